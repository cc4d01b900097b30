"""The analysis layer, top of the library: symmetry reports of a game (Phi_MDP, Phi_ER at one alpha and
the atlas over a grid of alphas, with the paper's group checks such as Phi_MDP <= Phi_ER) (``report``);
the census of random small Dec-POMDPs, how often Phi_ER is strictly larger than Phi_MDP (``census``); and
the figures (``plots``, matplotlib imported only when drawing). Only the CLI sits above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.analysis.census import census
    from ers_exact.analysis.config import CensusConfig
    from ers_exact.analysis.plots import plot_atlas, plot_sweep, save_figure
    from ers_exact.analysis.report import atlas, symmetry_report

__all__ = ["CensusConfig", "atlas", "census", "plot_atlas", "plot_sweep", "save_figure", "symmetry_report"]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "CensusConfig": "config",
            "census": "census",
            "plot_atlas": "plots",
            "plot_sweep": "plots",
            "save_figure": "plots",
            "atlas": "report",
            "symmetry_report": "report",
        },
    )
