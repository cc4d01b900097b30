"""Issue 22's careless-user inputs, classes 2 and 6: outputs that never destroy data (a full disk leaves the
earlier output byte-identical, --save-policy never overwrites its input, a second run into a results folder of
ers-exact or ers-deep is refused and --force replaces only that run's files, never an input or a foreign
folder; crossplay writes strict JSON and refuses a second run) and output streams (a closed pipe is quiet, a
full device is exit status 2).

A refusal is exit status 2 with ONE stderr line ``PROG CMD: error: ...`` naming the value, never a traceback
(the contract of ``tests/test_cli_contract.py``); the shared helpers are in ``tests/cli_helpers.py``, the
``exact``, ``deep`` and ``pools`` fixtures in ``tests/conftest.py``."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_helpers import ONE_AGENT, SMALL_TRAIN, assert_refused, fill, strict

# ----- class 2: nothing on disk is lost ----------------------------------------------------------------------
FAST_DEMO = ["--starts", "0", "--alpha", "5", "--max-policies", "10"]
# (id, argv with @OUT the earlier output file / folder, the file inside @OUT to compare when it is a folder)
OUTPUT_CASES = [
    ("export-gambit", ["export-gambit", "toy-coordination", "@OUT.efg"], None),
    ("save-policy", ["optimal", "toy-coordination", "--save-policy", "@OUT.json"], None),
    ("op-save-policy", ["op", "two-lever", "--steps", "5", "--save-policy", "@OUT.json"], None),
    ("sweep-plot", ["sweep", "toy-coordination", "--alphas", "0.3", "--plot", "@OUT.png"], None),
    ("demo-force", ["demo", "--out", "@OUT", "--force", *FAST_DEMO], "demo.json"),
    ("census-force", ["census", "--games", "1", "--starts", "0", "--out", "@OUT", "--force"], "census.json"),
]


@pytest.mark.parametrize(("argv", "inner"), [pytest.param(a, f, id=i) for i, a, f in OUTPUT_CASES])
def test_a_full_disk_leaves_the_earlier_output_byte_identical(
    argv: list[str],
    inner: str | None,
    tmp_path: Path,
    exact: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ers_exact.util.output as output

    argv, target = fill(argv, tmp_path)
    code, _, err = exact(*argv)
    assert code == 0, err
    file = target / inner if inner else target
    before = file.read_bytes()
    written: list[str] = []

    def full(fd: int) -> None:  # the data reached the temporary file's buffer; the disk is full
        written.append(str(fd))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output.os, "fsync", full)
    if inner is None:
        code, _, err = exact(*argv)
    else:  # a results folder: --force first empties it, so the earlier file sits beside it
        keep = tmp_path / "keep"
        file.rename(keep)
        code, _, err = exact(*argv)
        assert code == 2
        assert keep.read_bytes() == before
        return
    assert written, "the writer did not go through the atomic path"
    assert_refused("ers-exact", code, err, str(file), "No space left on device")
    assert file.read_bytes() == before
    assert sorted(p.name for p in file.parent.iterdir() if ".tmp-" in p.name) == []


def test_save_policy_never_overwrites_the_game_it_reads(
    tmp_path: Path, exact: Callable[..., tuple[int, str, str]]
) -> None:
    game = tmp_path / "one.dpomdp"
    game.write_text(ONE_AGENT)
    before = game.read_bytes()
    code, _, err = exact("optimal", str(game), "--save-policy", str(game))
    assert_refused("ers-exact", code, err, str(game), "reads")
    assert game.read_bytes() == before


# (id, command with @OUT, what is in @OUT before, names in the refusal)
FOLDER_CASES = [
    ("demo-earlier-run", ["demo", "--out", "@OUT", *FAST_DEMO], "earlier", ["--force"]),
    (
        "census-earlier-run",
        ["census", "--games", "1", "--starts", "0", "--out", "@OUT"],
        "earlier",
        ["--force"],
    ),
    ("zsc-foreign-folder", ["zsc", "handshake", "--agents", "2", "--out", "@OUT"], "foreign", ["notes.txt"]),
    (
        "demo-foreign-folder-even-forced",
        ["demo", "--out", "@OUT", "--force"],
        "foreign",
        ["not written by ers"],
    ),
]


@pytest.mark.parametrize(
    ("argv", "before", "names"), [pytest.param(a, b, n, id=i) for i, a, b, n in FOLDER_CASES]
)
def test_a_second_run_into_a_results_folder_is_refused(
    argv: list[str],
    before: str,
    names: list[str],
    tmp_path: Path,
    exact: Callable[..., tuple[int, str, str]],
) -> None:
    argv, target = fill(argv, tmp_path)
    if before == "earlier":
        code, _, err = exact(*argv)
        assert code == 0, err
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    snapshot = {p.name: p.read_bytes() for p in target.iterdir()}
    code, _, err = exact(*argv)
    assert_refused("ers-exact", code, err, str(target), *names)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == snapshot


def test_force_replaces_the_whole_earlier_run(
    tmp_path: Path, exact: Callable[..., tuple[int, str, str]]
) -> None:
    out = tmp_path / "census"
    code, _, err = exact("census", "--games", "1", "--starts", "0", "--out", str(out))
    assert code == 0, err
    (out / "stale-example.dpomdp").write_text("from the earlier run")
    code, _, err = exact("census", "--games", "1", "--starts", "0", "--out", str(out), "--force")
    assert code == 0, err
    assert not (out / "stale-example.dpomdp").exists()
    assert (out / "census.json").is_file()


# ----- class 2: a second run into a folder of ers-deep ---------------------------------------------------
# (id, argv with @POOL:name and @OUT, the output the second run must leave alone)
DEEP_FOLDER_CASES = [
    ("action-matrix", ["action-matrix", "@POOL:toy", "--games", "4", "--out", "@OUT"], "action-matrix.json"),
    (
        "xp-distribution",
        ["xp-distribution", "--populations", "a=@POOL:toy", "--games", "2", "--out", "@OUT"],
        "xp-distribution.json",
    ),
    (
        "train-sp",
        ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0", *SMALL_TRAIN, "--out", "@OUT"],
        "pool.json",
    ),
    (
        "train-op",
        ["train-op", "--env", "tabular:toy-coordination", "--symmetries", "mdp", "--seeds", "0"]
        + [*SMALL_TRAIN, "--eval-games", "4", "--out", "@OUT"],
        "pool.json",
    ),
    (
        "discover",
        ["discover", "--pool", "@POOL:toy", "--candidates", "1", "--top", "1", "--total-steps", "256"]
        + ["--eval-games", "4", "--out", "@OUT"],
        "discovery.json",
    ),
]


def _deep_argv(argv: list[str], pools: dict[str, Path], out: Path) -> list[str]:
    filled = []
    for a in argv:
        for name, path in pools.items():
            a = a.replace(f"@POOL:{name}", str(path))
        filled.append(str(out) if a == "@OUT" else a)
    return filled


@pytest.mark.parametrize(("argv", "kept"), [pytest.param(a, k, id=i) for i, a, k in DEEP_FOLDER_CASES])
def test_a_second_deep_run_into_its_folder_is_refused_and_force_replaces_it(
    argv: list[str],
    kept: str,
    pools: dict[str, Path],
    tmp_path: Path,
    deep: Callable[..., tuple[int, str, str]],
) -> None:
    out = tmp_path / "out"
    argv = _deep_argv(argv, pools, out)
    code, _, err = deep(*argv)
    assert code == 0, err
    before = (out / kept).read_bytes()
    code, stdout, err = deep(*argv)
    assert_refused("ers-deep", code, err, str(out), "--force")
    assert stdout == "" and (out / kept).read_bytes() == before
    (out / "stale.txt").write_text("not written by ers")
    if argv[0] in ("train-sp", "train-op", "discover"):  # --force removes only the run's own entries
        code, _, err = deep(*argv, "--force")  # (it removed the whole folder: tests/test_output_safety.py)
        assert_refused("ers-deep", code, err, str(out), "stale.txt")
        assert (out / "stale.txt").is_file() and (out / kept).read_bytes() == before
        (out / "stale.txt").unlink()
    code, _, err = deep(*argv, "--force")
    assert code == 0, err
    assert (out / kept).is_file()


def test_analyses_share_a_folder_and_force_replaces_only_their_own_files(
    pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    out = tmp_path / "analysis"
    matrix = ["action-matrix", str(pools["toy"]), "--games", "4", "--out", str(out)]
    xp = ["xp-distribution", "--populations", f"a={pools['toy']}", "--games", "2", "--out", str(out)]
    for argv in (matrix, xp):
        code, _, err = deep(*argv)
        assert code == 0, err
    kept = (out / "xp-distribution.json").read_bytes()
    (out / "action-matrix.png").unlink()  # an earlier run's files, one of them gone: still refused
    code, _, err = deep(*matrix)
    assert_refused("ers-deep", code, err, "action-matrix", "--force")
    code, _, err = deep(*matrix, "--force")
    assert code == 0, err
    assert (out / "action-matrix.png").is_file() and (out / "xp-distribution.json").read_bytes() == kept


def test_force_never_removes_an_input_or_a_foreign_folder(
    pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    import shutil

    pool = tmp_path / "pool"
    shutil.copytree(pools["toy"], pool)
    argv = ["discover", "--pool", str(pool), "--candidates", "1", "--top", "1", "--total-steps", "256"]
    code, _, err = deep(*argv, "--out", str(pool), "--force")
    assert_refused("ers-deep", code, err, str(pool))
    assert (pool / "pool.json").is_file()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    train = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0", *SMALL_TRAIN]
    code, _, err = deep(*train, "--out", str(foreign), "--force")
    assert_refused("ers-deep", code, err, "notes.txt")
    assert (foreign / "notes.txt").read_text() == "mine"
    code, _, err = deep("train-sp", "--resume", str(pools["partial"]), "--force")
    assert_refused("ers-deep", code, err, "--force", "--resume")


def test_table1_continues_its_own_config_and_refuses_another_without_force(tmp_path: Path) -> None:
    """The folder check of table1 / table2 (the runs themselves are tested in tests/deep/test_zsc.py)."""
    from ers_deep.zsc import PopulationConfig
    from ers_deep.zsc.population import _claim
    from ers_exact.util.output import OutputError

    out = tmp_path / "t1"
    config = PopulationConfig(env="tabular:toy-coordination")
    _claim(config, out, False, "ers-deep table1")
    (out / "sp").mkdir()  # a stage of the run
    _claim(config, out, False, "ers-deep table1")  # the same config: continued
    assert (out / "sp").is_dir()
    other = PopulationConfig(env="tabular:toy-coordination", agents=4)
    with pytest.raises(OutputError, match=r"another config \(agents\).*--force"):
        _claim(other, out, False, "ers-deep table2")
    assert (out / "sp").is_dir()
    _claim(other, out, True, "ers-deep table1")
    assert not (out / "sp").exists()
    assert json.loads((out / "config.json").read_text())["agents"] == 4
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not written by ers"):
        _claim(config, foreign, True, "ers-deep table1")


def test_table1_force_does_not_follow_a_link_in_place_of_the_marker(tmp_path: Path) -> None:
    """A table folder of an earlier version (config.json, no marker) got its marker touched before --force
    removed it: a dangling link in its place was followed, creating the file it named. Now it is removed."""
    from ers_deep.zsc import PopulationConfig
    from ers_deep.zsc.population import _claim
    from ers_exact.util.output import MARKER

    out, victim = tmp_path / "t1", tmp_path / "victim.txt"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"env": "tabular:toy-coordination", "agents": 9}))
    (out / MARKER).symlink_to(victim)
    _claim(PopulationConfig(env="tabular:toy-coordination"), out, True, "ers-deep table1")
    assert not victim.exists() and not (out / MARKER).is_symlink()


def test_crossplay_writes_strict_json_and_refuses_a_second_run_without_force(
    pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    out = tmp_path / "xp"
    argv = ["crossplay", str(pools["toy"]), "--games", "4", "--no-mdp", "--out", str(out)]
    code, _, err = deep(*argv)
    assert code == 0, err
    report = strict((out / "report.json").read_text())
    assert report["rows"][0]["xp_median_mdp"]["value"] is None  # --no-mdp: undefined, null not NaN
    strict((out / "xp.json").read_text())
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = deep(*argv)
    assert_refused("ers-deep", code, err, str(out), "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    code, _, err = deep(*argv, "--force")
    assert code == 0, err


# ----- class 6: output streams ---------------------------------------------------------------------------
STREAM_CASES = [
    ("exact-json", ["ers_exact.cli", "solve", "three-lever", "--alpha", "0.5", "--json"]),
    ("exact-text", ["ers_exact.cli", "games"]),
    ("deep-text", ["ers_deep.cli", "env-bench", "hanabi", "--batch", "2", "--steps", "1", "--mode", "eager"]),
]


@pytest.mark.parametrize("argv", [pytest.param(a, id=i) for i, a in STREAM_CASES])
def test_a_closed_pipe_is_quiet_and_a_full_device_is_exit_2(argv: list[str]) -> None:
    cmd = [sys.executable, "-m", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err.strip() == ""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        done = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    prog = "ers-exact" if argv[0] == "ers_exact.cli" else "ers-deep"
    assert_refused(prog, done.returncode, done.stderr, "No space left on device")
