"""What ``--force`` may remove and where a write may land (the security audit of 2026-12-07).

``--force`` of ``train-sp`` / ``train-op`` / ``discover`` removed the whole ``--out`` folder once one entry
looked like a pool or a run (``run/``, ``run/config.json``): a thesis beside it went too. Now it removes only
what ers writes into such a folder, entry by entry, and refuses (exit 2, one line naming them, nothing removed)
a folder that holds anything else. Writes followed symbolic links planted in a received pool (``pool.json``
onto another file, ``crossplay/`` onto another folder); a link inside an output folder is now refused, while
the output folder the user names may itself be a link (a results folder on a bigger disk).

The ``deep`` fixture and the session's tiny ``pools`` are in ``tests/conftest.py``; the refusal contract
(exit 2, ONE stderr line naming the value) is ``tests/cli_helpers.assert_refused``."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ers_exact.util.output import OutputError, write_atomic
from tests.cli_helpers import SMALL_TRAIN, assert_refused

Deep = Callable[..., tuple[int, str, str]]
TRAIN = ["train-sp", "--env", "tabular:toy-coordination", "--seeds", "0", *SMALL_TRAIN, "--eval-games", "4"]
DISCOVER = ["--candidates", "1", "--top", "1", "--total-steps", "64", "--num-envs", "4", "--eval-games", "4"]


def _contents(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (links not followed): a file's SHA-256, a folder's or a link's kind."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(folder))] = f"link -> {p.readlink()}"
        elif p.is_file():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p.relative_to(folder))] = "folder"
    return out


def _user_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("\\chapter{Four years}")
    (folder / "src").mkdir()
    (folder / "src" / "code.py").write_text("print('mine')")
    return folder


# ----- --force removes only ers's own entries -----------------------------------------------------------------


@pytest.mark.parametrize("run", ["notes", "pool"], ids=["run-notes", "beside-a-pool"])
def test_train_sp_force_keeps_files_ers_did_not_write(
    run: str, pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """victim/{thesis.tex, src/code.py, run/notes.txt}: ``train-sp --force`` took it for a pool (it has run/)
    and removed all of it (exit 0); so it did with a real pool that a user's files had joined."""
    victim = tmp_path / "victim"
    if run == "pool":
        shutil.copytree(pools["toy"], victim)
    else:
        (victim / "run").mkdir(parents=True)
        (victim / "run" / "notes.txt").write_text("mine")
    _user_files(victim)
    before = _contents(victim)
    code, out, err = deep(*TRAIN, "--out", str(victim), "--force")
    assert_refused("ers-deep", code, err, str(victim), "src", "thesis.tex")
    assert out == "" and _contents(victim) == before


