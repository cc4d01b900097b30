"""``ers-exact``: one CLI with subcommands; each is a thin ``run_*(...) -> dict`` callable from tests.

Every command prints a human-readable summary, or JSON with ``--json``. A GAME argument is a built-in
name (``ers-exact games``) or a path to a .dpomdp file.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ers_exact import __version__
from ers_exact.games import GAMES, load_game
from ers_exact.model.game import Game
from ers_exact.model.histories import DEFAULT_MAX_NODES, enumerate_histories, estimate_history_count
from ers_exact.model.optimal import DEFAULT_MAX_POLICIES, count_policy_trees, self_play_optimum
from ers_exact.model.values import expected_return, local_q_values, uniform_policy

if TYPE_CHECKING:
    from ers_exact.solve.fixed_points import SolverConfig

__all__ = ["main", "run_demo", "run_games", "run_info", "run_optimal", "run_atlas", "run_census", "run_discover", "run_export_gambit",
           "run_solve", "run_sweep", "run_symmetries", "run_value", "run_zsc"]


def _provenance() -> dict[str, Any]:
    return {"ers_exact": __version__, "numpy": np.__version__, "python": platform.python_version()}


def _game_json(game: Game) -> dict[str, Any]:
    return {"game": game.name, "horizon": game.horizon, "discount": game.discount, "n_agents": game.n_agents,
            "n_states": game.n_states, "n_actions": list(game.n_actions),
            "n_observations": list(game.n_observations)}


def run_games() -> dict[str, Any]:
    """The built-in registry: name, description and sizes of each game."""
    rows = []
    for name, factory in GAMES.items():
        g = factory()
        rows.append({**_game_json(g), "name": name, "description": g.description})
    return {"games": rows}


def run_info(spec: str, horizon: int | None = None, max_nodes: int = DEFAULT_MAX_NODES) -> dict[str, Any]:
    """Sizes of the game and of its enumerated histories (refuses beyond ``max_nodes``)."""
    game = load_game(spec, horizon=horizon)
    start = time.perf_counter()
    tree = enumerate_histories(game, max_nodes=max_nodes)
    out = {**_game_json(game), "estimated_joint_nodes_upper_bound": estimate_history_count(game),
           **tree.counts(), "policy_trees_per_agent": [count_policy_trees(tree, [i]) for i in range(game.n_agents)],
           "enumeration_seconds": round(time.perf_counter() - start, 4)}
    return out


def _read_policy(path: str, n_agents: int) -> tuple[np.ndarray, ...]:
    data = json.loads(Path(path).read_text())
    agents = data["policy"] if isinstance(data, dict) else data
    if len(agents) != n_agents:
        raise SystemExit(f"{path}: policy lists {len(agents)} agents, the game has {n_agents}")
    return tuple(np.asarray(a, dtype=np.float64) for a in agents)


def run_value(spec: str, policy: str = "uniform", horizon: int | None = None,
              discount: float | None = None) -> dict[str, Any]:
    """J(pi) and the root local Q^i values of a policy ('uniform' or a JSON file {"policy": [...]})."""
    game = load_game(spec, horizon=horizon, discount=discount)
    tree = enumerate_histories(game)
    pol = uniform_policy(tree) if policy == "uniform" else _read_policy(policy, game.n_agents)
    q = local_q_values(tree, pol)
    return {**_game_json(game), "policy": policy, "J": expected_return(tree, pol),
            "q_root": [qi[0].tolist() for qi in q]}


def run_optimal(spec: str, horizon: int | None = None, discount: float | None = None,
                max_policies: int = DEFAULT_MAX_POLICIES, save_policy: str | None = None) -> dict[str, Any]:
    """Exact optimal value J* over deterministic joint policies (exhaustive; tiny games)."""
    game = load_game(spec, horizon=horizon, discount=discount)
    tree = enumerate_histories(game)
    result = self_play_optimum(tree, max_policies=max_policies)
    if save_policy:
        Path(save_policy).write_text(json.dumps({"game": game.name, "horizon": game.horizon,
                                                 "policy": [p.tolist() for p in result.policy]}))
    return {**result.to_json(), "provenance": _provenance()}


def _solver_config(starts: int, seed: int) -> "SolverConfig":
    from ers_exact.solve.fixed_points import SolverConfig

    return SolverConfig(n_starts=starts, seed=seed)


def run_solve(spec: str, alpha: float, horizon: int | None = None, starts: int = 64, seed: int = 0,
              with_policy: bool = False) -> dict[str, Any]:
    """Boltzmann fixed points at temperature alpha, J* and the self-play-optimal set Pi*_alpha."""
    from ers_exact.solve.fixed_points import solve_fixed_points

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    result = solve_fixed_points(tree, alpha, _solver_config(starts, seed))
    return {**result.to_json(with_policy), "provenance": _provenance()}


def run_sweep(spec: str, alphas: str, horizon: int | None = None, starts: int = 32, seed: int = 0,
              plot: str | None = None) -> dict[str, Any]:
    """Fixed points over a grid of alphas (continuation), bifurcations, optional plot."""
    from ers_exact.analysis.plots import plot_sweep
    from ers_exact.solve.sweep import parse_alphas, sweep

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    result = sweep(tree, parse_alphas(alphas), _solver_config(starts, seed))
    out = {**result.to_json(), "config": {"alphas": alphas, "starts": starts, "seed": seed},
           "provenance": _provenance()}
    if plot:
        out["plot"] = str(plot_sweep(result, plot))
    return out


def run_export_gambit(spec: str, out: str, horizon: int | None = None) -> dict[str, Any]:
    """Write the game as a Gambit extensive form (.efg); information sets = local histories."""
    from ers_exact.io.gambit import save_efg

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    save_efg(tree, out)
    return {**_game_json(tree.game), "written": str(out), "information_sets": list(tree.n_histories),
            "note": "Gambit action values = gamma^t * Q^i (reward-to-go); lambda = 1 / alpha"}


def run_symmetries(spec: str, alpha: float, horizon: int | None = None, starts: int = 64, seed: int = 0
                   ) -> dict[str, Any]:
    """Phi_MDP and Phi_ER at alpha (against the solver's whole optimal set), as groups."""
    from ers_exact.analysis.report import symmetry_report

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    return {**symmetry_report(tree, alpha, _solver_config(starts, seed)), "provenance": _provenance()}


def run_atlas(spec: str, alphas: str, horizon: int | None = None, starts: int = 32, seed: int = 0,
              plot: str | None = None) -> dict[str, Any]:
    """|Pi*_alpha|, |Phi_ER(alpha)| and |Phi_MDP| over a grid of alphas, optionally plotted."""
    from ers_exact.analysis.plots import plot_atlas
    from ers_exact.analysis.report import atlas
    from ers_exact.solve.sweep import parse_alphas

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    out = {**atlas(tree, parse_alphas(alphas), _solver_config(starts, seed)),
           "config": {"alphas": alphas, "starts": starts, "seed": seed}, "provenance": _provenance()}
    if plot:
        out["plot"] = str(plot_atlas(out, plot))
    return out


def run_census(games: int, seed: int, alpha: float = 0.25, out: str | None = None) -> dict[str, Any]:
    """Random small Dec-POMDPs: how often Phi_ER is strictly larger than Phi_MDP."""
    from ers_exact.analysis.census import CensusConfig, census

    return {**census(CensusConfig(games=games, seed=seed, alpha=alpha, out=out)), "provenance": _provenance()}


def run_zsc(spec: str, agents: int = 5, seed: int = 0, pool: str = "iql", alpha: float = 1.0, k: int = 20,
            l: int = 6, m: int = 5, episodes: int = 10_000, algorithm: str = "sp-max", horizon: int | None = None,
            out: str | None = None) -> dict[str, Any]:  # noqa: E741
    """The population pipeline: SP, OP + Phi_MDP and OP + learned Phi_ER; Table 1 as JSON and markdown."""
    from ers_exact.zsc.pipeline import ZSCConfig
    from ers_exact.zsc.pipeline import run_zsc as pipeline

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    cfg = ZSCConfig(agents=agents, seed=seed, pool=pool, alpha=alpha, k=k, l=l, m=m, episodes=episodes,
                    algorithm=algorithm)
    report, discoveries = pipeline(tree, cfg)
    result = {**report.to_json(), "markdown": report.to_markdown(),
              "discovery": [d.to_json() for d in discoveries], "provenance": _provenance()}
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, f"zsc-{tree.game.name}-seed{seed}.json").write_text(json.dumps(result, indent=2))
    return result


