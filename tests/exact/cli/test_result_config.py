"""Every ers-exact result records what it was computed with: a ``config`` block holding the resolved options
(all but where the result is written), the game as used (after --horizon / --discount) and the library's own
config under its earlier names, built once (``command_inputs.result_json``); and ``provenance``. ``--force``
without ``--out`` is refused, not ignored."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ers_exact.cli import COMMANDS, main
from ers_exact.cli.command_inputs import OUTPUT_OPTIONS

GAME = "toy-coordination"
#: the game's own horizon (2) and discount (1.0) overridden: the config must hold the values used
GAME_OVERRIDES = ["--horizon", "1", "--discount", "0.5"]
#: (command, argv after the game, the library's config keys the result kept under their own names);
#: @OUT is a fresh folder, and a result written there is read back instead of --json's
CASES = [
    ("info", [], ()),
    ("value", [], ()),
    ("optimal", [], ()),
    ("solve", ["--alpha", "0.3", "--starts", "3"], ("n_starts", "memory_budget_bytes")),
    ("optimal-set", ["--alpha", "0.3", "--starts", "0", "--max-seconds", "5"], ("batch", "krawczyk_width")),
    ("sweep", ["--alphas", "0.5", "--starts", "0"], ()),
    ("symmetries", ["--alpha", "0.5", "--starts", "0"], ()),
    ("atlas", ["--alphas", "0.5", "--starts", "0"], ()),
    ("op", ["--seeds", "1", "--steps", "10", "--restarts", "1"], ("learning_rate", "row_search")),
    ("discover", ["--pool-source", "exact", "--alpha", "0.3", "--k", "2", "--top", "1"], ("lambda1",)),
    (
        "zsc",
        ["--agents", "2", "--pool-source", "exact", "--alpha", "0.3", "--k", "2", "--top", "1", "--m", "1"]
        + ["--out", "@OUT"],
        ("op_steps", "mdp_order", "op_reading"),
    ),
    ("export-gambit", ["@OUT/game.efg"], ()),
]


def _run(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    argv = [a.replace("@OUT", str(out)) for a in argv]
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = sorted(out.glob("[!.]*.json"))  # not the folder's .ers-results.json marker
    return json.loads(written[0].read_text()) if written else printed


def _option_names(command: str) -> set[str]:
    (cmd,) = [c for c in COMMANDS if c.name == command]
    return {f.name for f in dataclasses.fields(cmd.options)} - set(OUTPUT_OPTIONS)


@pytest.mark.parametrize(("command", "argv", "kept"), CASES, ids=[c[0] for c in CASES])
def test_the_result_records_every_option_and_the_game_as_used(
    command: str, argv: list[str], kept: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _run([command, GAME, *GAME_OVERRIDES, *argv], tmp_path / "out", capsys)
    config = result["config"]
    assert (config["game"], config["horizon"], config["discount"]) == (GAME, 1, 0.5)
    assert _option_names(command) <= set(config), "an option is missing from the config"
    assert not set(OUTPUT_OPTIONS) & set(config), "where the result is written is not part of its config"
    assert set(kept) <= set(config), "the library's config keys are kept as they were"
    assert set(result["provenance"]) == {"ers_exact", "numpy", "python"}
    if "--starts" in argv:
        assert config["starts"] == int(argv[argv.index("--starts") + 1])


@pytest.fixture(autouse=True)
def _out_folder(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()


def test_the_discount_changes_the_numbers_and_the_config_says_which(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The audit's case: --discount 0.5 moves J* and the result now says so (it was recorded nowhere)."""
    base = ["solve", GAME, "--alpha", "0.3", "--starts", "2", "--json"]
    results = []
    for extra in ([], ["--discount", "0.5"]):
        assert main([*base, *extra]) == 0
        results.append(json.loads(capsys.readouterr().out))
    (own, half) = results
    assert own["J_star"] != pytest.approx(half["J_star"])
    assert (own["config"]["discount"], half["config"]["discount"]) == (1.0, 0.5)
    assert own["config"]["horizon"] == half["config"]["horizon"] == 2  # the game's own, resolved


@pytest.mark.parametrize("command", ["sweep", "atlas"])
def test_no_continuation_is_recorded(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--no-continuation changes the fixed points a grid finds; sweep's and atlas's config said nothing of it."""
    base = [command, GAME, "--horizon", "1", "--alphas", "0.5", "--starts", "0", "--json"]
    seen = []
    for extra in ([], ["--no-continuation"]):
        assert main([*base, *extra]) == 0
        config = json.loads(capsys.readouterr().out)["config"]
        seen.append((config["continuation"], config["memory_budget"], config["seed"], config["alphas"]))
    assert [s[0] for s in seen] == [True, False]
    assert seen[0][1:] == seen[1][1:] == (seen[0][1], 0, "0.5")


def test_census_json_carries_its_config_and_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """census.json was written without provenance (the printed result had it)."""
    out = tmp_path / "census"
    assert main(["census", "--games", "1", "--starts", "0", "--seed", "3", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((out / "census.json").read_text())
    assert written == printed
    assert set(written["provenance"]) == {"ers_exact", "numpy", "python"}
    config = written["config"]
    assert (config["games"], config["seed"], config["starts"], config["planted_share"]) == (1, 3, 0, 0.5)
    assert config["out"] == str(out)  # CensusConfig's own field, as before


def test_demo_config_keeps_its_fields_and_adds_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["demo", "--out", str(tmp_path / "demo"), "--starts", "0", "--alpha", "5", "--max-policies", "10"]
    assert main([*argv, "--max-nodes", "100000", "--json"]) == 0
    config = json.loads((tmp_path / "demo" / "demo.json").read_text())["config"]
    assert config == {"max_policies": 10, "alpha": 5.0, "starts": 0, "max_nodes": 100_000, "seed": 0}
    capsys.readouterr()


@pytest.mark.parametrize("argv", [["census", "--force"], ["zsc", GAME, "--force"]], ids=["census", "zsc"])
def test_force_without_out_is_refused_not_ignored(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"ers-exact {argv[0]}: error: --force") and "--out" in err
