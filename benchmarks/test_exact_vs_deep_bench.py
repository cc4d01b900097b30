"""Exact versus deep ER-symmetry discovery on games with known answers (issue 15), per game at the pool's alpha:

* exact path: Pi*_alpha by ``solve_fixed_points`` and Phi_ER by ``er_symmetries`` (``symmetry_report``, what
  ``ers-exact symmetries GAME --alpha A`` prints): its size and members on policies, and the time it took;
* deep path: an IPPO pool (``train_pool``, tabular env) and ``discover`` (Algorithm 1, phi_O networks through
  the frozen pool): the DiscoveryResult JSON, the share of kept phi that round to a member of the exact
  Phi_ER, the exact J of the rounded ones (mean J(phi(pi)) over the deep pool, and J(phi(pi*)) over the exact
  Pi*_alpha, which is J* for an ER symmetry), and the time of pool training plus discovery.

alpha = 0.25 everywhere: ers-exact says Phi_ER = Phi_MDP there on three-lever (the 6 lever relabellings) and
two-lever (the lever swap), and that the toy swap (actions swapped, observations x <-> m) is in Phi_ER but not
in Phi_MDP on the toy game. Maps of policies are compared by their action on the game's histories (each agent's
``history_map`` and action permutation, as ``distinct_on_policies`` counts them). Asserted, per case:

1. every kept phi rounds (its ``nearest``) to a member of the exact Phi_ER (with two-lever's discovery cut to 2
   candidates x 100k steps the kept phi rounds outside it, and this fails);
2. the group the rounded kept phi generate is the exact Phi_ER, every member (membership alone held for one
   transposition kept three times, or the identity alone); each case keeps at least as many phi as
   ers-exact's generating set of Phi_ER has (1 on the toy game and two-lever, 2 on three-lever);
3. where Phi_ER has members outside Phi_MDP (the toy game), a kept phi rounds to one: the toy swap;
4. direction: each kept phi acts on Pi' (the policies it trained on and was ranked on) as its rounding does.
   Its deep score (the exact mean J(phi(pi)) of the network's phi(pi) over Pi', as ``discover`` ranks them) is
   within ``J_TOL`` of the exact mean J(nearest(pi)) over the same Pi', and the network's phi(pi) is within
   ``POLICY_TOL`` of nearest(pi) on every local history (max abs over probabilities). A rounding recorded as
   its inverse fails the second for a non-involution: on three-lever with ``action_set="permutations"`` (the
   case that keeps a 3-cycle, asserted) the inverse of a kept 3-cycle is 0.95-0.97 away from the network's
   phi(pi), the rounding itself <= 0.03. The J comparison alone cannot see it on these games: every member
   of Phi_MDP keeps J for every policy, so a lever relabelling and its inverse have the same J (it tells the
   rounding from a different map of other J). ``LearnedTransformation`` checks ``nearest`` against its own
   ``action_map`` and ``obs_permutation`` (a convention between fields); this checks it against what the
   network does.

Sizes keep the whole file at a few minutes on one CPU thread; three-lever-permutations reuses three-lever's
pool (same game, seeds and steps) when both run in one session."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ers_deep.discovery import DeepDiscoveryConfig, discover, load_symmetries
from ers_deep.discovery.net import LearnedSymmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import masked_logits
from ers_deep.policies import Policy
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import make_env, paper_config
from ers_deep.train.evaluate import Agent
from ers_deep.train.exact import tabular_policies
from ers_exact.analysis.report import symmetry_report
from ers_exact.games import get_game
from ers_exact.interface import LearnedTransformation, Transformation
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import apply_to_policy, history_map, is_admissible
from ers_exact.model.values import expected_return
from ers_exact.solve.fixed_points import solve_fixed_points

ALPHA = 0.25
#: |deep score - exact mean J(nearest(pi))| over Pi' of a kept phi: the network's soft phi_O is not quite its
#: rounding (measured: 0 on the toy game, <= 2.7e-3 on two-lever, <= 6.6e-3 on three-lever's kept phi; 9.6e-3 at
#: distance 0.02, 2.4e-2 at distance 0.56 among three-lever-permutations' unkept candidates)
J_TOL = 0.015
#: max |phi(pi) - nearest(pi)| over Pi', agents, local histories and actions of a kept phi (measured: <= 1.1e-3 on
#: the toy game, 8e-3 on two-lever, <= 0.11 on three-lever at distance 0.022; a kept 3-cycle's inverse 0.95-0.97)
POLICY_TOL = 0.25


@dataclass(frozen=True)
class Case:
    game: str
    seeds: int  # pool size (half trains phi, half is held out)
    pool_updates: int  # IPPO updates of the paper's tabular settings (4096 games x 2 steps each)
    discovery: DeepDiscoveryConfig


CASES = {
    "toy-coordination": Case(
        "toy-coordination",
        4,
        60,
        DeepDiscoveryConfig(candidates=3, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=100_000),
    ),
    "three-lever": Case(
        "three-lever",
        8,
        150,
        DeepDiscoveryConfig(candidates=9, top=3, num_envs=256, num_steps=4, lr=0.01, total_env_steps=300_000),
    ),
    # every lever permutation as a candidate's phi_A (3 transpositions, 2 3-cycles), each twice: the 3-cycles
    # are not involutions, so the direction check can tell a rounding from its inverse (top 5 keeps one of them;
    # the top 3 of these 10 were transpositions). Three-lever's pool; discovery ~31 s on one thread
    "three-lever-permutations": Case(
        "three-lever",
        8,
        150,
        DeepDiscoveryConfig(
            candidates=10,
            top=5,
            num_envs=256,
            num_steps=4,
            lr=0.01,
            total_env_steps=300_000,
            action_set="permutations",
        ),
    ),
    # phi_O is worth ~0.04 of J here: 100k steps left the one kept candidate unconverged. 8 seeds (Pi' of 4): with
    # 4 (Pi' of 2) the kept set, ranked on Pi' since 2026-12-07, held a phi fitted to those two policies that
    # rounds outside Phi_ER (distance 0.89, exact J 1.669 on the pool); with 8 both kept round into it (7e-4)
    "two-lever": Case(
        "two-lever",
        8,
        100,
        DeepDiscoveryConfig(candidates=4, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=600_000),
    ),
}

PolicyMap = tuple[tuple[bytes, ...], tuple[tuple[int, ...], ...]]


def _on_policies(tree: HistoryTree, phi: Transformation) -> PolicyMap:
    """phi as a map of policies: each agent's history map and action permutation (``distinct_on_policies``'
    key; state permutations act trivially, and two phi with equal keys map every policy alike)."""
    return tuple(history_map(tree, phi, i).tobytes() for i in range(tree.game.n_agents)), phi.actions


def _generated(tree: HistoryTree, generators: list[Transformation]) -> set[PolicyMap]:
    """The group ``generators`` generate, as maps of policies: products (``Transformation.compose``) breadth
    first from the identity, one representative per map of policies (a finite group: no inverses needed)."""
    identity = Transformation.identity(tree.game)
    seen, frontier = {_on_policies(tree, identity)}, [identity]
    while frontier:
        grown = []
        for a in frontier:
            for g in generators:
                c = g.compose(a)
                if (k := _on_policies(tree, c)) not in seen:
                    seen.add(k)
                    grown.append(c)
        frontier = grown
    return seen


@torch.no_grad()
def _network_image(env: TabularEnv, policy: Policy, sym: LearnedSymmetry) -> tuple[np.ndarray, ...]:
    """The network's phi(pi) on every local history, the policy whose exact J ``discover`` scores
    (``ers_deep.discovery.scores.exact_value``): pi's frozen net read through phi, legal-masked softmax."""
    obs, legal = env.history_obs(), env.legal_table()
    K = obs.shape[0]
    agent = Agent(policy.net, (sym,))
    first = torch.ones(K, dtype=torch.bool, device=obs.device)
    logits, _ = agent.logits(obs, first, agent.initial_state(K, obs.device), legal)
    return env.split_policy(torch.softmax(masked_logits(logits.double(), legal), -1))


