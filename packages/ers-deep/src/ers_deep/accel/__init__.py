"""Fast paths of the batched envs: compiled steps and CUDA-graph-captured steps and rollouts.

The eager ``env.step`` stays the reference; everything here runs the env's branch-free ``step_state`` (no
device sync, no data-dependent branch, randomness from ``env.draw_noise()``) in one of four modes:

* ``"eager"``: ``draw_noise`` + ``step_state`` op by op (what ``env.step`` runs when ``branch_free``);
* ``"compile"``: ``step_state`` through ``torch.compile(fullgraph=True)`` (the noise is drawn eagerly:
  torch's tracer cannot follow a ``torch.Generator``); the CPU fast path at small batches;
* ``"graph"``: ``draw_noise`` + ``step_state`` (+ an actor) recorded once as a CUDA graph and replayed;
  the env's and the actor's generators are registered with the graph, so every replay draws fresh numbers,
  the same numbers the eager path draws from the same generator states;
* ``"compile-graph"``: the compiled ``step_state`` (fused kernels) captured in the CUDA graph.

``"auto"`` (``capture.resolve_mode``): ``"compile-graph"`` on CUDA, ``"compile"`` on CPU at the small batches
where it measured faster, else ``"eager"``; a compiled mode chosen by ``"auto"`` falls back to its uncompiled
twin, with a warning, when compilation fails.

Modules: ``capture`` (static buffers, warm-up, capture, mode choice), ``actors`` (action sources: uniform
random legal actions for the benchmarks, a policy network for collectors), ``step`` (``FastStep``: the env
step with given actions), ``rollout`` (``FastRollout``: k steps of env + actor as one graph, stacked).
"""

from __future__ import annotations

from ers_deep.accel.actors import Actor, PolicyActor, RandomLegal, actors_to_game, game_to_actors
from ers_deep.accel.capture import MODES, Mode, resolve_mode
from ers_deep.accel.rollout import FastRollout
from ers_deep.accel.step import FastStep

__all__ = [
    "MODES",
    "Actor",
    "FastRollout",
    "FastStep",
    "Mode",
    "PolicyActor",
    "RandomLegal",
    "actors_to_game",
    "game_to_actors",
    "resolve_mode",
]
