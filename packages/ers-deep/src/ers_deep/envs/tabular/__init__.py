"""Every ers-exact game as a batched torch env (``env``) and its TorchRL env (``torchrl``, not exported)."""

from ers_deep.envs.tabular.env import TabularEnv, TabularState, TabularStep, TabularTransition

__all__ = ["TabularEnv", "TabularState", "TabularStep", "TabularTransition"]
