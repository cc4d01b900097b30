"""``ers-deep discover`` end to end on the toy pool, through ``main``: JSON, the readable table, --out guard and
--resume, and the options resolved for tabular pools."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ers_deep.cli import main
from ers_deep.cli.discover import DiscoverOptions
from ers_deep.discovery import TABULAR_SETTINGS
from ers_exact.interface import DiscoveryResult, LearnedTransformation
from ers_exact.util.options import UsageError


def _argv(pool: Path, out: Path, *extra: str) -> list[str]:
    return [
        "discover",
        "--pool",
        str(pool),
        "--candidates",
        "2",
        "--top",
        "1",
        "--total-steps",
        "20000",
        "--out",
        str(out),
        "--threads",
        "1",
        *extra,
    ]


def test_discover_json_table_and_resume(
    toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "disc"
    assert main(_argv(toy_pool, out, "--json")) == 0
    res = json.loads(capsys.readouterr().out)
    result = DiscoveryResult.from_json(res)
    assert result.algorithm == "sp-max" and len(result.transformations) == 1
    assert (
        res["files"]["discovery"] == str(out / "discovery.json")
        and (out / "symmetries.safetensors").is_file()
    )
    assert res["config"]["discovery"]["num_envs"] == TABULAR_SETTINGS["num_envs"]  # tabular defaults
    assert res["config"]["entropy"] == 0.25 and res["config"]["scoring"] == "exact"
    assert res["config"]["exact"][0]["er_symmetry"] is True  # the toy swap

    assert main(_argv(toy_pool, out)) == 2  # the run is there: refuse to overwrite it
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "--resume" in err[0]

    assert main(_argv(toy_pool, out, "--resume")) == 0  # finished: resumes at once, prints the table
    text = capsys.readouterr().out
    assert "deep discovery on tabular:toy-coordination (sp-max)" in text
    for word in ("on Pi'", "admissible", "Dec-POMDP", "ER", "exact mean J", "A(1 0) O(1 0 2)", "Table 2"):
        assert word in text, word


def test_default_out_and_resolved_config(toy_pool: Path) -> None:
    opts = DiscoverOptions(pool=str(toy_pool), algorithm="xp-max", lr=0.05)
    assert opts.out_dir() == toy_pool / "discovery-xp-max"
    cfg = opts.config("tabular:toy-coordination")
    assert (cfg.num_envs, cfg.num_steps, cfg.total_env_steps, cfg.lr) == (256, 4, 300_000, 0.05)
    assert cfg.alpha is None and cfg.algorithm == "xp-max"
    deep = opts.config("hanabi")
    assert (deep.num_envs, deep.num_steps, deep.lr) == (128, 32, 0.05)
    with pytest.raises(UsageError, match="--top 3 is more than --candidates 2"):
        DiscoverOptions(pool=str(toy_pool), candidates=2, top=3)
    # Algorithm 2's weights on another algorithm were ignored without a word
    with pytest.raises(UsageError, match=r"--lambda1 0\.5 only applies to --algorithm sp-max-reg"):
        DiscoverOptions(pool=str(toy_pool), lambda1=0.5)
    with pytest.raises(UsageError, match=r"--lambda1 0\.5 and --lambda2 0\.2 only apply"):
        DiscoverOptions(pool=str(toy_pool), algorithm="xp-max", lambda1=0.5, lambda2=0.2)
    assert DiscoverOptions(pool=str(toy_pool), algorithm="sp-max-reg", lambda1=0.5).lambda1 == 0.5


def test_resume_keeps_the_runs_options_and_refuses_others(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume continues with the run's own options (OUT/discovery-config.json) without repeating them; an
    option given that differs from the run's (--candidates, --seed: they shape the run's candidates, action
    maps and checkpoints) is an input error naming each, and the run's discovery-config.json stays."""
    out = tmp_path / "toy-discovery"  # a copy: the resumes below read its files
    shutil.copytree(toy_discovery[0], out)
    result = toy_discovery[1]
    before = (out / "discovery-config.json").read_bytes()
    pool = toy_discovery[0].parent / "toy-pool"
    argv = ["discover", "--pool", str(pool), "--out", str(out), "--resume", "--threads", "1"]
    assert main([*argv, "--seed", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed = 5 (the run's: 0)" in err[0] and "--force" in err[0], err
    assert main([*argv, "--candidates", "4", "--algorithm", "xp-max"]) == 2
    err = capsys.readouterr().err
    assert "algorithm = 'xp-max' (the run's: 'sp-max')" in err and "candidates = 4 (the run's: 3)" in err, err
    assert "total_env_steps" not in err  # not given: the run's 60,000 stands
    assert (out / "discovery-config.json").read_bytes() == before
    assert main([*argv, "--candidates", "3", "--json"]) == 0  # the run's own: finished, so read back at once
    res = json.loads(capsys.readouterr().out)
    assert res["config"]["discovery"]["total_env_steps"] == 60_000 and res["scores"] == list(result.scores)
    assert (out / "discovery-config.json").read_bytes() == before


def test_resume_leaves_a_finished_run_as_it_is_and_refuses_another_pool(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished run resumed returns its discovery.json as written: before 2026-12-07 it was rewritten (new
    training seconds, so new bytes), and an other-play run from it, which checks its SHA-256, then refused to
    resume. A resume given other policies (--held-out here) is refused naming the role, before training: its
    checkpoints hold the first pool's nets, so the run mixed two pools. The record is
    OUT/discovery-policies.json (names and parameter digests)."""
    out = tmp_path / "toy-discovery"
    shutil.copytree(toy_discovery[0], out)
    before = (out / "discovery.json").read_bytes()
    pool = toy_discovery[0].parent / "toy-pool"
    recorded = json.loads((out / "discovery-policies.json").read_text())
    assert [n for n, _ in recorded["trained_on"]] == ["toy-pool/seed-0", "toy-pool/seed-1"]
    argv = ["discover", "--pool", str(pool), "--out", str(out), "--resume", "--threads", "1"]
    assert main(argv) == 0
    capsys.readouterr()
    assert (out / "discovery.json").read_bytes() == before
    assert main([*argv, "--held-out", str(pool)]) == 2  # the whole pool held out: other held-out policies
    err = capsys.readouterr().err
    assert "the policies it trains on differ (the run's: toy-pool/seed-0, toy-pool/seed-1)" in err, err
    assert (
        "the held-out policies differ (the run's: toy-pool/seed-2, toy-pool/seed-3)" in err
        and "--force" in err
    )
    assert (out / "discovery.json").read_bytes() == before


def test_earlier_symmetries_of_another_game_are_refused(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sp-max-reg --earlier with the symmetries of another game: one line naming both games, before any file is
    written (it was an internal RuntimeError inside training, with OUT left behind)."""
    from ers_deep.pools import train_pool
    from ers_deep.train.config import paper_config

    pool = tmp_path / "lever-pool"
    train_pool(
        paper_config("tabular:three-lever", seeds=(0, 1, 2, 3), total_env_steps=256 * 4 * 2),
        pool,
        eval_games=20,
        progress=False,
    )
    out = tmp_path / "reg"
    argv = _argv(pool, out, "--algorithm", "sp-max-reg", "--earlier", str(toy_discovery[0]))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "learned on tabular:toy-coordination, not on tabular:three-lever" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (
            ["discover", "--pool", "POOL", "--num-envs", "1000000000", "--out", "OUT"],
            "--num-envs x --candidates",
        ),
        (
            ["discover", "--pool", "POOL", "--sampled-scores", "--eval-games", "1000000000", "--out", "OUT"],
            "--eval-games",
        ),
        (["action-matrix", "POOL", "--games", "1000000000", "--out", "OUT"], "--games"),
        (["xp-distribution", "--populations", "A=POOL", "--games", "1000000000", "--out", "OUT"], "--games"),
        (
            [
                "op-preservation",
                "--discovery",
                "DISC",
                "--pool",
                "POOL",
                "--games",
                "1000000000",
                "--out",
                "OUT",
            ],
            "--games",
        ),
    ],
    ids=["discover-envs", "discover-eval-games", "action-matrix", "xp-distribution", "op-preservation"],
)
def test_games_beyond_the_memory_budget_are_refused_before_any_file(
    argv: list[str],
    flag: str,
    toy_discovery: tuple[Path, DiscoveryResult],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A billion games was an internal error (torch's allocator) after the run folder was made; now the budget's
    one-line refusal (as crossplay and train-sp give), and no folder."""
    disc = toy_discovery[0]
    out = tmp_path / "out"
    subs = {"POOL": str(disc.parent / "toy-pool"), "DISC": str(disc), "OUT": str(out)}
    args = [subs.get(a, a.replace("POOL", subs["POOL"])) for a in argv]
    assert main([*args, "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    games = "8,000,000,000" if flag.endswith("candidates") else "1,000,000,000"  # 8 candidates by default
    assert len(err) == 1 and f"{flag}: {games} games" in err[0] and "budget" in err[0], err
    assert not out.exists()


def test_hanabi_discovery_records_the_known_symmetry_of_each_rounding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On Hanabi (no ers-exact game to round to) each kept phi's rounding is compared with the colour
    permutations: discovery.json and the text name the known symmetry it equals or the nearest (a barely
    trained 2-policy Hanabi-Small pool; 2 candidates of a few updates)."""
    from ers_deep.nets import NetConfig
    from ers_deep.pools import train_pool
    from ers_deep.train.config import paper_config

    pool = tmp_path / "pool"
    small = {"num_envs": 16, "num_steps": 16, "minibatches": 2, "total_env_steps": 16 * 16 * 2}
    cfg = paper_config(
        "hanabi", hanabi_preset="Hanabi-Small", seeds=(0, 1), net=NetConfig(hidden=32), **small
    )
    train_pool(cfg, pool, eval_games=8, progress=False)
    argv = [
        *_argv(pool, tmp_path / "disc", "--num-envs", "16", "--num-steps", "16"),
        *("--total-steps", "512", "--eval-games", "8", "--candidates", "2", "--top", "2"),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    result = DiscoveryResult.from_json(json.loads((tmp_path / "disc" / "discovery.json").read_text()))
    assert "exact" not in result.config and "known Dec-POMDP symmetry" in text
    names = {"identity", "colours(1, 0)"}
    for t in result.transformations:
        assert isinstance(t, LearnedTransformation) and t.nearest is None and t.known is not None
        assert t.known.name in names and 0.0 <= t.known.agreement <= 1.0 and t.known.varying > 0
        assert t.known.match in (*names, None)
        assert (t.known.match or f"nearest {t.known.name}") in text
    # --resume with the options that have no default on Hanabi (the run's own values, and one that differs):
    # they were compared against defaults that lack them, an internal KeyError('total_env_steps')
    resume = [*argv, "--resume"]
    assert main(resume) == 0
    capsys.readouterr()
    assert main([*resume[:-1], "--num-envs", "32", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--num-envs = 32 (the run's: 16)" in err[0], err


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_action_set_permutations_on_a_deep_env_is_refused(
    env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--action-set permutations on a Hanabi or Overcooked V2 pool: there the candidates' phi_A come from
    transpositions of moves of one kind (Hanabi) or the identity (Overcooked V2) whatever the option, so it was
    ignored and discovery.json recorded ``"action_set": "permutations"`` for maps that were none of them. Now a
    one-line refusal (as --lambda1 without sp-max-reg), before any file; checked from pool.json alone."""
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "pool.json").write_text(json.dumps({"env": env, "policies": [f"seed-{s}" for s in range(4)]}))
    out = tmp_path / "out"
    assert main(_argv(pool, out, "--action-set", "permutations")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--action-set permutations only applies to tabular pools" in err[0], err
    assert f"a pool of {env}" in err[0] and not out.exists()
