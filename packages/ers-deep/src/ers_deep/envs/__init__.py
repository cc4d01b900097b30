"""Batched environments (torch), their shared protocol and their reference adapters.

* ``base``: the ``BatchedEnv`` protocol every env follows (reset / step / pure transition / observe /
  legal_mask, one seeding rule) and the ``Step`` / ``Transition`` output protocols;
* ``symmetry``: ``IndexSymmetry``, a Dec-POMDP symmetry as index permutations of observations and actions;
* ``torchrl_base``: ``BatchedTorchRLEnv``, the TorchRL wrapper base (imports torchrl; not re-exported);
* ``hanabi/``, ``overcooked_v2/``, ``tabular/`` (every ers-exact game): one folder per env, files named by
  role (``env``, ``symmetry``, ``torchrl``, ...); none imports another.

``ENVS`` maps env names to constructors (``ENVS["hanabi"](batch_size=64, seed=0)``); ``make_env`` calls one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ers_deep.envs.base import BatchedEnv, Step, Transition, step_legal
from ers_deep.envs.hanabi import PRESETS, HanabiConfig, HanabiEnv, HanabiState, HanabiStep, IllegalMoveError
from ers_deep.envs.overcooked_v2 import (
    LAYOUT_STRINGS,
    OvercookedLayout,
    OvercookedState,
    OvercookedStep,
    OvercookedV2Env,
    get_layout,
    parse_layout,
)
from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.envs.tabular import TabularEnv, TabularState, TabularStep

ENVS: dict[str, Callable[..., BatchedEnv]] = {
    "hanabi": HanabiEnv,
    "overcooked-v2": OvercookedV2Env,
    "tabular": TabularEnv,
}


def make_env(name: str, **kwargs: Any) -> BatchedEnv:
    """The env registered as ``name`` built with ``kwargs`` (``batch_size``, ``device``, ``seed``,
    ``auto_reset`` and the env's own configuration)."""
    if name not in ENVS:
        raise ValueError(f"unknown env {name!r}; choose from {sorted(ENVS)}")
    return ENVS[name](**kwargs)


__all__ = [
    "ENVS",
    "LAYOUT_STRINGS",
    "PRESETS",
    "BatchedEnv",
    "HanabiConfig",
    "HanabiEnv",
    "HanabiState",
    "HanabiStep",
    "IllegalMoveError",
    "IndexSymmetry",
    "OvercookedLayout",
    "OvercookedState",
    "OvercookedStep",
    "OvercookedV2Env",
    "Step",
    "TabularEnv",
    "TabularState",
    "TabularStep",
    "Transition",
    "get_layout",
    "make_env",
    "parse_layout",
    "step_legal",
]
