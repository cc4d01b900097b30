"""Issue 22's careless-user inputs, classes 4, 5 and 7: broken or foreign files (pool.json that is a list, not
UTF-8 or for another env; a discovery input that is a pool; a damaged run config or checkpoint), options that
are honoured or refused on --resume (the run's config and symmetries are kept), and degenerate games (one- and
three-agent games solve, and every command that trains, discovers or pairs policies works on them or refuses
them at load).

A refusal is exit status 2 with ONE stderr line ``PROG CMD: error: ...`` naming the value, never a traceback
(the contract of ``tests/test_cli_contract.py``); the shared helpers are in ``tests/cli_helpers.py``, the
``exact``, ``deep`` and ``pools`` fixtures in ``tests/conftest.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import ONE_AGENT, SMALL_TRAIN, THREE_AGENTS, assert_refused, finite, run, strict


# ----- classes 4, 5, 7: pools --------------------------------------------------------------------------------
def _broken(root: Path, kind: str, pools: dict[str, Path]) -> Path:
    import shutil

    folder = root / kind
    if kind == "list":
        folder.mkdir()
        (folder / "pool.json").write_text("[1, 2]")
    elif kind == "latin1":
        folder.mkdir()
        (folder / "pool.json").write_bytes('{"env": "caf\xe9"}'.encode("latin-1"))
    elif kind == "policies-not-list":
        folder.mkdir()
        (folder / "pool.json").write_text('{"env": "hanabi", "policies": 3}')
    elif kind == "wrong-env-label":
        shutil.copytree(pools["toy"], folder)
        info = json.loads((folder / "pool.json").read_text())
        (folder / "pool.json").write_text(json.dumps({**info, "env": "hanabi"}))
    elif kind == "run-config-garbage":
        shutil.copytree(pools["partial"], folder)
        (folder / "run" / "config.json").write_bytes(b"\xff\xfe garbage")
    elif kind == "run-config-no-net":
        shutil.copytree(pools["partial"], folder)
        (folder / "run" / "config.json").write_text('{"config": {"alpha": 1}}')
    elif kind.startswith("op-run-config-"):  # other-play's reader was json.loads, then info["config"]
        shutil.copytree(pools["op-partial"], folder)
        text = {"garbage": b"\xff\xfe garbage", "list": b"[1, 2]", "no-net": b'{"config": {"alpha": 1}}'}
        (folder / "run" / "config.json").write_bytes(text[kind.removeprefix("op-run-config-")])
    elif kind.startswith("op-record-"):  # the pool.json of a partial pool holds the record too
        shutil.copytree(pools["op-partial"], folder)
        (folder / "pool.json").unlink()
        text = {"garbage": b"\xff\xfe garbage", "no-source": b'{"symmetries": []}'}
        (folder / "run" / "other_play.json").write_bytes(text[kind.removeprefix("op-record-")])
    return folder


# (id, argv with @BROKEN:kind or @POOL:name, the substring the one line must name)
FILE_CASES = [
    ("pool-json-a-list", ["crossplay", "@BROKEN:list"], "pool.json"),
    ("pool-json-not-utf8", ["crossplay", "@BROKEN:latin1"], "UTF-8"),
    ("pool-policies-not-a-list", ["crossplay", "@BROKEN:policies-not-list"], "policies"),
    ("pool-wrong-env-label", ["crossplay", "@BROKEN:wrong-env-label"], "hanabi"),
    (
        "discover-held-out-other-env",
        ["discover", "--pool", "@POOL:toy", "--held-out", "@POOL:lever"],
        "--held-out",
    ),
    (
        "op-symmetries-folder-is-a-pool",
        ["train-op", "--env", "tabular:toy-coordination", "--symmetries", "@POOL:toy", "--out", "@OUT"],
        "a pool, not a discovery output",
    ),
    ("resume-config-garbage", ["train-sp", "--resume", "@BROKEN:run-config-garbage"], "config.json"),
    ("resume-config-no-net", ["train-sp", "--resume", "@BROKEN:run-config-no-net"], "has no 'net'"),
    ("op-resume-config-garbage", ["train-op", "--resume", "@BROKEN:op-run-config-garbage"], "config.json"),
    ("op-resume-config-a-list", ["train-op", "--resume", "@BROKEN:op-run-config-list"], "JSON list"),
    ("op-resume-config-no-net", ["train-op", "--resume", "@BROKEN:op-run-config-no-net"], "has no 'net'"),
    ("op-resume-record-garbage", ["train-op", "--resume", "@BROKEN:op-record-garbage"], "other_play.json"),
    (
        "op-resume-record-no-source",
        ["train-op", "--resume", "@BROKEN:op-record-no-source"],
        "other_play.json",
    ),
    # class 5: --resume keeps the run's config
    (
        "resume-with-options",
        ["train-sp", "--resume", "@POOL:partial", "--total-steps", "9", "--alpha", "0.5"],
        "--alpha",
    ),
    (
        "resume-max-updates-passed",
        ["train-sp", "--resume", "@POOL:partial", "--max-updates", "5"],
        "already at update 12",
    ),
    ("train-op-resume-with-seeds", ["train-op", "--resume", "@POOL:partial", "--seeds", "3"], "--seeds"),
    # stale symmetries: --resume keeps the run's Phi
    (
        "train-op-resume-other-symmetries",
        ["train-op", "--resume", "@POOL:op-partial", "--symmetries", "none"],
        "--symmetries none",
    ),
    (
        "train-op-resume-a-discovery-for-mdp",
        ["train-op", "--resume", "@POOL:op-partial", "--symmetries", "@POOL:toy"],
        "trained with symmetries 'mdp'",
    ),
    ("train-op-resume-a-self-play-pool", ["train-op", "--resume", "@POOL:partial"], "not an other-play pool"),
    (  # once an internal KeyError (the other-play net's parameters)
        "train-sp-resume-an-other-play-pool",
        ["train-sp", "--resume", "@POOL:op-partial"],
        "resume it with ers-deep train-op",
    ),
    # class 7: commands that need two seats refuse one-agent pools at load
    ("crossplay-one-agent", ["crossplay", "@POOL:one"], "1 agent"),
]


@pytest.mark.parametrize(("argv", "name"), [pytest.param(a, n, id=i) for i, a, n in FILE_CASES])
def test_broken_foreign_or_unfit_inputs_are_one_line(
    argv: list[str],
    name: str,
    pools: dict[str, Path],
    tmp_path: Path,
    deep: Callable[..., tuple[int, str, str]],
) -> None:
    filled = []
    for a in argv:
        if a.startswith("@BROKEN:"):
            a = str(_broken(tmp_path, a.split(":", 1)[1], pools))
        elif a.startswith("@POOL:"):
            a = str(pools[a.split(":", 1)[1]])
        elif a == "@OUT":
            a = str(tmp_path / "out")
        filled.append(a)
    code, out, err = deep(*filled)
    assert_refused("ers-deep", code, err, name)
    assert out == ""


@pytest.mark.parametrize(
    "given", [pytest.param([], id="symmetries-left-out"), pytest.param(["mdp"], id="same")]
)
def test_train_op_resume_honours_the_runs_symmetries(
    given: list[str], pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    import shutil

    folder = tmp_path / "op"
    shutil.copytree(pools["op-partial"], folder)
    flags = ["--symmetries", *given] if given else []
    code, _, err = deep("train-op", "--resume", str(folder), *flags, "--max-updates", "5", "--json")
    assert code == 0, err
    info = json.loads((folder / "pool.json").read_text())
    assert info["other_play"]["source"] == "mdp"


def test_resume_names_the_damaged_checkpoint_it_skips(
    pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    import shutil

    from ers_deep.train.run import checkpoints

    folder = tmp_path / "partial"
    shutil.copytree(pools["partial"], folder)
    newest = checkpoints(folder / "run")[-1]
    newest.write_bytes(newest.read_bytes()[:100])
    code, _, err = deep("train-sp", "--resume", str(folder), "--max-updates", "13")
    assert code == 0, err
    assert newest.name in err and "skipped" in err


def test_resume_max_updates_counts_from_the_checkpoint_resume_uses(
    pools: dict[str, Path], tmp_path: Path, deep: Callable[..., tuple[int, str, str]]
) -> None:
    """A newest checkpoint whose header reads but whose tensors are damaged: resume falls back to the older
    one, and so does ``--max-updates``'s check (it read the damaged header: "already at update 12")."""
    import shutil

    from ers_deep.train.checkpoint import read_metadata
    from ers_deep.train.run import checkpoints

    folder = tmp_path / "partial"
    shutil.copytree(pools["partial"], folder)
    older, newest = checkpoints(folder / "run")[-2:]
    done = read_metadata(older)["counters"]["update"]
    assert read_metadata(newest)["counters"]["update"] == 12 and done < 12
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0x55  # a tensor byte: the header still reads
    newest.write_bytes(bytes(data))
    code, _, err = deep("train-sp", "--resume", str(folder), "--max-updates", str(done))
    assert_refused("ers-deep", code, err, f"already at update {done}")
    code, _, err = deep("train-sp", "--resume", str(folder), "--max-updates", "12")
    assert code == 0, err
    assert newest.name in err and "skipped" in err
    assert read_metadata(checkpoints(folder / "run")[-1])["counters"]["update"] == 12