def run_discover(spec: str, alpha: float = 1.0, pool: str = "iql", k: int = 20, algorithm: str = "sp-max",
                 search: str = "exhaustive", top: int = 6, seed: int = 0, episodes: int = 10_000,
                 horizon: int | None = None) -> dict[str, Any]:
    """One agent's discovery (Algorithm 1, 2 or 3) with Table 2's group metrics on an unseen pool."""
    from ers_exact.zsc.discovery import DiscoveryConfig, discover
    from ers_exact.zsc.pools import UNSEEN_POOL_SEED_OFFSET, PoolConfig, build_pool

    tree = enumerate_histories(load_game(spec, horizon=horizon))
    cfg = PoolConfig(source=pool, alpha=alpha, k=k, episodes=episodes)
    train, _ = build_pool(tree, cfg, seed)
    unseen, _ = build_pool(tree, cfg, seed + UNSEEN_POOL_SEED_OFFSET)
    result = discover(tree, train, DiscoveryConfig(algorithm=algorithm, search=search, top=top, seed=seed),
                      unseen_pool=unseen)
    return {**result.to_json(), "pool": pool, "alpha": alpha, "provenance": _provenance()}


def run_demo(out: str | None = "results", max_policies: int = 200_000, alpha: float = 0.25) -> dict[str, Any]:
    """Exact analysis of every built-in game: history counts, J(uniform), J*, and the Boltzmann fixed
    points at ``alpha`` (how many, how many self-play optimal, J of the best)."""
    from ers_exact.solve.fixed_points import solve_fixed_points

    rows = []
    for name, factory in GAMES.items():
        game = factory()
        tree = enumerate_histories(game)
        row: dict[str, Any] = {**_game_json(game), "name": name, **tree.counts(),
                               "J_uniform": expected_return(tree, uniform_policy(tree))}
        try:
            opt = self_play_optimum(tree, max_policies=max_policies)
            row.update(J_star=opt.value, optimal_policy=opt.to_json()["policy"], search_candidates=opt.n_candidates,
                       search_seconds=round(opt.seconds, 4))
        except RuntimeError as err:
            row.update(J_star=None, note=str(err))
        fps = solve_fixed_points(tree, alpha, _solver_config(16, 0))
        row.update(alpha=alpha, n_fixed_points=len(fps.points), n_optimal=len(fps.optimal_points),
                   J_star_alpha=fps.J_star, fixed_points_complete=fps.complete)
        rows.append(row)
    result = {"command": "demo", "config": {"max_policies": max_policies, "alpha": alpha, "starts": 16},
              "games": rows,
              "provenance": _provenance()}
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "demo.json").write_text(json.dumps(result, indent=2))
        result["written"] = str(Path(out, "demo.json"))
    return result


