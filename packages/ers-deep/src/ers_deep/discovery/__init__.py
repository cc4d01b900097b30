"""Deep ER-symmetry discovery (the paper's Algorithms 1-3 with learned phi_O networks): the composite nets
(``net``), action candidates and rounding to permutations (``rounding``), the run's settings (``config``) and
``discover`` (``run``)."""

from ers_deep.discovery.config import (
    TABULAR_SETTINGS,
    DeepDiscoveryConfig,
    paper_discovery_config,
    paper_discovery_settings,
)
from ers_deep.discovery.files import exact_symmetries_for, load_symmetries, symmetries_for
from ers_deep.discovery.net import DiscoveryNet, LearnedSymmetry, compose
from ers_deep.discovery.run import discover, discovery_train_config
from ers_deep.envs.symmetry import Symmetry

__all__ = [
    "TABULAR_SETTINGS",
    "DeepDiscoveryConfig",
    "DiscoveryNet",
    "LearnedSymmetry",
    "Symmetry",
    "compose",
    "discover",
    "discovery_train_config",
    "exact_symmetries_for",
    "load_symmetries",
    "paper_discovery_config",
    "paper_discovery_settings",
    "symmetries_for",
]
