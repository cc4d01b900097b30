"""The ``ers-exact`` commands: each ``run_<command>(options) -> dict`` is a thin call into the library, usable
from tests and notebooks without a subprocess (``run_solve(SolveOptions(game="dectiger", alpha=0.5))``).
The dict is what ``--json`` prints.

Each ``run_*`` imports the library modules it uses when it runs, so that a command loads only what it needs
(``games`` never loads scipy or sympy; ``tests/exact/test_lazy_imports.py`` checks it)."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ers_exact import __version__
from ers_exact.cli.options import (
    AtlasOptions,
    CensusOptions,
    DemoOptions,
    DiscoverOptions,
    ExportGambitOptions,
    GameOptions,
    GamesOptions,
    InfoOptions,
    OPOptions,
    OptimalOptions,
    OptimalSetOptions,
    SolveOptions,
    SolverOptions,
    SweepOptions,
    SymmetriesOptions,
    ValueOptions,
    ZSCOptions,
    default_demo_dir,
)
from ers_exact.solve.config import SolverConfig
from ers_exact.util.budget import check_count, memory_scope
from ers_exact.util.options import UsageError
from ers_exact.util.output import claim_folder, write_json

if TYPE_CHECKING:
    from ers_exact.model.game import Game
    from ers_exact.model.histories import HistoryTree

__all__ = [
    "run_atlas",
    "run_census",
    "run_demo",
    "run_discover",
    "run_export_gambit",
    "run_games",
    "run_info",
    "run_op",
    "run_optimal",
    "run_optimal_set",
    "run_solve",
    "run_sweep",
    "run_symmetries",
    "run_value",
    "run_zsc",
]

#: memory of one census row (a dict of a dozen entries) and its JSON text, bytes
CENSUS_ROW_BYTES = 4_000

# an upper bound above this is reported as None, with its log10 (the exact sum can have millions of digits)
_EXACT_ESTIMATE_LOG10 = 18


def _provenance() -> dict[str, Any]:
    import numpy as np

    return {"ers_exact": __version__, "numpy": np.__version__, "python": platform.python_version()}


def _game_json(game: Game) -> dict[str, Any]:
    return {
        "game": game.name,
        "horizon": game.horizon,
        "discount": game.discount,
        "n_agents": game.n_agents,
        "n_states": game.n_states,
        "n_actions": list(game.n_actions),
        "n_observations": list(game.n_observations),
    }


def _reads(o: GameOptions) -> list[Path]:
    """The files a game command reads (the .dpomdp file, when GAME is one): outputs never replace them."""
    from ers_exact.games import find_game_file

    path = find_game_file(o.game)
    return [] if path is None else [path]


def _game(o: GameOptions) -> Game:
    from ers_exact.games import load_game

    return load_game(o.game, horizon=o.horizon, discount=o.discount)


def _tree(o: GameOptions) -> HistoryTree:
    from ers_exact.model.histories import enumerate_histories

    return enumerate_histories(_game(o), max_nodes=o.max_nodes)


def _solver(o: SolverOptions) -> SolverConfig:
    return SolverConfig(
        n_starts=o.starts,
        seed=o.seed,
        continuation=o.continuation,
        memory_budget_bytes=int(o.memory_budget * 1e9),
        memory_scope=memory_scope(),  # "process" when the command is its own process
    )


def run_games(o: GamesOptions | None = None) -> dict[str, Any]:
    """The built-in registry: name, description and sizes of each game."""
    from ers_exact.games import GAMES

    rows = []
    for name, factory in GAMES.items():
        g = factory()
        rows.append({**_game_json(g), "name": name, "description": g.description})
    return {"games": rows}


def run_info(o: InfoOptions) -> dict[str, Any]:
    """Sizes of the game and of its enumerated histories (refuses beyond ``max_nodes``)."""
    from ers_exact.model.histories import enumerate_histories, estimate_history_count, history_count_log10
    from ers_exact.model.optimal import count_policy_trees

    game = _game(o)
    start = time.perf_counter()
    tree = enumerate_histories(game, max_nodes=o.max_nodes)
    log10 = history_count_log10(game)
    bound = estimate_history_count(game) if log10 < _EXACT_ESTIMATE_LOG10 else None
    return {
        **_game_json(game),
        "estimated_joint_nodes_upper_bound": bound,
        "estimated_joint_nodes_log10": round(log10, 3),
        **tree.counts(),
        "policy_trees_per_agent": [count_policy_trees(tree, [i]) for i in range(game.n_agents)],
        "enumeration_seconds": round(time.perf_counter() - start, 4),
    }


def run_value(o: ValueOptions) -> dict[str, Any]:
    """J(pi) and the root local Q^i values of a policy ('uniform' or a JSON policy file)."""
    from ers_exact.cli.files import read_policy_file
    from ers_exact.model.values import expected_return, local_q_values, uniform_policy

    tree = _tree(o)
    pol = uniform_policy(tree) if o.policy == "uniform" else read_policy_file(o.policy, tree)
    q = local_q_values(tree, pol)
    return {
        **_game_json(tree.game),
        "policy": o.policy,
        "J": expected_return(tree, pol),
        "q_root": [qi[0].tolist() for qi in q],
    }


def run_optimal(o: OptimalOptions) -> dict[str, Any]:
    """Exact optimal value J* over deterministic joint policies (exhaustive search, GMAA* or GMAA*-ICE)."""
    from ers_exact.cli.files import write_policy_file
    from ers_exact.model.optimal import optimal_for_game, optimal_value

    limits: dict[str, Any] = {
        "max_policies": o.max_policies,
        "heuristic": o.heuristic,
        "max_children": o.max_children,
        "budget_bytes": None if o.memory_budget is None else o.memory_budget * 1e9,
        "max_seconds": float("inf") if o.max_seconds is None else o.max_seconds,
    }
    if o.save_policy:  # the policy file is indexed by local histories: enumerate them
        tree = _tree(o)
        result = optimal_value(tree, o.method, **limits)
        if not result.policy:
            raise UsageError(
                f"{result.game}: the search stopped before it found a joint policy ({result.stopped}); "
                f"nothing written to {o.save_policy} (raise --max-seconds / --memory-budget)"
            )
        write_policy_file(o.save_policy, tree, result.policy, reads=_reads(o))
    else:
        result = optimal_for_game(_game(o), o.method, max_nodes=o.max_nodes, **limits)
    return {**result.to_json(), "provenance": _provenance()}


def run_solve(o: SolveOptions) -> dict[str, Any]:
    """Boltzmann fixed points at temperature alpha, J* and the self-play-optimal set Pi*_alpha."""
    from ers_exact.solve.fixed_points import solve_fixed_points

    result = solve_fixed_points(_tree(o), o.alpha, _solver(o))
    return {**result.to_json(o.with_policy), "provenance": _provenance()}


def run_optimal_set(o: OptimalSetOptions) -> dict[str, Any]:
    """Pi*_alpha proven complete: every fixed point with J >= J* - eps, certified, and whether the list is."""
    from ers_exact.solve.config import OptimalSetConfig
    from ers_exact.solve.optimal_set import certified_optimal_set
    from ers_exact.symmetry.mdp_group import decpomdp_group
    from ers_exact.symmetry.search import SymmetryBudgetError

    cfg = OptimalSetConfig(eps=o.eps, max_boxes=o.max_boxes, max_seconds=o.max_seconds, workers=o.workers)
    solver = SolverConfig(**{**_solver(o).__dict__, "complete_search": False})
    tree = _tree(o)
    try:  # Phi_MDP's parts acting on policies: the search explores a fundamental domain of them
        relabellings = decpomdp_group(tree.game).policy_parts
    except SymmetryBudgetError:
        relabellings = ()
    result = certified_optimal_set(tree, o.alpha, cfg, solver=solver, relabellings=relabellings)
    return {**result.to_json(o.with_policy), "provenance": _provenance()}


def run_sweep(o: SweepOptions) -> dict[str, Any]:
    """Fixed points over a grid of alphas (continuation), bifurcations, optional plot."""
    from ers_exact.analysis.plots import plot_sweep
    from ers_exact.solve.config import parse_alphas
    from ers_exact.solve.sweep import sweep

    result = sweep(_tree(o), parse_alphas(o.alphas), _solver(o))
    out = {
        **result.to_json(),
        "config": {"alphas": o.alphas, "starts": o.starts, "seed": o.seed},
        "provenance": _provenance(),
    }
    if o.plot:
        out["plot"] = str(plot_sweep(result, o.plot))
    return out


def run_export_gambit(o: ExportGambitOptions) -> dict[str, Any]:
    """Write the game as a Gambit extensive form (.efg); information sets = local histories."""
    from ers_exact.io.gambit import save_efg

    tree = _tree(o)
    save_efg(tree, o.out, reads=_reads(o))
    return {
        **_game_json(tree.game),
        "written": str(o.out),
        "information_sets": list(tree.n_histories),
        "note": "Gambit action values = gamma^t * Q^i (reward-to-go); lambda = 1 / alpha",
    }


def run_symmetries(o: SymmetriesOptions) -> dict[str, Any]:
    """Phi_MDP and Phi_ER at alpha (against the solver's whole optimal set), as groups."""
    from ers_exact.analysis.report import symmetry_report

    report = symmetry_report(
        _tree(o),
        o.alpha,
        _solver(o),
        max_elements=o.max_elements,
        er_method=o.er_method,
        prove_seconds=o.prove_optimal_set,
        prove_workers=o.prove_workers,
    )
    return {**report, "provenance": _provenance()}


def run_atlas(o: AtlasOptions) -> dict[str, Any]:
    """|Pi*_alpha|, |Phi_ER(alpha)| and |Phi_MDP| over a grid of alphas, optionally plotted."""
    from ers_exact.analysis.plots import plot_atlas
    from ers_exact.analysis.report import atlas
    from ers_exact.solve.config import parse_alphas

    out = {
        **atlas(
            _tree(o),
            parse_alphas(o.alphas),
            _solver(o),
            prove_seconds=o.prove_optimal_set,
            prove_workers=o.prove_workers,
        ),
        "config": {
            "alphas": o.alphas,
            "starts": o.starts,
            "seed": o.seed,
            "prove_optimal_set": o.prove_optimal_set,
            "prove_workers": o.prove_workers,
        },
        "provenance": _provenance(),
    }
    if o.plot:
        out["plot"] = str(plot_atlas(out, o.plot))
    return out


def run_census(o: CensusOptions) -> dict[str, Any]:
    """Random small Dec-POMDPs: how often Phi_ER is strictly larger than Phi_MDP."""
    from ers_exact.analysis.census import census
    from ers_exact.analysis.config import CensusConfig

    cfg = CensusConfig(games=o.games, seed=o.seed, alpha=o.alpha, starts=o.starts, out=o.out)
    check_count("--games", o.games, CENSUS_ROW_BYTES, "random games")  # their rows are kept for census.json
    if o.out:
        claim_folder(o.out, force=o.force, command="ers-exact census")
    return {**census(cfg), "provenance": _provenance()}


def run_zsc(o: ZSCOptions) -> dict[str, Any]:
    """The population pipeline: SP, OP + Phi_MDP and OP + learned Phi_ER; Table 1 as JSON and markdown."""
    from ers_exact.zsc.config import PopulationConfig
    from ers_exact.zsc.pipeline import run_zsc as pipeline

    cfg = PopulationConfig(
        agents=o.agents,
        seed=o.seed,
        pool_source=o.pool_source,
        alpha=o.alpha,
        k=o.k,
        top=o.top,
        m=o.m,
        select_by=o.select_by,
        episodes=o.episodes,
        algorithm=o.algorithm,
    )
    tree = _tree(o)
    if o.out:
        claim_folder(o.out, force=o.force, command="ers-exact zsc", reads=_reads(o))
    report, discoveries = pipeline(tree, cfg)
    result = {
        **report.to_json(),
        "markdown": report.to_markdown(),
        "discovery": [d.to_json() for d in discoveries],
        "provenance": _provenance(),
    }
    if o.out:
        write_json(Path(o.out, f"zsc-{tree.game.name}-seed{o.seed}.json"), result)
    return result


def run_op(o: OPOptions) -> dict[str, Any]:
    """The other-play optimum found over Phi (``--symmetries``): op_value, J, the policy, how it was found."""
    from ers_exact.cli.files import write_policy_file
    from ers_exact.zsc.config import OPConfig
    from ers_exact.zsc.other_play import solve_other_play

    cfg = OPConfig(
        seed=o.seed, seeds=o.seeds, share=o.share, steps=o.steps, restarts=o.restarts, exhaustive=o.exhaustive
    )
    tree = _tree(o)
    result = solve_other_play(tree, o.symmetries, cfg)
    if o.save_policy:
        write_policy_file(o.save_policy, tree, result.policy, reads=_reads(o))
    return {**_game_json(tree.game), **result.to_json(), "provenance": _provenance()}


def run_discover(o: DiscoverOptions) -> dict[str, Any]:
    """One agent's discovery (Algorithm 1, 2 or 3) with Table 2's group metrics on an unseen pool."""
    from ers_exact.zsc.config import UNSEEN_POOL_SEED_OFFSET, DiscoveryConfig, PoolConfig
    from ers_exact.zsc.discovery import discover
    from ers_exact.zsc.pools import build_pools

    cfg = PoolConfig(source=o.pool_source, alpha=o.alpha, k=o.k, episodes=o.episodes)
    discovery = DiscoveryConfig(algorithm=o.algorithm, search=o.search, top=o.top, seed=o.seed)
    tree = _tree(o)
    (train, _), (unseen, _) = build_pools(tree, cfg, [o.seed, o.seed + UNSEEN_POOL_SEED_OFFSET])
    result = discover(tree, train, discovery, unseen_pool=unseen)
    return {**result.to_json(), "pool_source": o.pool_source, "alpha": o.alpha, "provenance": _provenance()}


def run_demo(o: DemoOptions) -> dict[str, Any]:
    """Exact analysis of every built-in game: history counts, J(uniform), J*, and the Boltzmann fixed
    points at ``alpha`` (how many, how many self-play optimal, J of the best); written as demo.json."""
    from ers_exact.games import GAMES
    from ers_exact.model.config import PolicyBudgetError
    from ers_exact.model.histories import enumerate_histories
    from ers_exact.model.optimal import self_play_optimum
    from ers_exact.model.values import expected_return, uniform_policy
    from ers_exact.solve.fixed_points import solve_fixed_points

    folder = Path(o.out) if o.out else default_demo_dir()
    claim_folder(folder, force=o.force, command="ers-exact demo")
    rows = []
    for name, factory in GAMES.items():
        game = factory()
        tree = enumerate_histories(game, max_nodes=o.max_nodes)
        row: dict[str, Any] = {
            **_game_json(game),
            "name": name,
            **tree.counts(),
            "J_uniform": expected_return(tree, uniform_policy(tree)),
        }
        try:
            opt = self_play_optimum(tree, max_policies=o.max_policies)
            row.update(
                J_star=opt.value,
                optimal_policy=opt.to_json()["actions"],
                search_candidates=opt.n_candidates,
                search_seconds=round(opt.seconds, 4),
            )
        except PolicyBudgetError as err:
            row.update(J_star=None, note=str(err))
        fps = solve_fixed_points(tree, o.alpha, SolverConfig(n_starts=o.starts, seed=0))
        row.update(
            alpha=o.alpha,
            n_fixed_points=len(fps.points),
            n_optimal=len(fps.optimal_points),
            J_star_alpha=fps.J_star,
            fixed_points_complete=fps.complete,
        )
        rows.append(row)
    config = {"max_policies": o.max_policies, "alpha": o.alpha, "starts": o.starts}
    result: dict[str, Any] = {"command": "demo", "config": config, "games": rows, "provenance": _provenance()}
    write_json(Path(folder, "demo.json"), result)
    result["written"] = str(Path(folder, "demo.json"))
    return result
