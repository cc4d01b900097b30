"""Benchmarks of ers-deep (``ers-deep env-bench``, ``benchmarks/``): env throughput and the learner's.

* ``timing``: the shared timing / profiling loop and the JaxMARL helpers;
* ``hanabi``: batched Hanabi against HLE and JaxMARL;
* ``overcooked_v2``: batched Overcooked V2 against JaxMARL;
* ``train``: the learner's env-steps/s against the baseline and the JAX anchors; ``minibatch_noise``: the PPO
  update's minibatch gradient noise under whole games, turn streams and actors;
* ``jax_update``: one ers update against the JAX anchor's, in float32 and float64, on the same data;
* ``learn_pair``: two learners' curves, several runs a side (mean, standard error, Welch's t per mark);
* ``train_table``: the markdown of issue 21's device table (``scripts/gpu_train_table.py``).

``ENV_BENCHES`` maps env names (those of ``ers_deep.envs.ENVS``) to their ``env_bench`` functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ers_deep.bench import hanabi, overcooked_v2

ENV_BENCHES: dict[str, Callable[..., dict[str, Any]]] = {
    "hanabi": hanabi.env_bench,
    "overcooked-v2": overcooked_v2.env_bench,
}

__all__ = ["ENV_BENCHES"]
