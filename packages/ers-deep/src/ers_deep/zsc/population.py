"""The paper's population protocol (Table 1) and its discovery table (Table 2), resumable stage by stage.

``run_table1(config, out)``:

1. self-play: the k seeds of every agent in one pool ``OUT/sp`` (all P x k seeds trained together);
2. discovery: per agent, ``discover`` on its k policies (half train, half held out) -> ``OUT/agent-A/discovery``;
3. other-play: ``OUT/op-mdp`` (m seeds per agent, the env's Dec-POMDP symmetries, trained together) and, per
   agent, ``OUT/agent-A/op-er`` (m seeds with that agent's learned symmetries);
4. deployed policies: each agent deploys, of the policies it trained for the population, one by
   ``config.select_by`` (``ers_exact.deployment.deploy_index``, the rule ers-exact's pipeline applies too):
   IPPO + OP-MDP and IPPO + OP-ER among its m OP seeds, by the best self-play return (the paper's
   argmax_k J(pi_{i,k}), the default) or the best OP score (pool.json's ``other_play``, the per-seat draw
   E J(phi_1(pi), phi_2(pi)): ``op_reading: "per-seat"`` in the report), ties by the other score; IPPO by
   the best self-play return among its k self-play seeds (no OP score); per population the exact-seat
   cross-play matrix (``OUT/xp-POP.json``, ``.png``), and the
   row of Table 1: SP, XP, XP(*) (median), XP(*) after symmetrising every policy over Phi_MDP and over its own
   learned Phi_ER (each agent's; the symmetriser averages ``config.symmetriser``: the official code's
   logits by default, or the paper's probabilities, as ers-exact's columns), and the OP objective
   E_{phi in Phi} J(pi, phi(pi)) of the deployed policies in both seat orders (Phi: the population's OP set;
   IPPO: Phi_MDP): ers-exact's OP^Phi, the ``"seatings"`` reading (``op_column_reading`` in the report), not
   the per-seat draw the agents train on (``op_reading``), from which it differs when Phi is not a group.

Every stage is skipped when its output exists and resumed when its run was interrupted, so a killed run
continues with the same command. A folder holding a run with another config is refused unless ``force``
(``--force``), which removes that run first; a non-empty folder not written by ers is refused. ``run_table2`` reruns discovery with each algorithm on the same pools and
reports J_1, J_2, J_3 and the reconstruction loss per algorithm (mean and standard error over agents).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from ers_deep.crossplay import crossplay_matrix, env_symmetries, heatmap, mean_se, xp_estimates
from ers_deep.discovery import discover
from ers_deep.envs.symmetry import Symmetry
from ers_deep.other_play import op_symmetries, train_op_pool
from ers_deep.pools import Policy, Pool, PoolError, load_pool, train_pool
from ers_deep.train.checkpoint import atomic_write_bytes
from ers_deep.train.evaluate import Agent, Average, play
from ers_deep.zsc.config import PopulationConfig
from ers_exact.deployment import deploy_index
from ers_exact.interface import DiscoveryResult, Estimate, PopulationRow, ZSCReport
from ers_exact.util.deprecation import upgrade_keys
from ers_exact.util.output import MARKER, OutputError, claim_folder, dumps

__all__ = ["POPULATIONS", "load_deployed", "run_table1", "run_table2"]


def _pool(out: Path, make: Any) -> Pool:
    """The pool in ``out``: loaded when finished, resumed when interrupted, else trained by ``make``."""
    if (out / "pool.json").exists():
        return load_pool(out)
    make(resume_run=(out / "run" / "config.json").exists())
    return load_pool(out)


def _sp_pool(config: PopulationConfig, out: Path, progress: bool | None) -> Pool:
    seeds = tuple(s for a in range(config.agents) for s in config.sp_seeds(a) + config.unseen_seeds(a))
    cfg = config.train_config(seeds, config.sp_steps)
    return _pool(
        out / "sp",
        lambda resume_run: train_pool(
            cfg, out / "sp", resume_run=resume_run, eval_games=config.games, progress=progress
        ),
    )


def _subpool(pool: Pool, seeds: Sequence[int]) -> Pool:
    keep = [p for p in pool.policies if p.seed in set(seeds)]
    return Pool(pool.path, pool.info, tuple(keep))


def _discovery(
    config: PopulationConfig, sp: Pool, agent: int, out: Path, algorithm: str, progress: bool | None
) -> DiscoveryResult:
    folder = out / f"agent-{agent}" / f"discovery-{algorithm}"
    if (folder / "discovery.json").exists():
        return DiscoveryResult.from_json(json.loads((folder / "discovery.json").read_text()))
    disc = config.discovery_config(agent, algorithm)
    if (
        algorithm == "sp-max-reg"
    ):  # compose with the agent's own sp-max symmetries (Algorithm 2's phi_i, phi_j)
        _discovery(config, sp, agent, out, "sp-max", progress)
        disc = dataclasses.replace(disc, earlier=str(out / f"agent-{agent}" / "discovery-sp-max"))
    # the paper's protocol with ``unseen``: all k seeds are the agent's Pi', its unseen ones only measure Table 2
    held_out = _subpool(sp, config.unseen_seeds(agent)) if config.unseen is not None else None
    return discover(
        _subpool(sp, config.sp_seeds(agent)),
        disc,
        folder,
        held_out=held_out,
        resume_run=(folder / "run" / "config.json").exists(),
        progress=progress,
    )


def _op_pool(
    config: PopulationConfig, seeds: tuple[int, ...], source: str, out: Path, progress: bool | None
) -> Pool:
    cfg = config.train_config(seeds, config.op_steps)
    return _pool(
        out,
        lambda resume_run: train_op_pool(
            cfg, source, out, resume_run=resume_run, eval_games=config.games, progress=progress
        ),
    )


def _first(pool: Pool, seed: int) -> Policy:
    return next(p for p in pool.policies if p.seed == seed)


def _best(pool: Pool, seeds: Sequence[int], select_by: str = "sp_return") -> Policy:
    """The policy of ``seeds`` that rule ``select_by`` deploys (``ers_exact.deployment.deploy_index``) by the
    scores pool.json records: ``self_play`` and, for an other-play pool, ``other_play``."""
    entries = {int(e["seed"]): e for e in pool.info["policies"]}
    sp = [float(entries[s]["self_play"]["mean"]) for s in seeds]
    scored = all("other_play" in entries[s] for s in seeds)  # an OP pool: its scores rank or break ties
    if select_by == "op_value" and not scored:
        raise PoolError(f"{pool.path}: no other_play score per policy; select_by 'op_value' needs one")
    op = [float(entries[s]["other_play"]["mean"]) for s in seeds] if scored else None
    return _first(pool, seeds[deploy_index(sp, op, select_by)])


def _deployed(
    config: PopulationConfig, sp: Pool, op_mdp: Pool, op_er: Sequence[Pool]
) -> dict[str, list[Policy]]:
    """The deployed policies per population tag: each agent's policy with the best self-play return among
    its k self-play seeds (IPPO), and the one ``config.select_by`` picks among its m OP seeds (OP-MDP, OP-ER)."""
    P, rule = range(config.agents), config.select_by
    return {
        "ippo": [_best(sp, list(config.sp_seeds(a))) for a in P],
        "op-mdp": [_best(op_mdp, list(config.op_seeds(a, "mdp")), rule) for a in P],
        "op-er": [_best(op_er[a], list(config.op_seeds(a, "er")), rule) for a in P],
    }


#: the populations of a table1 folder: tag -> Table 1's row name (OP-ER adds the discovery algorithm)
POPULATIONS = {"ippo": "IPPO", "op-mdp": "IPPO + OP-MDP", "op-er": "IPPO + OP-ER"}


def load_deployed(out: str | Path) -> tuple[PopulationConfig, dict[str, list[Policy]]]:
    """The configuration and the deployed policies (by tag: ``ippo``, ``op-mdp``, ``op-er``, in agent order, as
    in ``OUT/xp-TAG-plain.json``) of a ``run_table1`` folder whose pools are trained; nothing is trained here
    (``PoolError`` naming the folder when a pool is missing)."""
    out = Path(out)
    try:
        config = PopulationConfig(
            **upgrade_keys(PopulationConfig, json.loads((out / "config.json").read_text()))
        )
    except OSError:
        raise PoolError(f"{out}: not a table1 folder (no config.json); run ers-deep table1 first") from None
    except (json.JSONDecodeError, TypeError) as e:
        raise PoolError(f"{out / 'config.json'}: not a PopulationConfig ({e})") from None
    er = [load_pool(out / f"agent-{a}" / "op-er") for a in range(config.agents)]
    return config, _deployed(config, load_pool(out / "sp"), load_pool(out / "op-mdp"), er)


def _op_objective(
    policies: Sequence[Policy], sets: Sequence[Sequence[Symmetry]], games: int, seed: int
) -> Estimate:
    """Mean over the deployed policies of E_{phi in Phi} J(pi, phi(pi)) (both seat orders: the "seatings"
    reading of ``ers_exact.deployment.OP_READINGS``, not the per-seat draw), with its SE."""
    values = []
    for p, phis in zip(policies, sets):
        runs = []
        for k, phi in enumerate(phis):
            pair = (Agent(p.net), Agent(p.net, (phi,)))
            runs.append(play(pair, p.config, games, seed=seed + 31 * k)["mean"])
            runs.append(play(pair[::-1], p.config, games, seed=seed + 31 * k + 1)["mean"])
        values.append(float(np.mean(runs)))
    return mean_se(values)


def _row(
    name: str,
    deployed: list[Policy],
    mdp: tuple[Symmetry, ...],
    learned: dict[str, tuple[Symmetry, ...]],
    op_sets: Sequence[Sequence[Symmetry]],
    config: PopulationConfig,
    out: Path,
    tag: str,
) -> PopulationRow:
    games, seed = config.games, config.seed
    greedy = config.greedy
    plain = crossplay_matrix(deployed, deployed, games, greedy=greedy, seed=seed)
    est = xp_estimates(plain, seed)
    average = cast(Average, config.symmetriser)
    sym_mdp = (
        plain
        if len(mdp) <= 1
        else crossplay_matrix(
            deployed, deployed, games, greedy=greedy, seed=seed, symmetries=mdp, average=average
        )
    )
    sym_er = crossplay_matrix(
        deployed,
        deployed,
        games,
        greedy=greedy,
        seed=seed,
        symmetries_of=lambda p: learned[p.name],
        average=average,
    )
    for key, m in (("plain", plain), ("mdp", sym_mdp), ("er", sym_er)):
        atomic_write_bytes(out / f"xp-{tag}-{key}.json", dumps(m, indent=2).encode())
    heatmap(plain, out / f"xp-{tag}.png", f"cross-play: {name}")
    return PopulationRow(
        name=name,
        sp=est["sp"],
        xp=est["xp"],
        xp_median=est["xp_median"],
        xp_median_mdp=xp_estimates(sym_mdp, seed)["xp_median"],
        xp_median_er=xp_estimates(sym_er, seed)["xp_median"],
        op=_op_objective(deployed, op_sets, games, seed),
    )


#: PopulationConfig fields added after runs were written: a config.json without one ran with this value
ADDED_FIELDS: dict[str, Any] = {
    "symmetriser": "logits",
    "select_by": "sp_return",
    "unseen": None,
    "greedy": False,
}


def _claim(config: PopulationConfig, out: Path, force: bool, command: str) -> None:
    """Prepare ``out`` for ``config``'s run (module docstring): continue the same config's run, refuse
    another's unless ``force`` (then remove it), and write config.json."""
    new = json.loads(json.dumps(config.to_json()))
    file = out / "config.json"
    if file.is_file():
        try:
            old = json.loads(file.read_text())
        except (OSError, ValueError):
            old = None
        if isinstance(old, dict):  # a config.json of an earlier version: its renamed keys, its missing fields
            old = {**ADDED_FIELDS, **upgrade_keys(PopulationConfig, old)}
        if old == new:
            return
        if not force:
            changed = sorted(k for k in new if not isinstance(old, dict) or old.get(k) != new[k])
            raise OutputError(
                f"{out}: holds a run with another config ({', '.join(changed) or 'unreadable config.json'}); "
                "rerun with its options to continue it, pass --force to replace it, or choose another --out"
            )
        if not os.path.lexists(
            out / MARKER
        ):  # a table folder (config.json) of an earlier version, before the
            (out / MARKER).touch()  # marker (a link in its place is not followed: --force removes it)
    claim_folder(out, force=force, command=command)
    atomic_write_bytes(file, dumps(config.to_json(), indent=2).encode())


