"""ers-deep: the deep half of ers (torch). It depends on ers-exact (never the reverse).

Layout (imports point down: ``envs`` < ``bench`` < ``cli``):

* ``envs/``: batched torch envs behind one protocol (``envs.base.BatchedEnv``), their Dec-POMDP symmetries
  as ``envs.symmetry.IndexSymmetry`` and one TorchRL wrapper base (``envs.torchrl_base``); ``envs.ENVS``
  registers them by name.

  * ``envs/hanabi/``: Hanabi equal to DeepMind's HLE step for step (``env``), its config and presets
    (``config``), colour-permutation symmetries (``symmetry``), TorchRL env (``torchrl``) and the HLE
    reference adapter (``hle``);
  * ``envs/overcooked_v2/``: Overcooked V2 equal to JaxMARL's ``overcooked_v2`` step for step (``env``, with
    ``layouts``, ``dynamics``, ``obs``), its vertical-flip symmetry (``symmetry``) and TorchRL env
    (``torchrl``).

* ``bench/``: env throughput against the references (``timing``, ``hanabi``, ``overcooked_v2``);
* ``cli``: the ``ers-deep`` command (``ers-deep env-bench``).
"""

__all__: list[str] = []
__version__ = "0.1.0"
