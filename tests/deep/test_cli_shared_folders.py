"""Which folders a command of ers-deep writes into besides its own: ``train-sp`` / ``train-op`` only into a
missing or empty folder or a pool, the analyses only into a pool, a table1 folder or the analyses' own folder;
another command's results folder (its ``.ers-results.json`` names the command) or a folder of other files is
refused in one line, before any work, and left as it was (both wrote their files beside the folder's, exit 0).
Also: ``--alpha 0`` on a tabular env is refused with the options (it was refused after the training, leaving
policies/ and run/), ``discover --resume`` with no run to continue is refused (it started a new one), and a
results folder's refusal names the command that wrote it.

The ``deep`` and ``pools`` fixtures are in ``tests/conftest.py``; the refusal contract in
``tests/cli_helpers.py``."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ers_deep.cli.train import TrainSPOptions
from tests.cli_helpers import SMALL_TRAIN, assert_refused

Deep = Callable[..., tuple[int, str, str]]

MARKER = ".ers-results.json"
#: results folders of other commands: (the command their marker names, a file of theirs)
FOREIGN = {
    "census": ("ers-exact census", "census.json"),
    "demo": ("ers-exact demo", "demo.json"),
    "zsc": ("ers-exact zsc", "report.json"),
    "crossplay": ("ers-deep crossplay", "xp.json"),
}
TRAIN = ["--env", "tabular:toy-coordination", "--seeds", "0", *SMALL_TRAIN, "--eval-games", "4"]
COMMANDS = {
    "train-sp": ["train-sp", *TRAIN, "--threads", "1"],
    "train-op": ["train-op", *TRAIN, "--threads", "1", "--symmetries", "mdp"],
}


def _contents(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _folder(root: Path, kind: str) -> tuple[Path, str]:
    """A folder of ``kind`` (a key of FOREIGN, "notes": a folder of files not written by ers, "analysis": the
    analyses' folder, "discovery": a discovery run's files, "table1": a table1 folder) and what a refusal of
    it names."""
    folder = root / kind
    folder.mkdir()
    if kind in FOREIGN:
        command, file = FOREIGN[kind]
        (folder / MARKER).write_text(json.dumps({"command": command}))
        (folder / file).write_text("{}")
        return folder, command
    if kind == "table1":
        (folder / MARKER).write_text(json.dumps({"command": "ers-deep table1"}))
        (folder / "config.json").write_text("{}")
        return folder, "ers-deep table1"
    name = {"notes": "notes.txt", "analysis": "xp-distribution.json", "discovery": "discovery.json"}[kind]
    (folder / name).write_text("mine")
    return folder, name


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("kind", [*FOREIGN, "notes", "analysis", "table1"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_pool_is_not_written_into_another_commands_folder(
    tmp_path: Path, deep: Deep, command: str, kind: str, force: bool
) -> None:
    folder, names = _folder(tmp_path, kind)
    before = _contents(folder)
    code, out, err = deep(*COMMANDS[command], "--out", str(folder), *(["--force"] if force else []))
    assert_refused("ers-deep", code, err, str(folder), names, "not a pool")
    assert out == "" and _contents(folder) == before


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_a_pool_is_written_into_a_missing_or_empty_folder(tmp_path: Path, deep: Deep, folder: str) -> None:
    out = tmp_path / folder
    if folder == "empty":
        out.mkdir()
    code, _, err = deep(*COMMANDS["train-sp"], "--out", str(out))
    assert code == 0, err
    assert (out / "pool.json").is_file()


@pytest.mark.parametrize("alpha", ["0", "-0", "0.0"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_alpha_zero_on_a_tabular_env_is_refused_before_training(
    tmp_path: Path, deep: Deep, command: str, alpha: str
) -> None:
    out = tmp_path / "pool"
    code, stdout, err = deep(*COMMANDS[command], f"--alpha={alpha}", "--out", str(out))
    assert_refused("ers-deep", code, err, "--alpha", "tabular:toy-coordination", "> 0")
    assert stdout == "" and not out.exists()


def test_alpha_zero_stays_an_entropy_coefficient_of_a_deep_env(tmp_path: Path) -> None:
    """Hanabi's and Overcooked V2's alpha is PPO's entropy coefficient only: 0 is accepted there."""
    for env in ("hanabi", "overcooked-v2"):
        assert TrainSPOptions(env=env, out=str(tmp_path / env), alpha=0.0).alpha == 0.0


