"""The zero-shot-coordination layer, computed exactly on tabular games: pools Pi' of self-play policies
(``pools``: IQL runs as softmax(Q / alpha), or points of Pi*_alpha); tabular IQL (``iql``); learning ER
symmetries from a pool with the paper's Algorithms 1-3 (``discovery``); other-play training against
OP^Phi (``other_play``; exact OP values and gradients in ``op_objective``, the search over deterministic
policies in ``op_search``); and the paper's population pipeline, Table 1's SP / XP / XP(*) columns with and
without symmetrising by Phi_MDP and the learned Phi_ER (``pipeline``); rounding a learned phi_O to the nearest
exact transformation and scoring transformations exactly (``rounding``). The configurations live in
``config`` (light: the command line reads their defaults without loading the layer). It writes the shared
:mod:`ers_exact.interface` types and imports ``symmetry`` and the layers below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.deprecation import deprecated_names
from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.zsc.config import DiscoveryConfig, OPConfig, PoolConfig, PopulationConfig
    from ers_exact.zsc.discovery import discover
    from ers_exact.zsc.iql import IQLConfig, iql_pool, train_iql
    from ers_exact.zsc.other_play import OPResult, solve_other_play, train_other_play
    from ers_exact.zsc.pipeline import run_zsc
    from ers_exact.zsc.pools import build_pool
    from ers_exact.zsc.rounding import TransformationScore, round_history_images, score_transformations

__all__ = [
    "DiscoveryConfig",
    "IQLConfig",
    "OPConfig",
    "OPResult",
    "PoolConfig",
    "PopulationConfig",
    "TransformationScore",
    "build_pool",
    "discover",
    "iql_pool",
    "round_history_images",
    "run_zsc",
    "score_transformations",
    "solve_other_play",
    "train_iql",
    "train_other_play",
]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    _lazy_getattr, __dir__ = lazy_exports(
        __name__,
        {
            "DiscoveryConfig": "config",
            "discover": "discovery",
            "IQLConfig": "iql",
            "iql_pool": "iql",
            "train_iql": "iql",
            "OPConfig": "config",
            "OPResult": "other_play",
            "solve_other_play": "other_play",
            "train_other_play": "other_play",
            "PopulationConfig": "config",
            "run_zsc": "pipeline",
            "PoolConfig": "config",
            "build_pool": "pools",
            "TransformationScore": "rounding",
            "round_history_images": "rounding",
            "score_transformations": "rounding",
        },
    )
    # deprecated names: warn at the caller's line on every access (never cached in the package)
    __getattr__ = deprecated_names(
        __name__,
        {"ZSCConfig": ("PopulationConfig", lambda: _lazy_getattr("PopulationConfig"))},
        fallback=_lazy_getattr,
    )
