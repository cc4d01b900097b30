"""Analyses of trained policies and runs, each a function that returns JSON-ready numbers plus a figure:

* ``curves``: learning curves from a run directory or a pool (``pool_curve``), time to a fraction of the best
  score;
* ``action_matrix``: conditional action matrices P(a_t^i | a_{t-1}^j) over self-play (appendix
  "Interpretability");
* ``op_preservation``: E[OP^Phi(pi)] against E_phi[OP^Phi(phi(pi))] for a learned set Phi ("Preserves OP
  Optimality"), deep estimates and, on tabular games, ers-exact's exact values;
* ``xp_distribution``: histograms of pairwise cross-play scores per population (the Overcooked V2 figure).
"""

from ers_deep.analysis.action_matrix import action_labels, action_matrix, matrix_figure, record_actions
from ers_deep.analysis.curves import curves, learning_curve, pool_curve, pool_run_dirs, time_to_fraction
from ers_deep.analysis.op_preservation import (
    deep_op_preservation,
    discovery_folder,
    exact_op_preservation,
    learned_exact_op_preservation,
    op_preservation,
    preservation_figure,
)
from ers_deep.analysis.xp_distribution import (
    bimodality,
    distribution_figure,
    pairwise_scores,
    parse_populations,
    population_matrix,
    population_summary,
    source_pool,
    table1_matrix,
    table1_sources,
    xp_distribution,
)

__all__ = [
    "action_labels",
    "action_matrix",
    "bimodality",
    "curves",
    "deep_op_preservation",
    "discovery_folder",
    "distribution_figure",
    "exact_op_preservation",
    "learned_exact_op_preservation",
    "learning_curve",
    "matrix_figure",
    "op_preservation",
    "pairwise_scores",
    "parse_populations",
    "pool_curve",
    "pool_run_dirs",
    "population_matrix",
    "population_summary",
    "preservation_figure",
    "record_actions",
    "source_pool",
    "table1_matrix",
    "table1_sources",
    "time_to_fraction",
    "xp_distribution",
]