def test_force_refuses_a_file_ers_did_not_write_inside_a_pools_subfolder(
    pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """A user's notes inside a real pool's run/ folder: the pool's own entries are checked entry by entry."""
    pool = tmp_path / "pool"
    shutil.copytree(pools["toy"], pool)
    (pool / "run" / "notes.txt").write_text("mine")
    before = _contents(pool)
    code, _, err = deep(*TRAIN, "--out", str(pool), "--force")
    assert_refused("ers-deep", code, err, "run/notes.txt")
    assert _contents(pool) == before


def test_discover_force_keeps_files_ers_did_not_write(
    pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """victim2/{run/config.json = {"lr": 1}, thesis.tex, src/}: ``discover --force`` took it for a discovery run
    killed early and removed all of it."""
    victim = _user_files(tmp_path / "victim2")
    (victim / "run").mkdir()
    (victim / "run" / "config.json").write_text('{"lr":1}')
    before = _contents(victim)
    code, out, err = deep("discover", "--pool", str(pools["toy"]), *DISCOVER, "--out", str(victim), "--force")
    assert_refused("ers-deep", code, err, str(victim), "src", "thesis.tex")
    assert out == "" and _contents(victim) == before


def test_force_replaces_a_real_pool_with_what_ers_wrote_into_it(
    pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """The legitimate flow: a pool written by ers, with the analyses, the cross-play and a discovery run later
    written into it, is replaced by ``--force`` (those derived results go with the pool they describe); so is
    a table1 sub-pool (a pool without learning curve or analyses)."""
    pool = tmp_path / "pool"
    shutil.copytree(pools["toy"], pool)
    for argv in (
        ["action-matrix", str(pool), "--games", "4"],
        ["crossplay", str(pool), "--games", "2"],
        ["discover", "--pool", str(pool), *DISCOVER],
    ):
        code, _, err = deep(*argv)
        assert code == 0, err
    assert {"analysis", "crossplay", "discovery-sp-max"} <= {p.name for p in pool.iterdir()}
    old = (pool / "pool.json").read_bytes()
    code, _, err = deep(*TRAIN, "--out", str(pool), "--force")
    assert code == 0, err
    names = {p.name for p in pool.iterdir()}
    assert (pool / "pool.json").read_bytes() != old and not names & {
        "analysis",
        "crossplay",
        "discovery-sp-max",
    }
    table = tmp_path / "table1"
    shutil.copytree(pools["partial"], table / "sp", ignore=shutil.ignore_patterns("learning-curve.png"))
    code, _, err = deep(*TRAIN, "--out", str(table / "sp"), "--force")
    assert code == 0, err
    assert (table / "sp" / "pool.json").is_file()


# ----- no write through a link inside an output folder -------------------------------------------------------


@pytest.mark.parametrize("entry", ["pool.json", "run/metrics.csv", "policies"])
def test_resume_refuses_a_link_inside_the_pool(
    entry: str, pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """A received pool whose pool.json pointed at ~/.ssh/authorized_keys: ``train-sp --resume`` overwrote that
    file with the pool's JSON; a linked metrics.csv was appended to, a linked policies/ folder written into."""
    pool = tmp_path / "shared"
    shutil.copytree(pools["partial"], pool)
    outside = tmp_path / "outside"
    if entry == "policies":
        outside.mkdir()
        shutil.rmtree(pool / entry)
    else:
        outside.write_text("ssh-ed25519 AAAA the victim's key\n")
        (pool / entry).unlink()
    (pool / entry).symlink_to(outside)
    before, kept = _contents(pool), _contents(tmp_path)
    code, _, err = deep("train-sp", "--resume", str(pool))
    assert_refused("ers-deep", code, err, entry)
    assert _contents(pool) == before and _contents(tmp_path) == kept


@pytest.mark.parametrize(
    ("folder", "argv"),
    [
        ("crossplay", ["crossplay", "@POOL", "--games", "2"]),
        ("analysis", ["action-matrix", "@POOL", "--games", "4"]),
        ("discovery-sp-max", ["discover", "--pool", "@POOL", *DISCOVER]),
    ],
)
def test_a_linked_subfolder_of_a_received_pool_is_refused(
    folder: str, argv: list[str], pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """sl/crossplay -> outside/: ``crossplay sl`` wrote its results into outside/ (so did the analyses into a
    linked POOL/analysis, discover into a linked POOL/discovery-ALGORITHM)."""
    pool = tmp_path / "sl"
    shutil.copytree(pools["toy"], pool)
    outside = tmp_path / "outside"
    outside.mkdir()
    (pool / folder).symlink_to(outside, target_is_directory=True)
    code, _, err = deep(*[str(pool) if a == "@POOL" else a for a in argv])
    assert_refused("ers-deep", code, err, folder)
    assert list(outside.iterdir()) == []


def test_a_linked_output_folder_the_user_names_still_works(
    pools: dict[str, Path], tmp_path: Path, deep: Deep
) -> None:
    """--out may be a link (a results folder on a bigger disk): a new pool, its --resume and its --force are
    written into the link's target, and the link stays a link (``--force`` called rmtree on the link: an
    internal error); so is crossplay's --out."""
    disk = tmp_path / "disk" / "pool"
    disk.mkdir(parents=True)
    link = tmp_path / "pool"
    link.symlink_to(disk, target_is_directory=True)
    code, _, err = deep(*TRAIN, "--max-updates", "2", "--out", str(link))
    assert code == 0, err
    code, _, err = deep("train-sp", "--resume", str(link))
    assert code == 0, err
    code, _, err = deep(*TRAIN, "--out", str(link), "--force")
    assert code == 0, err
    assert link.is_symlink() and (disk / "pool.json").is_file() and (disk / "policies").is_dir()
    (tmp_path / "disk" / "xp").mkdir()
    (tmp_path / "xp").symlink_to(tmp_path / "disk" / "xp", target_is_directory=True)
    code, _, err = deep("crossplay", str(pools["toy"]), "--games", "2", "--out", str(tmp_path / "xp"))
    assert code == 0, err
    assert (tmp_path / "disk" / "xp" / "xp.json").is_file()


def test_write_atomic_refuses_a_link_below_an_output_root(tmp_path: Path) -> None:
    """Below an output folder (``output_root``) neither the file written nor a folder on its way may be a link;
    the root itself may be one, and a file the user names outside any output folder is still written through
    its link (``tests/exact/cli/test_cli_limits.py``)."""
    from ers_exact.util.output import output_root

    target = tmp_path / "victim.txt"
    target.write_text("mine")
    (tmp_path / "real").mkdir()
    root = tmp_path / "root"
    root.symlink_to(tmp_path / "real", target_is_directory=True)
    (root / "file.json").symlink_to(target)
    (root / "sub").symlink_to(tmp_path, target_is_directory=True)
    with output_root(root):
        write_atomic(root / "new.json", "{}")
        for path in (root / "file.json", root / "sub" / "x.json"):
            with pytest.raises(OutputError, match="symbolic link"):
                write_atomic(path, "{}")
    assert target.read_text() == "mine" and not (tmp_path / "x.json").exists()
    assert (tmp_path / "real" / "new.json").read_text() == "{}"
    write_atomic(root / "file.json", "theirs")  # no output folder: the user's link is written through
    assert target.read_text() == "theirs"


@pytest.mark.parametrize(
    ("text", "why"),
    [("[" * 200_000 + "]" * 200_000, "RecursionError"), ('{"a": ' + "9" * 5000 + "}", "ValueError")],
    ids=["nested", "huge-integer"],
)
def test_a_crafted_json_file_is_refused_not_a_crash(tmp_path: Path, text: str, why: str) -> None:
    """JSON nested 200,000 deep, or an integer of 5,000 digits (past Python's conversion limit), escaped
    ``load_json`` as RecursionError / ValueError: "internal error, please report it" (pool.json, --policy)."""
    from ers_exact.util.output import FileFormatError, load_json

    path = tmp_path / "crafted.json"
    path.write_text(text)
    with pytest.raises(FileFormatError, match=f"crafted.json: not JSON ers reads \\({why}"):
        load_json(path, "a pool summary")