def test_one_and_three_agent_games_solve(tmp_path: Path, exact: Callable[..., tuple[int, str, str]]) -> None:
    for name, text in (("one", ONE_AGENT), ("three", THREE_AGENTS)):
        game = tmp_path / f"{name}.dpomdp"
        game.write_text(text)
        for cmd in (["solve", str(game), "--alpha", "0.5"], ["symmetries", str(game), "--alpha", "0.01"]):
            code, out, err = exact(*cmd, "--json")
            assert code == 0, err
            assert finite(strict(out))


# ----- class 7: one- and three-agent games in every command that trains, discovers or pairs policies -------
@pytest.fixture(scope="module")
def degenerate(pools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per game (one, three): its .dpomdp, a tiny self-play pool and a tiny discovery run on it."""
    from ers_deep.cli import main

    root = tmp_path_factory.mktemp("degenerate")
    out = {"one-game": pools["one"].parent / "one.dpomdp", "one-pool": pools["one"]}
    (root / "three.dpomdp").write_text(THREE_AGENTS)
    out["three-game"] = root / "three.dpomdp"
    argv = ["train-sp", "--env", str(out["three-game"]), "--seeds", "0-1", *SMALL_TRAIN, "--eval-games", "4"]
    assert run(main, [*argv, "--out", str(root / "three-pool")]) == 0
    out["three-pool"] = root / "three-pool"
    for g in ("one", "three"):
        argv = ["discover", "--pool", str(out[f"{g}-pool"]), "--candidates", "1", "--top", "1"]
        argv += ["--total-steps", "256", "--eval-games", "4", "--out", str(root / f"{g}-discovery")]
        assert run(main, argv) == 0
        out[f"{g}-discovery"] = root / f"{g}-discovery"
    return out


_TINY_TABLE = ["--agents", "2", "--k", "2", "--candidates", "1", "--top", "1", "--sp-steps", "64"]
# (id, CLI, argv with @GAME / @POOL / @DISCOVERY / @OUT of the game, None when it works else what it names)
DEGENERATE_CASES = [
    ("exact-discover", "exact", ["discover", "@GAME", "--k", "2", "--episodes", "20"], None),
    (
        "exact-zsc",
        "exact",
        ["zsc", "@GAME", "--agents", "2", "--k", "2", "--episodes", "20", "--top", "1", "--out", "@OUT"],
        None,
    ),
    ("exact-op", "exact", ["op", "@GAME", "--steps", "20"], None),
    (
        "deep-discover",
        "deep",
        ["discover", "--pool", "@POOL", "--candidates", "1", "--top", "1"]
        + ["--total-steps", "128", "--eval-games", "4", "--out", "@OUT"],
        None,
    ),
    (
        "train-op-learned",
        "deep",
        ["train-op", "--env", "@GAME", "--symmetries", "@DISCOVERY", "--seeds", "0"]
        + [*SMALL_TRAIN, "--eval-games", "4", "--out", "@OUT"],
        None,
    ),
    ("action-matrix", "deep", ["action-matrix", "@POOL", "--games", "2", "--out", "@OUT"], None),
    (
        "xp-distribution",
        "deep",
        ["xp-distribution", "--populations", "a=@POOL", "--out", "@OUT"],
        "xp-distribution pairs policies in two seats",
    ),
    (
        "op-preservation",
        "deep",
        ["op-preservation", "--discovery", "@DISCOVERY", "--pool", "@POOL", "--out", "@OUT"],
        "op-preservation pairs policies in two seats",
    ),
    (
        "table1",
        "deep",
        ["table1", "--env", "@GAME", *_TINY_TABLE, "--out", "@OUT"],
        "table1 pairs policies in two seats",
    ),
    ("crossplay", "deep", ["crossplay", "@POOL", "--out", "@OUT"], "crossplay pairs policies in two seats"),
]


def _degenerate_params() -> list[Any]:
    """The table x (one, three); the three-agent exact zsc (about 25 s: Phi_MDP of a symmetric three-agent game
    in every other-play run) runs under ``make test-slow``."""
    out = []
    for i, c, a, r in DEGENERATE_CASES:
        for game in ("one", "three"):
            slow = (i, game) == ("exact-zsc", "three")
            marks = [pytest.mark.slow] if slow else []
            out.append(pytest.param(c, a, r, game, id=f"{i}-{game}", marks=marks))
    return out


@pytest.mark.parametrize(("cli", "argv", "refused", "game"), _degenerate_params())
def test_one_and_three_agent_games_work_or_are_refused_at_load(
    cli: str,
    argv: list[str],
    refused: str | None,
    game: str,
    degenerate: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ers_deep.cli import main as deep_main
    from ers_exact.cli import main as exact_main

    out = tmp_path / "out"
    subs = {"@GAME": f"{game}-game", "@POOL": f"{game}-pool", "@DISCOVERY": f"{game}-discovery"}

    def fill(a: str) -> str:
        for key, name in subs.items():
            a = a.replace(key, str(degenerate[name]))
        return str(out) if a == "@OUT" else a

    filled = [fill(a) for a in argv]
    code = run(exact_main if cli == "exact" else deep_main, filled)
    err = capsys.readouterr().err
    if refused is None:
        assert code == 0, err
    else:
        assert_refused(f"ers-{cli}", code, err, refused, f"{1 if game == 'one' else 3} agent")
        assert not out.exists() or not any(out.iterdir())  # refused before any work