def _print_table(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> None:
    widths = [max(len(k), *(len(_fmt(r.get(k))) for r in rows)) for k in keys]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for r in rows:
        print("  ".join(_fmt(r.get(k)).ljust(w) for k, w in zip(keys, widths)))


def _fmt(v: Any) -> str:
    return f"{v:.6f}" if isinstance(v, float) else ("-" if v is None else str(v))


def _human(command: str, result: dict[str, Any]) -> None:
    if command == "games":
        _print_table(result["games"], ["name", "n_agents", "n_states", "n_actions", "horizon", "description"])
    elif command == "solve":
        print(f"{result['game']} H={result['horizon']} alpha={result['alpha']}: {result['n_fixed_points']} fixed "
              f"point(s), J* = {result['J_star']:.6f}, |Pi*| = {result['n_optimal']}; {result['completeness']}")
        _print_table(result["fixed_points"], ["J", "residual", "spectral_radius", "stable", "certified", "optimal",
                                              "basin"])
    elif command == "sweep":
        _print_table(result["per_alpha"], ["alpha", "n_fixed_points", "n_optimal", "J_star", "complete"])
        for b in result["bifurcations"]:
            print(f"count changes between alpha {b['between'][0]} and {b['between'][1]}: "
                  f"{b['n_before']} -> {b['n_after']}")
        if "plot" in result:
            print(f"wrote {result['plot']}")
    elif command == "symmetries":
        print(f"{result['game']} alpha={result['alpha']}: |Psi| = {result['psi_order']}, |Pi*| found = "
              f"{result['pool_size']} (complete: {result['fixed_points_complete']})")
        print(f"|Phi_MDP| = {result['mdp']['order']} ({result['mdp']['order_on_policies']} on policies); "
              f"|Phi_ER| = {result['er']['order']} ({result['er']['order_on_policies']} on policies); "
              f"Phi_MDP <= Phi_ER: {result['mdp_subgroup_of_er']}; in Phi_ER not Phi_MDP (on policies): "
              f"{result['er_not_mdp_on_policies']}")
    elif command == "atlas":
        _print_table(result["rows"], ["alpha", "pool_size", "er_order_on_policies", "mdp_order", "mdp_subgroup_of_er"])
        if "plot" in result:
            print(f"wrote {result['plot']}")
    elif command == "census":
        for k, v in result["summary"].items():
            print(f"{k}: {v}")
    elif command == "zsc":
        print(result["markdown"])
    elif command == "discover":
        print(f"{result['algorithm']}: pool J = {result['pool_return']:.4f}; J_1 = {result['J_1']:.4f}, "
              f"J_2 = {result['J_2']:.4f}, J_3 = {result['J_3']:.4f}, reconstruction loss "
              f"{result['reconstruction_loss']:.3f}")
        for t, sc in zip(result["transformations"], result["scores"]):
            print(f"  {sc:.6f}  actions {t['actions']}  observations {t['observations']}")
    elif command == "demo":
        _print_table(result["games"], ["name", "horizon", "joint_nodes", "local_histories", "J_uniform", "J_star",
                                       "n_fixed_points", "n_optimal", "J_star_alpha", "fixed_points_complete"])
        print(f"(fixed points at alpha = {result['config']['alpha']}, {result['config']['starts']} starts)")
        if "written" in result:
            print(f"\nwrote {result['written']}")
    else:
        for k, v in result.items():
            print(f"{k}: {v}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ers-exact", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"ers-exact {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--json", action="store_true", help="print JSON instead of a summary")
        return sp

    add("games", "list the built-in games")
    sp = add("info", "sizes of a game and its histories")
    sp.add_argument("game"); sp.add_argument("--horizon", type=int)
    sp.add_argument("--max-nodes", type=int, default=DEFAULT_MAX_NODES)
    sp = add("value", "J and root Q values of a policy")
    sp.add_argument("game"); sp.add_argument("--policy", default="uniform", help="'uniform' or a JSON file")
    sp.add_argument("--horizon", type=int); sp.add_argument("--discount", type=float)
    sp = add("optimal", "exact optimal value over deterministic joint policies")
    sp.add_argument("game"); sp.add_argument("--horizon", type=int); sp.add_argument("--discount", type=float)
    sp.add_argument("--max-policies", type=int, default=DEFAULT_MAX_POLICIES)
    sp.add_argument("--save-policy", help="write the optimal policy as JSON (usable by `value --policy`)")
    sp = add("solve", "all Boltzmann fixed points found at a temperature alpha")
    sp.add_argument("game"); sp.add_argument("--alpha", type=float, required=True)
    sp.add_argument("--horizon", type=int); sp.add_argument("--starts", type=int, default=64)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--with-policy", action="store_true", help="include full policies in the JSON")
    sp = add("sweep", "fixed points over a grid of temperatures, with bifurcations and a plot")
    sp.add_argument("game"); sp.add_argument("--alphas", required=True, help="start:stop:step or a,b,c")
    sp.add_argument("--horizon", type=int); sp.add_argument("--starts", type=int, default=32)
    sp.add_argument("--seed", type=int, default=0); sp.add_argument("--plot", help="PNG file to draw")
    sp = add("zsc", "zero-shot coordination: SP, OP + Phi_MDP, OP + learned Phi_ER populations (Table 1)")
    sp.add_argument("game"); sp.add_argument("--agents", type=int, default=5); sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--pool", choices=["iql", "exact"], default="iql"); sp.add_argument("--alpha", type=float, default=1.0)
    sp.add_argument("--k", type=int, default=20); sp.add_argument("--l", type=int, default=6)
    sp.add_argument("--m", type=int, default=5); sp.add_argument("--episodes", type=int, default=10_000)
    sp.add_argument("--algorithm", choices=["sp-max", "sp-max-reg", "xp-max"], default="sp-max")
    sp.add_argument("--horizon", type=int); sp.add_argument("--out", help="folder for the JSON result")
    sp = add("discover", "learn ER symmetries from a pool (Algorithms 1-3) with Table 2's group metrics")
    sp.add_argument("game"); sp.add_argument("--alpha", type=float, default=1.0)
    sp.add_argument("--pool", choices=["iql", "exact"], default="iql"); sp.add_argument("--k", type=int, default=20)
    sp.add_argument("--algorithm", choices=["sp-max", "sp-max-reg", "xp-max"], default="sp-max")
    sp.add_argument("--search", choices=["exhaustive", "gradient"], default="exhaustive")
    sp.add_argument("--top", type=int, default=6); sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--episodes", type=int, default=10_000); sp.add_argument("--horizon", type=int)
    sp = add("export-gambit", "write the game as a Gambit .efg file")
    sp.add_argument("game"); sp.add_argument("out"); sp.add_argument("--horizon", type=int)
    sp = add("symmetries", "Phi_MDP and Phi_ER at a temperature alpha")
    sp.add_argument("game"); sp.add_argument("--alpha", type=float, required=True)
    sp.add_argument("--horizon", type=int); sp.add_argument("--starts", type=int, default=64)
    sp.add_argument("--seed", type=int, default=0)
    sp = add("atlas", "|Pi*_alpha|, |Phi_ER| and |Phi_MDP| over a grid of alphas")
    sp.add_argument("game"); sp.add_argument("--alphas", required=True, help="start:stop:step or a,b,c")
    sp.add_argument("--horizon", type=int); sp.add_argument("--starts", type=int, default=32)
    sp.add_argument("--seed", type=int, default=0); sp.add_argument("--plot", help="PNG file to draw")
    sp = add("census", "random small games: how often Phi_ER is strictly larger than Phi_MDP")
    sp.add_argument("--games", type=int, default=20); sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--alpha", type=float, default=0.25); sp.add_argument("--out", help="folder for examples")
    sp = add("demo", "exact analysis of every built-in game, written as JSON")
    sp.add_argument("--out", default="results"); sp.add_argument("--max-policies", type=int, default=200_000)
    sp.add_argument("--alpha", type=float, default=0.25)
    return p


_COMMANDS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "games": lambda a: run_games(),
    "info": lambda a: run_info(a.game, a.horizon, a.max_nodes),
    "value": lambda a: run_value(a.game, a.policy, a.horizon, a.discount),
    "optimal": lambda a: run_optimal(a.game, a.horizon, a.discount, a.max_policies, a.save_policy),
    "solve": lambda a: run_solve(a.game, a.alpha, a.horizon, a.starts, a.seed, a.with_policy),
    "sweep": lambda a: run_sweep(a.game, a.alphas, a.horizon, a.starts, a.seed, a.plot),
    "symmetries": lambda a: run_symmetries(a.game, a.alpha, a.horizon, a.starts, a.seed),
    "atlas": lambda a: run_atlas(a.game, a.alphas, a.horizon, a.starts, a.seed, a.plot),
    "census": lambda a: run_census(a.games, a.seed, a.alpha, a.out),
    "zsc": lambda a: run_zsc(a.game, a.agents, a.seed, a.pool, a.alpha, a.k, a.l, a.m, a.episodes, a.algorithm,
                             a.horizon, a.out),
    "discover": lambda a: run_discover(a.game, a.alpha, a.pool, a.k, a.algorithm, a.search, a.top, a.seed,
                                       a.episodes, a.horizon),
    "export-gambit": lambda a: run_export_gambit(a.game, a.out, a.horizon),
    "demo": lambda a: run_demo(a.out, a.max_policies, a.alpha),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = _COMMANDS[args.command](args)
    except (ValueError, RuntimeError, OSError) as err:
        print(f"ers-exact {args.command}: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, default=float))
    else:
        _human(args.command, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
