"""Batched environments (torch) and their reference adapters."""

from ers_deep.envs.hanabi import HanabiEnv, HanabiState, HanabiStep, IllegalMoveError
from ers_deep.envs.hanabi_config import PRESETS, HanabiConfig
from ers_deep.envs.overcooked_v2 import OvercookedState, OvercookedStep, OvercookedV2Env
from ers_deep.envs.overcooked_v2_layouts import LAYOUT_STRINGS, OvercookedLayout, get_layout, parse_layout

__all__ = ["LAYOUT_STRINGS", "PRESETS", "HanabiConfig", "HanabiEnv", "HanabiState", "HanabiStep",
           "IllegalMoveError", "OvercookedLayout", "OvercookedState", "OvercookedStep", "OvercookedV2Env",
           "get_layout", "parse_layout"]
