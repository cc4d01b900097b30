"""Batched environments (torch) and their reference adapters."""

from ers_deep.envs.hanabi import HanabiEnv, HanabiState, HanabiStep, IllegalMoveError
from ers_deep.envs.hanabi_config import PRESETS, HanabiConfig

__all__ = ["PRESETS", "HanabiConfig", "HanabiEnv", "HanabiState", "HanabiStep", "IllegalMoveError"]
