"""Exact versus deep ER-symmetry discovery on games with known answers (issue 15), per game at the pool's alpha:

* exact path: Pi*_alpha by ``solve_fixed_points`` and Phi_ER by ``er_symmetries`` (``symmetry_report``, what
  ``ers-exact symmetries GAME --alpha A`` prints): its size and members on policies, and the time it took;
* deep path: an IPPO pool (``train_pool``, tabular env) and ``discover`` (Algorithm 1, phi_O networks through
  the frozen pool): the DiscoveryResult JSON, the share of kept phi that round to a member of the exact
  Phi_ER, the exact J of the rounded ones (mean J(phi(pi)) over the deep pool, and J(phi(pi*)) over the exact
  Pi*_alpha, which is J* for an ER symmetry), and the time of pool training plus discovery.

alpha = 0.25 everywhere: ers-exact says Phi_ER = Phi_MDP there on three-lever (the 6 lever relabellings) and
two-lever (the lever swap), and that the toy swap (actions swapped, observations x <-> m) is in Phi_ER but not
in Phi_MDP on the toy game. Asserted: every kept phi rounds to a member of the exact Phi_ER (with two-lever's
discovery cut to 2 candidates x 100k steps the kept phi rounds outside it, and this fails). Sizes keep the whole
file at a few minutes on one CPU thread."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ers_deep.discovery import DeepDiscoveryConfig, discover
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import paper_config
from ers_exact.analysis.report import symmetry_report
from ers_exact.games import get_game
from ers_exact.interface import LearnedTransformation, Transformation
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import apply_to_policy
from ers_exact.model.values import expected_return
from ers_exact.solve.fixed_points import solve_fixed_points

ALPHA = 0.25


@dataclass(frozen=True)
class Case:
    seeds: int  # pool size (half trains phi, half is held out)
    pool_updates: int  # IPPO updates of the paper's tabular settings (4096 games x 2 steps each)
    discovery: DeepDiscoveryConfig


CASES = {
    "toy-coordination": Case(
        4,
        60,
        DeepDiscoveryConfig(candidates=3, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=100_000),
    ),
    "three-lever": Case(
        8,
        150,
        DeepDiscoveryConfig(candidates=9, top=3, num_envs=256, num_steps=4, lr=0.01, total_env_steps=300_000),
    ),
    # phi_O is worth ~0.04 of J here: 100k steps left the one kept candidate unconverged. 8 seeds (Pi' of 4): with
    # 4 (Pi' of 2) the kept set, ranked on Pi' since 2026-12-07, held a phi fitted to those two policies that
    # rounds outside Phi_ER (distance 0.89, exact J 1.669 on the pool); with 8 both kept round into it (7e-4)
    "two-lever": Case(
        8,
        100,
        DeepDiscoveryConfig(candidates=4, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=600_000),
    ),
}


def _part(t: Transformation) -> tuple[Any, Any]:
    return (t.actions, t.observations)


def _exact_vs_deep(game: str, case: Case, root: Path) -> dict[str, Any]:
    tree = enumerate_histories(get_game(game))
    start = time.perf_counter()
    report = symmetry_report(tree, ALPHA)
    exact_s = time.perf_counter() - start
    members = [Transformation.from_json(e) for e in report["er"]["elements"]]
    er_parts = {_part(m) for m in members}
    optimal = [p.policy for p in solve_fixed_points(tree, ALPHA).optimal_points]

    start = time.perf_counter()
    cfg = paper_config(
        f"tabular:{game}",
        seeds=tuple(range(case.seeds)),
        alpha=ALPHA,
        total_env_steps=4096 * 2 * case.pool_updates,
    )
    train_pool(cfg, root / "pool", eval_games=500, progress=False)
    pool_s = time.perf_counter() - start
    start = time.perf_counter()
    result = discover(load_pool(root / "pool"), case.discovery, root / "discovery", progress=False)
    discovery_s = time.perf_counter() - start

    rounded = []
    for t, verdict in zip(result.transformations, result.config["exact"]):
        assert isinstance(t, LearnedTransformation)
        near = t.nearest
        in_er = near is not None and _part(near) in er_parts
        on_optimal = (
            float(np.mean([expected_return(tree, apply_to_policy(tree, near, p)) for p in optimal]))
            if near is not None and verdict is not None and verdict["admissible"]
            else None
        )
        rounded.append(
            {
                "name": t.name,
                "action_map": list(t.action_map),
                "distance": t.distance,
                "nearest": None if near is None else near.to_json(),
                "in_exact_phi_er": in_er,
                "verdict": verdict,
                "exact_J_on_deep_pool": None if verdict is None else verdict["mean_return"],
                "exact_J_on_pi_star": on_optimal,
            }
        )
    return {
        "game": game,
        "alpha": ALPHA,
        "exact": {
            "seconds": exact_s,
            "J_star": report["J_star"],
            "pi_star_found": report["pool_found_by_solver"],
            "phi_er_on_policies": report["er"]["order_on_policies"],
            "phi_mdp_on_policies": report["mdp"]["order_on_policies"],
            "phi_er_not_mdp_on_policies": report["er_not_mdp_on_policies"],
            "phi_er_members": sorted({str(_part(m)) for m in members}),
        },
        "deep": {
            "pool_seconds": pool_s,
            "discovery_seconds": discovery_s,
            "seconds": pool_s + discovery_s,
            "pool_seeds": case.seeds,
            "pool_steps_per_seed": cfg.total_env_steps,
            "pool_exact_J": [p["exact"]["J"] for p in load_pool(root / "pool").info["policies"]],
            "result": result.to_json(),
            "rounded": rounded,
            "share_rounding_to_exact_er": sum(r["in_exact_phi_er"] for r in rounded) / len(rounded),
        },
    }


@pytest.mark.parametrize("game", list(CASES))
def test_exact_vs_deep(benchmark, one_thread, game: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = benchmark.pedantic(_exact_vs_deep, args=(game, CASES[game], tmp_path), rounds=1, iterations=1)
    benchmark.extra_info.update(out)
    e, d = out["exact"], out["deep"]
    print(
        f"\n{game} alpha {ALPHA}: exact |Phi_ER| = {e['phi_er_on_policies']} on policies "
        f"({e['phi_er_not_mdp_on_policies']} not in Phi_MDP), {e['seconds']:.2f} s; deep: "
        f"{d['share_rounding_to_exact_er']:.0%} of {len(d['rounded'])} kept round into it, pool "
        f"{d['pool_seconds']:.1f} s + discovery {d['discovery_seconds']:.1f} s"
    )
    for r in d["rounded"]:
        print(
            f"  {r['name']}: A{r['action_map']} distance {r['distance']:.2e} -> "
            f"{r['nearest'] and (r['nearest']['actions'][0], r['nearest']['observations'][0])} "
            f"in Phi_ER {r['in_exact_phi_er']}, exact J on deep pool {r['exact_J_on_deep_pool']}, "
            f"on Pi* {r['exact_J_on_pi_star']} (J* {e['J_star']:.6f})"
        )
    assert d["rounded"] and e["phi_er_on_policies"] >= 2
    assert d["share_rounding_to_exact_er"] == 1.0, d["rounded"]  # every kept phi rounds to a member of Phi_ER