def _direction(
    env: TabularEnv, trained: list[Policy], sym: LearnedSymmetry, near: Transformation | None
) -> dict[str, Any]:
    """A kept phi's network against its rounding ``near`` on Pi' (``trained``): the mean exact J of the
    network's phi(pi) (its deep score), of nearest(pi), and max |phi(pi) - nearest(pi)| (module docstring, 4)."""
    tree = env.tree
    images = [_network_image(env, p, sym) for p in trained]
    out: dict[str, Any] = {
        "deep_J_on_pi_prime": float(np.mean([expected_return(tree, img) for img in images])),
        "exact_J_of_nearest_on_pi_prime": None,
        "policy_gap_to_nearest": None,
    }
    if near is None or not is_admissible(tree, near):
        return out
    rounded = [apply_to_policy(tree, near, tabular_policies(p.net, env)[0]) for p in trained]
    out["exact_J_of_nearest_on_pi_prime"] = float(np.mean([expected_return(tree, r) for r in rounded]))
    out["policy_gap_to_nearest"] = max(
        float(np.abs(a - b).max()) for img, r in zip(images, rounded) for a, b in zip(img, r)
    )
    return out


def _pool(case: Case, root: Path, pools: dict[Any, Path] | None) -> tuple[Path, float, bool, Any]:
    """The case's pool folder, trained in ``root`` unless ``pools`` holds one of the same game, seeds and steps
    (then its training seconds are the other case's, and 0 here), with the config it was trained with."""
    cfg = paper_config(
        f"tabular:{case.game}",
        seeds=tuple(range(case.seeds)),
        alpha=ALPHA,
        total_env_steps=4096 * 2 * case.pool_updates,
    )
    key = (case.game, case.seeds, case.pool_updates)
    if pools is not None and key in pools:
        return pools[key], 0.0, True, cfg
    start = time.perf_counter()
    train_pool(cfg, root / "pool", eval_games=500, progress=False)
    if pools is not None:
        pools[key] = root / "pool"
    return root / "pool", time.perf_counter() - start, False, cfg


