"""Batched Hanabi (torch), equal to DeepMind's HLE step for step.

* ``config``: ``HanabiConfig``, HLE presets, move table, observation layout, the step's lookup tables (numpy);
* ``env``: ``HanabiEnv``, the batched game (follows ``ers_deep.envs.base.BatchedEnv``);
* ``state``: ``HanabiState`` (the batch's tensors), ``HanabiStep`` / ``HanabiTransition`` (what a step returns),
  ``IllegalMoveError``;
* ``symmetry``: colour permutations as ``IndexSymmetry`` (plus ``permute_deck``);
* ``torchrl``: ``HanabiTorchRLEnv`` (imports torchrl; not re-exported here);
* ``hle``: the HLE reference adapter (``HLEGame``, ``HLEBatch``, ``replay``; tests and benchmarks).
"""

from ers_deep.envs.hanabi.config import PRESETS, HanabiConfig
from ers_deep.envs.hanabi.env import HanabiEnv
from ers_deep.envs.hanabi.state import HanabiState, HanabiStep, HanabiTransition, IllegalMoveError
from ers_deep.envs.hanabi.symmetry import colour_permutation, colour_permutations, permute_deck

__all__ = [
    "PRESETS",
    "HanabiConfig",
    "HanabiEnv",
    "HanabiState",
    "HanabiStep",
    "HanabiTransition",
    "IllegalMoveError",
    "colour_permutation",
    "colour_permutations",
    "permute_deck",
]
