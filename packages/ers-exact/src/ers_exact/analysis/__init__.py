"""The analysis layer, top of the library: symmetry reports of a game (Phi_MDP, Phi_ER at one alpha and
the atlas over a grid of alphas, with the paper's group checks such as Phi_MDP <= Phi_ER) (``report``);
the census of random small Dec-POMDPs, how often Phi_ER is strictly larger than Phi_MDP (``census``); and
the figures (``plots``, matplotlib imported only when drawing). Only the CLI sits above it.
"""

from ers_exact.analysis.census import CensusConfig, census
from ers_exact.analysis.plots import plot_atlas, plot_sweep, save_figure
from ers_exact.analysis.report import atlas, symmetry_report

__all__ = ["CensusConfig", "atlas", "census", "plot_atlas", "plot_sweep", "save_figure", "symmetry_report"]
