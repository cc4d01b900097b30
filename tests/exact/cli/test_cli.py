"""ers-exact's CLI beyond the bad-input table of tests/test_cli_contract.py: options classes are the single
source of flags, defaults and help; run_* are callable in-process; files resolve through $ERS_DPOMDP_DIR;
the library guards behind the one-line errors."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest

from ers_exact.cli import COMMANDS, main, readme_tables
from ers_exact.cli.commands import run_demo, run_info, run_optimal, run_value
from ers_exact.cli.options import (
    DemoOptions,
    InfoOptions,
    OPOptions,
    OptimalOptions,
    SolveOptions,
    SweepOptions,
    ValueOptions,
    default_demo_dir,
)
from ers_exact.games import get_game, load_game
from ers_exact.io.dpomdp import read_dpomdp, write_dpomdp
from ers_exact.io.dpomdp_parse import DpomdpError
from ers_exact.model.histories import enumerate_histories, estimate_history_count, history_count_log10
from ers_exact.model.optimal import optimal_for_game
from ers_exact.model.values import PolicyError, check_policy, expected_return, uniform_policy
from ers_exact.solve.fixed_points import SolverConfig
from ers_exact.solve.sweep import parse_alphas
from ers_exact.util.options import UsageError, flag_name
from ers_exact.zsc.other_play import OPConfig
from ers_exact.zsc.pipeline import PopulationConfig


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.name for c in COMMANDS])
def test_help_shows_every_option_of_the_options_class(cmd, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([cmd.name, "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(cmd.options):
        assert (f.metadata["metavar"] if f.metadata.get("positional") else flag_name(f.name)) in out
        assert " ".join(f.metadata["help"].split()[:3]) in out


def test_defaults_come_from_the_library_configs() -> None:
    solve = SolveOptions(game="toy-coordination", alpha=0.3)
    assert (solve.starts, solve.seed) == (SolverConfig().n_starts, SolverConfig().seed)
    zsc = PopulationConfig()
    from ers_exact.cli.options import ZSCOptions

    opts = ZSCOptions(game="three-lever")
    assert (opts.agents, opts.k, opts.top, opts.m, opts.alpha, opts.episodes) == (
        zsc.agents,
        zsc.k,
        zsc.top,
        zsc.m,
        zsc.alpha,
        zsc.episodes,
    )


def test_options_validate_from_python_too() -> None:
    with pytest.raises(UsageError, match=r"--alpha 0\.0"):
        SolveOptions(game="dectiger", alpha=0.0)
    with pytest.raises(UsageError, match=r"--alphas '2:1:0\.1'"):
        SweepOptions(game="dectiger", alphas="2:1:0.1")


def test_readme_tables_cover_every_command() -> None:
    text = readme_tables()
    for cmd in COMMANDS:
        assert f"#### ers-exact {cmd.name}\n" in text
    assert "| `--max-nodes` | `5000000` |" in text and "| GAME | required |" in text


def test_run_functions_take_their_options() -> None:
    info = run_info(InfoOptions(game="toy-coordination", horizon=1))
    assert info["joint_nodes"] == 1 and info["estimated_joint_nodes_upper_bound"] == 1


def test_saved_optimal_policy_is_read_back_by_value(tmp_path: Path) -> None:
    path = tmp_path / "pi.json"
    opt = run_optimal(OptimalOptions(game="dectiger", save_policy=str(path)))
    val = run_value(ValueOptions(game="dectiger", policy=str(path)))
    assert val["J"] == pytest.approx(opt["value"])


@pytest.mark.parametrize("method", ["exhaustive", "gmaa"])
def test_optimal_json_is_a_policy_file_value_reads(method: str, tmp_path: Path, capsys) -> None:
    """``optimal --json``'s ``policy`` is the policy-file format (one [histories x actions] table per agent, as
    ``--save-policy`` writes it), so ``value --policy`` reads the JSON itself and gives back J*; the action
    per history is ``actions``. It was the action indices, which ``value --policy`` refused (shape (7,))."""
    assert main(["optimal", "dectiger", "--method", method, "--json"]) == 0
    path = tmp_path / "optimal.json"
    path.write_text(capsys.readouterr().out)
    out = json.loads(path.read_text())
    saved = tmp_path / "saved.json"
    run_optimal(OptimalOptions(game="dectiger", method=method, save_policy=str(saved)))
    assert out["policy"] == json.loads(saved.read_text())["policy"]
    assert out["actions"] == [np.argmax(p, axis=1).tolist() for p in out["policy"]]
    assert run_value(ValueOptions(game="dectiger", policy=str(path)))["J"] == pytest.approx(
        out["value"], abs=1e-12
    )


def test_an_ice_result_without_tables_points_to_save_policy(tmp_path: Path, capsys) -> None:
    assert main(["optimal", "dectiger", "--method", "ice", "--json"]) == 0
    path = tmp_path / "ice.json"
    path.write_text(capsys.readouterr().out)
    assert "policy_trees" in json.loads(path.read_text())
    assert main(["value", "dectiger", "--policy", str(path)]) == 2
    assert "optimal --save-policy FILE" in capsys.readouterr().err


def test_an_optimal_set_point_is_a_policy_file_value_reads(tmp_path: Path, capsys) -> None:
    """``optimal-set --json --with-policy``: each point's object is a policy file (pi^i a [histories x actions]
    table, no batch axis) whose J(pi) ``value --policy`` gives back, and ``root_policy`` its root rows."""
    assert main(["optimal-set", "dectiger", "--alpha", "1", "--json", "--with-policy"]) == 0
    point = json.loads(capsys.readouterr().out)["points"][0]
    assert point["root_policy"] == [pi[0] for pi in point["policy"]]
    assert np.shape(point["root_policy"]) == (2, 3) and np.shape(point["policy"][0]) == (7, 3)
    path = tmp_path / "point.json"
    path.write_text(json.dumps(point))
    assert run_value(ValueOptions(game="dectiger", policy=str(path)))["J"] == pytest.approx(
        point["J"], abs=1e-9
    )


@pytest.mark.parametrize("method", ["exhaustive", "gmaa", "ice", "auto"])
def test_optimal_methods_agree_and_print_their_work(method: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_optimal(OptimalOptions(game="dectiger", horizon=3, method=method))
    assert out["value"] == pytest.approx(5.1908125, abs=1e-9)
    assert out["method"] == {"auto": "ice"}.get(method, method)
    assert main(["optimal", "dectiger", "--horizon", "3", "--method", method]) == 0
    text = capsys.readouterr().out
    assert "J* = 5.19081" in text and ("policy trees" if method == "exhaustive" else "expanded") in text


@pytest.mark.parametrize("method", ["gmaa", "ice"])
def test_optimal_upper_bound_is_the_searchs_final_bound(method: str) -> None:
    """``upper_bound`` is the bound the search ends with, value <= J* <= upper_bound: the value itself once
    proven (it was the heuristic's bound at the empty policy, 11.02 against J* 4.80 on Dec-Tiger H = 4, while
    ``search.upper_bound`` held the final one); the root's bound is ``search.root_bound``."""
    out = run_optimal(OptimalOptions(game="dectiger", horizon=4, method=method))
    assert out["optimal"] is True and out["upper_bound"] == pytest.approx(out["value"], abs=1e-9)
    assert out["search"]["root_bound"] > out["value"] + 1
    assert out["search"].get("upper_bound", out["upper_bound"]) == out["upper_bound"]