def _analysis(command: str, pool: Path, out: Path) -> list[str]:
    source = [str(pool)] if command == "action-matrix" else ["--populations", f"a={pool}"]
    return [command, *source, "--games", "2", "--threads", "1", "--out", str(out)]


@pytest.mark.parametrize("kind", [*FOREIGN, "notes", "discovery"])
@pytest.mark.parametrize("command", ["action-matrix", "xp-distribution"])
def test_an_analysis_is_not_written_into_another_commands_folder(
    pools: dict[str, Path], tmp_path: Path, deep: Deep, command: str, kind: str
) -> None:
    folder, names = _folder(tmp_path, kind)
    before = _contents(folder)
    code, out, err = deep(*_analysis(command, pools["toy"], folder))
    assert_refused("ers-deep", code, err, str(folder), names)
    assert out == "" and _contents(folder) == before


@pytest.mark.parametrize("kind", ["pool", "table1", "analysis", "empty"])
def test_an_analysis_shares_a_pool_a_table1_or_an_analysis_folder(
    pools: dict[str, Path], tmp_path: Path, deep: Deep, kind: str
) -> None:
    if kind == "pool":
        folder = tmp_path / "pool"
        shutil.copytree(pools["toy"], folder)
    elif kind == "empty":
        folder = tmp_path / "empty"
        folder.mkdir()
    else:
        folder = _folder(tmp_path, kind)[0]
    before = _contents(folder)
    code, _, err = deep(*_analysis("action-matrix", pools["toy"], folder))
    assert code == 0, err
    after = _contents(folder)
    assert {k: after[k] for k in before} == before and (folder / "action-matrix.json").is_file()


def test_discover_resume_without_a_run_is_refused(pools: dict[str, Path], tmp_path: Path, deep: Deep) -> None:
    """``--resume`` continues the run in --out: with none there (a missing or empty --out, or the folder under
    the pool that --out names by default) it is refused naming the folder, which is not created."""
    pool = tmp_path / "pool"
    shutil.copytree(pools["toy"], pool)
    (tmp_path / "empty").mkdir()
    tiny = ["--candidates", "1", "--top", "1", "--total-steps", "16", "--num-envs", "4", "--threads", "1"]
    for out in (tmp_path / "missing", tmp_path / "empty", None):
        where = ["--out", str(out)] if out is not None else []
        code, stdout, err = deep("discover", "--pool", str(pool), *tiny, *where, "--resume")
        folder = out if out is not None else pool / "discovery-sp-max"
        assert_refused("ers-deep", code, err, "--resume", str(folder))
        assert stdout == "" and (folder.is_dir() and not any(folder.iterdir())) == (folder.name == "empty")
    assert not (pool / "discovery-sp-max").exists()


def test_a_results_folder_refusal_names_the_command_that_wrote_it(
    pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """crossplay (ers_exact.util.output.claim_folder, also census, zsc, demo and table1) names the command
    recorded in the folder's marker: its own earlier run, or another command's."""
    out = tmp_path / "xp"
    argv = ["crossplay", str(pools["toy"]), "--games", "2", "--no-mdp", "--threads", "1", "--out"]
    code, _, err = deep(*argv, str(out))
    assert code == 0, err
    code, _, err = deep(*argv, str(out))
    assert_refused("ers-deep", code, err, str(out), "ers-deep crossplay", "--force")
    census, command = _folder(tmp_path, "census")
    code, _, err = deep(*argv, str(census))
    assert_refused("ers-deep", code, err, str(census), command, "--force")


def test_table1_alpha_zero_on_a_tabular_env_is_refused_before_training(tmp_path: Path, deep: Deep) -> None:
    """``table1`` trains its self-play pools first: ``--alpha 0`` on a tabular env was refused only after them."""
    out = tmp_path / "t1"
    argv = ["table1", "--env", "tabular:toy-coordination", "--alpha", "0", "--out", str(out)]
    code, stdout, err = deep(*argv)
    assert_refused("ers-deep", code, err, "--alpha", "tabular:toy-coordination", "> 0")
    assert stdout == "" and not out.exists()