def _exact_vs_deep(name: str, case: Case, root: Path, pools: dict[Any, Path] | None = None) -> dict[str, Any]:
    game = case.game
    tree = enumerate_histories(get_game(game))
    start = time.perf_counter()
    report = symmetry_report(tree, ALPHA)
    exact_s = time.perf_counter() - start
    members = [Transformation.from_json(e) for e in report["er"]["elements"]]
    er_maps = {_on_policies(tree, m) for m in members}
    mdp_maps = {_on_policies(tree, Transformation.from_json(e)) for e in report["mdp"]["elements"]}
    optimal = [p.policy for p in solve_fixed_points(tree, ALPHA).optimal_points]

    pool_dir, pool_s, shared, cfg = _pool(case, root, pools)
    pool = load_pool(pool_dir)
    start = time.perf_counter()
    result = discover(pool, case.discovery, root / "discovery", progress=False)
    discovery_s = time.perf_counter() - start

    env = make_env(pool.policies[0].config, 1, seed=0)
    assert isinstance(env, TabularEnv)
    by_name = {p.name: p for p in pool.policies}
    trained = [
        by_name[n] for n in result.config["trained_on"]
    ]  # Pi', which trained and ranked the candidates
    syms = load_symmetries(root / "discovery")
    rounded, kept = [], []
    for t, verdict, sym, score in zip(result.transformations, result.config["exact"], syms, result.scores):
        assert isinstance(t, LearnedTransformation)
        near = t.nearest
        kept += [] if near is None else [near]
        in_er = near is not None and _on_policies(tree, near) in er_maps
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
                "in_exact_phi_mdp": near is not None and _on_policies(tree, near) in mdp_maps,
                "involution": near is not None
                and _on_policies(tree, near) == _on_policies(tree, near.inverse()),
                "verdict": verdict,
                "exact_J_on_deep_pool": None if verdict is None else verdict["mean_return"],
                "exact_J_on_pi_star": on_optimal,
                "deep_score": score,  # exact mean J of the network's phi(pi) over Pi' (discover's ranking)
                **_direction(env, trained, sym, near),
            }
        )
    generated = _generated(tree, kept) if len(kept) == len(rounded) else set()
    return {
        "game": game,
        "case": name,
        "alpha": ALPHA,
        "exact": {
            "seconds": exact_s,
            "J_star": report["J_star"],
            "pi_star_found": report["pool_found_by_solver"],
            "phi_er_on_policies": report["er"]["order_on_policies"],
            "phi_er_listed_on_policies": len(er_maps),
            "phi_er_generators": report["er"]["n_generators"],
            "phi_mdp_on_policies": report["mdp"]["order_on_policies"],
            "phi_er_not_mdp_on_policies": report["er_not_mdp_on_policies"],
            "phi_er_members": sorted({str((m.actions, m.observations)) for m in members}),
        },
        "deep": {
            "pool_seconds": pool_s,
            "pool_shared": shared,  # trained by another case of this session (pool_seconds 0 here)
            "discovery_seconds": discovery_s,
            "seconds": pool_s + discovery_s,
            "pool_seeds": case.seeds,
            "pool_steps_per_seed": cfg.total_env_steps,
            "pool_exact_J": [p["exact"]["J"] for p in pool.info["policies"]],
            "top": case.discovery.top,
            "action_set": case.discovery.action_set,
            "result": result.to_json(),
            "rounded": rounded,
            "share_rounding_to_exact_er": sum(r["in_exact_phi_er"] for r in rounded) / len(rounded),
            "kept_distinct_on_policies": len({_on_policies(tree, k) for k in kept}),
            "generated_on_policies": len(generated),
            "generated_outside_exact_er": len(generated - er_maps),
            "exact_er_not_generated": len(er_maps - generated),
        },
    }


