"""A folder written by one training command is not taken for another's: ``discover`` refuses a pool as its
``--out`` and ``train-sp`` / ``train-op`` refuse a discovery run as theirs, with or without ``--force`` or
``--resume`` (``discover --force`` removed an other-play pool, ``train-sp --force`` a discovery output,
``discover --resume`` wrote into a pool and stopped on an internal error, ``train-sp --resume`` called the
discovery's checkpoints damaged)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ers_deep.cli import main
from ers_deep.cli.common import folder_kind

#: a tiny three-lever run (4 games x 2 steps, one update, 4 evaluation games, one thread)
TINY = ["--num-envs", "4", "--total-steps", "8", "--eval-games", "4", "--threads", "1"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-play pool of 4 seeds, an other-play pool and a discovery run of that pool, each written by its
    command."""
    root = tmp_path_factory.mktemp("runs")
    env = ["--env", "tabular:three-lever"]
    assert main(["train-sp", *env, "--seeds", "0-3", "--out", str(root / "sp"), *TINY]) == 0
    op = ["train-op", *env, "--symmetries", "none", "--seeds", "0-1", "--out", str(root / "op"), *TINY]
    assert main(op) == 0
    disc = ["discover", "--pool", str(root / "sp"), "--out", str(root / "disc"), "--candidates", "1"]
    assert main([*disc, "--top", "1", "--num-envs", "4", "--total-steps", "8", "--threads", "1"]) == 0
    return {"sp": root / "sp", "op": root / "op", "disc": root / "disc"}


def _contents(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _killed(pool: Path, folder: Path) -> Path:
    """``folder`` as ``pool`` killed during training, before its freeze: only its run (pool.json, policies/ and
    the learning curve are written at the freeze)."""
    shutil.copytree(pool / "run", folder / "run")
    return folder


def test_each_folder_is_told_apart(folders: dict[str, Path], tmp_path: Path) -> None:
    assert [folder_kind(folders[k]) for k in ("sp", "op", "disc")] == ["pool", "pool", "discovery"]
    killed = _killed(folders["sp"], tmp_path / "killed")  # its run/config.json keeps the pool's eval_games
    assert folder_kind(killed) == "pool" and folder_kind(tmp_path / "none") is None
    config = killed / "run" / "config.json"  # as written before runs kept it: either command's own
    config.write_text(
        json.dumps({k: v for k, v in json.loads(config.read_text()).items() if k != "eval_games"})
    )
    assert folder_kind(killed) == "run"
    config.write_text("{damaged")
    assert folder_kind(killed) == "run"


@pytest.mark.parametrize("flag", ["--force", "--resume", None], ids=["force", "resume", "plain"])
def test_a_killed_self_play_pool_is_no_discovery_run(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str | None
) -> None:
    """A self-play pool killed before its freeze holds only its run, as a killed discovery run did: discover
    refuses it as its --out (``--force`` removed it, ``--resume`` wrote discovery-config.json into it and
    stopped on an internal error), leaves every file as it was, and train-sp --resume still continues it."""
    folder = _killed(folders["sp"], tmp_path / "killed")
    before = _contents(folder)
    capsys.readouterr()
    argv = ["discover", "--pool", str(folders["sp"]), "--out", str(folder), *([flag] if flag else [])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a pool" in err[0], err
    assert _contents(folder) == before
    assert main(["train-sp", "--resume", str(folder), "--threads", "1"]) == 0
    assert (folder / "pool.json").is_file()


@pytest.mark.parametrize(
    ("target", "argv", "says"),
    [
        ("op", ["discover", "--pool", "{sp}", "--out", "{target}", "--force"], "holds a pool"),
        ("sp", ["discover", "--pool", "{op}", "--out", "{target}", "--force"], "holds a pool"),
        ("op", ["discover", "--pool", "{sp}", "--out", "{target}", "--resume"], "holds a pool"),
        ("op", ["discover", "--pool", "{sp}", "--out", "{target}"], "holds a pool"),
        (
            "disc",
            ["train-sp", "--env", "tabular:three-lever", "--out", "{target}", "--force"],
            "a discovery run",
        ),
        ("disc", ["train-sp", "--env", "tabular:three-lever", "--out", "{target}"], "a discovery run"),
        (
            "disc",
            [
                "train-op",
                "--env",
                "tabular:three-lever",
                "--symmetries",
                "none",
                "--out",
                "{target}",
                "--force",
            ],
            "a discovery run",
        ),
        ("disc", ["train-sp", "--resume", "{target}"], "continue it with ers-deep discover --resume"),
        ("disc", ["train-op", "--resume", "{target}"], "continue it with ers-deep discover --resume"),
    ],
)
def test_another_commands_folder_is_refused_and_kept(
    folders: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    argv: list[str],
    says: str,
) -> None:
    folder = tmp_path / target
    shutil.copytree(folders[target], folder)
    before = _contents(folder)
    names = {k: str(v) for k, v in folders.items()}
    capsys.readouterr()
    assert main([a.format(target=folder, **names) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "internal error" not in err[0], err
    assert _contents(folder) == before
