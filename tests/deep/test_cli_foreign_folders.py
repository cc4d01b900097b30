"""A folder written by one training command is not taken for another's: ``discover`` refuses a pool as its
``--out`` and ``train-sp`` / ``train-op`` refuse a discovery run as theirs, with or without ``--force`` or
``--resume`` (``discover --force`` removed an other-play pool, ``train-sp --force`` a discovery output,
``discover --resume`` wrote into a pool and stopped on an internal error, ``train-sp --resume`` called the
discovery's checkpoints damaged)."""

from __future__ import annotations

import hashlib
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


def test_each_folder_is_told_apart(folders: dict[str, Path], tmp_path: Path) -> None:
    assert [folder_kind(folders[k]) for k in ("sp", "op", "disc")] == ["pool", "pool", "discovery"]
    killed = tmp_path / "killed"  # a pool killed before its first freeze: only its run
    (killed / "run").mkdir(parents=True)
    shutil.copy(folders["sp"] / "run" / "config.json", killed / "run" / "config.json")
    assert folder_kind(killed) == "run" and folder_kind(tmp_path / "none") is None


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