def run_table1(
    config: PopulationConfig, out: str | Path, *, force: bool = False, progress: bool | None = None
) -> tuple[ZSCReport, list[DiscoveryResult]]:
    """Table 1 of the population protocol (module docstring); writes ``OUT/table1.{json,md}``."""
    out = Path(out)
    _claim(config, out, force, "ers-deep table1")
    sp = _sp_pool(config, out, progress)
    P = range(config.agents)
    results = [_discovery(config, sp, a, out, config.algorithm, progress) for a in P]
    mdp_seeds = tuple(s for a in P for s in config.op_seeds(a, "mdp"))
    op_mdp = _op_pool(config, mdp_seeds, "mdp", out / "op-mdp", progress)
    er_dirs = [out / f"agent-{a}" / f"discovery-{config.algorithm}" for a in P]
    op_er = [
        _op_pool(config, config.op_seeds(a, "er"), str(er_dirs[a]), out / f"agent-{a}" / "op-er", progress)
        for a in P
    ]
    ippo, mdp_dep, er_dep = _deployed(config, sp, op_mdp, op_er).values()
    base_cfg = ippo[0].config
    mdp = env_symmetries(base_cfg) or op_symmetries(base_cfg, "none")
    own = [op_symmetries(base_cfg, str(er_dirs[a])) for a in P]
    learned = {p.name: own[a] for pop in (ippo, mdp_dep, er_dep) for a, p in enumerate(pop)}
    rows = (
        _row("IPPO", ippo, mdp, learned, [mdp] * len(P), config, out, "ippo"),
        _row("IPPO + OP-MDP", mdp_dep, mdp, learned, [mdp] * len(P), config, out, "op-mdp"),
        _row(f"IPPO + OP-ER ({config.algorithm})", er_dep, mdp, learned, own, config, out, "op-er"),
    )
    report = ZSCReport(
        base_cfg.game,
        rows,
        config={
            **config.to_json(),
            "source": "ers-deep table1",
            "op_reading": "per-seat",
            "op_column_reading": "seatings",
            "mdp_symmetries": len(mdp),
            "learned_symmetries": [len(s) - 1 for s in own],
        },
    )
    atomic_write_bytes(out / "table1.json", report.dumps().encode())
    atomic_write_bytes(out / "table1.md", (report.to_markdown() + "\n").encode())
    return report, results


