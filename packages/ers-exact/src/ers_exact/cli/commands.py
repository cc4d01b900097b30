"""The ``ers-exact`` commands: each ``run_<command>(options) -> dict`` is a thin call into the library, usable
from tests and notebooks without a subprocess (``run_solve(SolveOptions(game="dectiger", alpha=0.5))``).
The dict is what ``--json`` prints.

Each ``run_*`` imports the library modules it uses when it runs, so that a command loads only what it needs
(``games`` never loads scipy or sympy; ``tests/exact/test_lazy_imports.py`` checks it). What they build from
their options (game, tree, solver config) and the ``config`` block and provenance of every result
(``result_json``: the resolved options, the game as used) is :mod:`ers_exact.cli.command_inputs`; the zero-shot
coordination commands (``zsc``, ``op``, ``discover``) are :mod:`ers_exact.cli.zsc_commands`, re-exported
here."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ers_exact.cli.command_inputs import game_files, game_json, game_of, result_json, solver_config, tree_of
from ers_exact.cli.options import (
    AtlasOptions,
    CensusOptions,
    DemoOptions,
    ExportGambitOptions,
    GamesOptions,
    InfoOptions,
    OptimalOptions,
    OptimalSetOptions,
    SolveOptions,
    SweepOptions,
    SymmetriesOptions,
    ValueOptions,
    default_demo_dir,
)
from ers_exact.cli.zsc_commands import run_discover, run_op, run_zsc
from ers_exact.solve.config import SolverConfig
from ers_exact.util.budget import check_count
from ers_exact.util.options import UsageError
from ers_exact.util.output import claim_folder, write_json

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

#: seed of the demo's fixed-point search (every game's)
_DEMO_SEED = 0

# an upper bound above this is reported as None, with its log10 (the exact sum can have millions of digits)
_EXACT_ESTIMATE_LOG10 = 18


def run_games(o: GamesOptions | None = None) -> dict[str, Any]:
    """The built-in registry: name, description and sizes of each game."""
    from ers_exact.games import GAMES

    rows = []
    for name, factory in GAMES.items():
        g = factory()
        rows.append({**game_json(g), "name": name, "description": g.description})
    return {"games": rows}


def run_info(o: InfoOptions) -> dict[str, Any]:
    """Sizes of the game and of its enumerated histories (refuses beyond ``max_nodes``)."""
    from ers_exact.model.histories import enumerate_histories, estimate_history_count, history_count_log10
    from ers_exact.model.optimal import count_policy_trees

    game = game_of(o)
    start = time.perf_counter()
    tree = enumerate_histories(game, max_nodes=o.max_nodes)
    log10 = history_count_log10(game)
    bound = estimate_history_count(game) if log10 < _EXACT_ESTIMATE_LOG10 else None
    info = {
        **game_json(game),
        "estimated_joint_nodes_upper_bound": bound,
        "estimated_joint_nodes_log10": round(log10, 3),
        **tree.counts(),
        "policy_trees_per_agent": [count_policy_trees(tree, [i]) for i in range(game.n_agents)],
        "enumeration_seconds": round(time.perf_counter() - start, 4),
    }
    return result_json(info, o, game)


def run_value(o: ValueOptions) -> dict[str, Any]:
    """J(pi) and the root local Q^i values of a policy ('uniform' or a JSON policy file)."""
    from ers_exact.cli.files import read_policy_file
    from ers_exact.model.values import expected_return, local_q_values, uniform_policy

    tree = tree_of(o)
    pol = uniform_policy(tree) if o.policy == "uniform" else read_policy_file(o.policy, tree)
    q = local_q_values(tree, pol)
    value = {
        **game_json(tree.game),
        "policy": o.policy,
        "J": expected_return(tree, pol),
        "q_root": [qi[0].tolist() for qi in q],
    }
    return result_json(value, o, tree.game)


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
        tree = tree_of(o)
        result = optimal_value(tree, o.method, **limits)
        if not result.policy:
            raise UsageError(
                f"{result.game}: the search stopped before it found a joint policy ({result.stopped}); "
                f"nothing written to {o.save_policy} (raise --max-seconds / --memory-budget)"
            )
        write_policy_file(o.save_policy, tree, result.policy, reads=game_files(o))
        game = tree.game
    else:
        game = game_of(o)
        result = optimal_for_game(game, o.method, max_nodes=o.max_nodes, **limits)
    return result_json(result.to_json(), o, game)


def run_solve(o: SolveOptions) -> dict[str, Any]:
    """Boltzmann fixed points at temperature alpha, J* and the self-play-optimal set Pi*_alpha."""
    from ers_exact.solve.fixed_points import solve_fixed_points

    tree = tree_of(o)
    result = solve_fixed_points(tree, o.alpha, solver_config(o))
    return result_json(result.to_json(o.with_policy), o, tree.game)


def run_optimal_set(o: OptimalSetOptions) -> dict[str, Any]:
    """Pi*_alpha proven complete: every fixed point with J >= J* - eps, certified, and whether the list is."""
    from ers_exact.solve.config import OptimalSetConfig
    from ers_exact.solve.optimal_set import certified_optimal_set
    from ers_exact.symmetry.mdp_group import decpomdp_group
    from ers_exact.symmetry.search import SymmetryBudgetError

    cfg = OptimalSetConfig(eps=o.eps, max_boxes=o.max_boxes, max_seconds=o.max_seconds, workers=o.workers)
    solver = SolverConfig(**{**solver_config(o).__dict__, "complete_search": False})
    tree = tree_of(o)
    try:  # Phi_MDP's parts acting on policies: the search explores a fundamental domain of them
        relabellings = decpomdp_group(tree.game).policy_parts
    except SymmetryBudgetError:
        relabellings = ()
    result = certified_optimal_set(tree, o.alpha, cfg, solver=solver, relabellings=relabellings)
    return result_json(result.to_json(o.with_policy), o, tree.game)


def run_sweep(o: SweepOptions) -> dict[str, Any]:
    """Fixed points over a grid of alphas (continuation), bifurcations, optional plot."""
    from ers_exact.analysis.plots import plot_sweep
    from ers_exact.solve.config import parse_alphas
    from ers_exact.solve.sweep import sweep

    tree = tree_of(o)
    result = sweep(tree, parse_alphas(o.alphas), solver_config(o))
    out = result_json(result.to_json(), o, tree.game)
    if o.plot:
        out["plot"] = str(plot_sweep(result, o.plot))
    return out


def run_export_gambit(o: ExportGambitOptions) -> dict[str, Any]:
    """Write the game as a Gambit extensive form (.efg); information sets = local histories."""
    from ers_exact.io.gambit import save_efg

    tree = tree_of(o)
    save_efg(tree, o.out, reads=game_files(o))
    exported = {
        **game_json(tree.game),
        "written": str(o.out),
        "information_sets": list(tree.n_histories),
        "note": "Gambit action values = gamma^t * Q^i (reward-to-go); lambda = 1 / alpha",
    }
    return result_json(exported, o, tree.game)


def run_symmetries(o: SymmetriesOptions) -> dict[str, Any]:
    """Phi_MDP and Phi_ER at alpha (against the solver's whole optimal set), as groups."""
    from ers_exact.analysis.report import symmetry_report

    tree = tree_of(o)
    report = symmetry_report(
        tree,
        o.alpha,
        solver_config(o),
        max_elements=o.max_elements,
        er_method=o.er_method,
        prove_seconds=o.prove_optimal_set,
        prove_workers=o.prove_workers,
    )
    return result_json(report, o, tree.game)


def run_atlas(o: AtlasOptions) -> dict[str, Any]:
    """|Pi*_alpha|, |Phi_ER(alpha)| and |Phi_MDP| over a grid of alphas, optionally plotted."""
    from ers_exact.analysis.plots import plot_atlas
    from ers_exact.analysis.report import atlas
    from ers_exact.solve.config import parse_alphas

    tree = tree_of(o)
    rows = atlas(
        tree,
        parse_alphas(o.alphas),
        solver_config(o),
        prove_seconds=o.prove_optimal_set,
        prove_workers=o.prove_workers,
    )
    out = result_json(rows, o, tree.game)
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
    result = result_json(census(cfg, write=False), o)
    if o.out:  # once, with the options' config and the provenance
        Path(o.out).mkdir(parents=True, exist_ok=True)
        write_json(Path(o.out, "census.json"), result)
    return result


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
            **game_json(game),
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
        fps = solve_fixed_points(tree, o.alpha, SolverConfig(n_starts=o.starts, seed=_DEMO_SEED))
        row.update(
            alpha=o.alpha,
            n_fixed_points=len(fps.points),
            n_optimal=len(fps.optimal_points),
            J_star_alpha=fps.J_star,
            fixed_points_complete=fps.complete,
        )
        rows.append(row)
    config = {"max_policies": o.max_policies, "alpha": o.alpha, "starts": o.starts, "seed": _DEMO_SEED}
    result = result_json({"command": "demo", "config": config, "games": rows}, o)
    write_json(Path(folder, "demo.json"), result)
    result["written"] = str(Path(folder, "demo.json"))
    return result
