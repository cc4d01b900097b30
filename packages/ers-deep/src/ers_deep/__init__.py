"""ers-deep: the deep half of ers (torch, torchrl). It depends on ers-exact (never the reverse) and writes its
results in ers-exact's torch-free interface (:mod:`ers_exact.interface`: ``DiscoveryResult``, ``ZSCReport``),
so exact and deep discovery can be compared on the same tabular game.

Layers, lowest first (imports point down only; ``tests/test_architecture.py`` checks it):

* ``envs``: batched torch envs behind one protocol (``envs.base.BatchedEnv``): ``HanabiEnv`` (DeepMind's HLE
  step for step), ``OvercookedV2Env`` (JaxMARL's ``overcooked_v2``), ``TabularEnv`` (every ers-exact game);
  their Dec-POMDP symmetries as ``envs.symmetry.IndexSymmetry``; TorchRL envs; ``ENVS`` names them;
* ``nets``: the actor-critic networks (``NetConfig``, ``build_net``), phi_O maps and the other-play net;
* ``accel``: compiled and CUDA-graph-captured env steps and rollouts (``FastStep``, ``FastRollout``);
* ``train``: IPPO self-play (``TrainConfig``, ``paper_config``, ``train``, ``resume``; the learner for S seeds
  at once, one collection path);
* ``policies``, ``pools``: frozen single-seed policies and pools of them (the deep Pi': ``train_pool``,
  ``load_pool``), ``ray_cluster``: the Ray connection of ``train_pool_ray`` (one task per seed);
* ``crossplay``: cross-play matrices XP(pi_i, pi_j), the symmetriser and ``population_report`` (a
  ``ZSCReport`` row);
* ``discovery``: learned ER symmetries, the paper's Algorithms 1-3 (``DeepDiscoveryConfig``, ``discover``:
  a ``DiscoveryResult``);
* ``other_play``: other-play training with Phi = none, Phi_MDP or a learned set;
* ``seed_layout``: the bounds of the population runs' seed layout (no imports: ``zsc`` and ``cli`` check them);
* ``zsc``: the population protocol (``PopulationConfig``, ``run_table1``: a ``ZSCReport``, ``run_table2``);
* ``analysis``: action matrices, OP-optimality preservation, cross-play distributions, learning curves;
* ``bench``: env and learner throughput against the references;
* ``cli``: the ``ers-deep`` command.

Walkthrough with examples: ``packages/ers-deep/README.md``; the shared names: the root README ("Names across
the packages").
"""

__all__: list[str] = []
__version__ = "0.1.0"