def _mean_se(values: Sequence[float]) -> dict[str, float]:
    est = mean_se(values)
    return {"value": est.value, "se": est.se}


def run_table2(
    config: PopulationConfig,
    out: str | Path,
    *,
    algorithms: Sequence[str] = ("sp-max", "sp-max-reg"),
    force: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Table 2: per discovery algorithm, J_1, J_2, J_3 and the relative reconstruction loss over agents (the
    folder may be table1's with the same config: its self-play pool is reused)."""
    out = Path(out)
    _claim(config, out, force, "ers-deep table2")
    sp = _sp_pool(config, out, progress)
    table: dict[str, Any] = {"config": config.to_json(), "rows": {}}
    lines = [
        "| algorithm | pool J | J_1 | J_2 | J_3 | reconstruction loss |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for alg in algorithms:
        res = [_discovery(config, sp, a, out, alg, progress) for a in range(config.agents)]
        row = {
            k: _mean_se([getattr(r, k) for r in res])
            for k in ("pool_return", "J_1", "J_2", "J_3", "reconstruction_loss")
        }
        table["rows"][alg] = row
        cells = [
            f"{row[k]['value']:.3f} ± {row[k]['se']:.3f}"
            for k in ("pool_return", "J_1", "J_2", "J_3", "reconstruction_loss")
        ]
        lines.append(f"| {alg} | " + " | ".join(cells) + " |")
    table["markdown"] = "\n".join(lines)
    atomic_write_bytes(out / "table2.json", dumps(table, indent=2).encode())
    atomic_write_bytes(out / "table2.md", (table["markdown"] + "\n").encode())
    return table
