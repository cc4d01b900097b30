"""The population protocol end to end on a tabular game at a tiny budget (Table 1 and Table 2), its resume
(every stage is reused from disk), and the checks of its configuration."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from ers_deep.pools import Pool, load_pool
from ers_deep.zsc import PopulationConfig, run_table1, run_table2
from ers_deep.zsc.population import _deployed
from ers_exact.interface import ZSCReport
from ers_exact.util.options import UsageError

TINY = PopulationConfig(
    env="tabular:toy-coordination",
    agents=2,
    k=2,
    candidates=2,
    top=1,
    m=1,
    sp_steps=4096 * 2 * 15,
    op_steps=4096 * 2 * 15,
    discovery_steps=256 * 4 * 10,
    games=200,
)


@pytest.fixture(scope="module")
def table1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ZSCReport]:
    out = tmp_path_factory.mktemp("t1")
    report, results = run_table1(TINY, out, progress=False)
    assert len(results) == TINY.agents
    return out, report


def test_table1_rows_and_files(table1: tuple[Path, ZSCReport]) -> None:
    out, report = table1
    assert [r.name for r in report.rows] == ["IPPO", "IPPO + OP-MDP", "IPPO + OP-ER (sp-max)"]
    for row in report.rows:
        for col in ("sp", "xp", "xp_median", "xp_median_mdp", "xp_median_er"):
            est = getattr(row, col)
            assert 0.0 <= est.value <= 1.0 + 1e-9, (row.name, col, est)  # toy game: returns in [0, 1]
        assert row.op is not None and math.isfinite(row.op.value)
    again = ZSCReport.from_json(json.loads((out / "table1.json").read_text()))
    assert again == report
    assert (out / "table1.md").read_text().startswith("| population | Self-Play |")
    for tag in ("ippo", "op-mdp", "op-er"):
        assert (out / f"xp-{tag}.png").stat().st_size > 0
        m = json.loads((out / f"xp-{tag}-plain.json").read_text())
        assert len(m["mean"]) == TINY.agents


def test_table1_command_draws_every_pools_learning_curves(table1: tuple[Path, ZSCReport]) -> None:
    """``ers-deep table1`` draws learning-curve.png in each pool it trained (``cli.zsc.pool_curves``)."""
    from ers_deep.cli.zsc import pool_curves

    out, _ = table1
    drawn = pool_curves(out)
    pools = ["sp", "op-mdp", *(f"agent-{a}/op-er" for a in range(TINY.agents))]
    assert sorted(drawn) == sorted(f"{p}/learning-curve.png" for p in pools)
    assert all((out / f).stat().st_size > 2000 for f in drawn)


def test_table1_resumes_from_disk(table1: tuple[Path, ZSCReport]) -> None:
    """A second run on the same folder trains nothing (every pool and discovery is loaded) and reports the
    same self-play column (evaluation games are seeded)."""
    out, report = table1
    stamp = {p: p.stat().st_mtime_ns for p in out.rglob("pool.json")}
    again, _ = run_table1(TINY, out, progress=False)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("pool.json")} == stamp
    assert [r.sp for r in again.rows] == [r.sp for r in report.rows]


def test_table2_reuses_the_pools(table1: tuple[Path, ZSCReport]) -> None:
    out, _ = table1
    table = run_table2(TINY, out, algorithms=("sp-max",), progress=False)
    row = table["rows"]["sp-max"]
    assert set(row) == {"pool_return", "J_1", "J_2", "J_3", "reconstruction_loss"}
    assert all(math.isfinite(v["value"]) for v in row.values())
    assert (out / "table2.md").read_text().splitlines()[2].startswith("| sp-max |")


def test_unseen_seeds_measure_table_2_and_all_k_seeds_are_each_agents_pool(
    table1: tuple[Path, ZSCReport], tmp_path: Path
) -> None:
    """``unseen``: the paper's protocol, each agent's k self-play seeds are its Pi' (discovery trains and ranks
    on all of them) and its unseen seeds only measure Table 2 (before 2026-12-07 an agent's discovery used the
    first half of its k seeds, so --k 6 learned from 3); IPPO deploys among the k only. Without it, the old
    split (the table1 fixture's config)."""
    config = dataclasses.replace(TINY, k=2, unseen=1)
    assert config.unseen_seeds(1) == (190,) and TINY.unseen_seeds(1) == ()
    table = run_table2(config, tmp_path, algorithms=("sp-max",), progress=False)
    assert all(math.isfinite(v["value"]) for v in table["rows"]["sp-max"].values())
    for a in range(config.agents):
        found = json.loads((tmp_path / f"agent-{a}" / "discovery-sp-max" / "discovery.json").read_text())
        names = {p.name: p.seed for p in load_pool(tmp_path / "sp").policies}
        assert sorted(names[n] for n in found["config"]["trained_on"]) == list(config.sp_seeds(a))
        assert [names[n] for n in found["config"]["held_out"]] == list(config.unseen_seeds(a))
    old_out = table1[
        0
    ]  # TINY: no unseen seeds, so its k = 2 seeds split: the first trains, the second is held out
    old = json.loads((old_out / "agent-1" / "discovery-sp-max" / "discovery.json").read_text())["config"]
    names = {p.name: p.seed for p in load_pool(old_out / "sp").policies}
    assert [names[n] for n in old["trained_on"]] == [100] and [names[n] for n in old["held_out"]] == [101]
    with pytest.raises(UsageError, match="unseen"):
        PopulationConfig(unseen=0)


def test_greedy_cross_play_reaches_every_matrix_of_a_row(
    table1: tuple[Path, ZSCReport], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``greedy`` (``--greedy``: the official cross_play.py's argmax play) reaches the plain and symmetrised
    matrices of a Table 1 row, and each matrix file records it; the default samples."""
    import ers_deep.zsc.population as population
    from ers_deep.other_play import op_symmetries
    from ers_deep.zsc import load_deployed

    config, deployed = load_deployed(table1[0])
    pols = deployed["ippo"]
    ident = op_symmetries(pols[0].config, "none")
    calls: list[object] = []
    real = population.crossplay_matrix

    def spy(*args: object, **kw: object) -> object:
        calls.append(kw.get("greedy"))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(population, "crossplay_matrix", spy)
    for greedy in (True, False):
        calls.clear()
        cfg = dataclasses.replace(config, greedy=greedy, games=20)
        sets = [ident] * len(pols)
        population._row("IPPO", pols, ident, {p.name: ident for p in pols}, sets, cfg, tmp_path, "ippo")
        assert calls == [greedy, greedy]  # plain and ER (Phi_MDP = {id}: its matrix is the plain one)
        assert json.loads((tmp_path / "xp-ippo-plain.json").read_text())["greedy"] is greedy
        assert json.loads((tmp_path / "xp-ippo-er.json").read_text())["greedy"] is greedy


def test_overcooked_population_config() -> None:
    """Overcooked V2 populations: the paper's recurrent CNN + GRU at the given widths, minibatches capped at
    2 x num_envs actor sequences (the paper's 64 at 256 envs); Hanabi keeps its MLP."""
    cfg = PopulationConfig(env="overcooked-v2", num_envs=16, hidden=64, conv=32).train_config((0, 1), 1000)
    assert (cfg.net.kind, cfg.net.hidden, cfg.net.conv, cfg.minibatches) == ("cnn-gru", 64, 32, 32)
    assert cfg.lr_schedule == "warmup-cosine" and cfg.layout == "grounded_coord_simple"
    paper = PopulationConfig(env="overcooked-v2", num_envs=256).train_config((0,), 1000)
    assert paper.minibatches == 64 and paper.net.conv == 128
    assert PopulationConfig(minibatches=2).train_config((0,), 1000).minibatches == 2
    assert PopulationConfig().train_config((0,), 1000).net.kind == "mlp"


def test_population_config_checks() -> None:
    with pytest.raises(UsageError, match="top = 5"):
        PopulationConfig(top=5, candidates=4)
    with pytest.raises(UsageError, match="minibatches = 65"):
        PopulationConfig(env="overcooked-v2", num_envs=32, minibatches=65)
    with pytest.raises(UsageError):
        PopulationConfig(agents=1)


def test_population_seeds_never_collide_within_the_bounds() -> None:
    """At the largest sizes, across two runs' seeds, every self-play, OP-MDP and OP-ER seed is distinct and
    every discovery seed too; one past any bound is refused (k = 51 made an agent's last self-play seed its
    first OP-MDP seed, m = 21 an OP-MDP seed an OP-ER one, 51 agents two agents' discovery seeds one)."""
    from ers_deep.zsc.config import MAX_AGENTS, MAX_K, MAX_M, MAX_UNSEEN

    train, disc = [], []
    for seed in (0, 1):
        c = PopulationConfig(
            env="tabular:toy-coordination", agents=MAX_AGENTS, k=MAX_K, m=MAX_M, unseen=MAX_UNSEEN, seed=seed
        )
        for a in range(c.agents):
            train += [*c.sp_seeds(a), *c.op_seeds(a, "mdp"), *c.op_seeds(a, "er"), *c.unseen_seeds(a)]
            disc += [c.discovery_config(a, alg).seed for alg in ("sp-max", "sp-max-reg")]
    assert len(set(train)) == len(train) and len(set(disc)) == len(disc)
    for field in ({"agents": MAX_AGENTS + 1}, {"k": MAX_K + 1}, {"m": MAX_M + 1}, {"unseen": MAX_UNSEEN + 1}):
        with pytest.raises(UsageError, match=next(iter(field))):
            PopulationConfig(env="tabular:toy-coordination", **field)  # type: ignore[arg-type]


def test_the_table_command_takes_the_configs_bounds(tmp_path: Path) -> None:
    """``ers-deep table1`` checks the same bounds as ``PopulationConfig`` (one definition, ``ers_deep.seed_layout``):
    the largest values pass, one past them is refused, and the help names them."""
    from ers_deep.cli.zsc import Table1Options
    from ers_deep.zsc.config import MAX_AGENTS, MAX_K, MAX_M

    out = str(tmp_path / "run")
    largest = Table1Options(env="tabular:toy-coordination", out=out, agents=MAX_AGENTS, k=MAX_K, m=MAX_M)
    config = largest.config()
    assert (config.agents, config.k, config.m) == (MAX_AGENTS, MAX_K, MAX_M)
    fields = {f.name: f for f in dataclasses.fields(Table1Options)}
    for name, bound in (("agents", MAX_AGENTS), ("k", MAX_K), ("m", MAX_M)):
        with pytest.raises(UsageError, match=name):
            Table1Options(env="tabular:toy-coordination", out=out, **{name: bound + 1})  # type: ignore[arg-type]
        assert f"to {bound}" in fields[name].metadata["help"]


@pytest.mark.gpu
def test_table1_on_cuda(tmp_path: Path) -> None:
    """The same protocol on a CUDA device (Hanabi-Very-Small, tiny budgets); the paper's scale is
    ``scripts/table1-gpu.sh``."""
    import dataclasses

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    config = dataclasses.replace(
        TINY,
        env="hanabi",
        preset="Hanabi-Very-Small",
        num_envs=64,
        num_steps=16,
        hidden=32,
        sp_steps=64 * 16 * 4,
        op_steps=64 * 16 * 4,
        discovery_steps=64 * 16 * 2,
        games=64,
        device="cuda",
    )
    report, _ = run_table1(config, tmp_path, progress=False)
    assert len(report.rows) == 3 and all(math.isfinite(r.sp.value) for r in report.rows)


def test_sp_max_reg_draws_its_candidates_from_another_seed_than_the_agents_sp_max() -> None:
    """Algorithm 2 trains "another set of random transpositions" than the sp-max run it composes with: table2
    gave both runs of an agent one seed, so sp-max-reg started from the same action maps and weights."""
    cfg = PopulationConfig(agents=3, seed=2)
    seeds = {
        (a, algo): cfg.discovery_config(a, algo).seed
        for a in range(cfg.agents)
        for algo in ("sp-max", "sp-max-reg")
    }
    assert len(set(seeds.values())) == len(seeds)  # every agent's every run draws its own candidates
    assert cfg.discovery_config(1).seed == seeds[1, cfg.algorithm]  # the population's algorithm by default


def _scored_pool(scores: dict[int, float], op: dict[int, float] | None = None) -> Pool:
    """A pool of stand-in policies (only their seeds) with the self-play scores pool.json records and, for an
    other-play pool, its ``other_play`` scores ``op``."""
    info = {
        "policies": [
            {"seed": s, "self_play": {"mean": v}, **({"other_play": {"mean": op[s]}} if op else {})}
            for s, v in scores.items()
        ]
    }
    return Pool(Path("pool"), info, tuple(SimpleNamespace(seed=s) for s in scores))  # type: ignore[misc]


def test_every_population_deploys_each_agents_best_self_play_seed() -> None:
    """The paper's argmax_k J(pi_{i,k}) for every population (ers-exact's pipeline deploys its SP agents'
    best too): IPPO among the agent's k self-play seeds (it deployed the first), OP among its m OP seeds;
    ties go to the earlier seed."""
    cfg = PopulationConfig(env="tabular:toy-coordination", agents=2, k=3, m=2)
    assert cfg.sp_seeds(1) == (100, 101, 102) and cfg.op_seeds(1, "er") == (170, 171)
    sp = _scored_pool({0: 0.5, 1: 0.9, 2: 0.7, 100: 0.8, 101: 0.8, 102: 0.1})
    mdp = _scored_pool({50: 0.2, 51: 0.3, 150: 0.4, 151: 0.4})
    er = [_scored_pool({70: 1.0, 71: 0.9}), _scored_pool({170: 0.1, 171: 0.6})]
    deployed = _deployed(cfg, sp, mdp, er)
    assert {tag: [p.seed for p in pols] for tag, pols in deployed.items()} == {
        "ippo": [1, 100],
        "op-mdp": [51, 150],
        "op-er": [70, 171],
    }


def test_table1_symmetriser_is_recorded_and_an_older_config_without_it_resumes(
    table1: tuple[Path, ZSCReport], tmp_path: Path
) -> None:
    """``symmetriser`` reaches XP(*)+MDP / +ER (xp-TAG-mdp/er.json) and table1.json's config; a config.json
    written before the field existed resumes as the logit average (nothing retrained), and the same pools
    re-reported with ``symmetriser="probabilities"`` record it."""
    import dataclasses
    import shutil

    out, report = table1
    assert report.config["symmetriser"] == "logits"
    assert json.loads((out / "xp-ippo-er.json").read_text())["symmetriser"] == "logits"
    old = tmp_path / "old"
    shutil.copytree(out, old)
    cfg = json.loads((old / "config.json").read_text())
    del cfg["symmetriser"]
    (old / "config.json").write_text(json.dumps(cfg))
    stamp = {p: p.stat().st_mtime_ns for p in old.rglob("pool.json")}
    run_table1(TINY, old, progress=False)
    assert {p: p.stat().st_mtime_ns for p in old.rglob("pool.json")} == stamp
    prob = dataclasses.replace(TINY, symmetriser="probabilities")
    (old / "config.json").write_text(json.dumps(prob.to_json()))  # as if the run had been made with it
    again, _ = run_table1(prob, old, progress=False)
    assert again.config["symmetriser"] == "probabilities"
    assert {p: p.stat().st_mtime_ns for p in old.rglob("pool.json")} == stamp
    for tag in ("ippo", "op-mdp", "op-er"):
        assert json.loads((old / f"xp-{tag}-er.json").read_text())["symmetriser"] == "probabilities"
    with pytest.raises(UsageError, match="symmetriser"):
        PopulationConfig(symmetriser="policies")


@pytest.mark.parametrize("rule", ["sp_return", "op_value"])
def test_op_agents_deploy_the_seed_select_by_names(rule: str) -> None:
    """Each agent's OP seeds where the two rules disagree (seed 50: J 0.9, OP 0.3; seed 51: J 0.5, OP 0.8):
    ``sp_return`` (the paper's argmax_k J) deploys 50, ``op_value`` (pool.json's other_play) 51, in both OP
    populations; the IPPO population deploys its best self-play seed under either rule."""
    cfg = PopulationConfig(env="tabular:toy-coordination", agents=2, k=2, m=2, select_by=rule)
    sp = _scored_pool({0: 0.2, 1: 0.7, 100: 0.6, 101: 0.1})
    mdp = _scored_pool({50: 0.9, 51: 0.5, 150: 0.9, 151: 0.5}, {50: 0.3, 51: 0.8, 150: 0.3, 151: 0.8})
    er = [
        _scored_pool({70: 0.9, 71: 0.5}, {70: 0.3, 71: 0.8}),
        _scored_pool({170: 0.9, 171: 0.5}, {170: 0.3, 171: 0.8}),
    ]
    picked = {tag: [p.seed for p in pols] for tag, pols in _deployed(cfg, sp, mdp, er).items()}
    first = rule == "sp_return"
    assert picked == {
        "ippo": [1, 100],
        "op-mdp": [50, 150] if first else [51, 151],
        "op-er": [70, 170] if first else [71, 171],
    }


def test_op_value_needs_the_other_play_scores() -> None:
    from ers_deep.pools import PoolError

    cfg = PopulationConfig(env="tabular:toy-coordination", agents=2, k=2, m=2, select_by="op_value")
    plain = _scored_pool({50: 0.9, 51: 0.5, 150: 0.9, 151: 0.5})
    er = [_scored_pool({70: 0.9, 71: 0.5}), _scored_pool({170: 0.9, 171: 0.5})]
    with pytest.raises(PoolError, match="other_play"):
        _deployed(cfg, _scored_pool({0: 0.2, 1: 0.7, 100: 0.6, 101: 0.1}), plain, er)


def test_select_by_defaults_to_the_papers_rule_as_in_ers_exact() -> None:
    from ers_exact.zsc.config import PopulationConfig as ExactPopulationConfig

    assert PopulationConfig().select_by == ExactPopulationConfig().select_by == "sp_return"
    with pytest.raises(UsageError, match="select_by"):
        PopulationConfig(select_by="best")


def test_table1_records_select_by_and_the_op_reading(table1: tuple[Path, ZSCReport], tmp_path: Path) -> None:
    """table1.json's config names the rule, the OP reading (ers-deep's per-seat draw) and the OP column's
    reading (seatings: both seat orders of J(pi, phi(pi)), tests/deep/test_op_column.py) and keeps them
    through its JSON round trip; a config.json written before ``select_by`` existed resumes as the rule it
    ran with (sp_return: nothing retrained)."""
    import shutil

    out, report = table1
    back = ZSCReport.from_json(json.loads((out / "table1.json").read_text()))
    assert (back.config["select_by"], back.config["op_reading"]) == ("sp_return", "per-seat")
    assert report.config["op_column_reading"] == "seatings"
    assert back.config == report.config
    old = tmp_path / "old"
    shutil.copytree(out, old)
    cfg = json.loads((old / "config.json").read_text())
    del cfg["select_by"]
    (old / "config.json").write_text(json.dumps(cfg))
    stamp = {p: p.stat().st_mtime_ns for p in old.rglob("pool.json")}
    again, _ = run_table1(TINY, old, progress=False)
    assert {p: p.stat().st_mtime_ns for p in old.rglob("pool.json")} == stamp
    assert again.config["select_by"] == "sp_return"


@pytest.mark.parametrize(
    ("env", "given", "stray"),
    [
        ("tabular:three-lever", {"preset": "Hanabi-Small"}, "--preset"),
        ("tabular:three-lever", {"num_envs": 8, "hidden": 4}, "--num-envs, --hidden"),
        ("hanabi", {"conv": 8}, "--conv"),
        ("overcooked-v2", {"preset": "small"}, "--preset"),
    ],
)
def test_table_options_the_env_does_not_read_are_refused(
    tmp_path: Path, env: str, given: dict[str, object], stray: str
) -> None:
    """table1 / table2 ignored them (a tabular run at --preset Hanabi-Small ran and recorded the preset in
    config.json); a run already in --out still continues with the options it was started with."""
    from ers_deep.cli.zsc import Table1Options, Table2Options

    for options in (Table1Options, Table2Options):
        with pytest.raises(UsageError, match=f"--env {env}: {stray} do"):
            options(env=env, out=str(tmp_path / "new"), **given)  # type: ignore[arg-type]
    started = tmp_path / "started"
    started.mkdir()
    (started / "config.json").write_text("{}")
    Table1Options(env=env, out=str(started), **given)  # type: ignore[arg-type]