def test_a_stopped_search_reports_its_final_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimal", "dectiger", "--horizon", "6", "--memory-budget", "0.0004", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["optimal"] is False and out["upper_bound"] == out["search"]["upper_bound"]
    assert out["value"] <= out["upper_bound"] < out["search"]["root_bound"]


def test_optimal_dectiger_h6_without_the_history_tree(
    dpomdp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Published 10.381625 (masplan.org); 62 million joint histories at t = 5, none enumerated. A budget too
    small for the search stops it with bounds around the optimum instead."""
    path = str(dpomdp_dir / "dectiger.dpomdp")
    out = run_optimal(OptimalOptions(game=path, horizon=6, discount=1.0))
    assert out["method"] == "ice" and out["optimal"] is True
    assert out["value"] == pytest.approx(10.381625, abs=5e-7)
    # 0.4 MB: the search's belief graph and heuristic take ~0.15 MB, each partial policy ~0.2 MB more
    assert main(["optimal", path, "--horizon", "6", "--discount", "1", "--memory-budget", "0.0004"]) == 0
    text = capsys.readouterr().out
    assert "NOT PROVEN OPTIMAL" in text and "memory budget" in text


def test_discount_zero_is_accepted_as_the_library_accepts_it(capsys: pytest.CaptureFixture[str]) -> None:
    """gamma = 0 (only the first stage's reward counts) is a game the library analyses (Q^i by the tree pass,
    where gamma^t underflows the sequence form) and a .dpomdp file may declare; ``--discount 0`` was refused
    ("must be in (0, 1]"). J and J* are the library's, and J* is the best first-stage reward."""
    game = get_game("dectiger", horizon=3).with_discount(0.0)
    tree = enumerate_histories(game)
    assert main(["value", "dectiger", "--horizon", "3", "--discount", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["discount"] == 0.0
    assert out["J"] == pytest.approx(expected_return(tree, uniform_policy(tree)), abs=1e-12)
    assert main(["optimal", "dectiger", "--horizon", "3", "--discount", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    stage = np.einsum("s,sat,sat->a", game.initial_belief, game.transition, game.reward)  # E[R_0 | a]
    assert out["value"] == pytest.approx(stage.max(), abs=1e-12)
    assert out["value"] == pytest.approx(optimal_for_game(game).value, abs=1e-12)


def test_value_names_the_game_a_policy_file_was_written_for(tmp_path: Path) -> None:
    path = tmp_path / "pi.json"
    run_optimal(OptimalOptions(game="dectiger", save_policy=str(path)))
    with pytest.raises(PolicyError, match=r"pi.json: .*written for dectiger H=2; this is dectiger H=3"):
        run_value(ValueOptions(game="dectiger", horizon=3, policy=str(path)))


def test_op_prints_the_optimum_its_j_and_a_policy_value_reads_back(tmp_path: Path, capsys) -> None:
    path = tmp_path / "op.json"
    assert (
        main(
            ["op", "three-lever", "--symmetries", "mdp", "--seed", "1", "--save-policy", str(path), "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["op_value"] == pytest.approx(4 / 3) and out["J"] == pytest.approx(2.0)
    assert (out["symmetries"], out["n_symmetries"], out["share"], out["seed"]) == ("mdp", 6, True, 1)
    assert run_value(ValueOptions(game="three-lever", policy=str(path)))["J"] == pytest.approx(out["J"])
    assert main(["op", "two-lever", "--no-share"]) == 0
    text = capsys.readouterr().out
    assert "OP^Phi = 1.500000" in text and "shared: False" in text and "(L1, L2)" in text
    assert OPOptions(game="two-lever").share is OPConfig().share is True


def test_bare_game_file_names_resolve_through_ers_dpomdp_dir(tmp_path: Path, monkeypatch, capsys) -> None:
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "tiny.dpomdp").write_text(write_dpomdp(get_game("handshake")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ERS_DPOMDP_DIR", str(folder))
    assert main(["info", "tiny.dpomdp", "--horizon", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["game"] == "tiny"
    (tmp_path / "tiny.dpomdp").write_text("not a game")  # the working directory wins
    with pytest.raises(DpomdpError, match=r"tiny\.dpomdp: line 1"):
        load_game("tiny.dpomdp")


def test_demo_writes_outside_the_source_tree_by_default(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ERS_RESULTS_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_demo_dir() == tmp_path / "xdg" / "ers" / "demo"
    monkeypatch.setenv("ERS_RESULTS_DIR", str(tmp_path / "results"))
    out = run_demo(DemoOptions(max_policies=1000, starts=2))
    assert Path(out["written"]) == tmp_path / "results" / "demo.json"
    assert json.loads(Path(out["written"]).read_text())["config"]["starts"] == 2


# ----- the library guards behind the CLI's one-line errors -----
def test_history_estimate_is_cheap_for_any_horizon() -> None:
    game = get_game("dectiger").with_horizon(10**6)
    start = time.perf_counter()
    assert estimate_history_count(game, limit=10**9) > 10**9
    assert history_count_log10(game) == pytest.approx(10**6 * np.log10(36), rel=1e-6)
    assert time.perf_counter() - start < 1.0
    small = get_game("dectiger").with_horizon(3)
    assert estimate_history_count(small) == 1 + 36 + 36**2
    assert history_count_log10(small) == pytest.approx(np.log10(1 + 36 + 36**2))


def test_check_policy_reports_malformed_input_as_policy_errors() -> None:
    tree = enumerate_histories(get_game("toy-coordination"))
    for bad in (42, "uniform", {"policy": []}, [[[1, 0], [1]], [[1, 0]] * 5], [[["a", "b"]] * 5] * 2):
        with pytest.raises(PolicyError):
            check_policy(tree, bad)


@pytest.mark.parametrize(
    "text", ["", "nan", "0.1,inf", "1:0.5:0.1", "0.1:1:0", "0.1:1", "0:1:0.1", "0.001:100:0.001"]
)
def test_parse_alphas_refuses_with_the_text(text: str) -> None:
    with pytest.raises(ValueError, match=f"alphas {text!r}: "):
        parse_alphas(text)


@pytest.mark.parametrize("command", ["sweep", "atlas"])
@pytest.mark.parametrize("text", ["0.3,0.3,0.6", "0.3,0.6,0.30", "1:1.000000000000001:1e-16"])
def test_a_repeated_alpha_is_refused(command: str, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A temperature given twice made two identical rows of a sweep or atlas (and a warm start from itself);
    it is refused, naming it, as is a range whose step is below the 15 significant digits kept."""
    assert main([command, "toy-coordination", "--alphas", text]) == 2
    err = capsys.readouterr().err
    assert f"alphas {text!r}: " in err and "appears more than once" in err
    tree = enumerate_histories(get_game("toy-coordination"))
    from ers_exact.analysis.report import atlas
    from ers_exact.solve.sweep import sweep

    with pytest.raises(ValueError, match=r"0\.3 is given more than once"):
        {"sweep": sweep, "atlas": atlas}[command](tree, [0.3, 0.6, 0.3])


def test_zsc_config_refuses_nonsense() -> None:
    for kwargs in (
        {"agents": 1},
        {"k": 0},
        {"top": 0},
        {"episodes": 0},
        {"pool_source": "deep"},
        {"alpha": 0.0},
    ):
        with pytest.raises(ValueError):
            PopulationConfig(**kwargs)


def test_dpomdp_reader_names_the_file_and_budget(tmp_path: Path) -> None:
    binary = tmp_path / "bin.dpomdp"
    binary.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(DpomdpError, match=r"bin\.dpomdp: not a UTF-8 text file"):
        read_dpomdp(binary)
    huge = (
        "agents: 1\ndiscount: 1\nvalues: reward\nstates: 100000\nstart:\nuniform\nactions:\n2\n"
        "observations:\n1\n"
    )
    with pytest.raises(DpomdpError, match=r"line 9: declares 100000 states .*T alone needs 160\.0 GB"):
        read_dpomdp(huge)


def test_solve_without_proof_prints_its_best_as_a_lower_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """Where not every fixed point is proven found, the best found is a lower bound on J*: three-lever at 0.25
    finds 1.896361 where optimal-set proves 1.8992923 (tests/exact/three_lever.py derives it by hand); the text
    printed "J* = 1.896361, |Pi*| = 1" (found by an audit, 2026-12-07). A complete run prints J* itself."""
    assert main(["solve", "three-lever", "--alpha", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "all proven: False" in out and "J* >= 1.8963" in out and "J* = " not in out
    assert main(["solve", "toy-coordination", "--alpha", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "all proven: True" in out and "J* = " in out and "J* >=" not in out
