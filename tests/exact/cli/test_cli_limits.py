"""ers-exact's CLI at its edges: searches that stop early or find nothing, outputs through links and onto
special files, policies of another game, counts beyond the model budget, grids of temperatures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ers_exact.cli import main
from ers_exact.io.dpomdp_parse import DpomdpError, parse_dpomdp
from ers_exact.solve.sweep import parse_alphas
from ers_exact.util.options import UsageError
from ers_exact.util.output import OutputError, write_atomic
from ers_exact.zsc.config import DiscoveryConfig


def test_optimal_set_with_no_certified_point_prints_an_empty_table(capsys) -> None:
    """At alpha 0.5 toy-coordination's one fixed point sits on its bifurcation: one box certifies nothing. The
    text output said so and then crashed printing the empty table (a traceback, exit 1)."""
    assert main(["optimal-set", "toy-coordination", "--alpha", "0.5", "--max-boxes", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "no certified fixed point" in out[0] and out[-1].split()[:3] == ["J", "J_lo", "J_hi"]


def test_save_policy_keeps_the_search_limits(tmp_path: Path, capsys) -> None:
    """``optimal --save-policy`` ran ice without its --max-seconds and --memory-budget (to the end, or past the
    budget); now both hold, and a search stopped before any policy writes nothing."""
    path = tmp_path / "p.json"
    game = ["optimal", "dectiger", "--horizon", "4", "--method", "ice", "--save-policy", str(path)]
    assert main([*game, "--max-seconds", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "stopped before it found a joint policy (time limit reached)" in err and not path.exists()
    assert (
        main(
            ["optimal", "dectiger", "--method", "ice", "--memory-budget", "1e-12", "--save-policy", str(path)]
        )
        == 2
    )
    assert "over the budget" in capsys.readouterr().err and not path.exists()
    assert (
        main(["optimal", "dectiger", "--method", "ice", "--max-seconds", "60", "--save-policy", str(path)])
        == 0
    )
    assert json.loads(path.read_text())["game"] == "dectiger"


def test_a_policy_of_another_game_is_refused(tmp_path: Path, capsys) -> None:
    """toy-coordination's and two-lever's tables have one shape, so a file of one was evaluated on the other
    (J 2.0, exit 0); the game it records now has to match, and without the record the tables are read."""
    path = tmp_path / "toy.json"
    assert main(["optimal", "toy-coordination", "--save-policy", str(path)]) == 0
    capsys.readouterr()
    assert main(["value", "two-lever", "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert "written for toy-coordination H=2; this is two-lever H=2" in err and '"game"' in err
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"policy": json.loads(path.read_text())["policy"]}))
    assert main(["value", "two-lever", "--policy", str(bare), "--json"]) == 0


def test_outputs_write_through_links_and_refuse_special_files(tmp_path: Path) -> None:
    """An output at a symbolic link replaced the link by a file (the target kept its old content); one at a
    pipe or device replaced it (as root: /dev/full became a JSON file)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "target.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["optimal", "handshake", "--save-policy", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["game"] == "handshake"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="not a regular file"):
        write_atomic(fifo, "{}")
    assert fifo.exists() and not fifo.is_file()


def test_a_count_beyond_the_model_budget_is_refused_before_its_names_are_made() -> None:
    """``states: 100000000000`` built 10^11 names (17 GB in a minute) before the size check."""
    text = "agents: 2\ndiscount: 1\nvalues: reward\nstates: {}\nstart: uniform\nactions:\n2\n2\nobservations:\n1\n1\n"
    with pytest.raises(DpomdpError, match="names alone"):
        parse_dpomdp(text.format(10**11))
    with pytest.raises(DpomdpError, match="T alone"):  # within the names' bound: the model's own size check
        parse_dpomdp(text.format(10**5))


def test_gradient_search_is_for_sp_max_only() -> None:
    """REINFORCE learns sp-max's objective; for xp-max and sp-max-reg ``search="gradient"`` was ignored (their
    scores equal the exhaustive ones) while the result recorded it."""
    for algorithm in ("xp-max", "sp-max-reg"):
        with pytest.raises(UsageError, match="sp-max objective only"):
            DiscoveryConfig(algorithm=algorithm, search="gradient")
    assert DiscoveryConfig(search="gradient").search == "gradient"


def test_a_grid_of_temperatures_keeps_every_digit_given() -> None:
    """The grid rounded to 12 decimals: a start of 1e-13 became 0 (refused), 0.123456789012345 lost 3 digits."""
    assert parse_alphas("1e-13:1:0.5")[0] == 1e-13
    assert parse_alphas("0.123456789012345:0.2:1") == [0.123456789012345]
    assert parse_alphas("0.1:0.5:0.1") == [0.1, 0.2, 0.3, 0.4, 0.5]


@pytest.mark.parametrize(("entry", "shown"), [('"1"', '"1"'), ("true", "true"), ("null", "null")])
def test_policy_entries_must_be_numbers(entry: str, shown: str, tmp_path: Path, capsys) -> None:
    """numpy read a string "1" or true as 1.0, so such a file was evaluated as if it held numbers."""
    path = tmp_path / "p.json"
    path.write_text(f'{{"policy": [[[{entry}, 0]], [[1, 0]]]}}')
    assert main(["value", "handshake", "--policy", str(path)]) == 2
    assert f"a policy entry is {shown}, not a number" in capsys.readouterr().err
    path.write_text('{"policy": [[[1, 0]], [[1, 0]]]}')
    assert main(["value", "handshake", "--policy", str(path)]) == 0


