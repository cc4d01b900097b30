"""A census of ER symmetries on random small Dec-POMDPs: how often is Phi_ER strictly larger than Phi_MDP?

Games: 2 agents, 2-3 actions and observations each, 1-2 states, H in {1, 2}, rewards on the grid
{0, 1} (or {-1, 0, 1}), T / U rows Dirichlet with exact zeros; a share of them are built with a
*planted* symmetry (the average of phi^k(G) over the cyclic group of a random phi, so phi is in
Phi_MDP). Both generators live in :mod:`ers_exact.games.random`. Phi_ER is computed against the solver's
whole optimal set at ``alpha``; each game records whether that set was certified complete. Games with
Phi_ER > Phi_MDP are saved as .dpomdp files. Each row also counts both groups as maps of policies
(``distinct_on_policies``): at H = 1 no local history holds an observation, so Phi_ER can be larger than
Phi_MDP as a subgroup of Psi (it holds every observation permutation) while acting on policies as Phi_MDP does;
``er_larger_on_policies`` is the comparison of those counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ers_exact.analysis.config import CensusConfig
from ers_exact.analysis.report import symmetry_report
from ers_exact.games.random import planted_game, random_small_game
from ers_exact.io.dpomdp import save_dpomdp
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import Transformation
from ers_exact.solve.fixed_points import SolverConfig
from ers_exact.util.output import write_json
from ers_exact.util.progress import Progress

__all__ = ["CensusConfig", "census"]


def census(config: CensusConfig, progress: bool | None = None, write: bool = True) -> dict[str, Any]:
    """Run the census; return (and, with ``config.out``, write) the table and the examples (``write=False``:
    the examples only; the command line writes census.json once, with its options and provenance)."""
    rng = np.random.default_rng(config.seed)
    rows = []
    with Progress(config.games, "census", enabled=progress) as bar:
        for k in range(config.games):
            game = random_small_game(rng, f"census-{config.seed}-{k}")
            planted = bool(rng.random() < config.planted_share)
            if planted:
                game = planted_game(game, Transformation.random(game, rng))
            rep = symmetry_report(
                enumerate_histories(game),
                config.alpha,
                SolverConfig(n_starts=config.starts, seed=config.seed + k),
                max_elements=0,
            )
            row = {
                "game": game.name,
                "planted": planted,
                "horizon": game.horizon,
                "n_states": game.n_states,
                "n_actions": list(game.n_actions),
                "n_observations": list(game.n_observations),
                "pool_size": rep["pool_size"],
                "fixed_points_complete": rep["fixed_points_complete"],
                "mdp_order_on_policies": rep["mdp"]["order_on_policies"],
                "er_order_on_policies": rep["er"]["order_on_policies"],
                "er_strictly_larger": rep["er"]["order_on_policies"] > rep["mdp"]["order_on_policies"],
                # as maps of policies (observation permutations act trivially at H = 1; None: not listed)
                "mdp_distinct_on_policies": rep["mdp"]["distinct_on_policies"],
                "er_distinct_on_policies": rep["er"]["distinct_on_policies"],
                "mdp_subgroup_of_er": rep["mdp_subgroup_of_er"],
            }
            d_er, d_mdp = row["er_distinct_on_policies"], row["mdp_distinct_on_policies"]
            row["er_larger_on_policies"] = None if d_er is None else d_er > d_mdp
            if row["er_strictly_larger"] and config.out:
                path = Path(config.out, f"{game.name}.dpomdp")
                path.parent.mkdir(parents=True, exist_ok=True)
                save_dpomdp(game, path)
                row["saved"] = str(path)
            rows.append(row)
            bar.update()
    summary = _summary(rows)
    result = {"config": config.__dict__, "summary": summary, "games": rows}
    if config.out and write:
        Path(config.out).mkdir(parents=True, exist_ok=True)
        write_json(Path(config.out, "census.json"), result)
    return result


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def part(sel: list[dict[str, Any]]) -> dict[str, Any]:
        n = len(sel)
        larger = sum(r["er_strictly_larger"] for r in sel)
        return {
            "games": n,
            "er_strictly_larger": larger,
            "er_larger_on_policies": sum(bool(r["er_larger_on_policies"]) for r in sel),
            "share": larger / n if n else None,
            "mdp_nontrivial": sum(r["mdp_order_on_policies"] > 1 for r in sel),
            "mdp_subgroup_of_er_everywhere": all(r["mdp_subgroup_of_er"] for r in sel),
        }

    return {
        "all": part(rows),
        "planted": part([r for r in rows if r["planted"]]),
        "unplanted": part([r for r in rows if not r["planted"]]),
    }