def _check(out: dict[str, Any]) -> None:
    """The assertions (module docstring, 1-4) on one case's record."""
    e, d = out["exact"], out["deep"]
    rounded = d["rounded"]
    assert rounded and e["phi_er_on_policies"] >= 2
    # the listed members are the whole group, so "generates Phi_ER" below compares with all of it
    assert e["phi_er_listed_on_policies"] == e["phi_er_on_policies"], e
    assert d["share_rounding_to_exact_er"] == 1.0, rounded  # 1: every kept phi rounds to a member of Phi_ER
    # 2: the kept phi generate the exact Phi_ER. Every case keeps enough phi to generate it (top >= the size of
    # ers-exact's generating set), so the full claim is asserted, never a weaker one
    assert d["top"] >= e["phi_er_generators"], (d["top"], e["phi_er_generators"])
    assert d["generated_on_policies"] == e["phi_er_on_policies"] and not d["generated_outside_exact_er"], (
        f"the {d['kept_distinct_on_policies']} distinct rounded kept phi generate {d['generated_on_policies']} maps "
        f"of policies ({d['generated_outside_exact_er']} outside Phi_ER, {d['exact_er_not_generated']} of Phi_ER "
        f"missed), exact |Phi_ER| = {e['phi_er_on_policies']}: {[r['nearest'] for r in rounded]}"
    )
    if e["phi_er_not_mdp_on_policies"]:  # 3: the toy swap, in Phi_ER but not in Phi_MDP
        assert any(not r["in_exact_phi_mdp"] for r in rounded), rounded
    if d["action_set"] == "permutations":  # the case exists to test the direction on a non-involution
        assert any(not r["involution"] for r in rounded), [r["nearest"] for r in rounded]
    for r in rounded:  # 4: direction
        where = f"{out['case']} {r['name']} A{r['action_map']} -> {r['nearest']}"
        # the network's phi(pi) compared below is the policy whose J discover scored and ranked
        assert abs(r["deep_J_on_pi_prime"] - r["deep_score"]) <= 1e-9, (where, r)
        assert r["exact_J_of_nearest_on_pi_prime"] is not None, (
            where,
            "the rounding does not act on policies",
        )
        assert abs(r["deep_score"] - r["exact_J_of_nearest_on_pi_prime"]) <= J_TOL, (where, r)
        assert r["policy_gap_to_nearest"] <= POLICY_TOL, (where, r)


@pytest.fixture(scope="module")
def pools() -> dict[Any, Path]:
    """Pools trained in this session by (game, seeds, updates): three-lever-permutations reuses three-lever's."""
    return {}


@pytest.mark.parametrize("name", list(CASES))
def test_exact_vs_deep(benchmark, one_thread, name: str, tmp_path: Path, pools: dict[Any, Path]) -> None:  # type: ignore[no-untyped-def]
    out = benchmark.pedantic(
        _exact_vs_deep, args=(name, CASES[name], tmp_path, pools), rounds=1, iterations=1
    )
    benchmark.extra_info.update(out)
    e, d = out["exact"], out["deep"]
    print(
        f"\n{name} alpha {ALPHA}: exact |Phi_ER| = {e['phi_er_on_policies']} on policies "
        f"({e['phi_er_not_mdp_on_policies']} not in Phi_MDP), {e['seconds']:.2f} s; deep: "
        f"{d['share_rounding_to_exact_er']:.0%} of {len(d['rounded'])} kept round into it, generating "
        f"{d['generated_on_policies']} ({d['kept_distinct_on_policies']} distinct kept); pool "
        f"{d['pool_seconds']:.1f} s{' (shared)' if d['pool_shared'] else ''} + discovery {d['discovery_seconds']:.1f} s"
    )
    for r in d["rounded"]:
        near = r["nearest"] and (r["nearest"]["actions"][0], r["nearest"]["observations"][0])
        gap = r["policy_gap_to_nearest"]
        exact_J = r["exact_J_of_nearest_on_pi_prime"]
        print(
            f"  {r['name']}: A{r['action_map']} distance {r['distance']:.2e} -> {near} "
            f"in Phi_ER {r['in_exact_phi_er']} (Phi_MDP {r['in_exact_phi_mdp']}, involution {r['involution']}); "
            f"on Pi': deep score {r['deep_score']:.6f}, exact J(nearest) "
            f"{'n/a' if exact_J is None else f'{exact_J:.6f}'}, policy gap "
            f"{'n/a' if gap is None else f'{gap:.3g}'}; exact J on deep pool {r['exact_J_on_deep_pool']}, "
            f"on Pi* {r['exact_J_on_pi_star']} (J* {e['J_star']:.6f})"
        )
    _check(out)