def test_a_policy_path_that_is_no_file_says_what_it_is(capsys) -> None:
    """An empty --policy read as the folder '.' (": is a folder"), /dev/null as "no such file"."""
    assert main(["value", "handshake", "--policy", ""]) == 2
    assert "error: an empty path;" in capsys.readouterr().err
    if Path("/dev/null").exists():
        assert main(["value", "handshake", "--policy", "/dev/null"]) == 2
        assert "/dev/null: is not a regular file" in capsys.readouterr().err


def test_optimal_set_names_the_workers_when_their_batches_exceed_the_budget(capsys) -> None:
    """1,000 workers' batches were over the budget, but the refusal said to lower --max-boxes."""
    assert main(["optimal-set", "toy-coordination", "--alpha", "1", "--workers", "1000"]) == 2
    err = capsys.readouterr().err
    assert "--workers 1000" in err and "lower --workers" in err, err


#: two agents on two-lever (one cross-play pair), each with two OP seeds
TWO_AGENT_ZSC = [
    "zsc",
    "two-lever",
    "--pool-source",
    "exact",
    "--k",
    "4",
    "--agents",
    "2",
    "--m",
    "2",
    "--top",
    "2",
]


def test_one_cross_play_pair_has_no_standard_error(capsys) -> None:
    """Two agents make one XP pair: its standard error is undefined (null; the table shows the value alone),
    not 0.0, which claimed an exact value."""
    assert main([*TWO_AGENT_ZSC, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(r["xp"]["se"] is None for r in rows)
    assert all(r["sp"]["se"] is not None for r in rows)  # two agents' self-play: two values


def test_a_report_with_an_undefined_standard_error_equals_its_round_trip(capsys) -> None:
    """An undefined (NaN) standard error made a ZSC report unequal to itself read back (NaN != NaN)."""
    import dataclasses

    import numpy as np

    from ers_exact.interface import Estimate, ZSCReport
    from ers_exact.util.output import dumps

    assert main([*TWO_AGENT_ZSC, "--json"]) == 0
    report = ZSCReport.from_json(json.loads(capsys.readouterr().out))
    # a report computed in the process holds NaNs of numpy's making, not from_json's math.nan
    fresh = dataclasses.replace(
        report,
        rows=tuple(
            dataclasses.replace(r, xp=Estimate(r.xp.value, float(np.float64("nan")))) for r in report.rows
        ),
    )
    assert fresh == ZSCReport.from_json(json.loads(dumps(fresh.to_json())))
    assert Estimate(1.0, float("nan")) == Estimate(1.0, float("nan")) != Estimate(1.0, 0.0)
    assert hash(Estimate(1.0, float("nan"))) == hash(Estimate(1.0, float("nan")))
    assert report != ZSCReport.from_json({**report.to_json(), "rows": report.to_json()["rows"][:1]})


def test_a_discovery_result_reads_null_numbers_back_as_nan() -> None:
    """Strict JSON writes an undefined J_1 as null; from_json gave None back (not a float)."""
    import math

    from ers_exact.interface import DiscoveryResult, Transformation
    from ers_exact.util.output import dumps

    phi = Transformation((0,), ((0,),), ((0,),))  # one score per transformation
    result = DiscoveryResult("g", "sp-max", (phi, phi), (1.0, math.nan), 0.5, math.nan, 1.0, 1.0, math.nan)
    back = DiscoveryResult.from_json(json.loads(dumps(result.to_json())))
    assert math.isnan(back.J_1) and math.isnan(back.reconstruction_loss) and math.isnan(back.scores[1])
    assert (back.scores[0], back.pool_return, back.J_2) == (1.0, 0.5, 1.0)


def test_results_with_undefined_numbers_equal_their_round_trips() -> None:
    """A NaN of numpy's making (an in-process result) made a DiscoveryResult or a LearnedTransformation
    unequal to its strict-JSON round trip (NaN != NaN); still unequal where a defined number differs."""
    import math

    import numpy as np

    from ers_exact.interface import DiscoveryResult, LearnedTransformation
    from ers_exact.util.output import dumps

    nan = float(np.float64("nan"))
    phi = LearnedTransformation("phi-0", "symmetries.safetensors", "0" * 64, "phi/0/", (1, 0), None, nan)
    result = DiscoveryResult("g", "sp-max", (phi,), (1.0,), 0.5, nan, 1.0, 1.0, 0.0, config={"seed": 0})
    back = DiscoveryResult.from_json(json.loads(dumps(result.to_json())))
    assert back == result and hash(back) == hash(result) and back.transformations[0] == phi
    assert back != DiscoveryResult("g", "sp-max", (phi,), (1.0,), 0.5, 1.0, 1.0, 1.0, 0.0)
    other_checkpoint = LearnedTransformation("phi-0", "s", "1" * 64, "k", (1, 0), None, math.nan)
    assert other_checkpoint != phi


def test_a_policy_file_is_read_as_the_distributions_its_rows_round(tmp_path: Path) -> None:
    """Rows within 1e-6 of a distribution are accepted; one of mass 1 + 1e-7 gave J = 1.0000001 > J* = 1."""
    from ers_exact.cli.commands import run_value
    from ers_exact.cli.options import ValueOptions

    path = tmp_path / "p.json"
    path.write_text('{"policy": [[[1.0000001, 0]], [[1, 0]]]}')
    assert run_value(ValueOptions(game="handshake", policy=str(path)))["J"] == 1.0
