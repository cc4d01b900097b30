"""Deep ER-symmetry discovery (the paper's Algorithms 1-3 with learned phi_O networks): the composite nets
(``net``), action candidates and rounding to permutations (``rounding``), the run's settings (``config``) and
``discover`` (``run``)."""

from ers_deep.discovery.config import TABULAR_SETTINGS, DeepDiscoveryConfig
from ers_deep.discovery.files import exact_symmetries_for, load_symmetries, symmetries_for
from ers_deep.discovery.net import DiscoveryNet, LearnedSymmetry, compose
from ers_deep.discovery.run import discover
from ers_deep.envs.symmetry import Symmetry

__all__ = [
    "TABULAR_SETTINGS",
    "DeepDiscoveryConfig",
    "DiscoveryNet",
    "LearnedSymmetry",
    "Symmetry",
    "compose",
    "discover",
    "exact_symmetries_for",
    "load_symmetries",
    "symmetries_for",
]
