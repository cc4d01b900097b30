"""Batched Overcooked V2 (torch), equal to JaxMARL's ``overcooked_v2`` step for step.

* ``layouts``: JaxMARL's layout strings, parsed (``OvercookedLayout``), static-object and item codes (numpy);
* ``dynamics``: the transition on cell indices and per-layout tables (moves, collisions, interactions,
  timers);
* ``obs``: the observation encoder (table look-ups) and ``channel_labels``;
* ``env``: ``OvercookedV2Env``, the batched game (follows ``ers_deep.envs.base.BatchedEnv``);
* ``symmetry``: the vertical flip as ``IndexSymmetry`` (plus ``apply_to_state``);
* ``torchrl``: ``OvercookedV2TorchRLEnv`` (imports torchrl; not re-exported here).
"""

from ers_deep.envs.overcooked_v2.env import (
    NUM_ACTIONS,
    OvercookedState,
    OvercookedStep,
    OvercookedTransition,
    OvercookedV2Env,
)
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS, OvercookedLayout, get_layout, parse_layout
from ers_deep.envs.overcooked_v2.symmetry import apply_to_state, find_vertical_symmetry

__all__ = [
    "LAYOUT_STRINGS",
    "NUM_ACTIONS",
    "OvercookedLayout",
    "OvercookedState",
    "OvercookedStep",
    "OvercookedTransition",
    "OvercookedV2Env",
    "apply_to_state",
    "find_vertical_symmetry",
    "get_layout",
    "parse_layout",
]
