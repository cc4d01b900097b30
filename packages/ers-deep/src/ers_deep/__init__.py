"""ers-deep: the deep half of ers (torch).

Now: a batched torch Hanabi equal to DeepMind's HLE step for step (``ers_deep.envs.hanabi``), its HLE reference
adapter (``ers_deep.envs.hle``), colour-permutation symmetries (``ers_deep.envs.hanabi_symmetry``), a TorchRL env
(``ers_deep.envs.torchrl_env``); a batched torch Overcooked V2 equal to JaxMARL's ``overcooked_v2`` step for step
(``ers_deep.envs.overcooked_v2``, its TorchRL env and its Dec-POMDP symmetry); and ``ers-deep env-bench``. It
depends on ers-exact (never the reverse).
"""

__all__: list[str] = []
__version__ = "0.1.0"
