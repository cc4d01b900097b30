"""``FastRollout``: k steps of env + actor as one fast call (one CUDA graph in the graph modes).

What a collector runs: per step the actor picks actions from the current observations, legal moves and
episode-start flags, the env steps with auto-reset, and the chosen fields are recorded; the carry
(observation, legal mask, episode-start flags, the actor's own state) and the env state live in static
buffers between calls, so consecutive calls continue one another exactly like consecutive eager steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ers_deep.accel.actors import Actor
from ers_deep.accel.capture import Mode, StaticState, capture, copy_into
from ers_deep.accel.step import Stepper
from ers_deep.envs.base import BatchedEnv, step_legal

#: recorded by default: the inputs of the actor (before the step), its action and extras, and every field
#: of the env's step output except the next observation and legal mask (which are the next step's inputs)
ALL = ("obs", "legal", "first", "action", "*extras", "*step")


class FastRollout:
    """``rollout()``: ``steps`` auto-resetting steps of ``env`` driven by ``actor``; returns ``{name: [k, ...]}``
    stacked over the k steps (see ``ALL``; ``record=()`` records nothing, the benchmarks' setting).

    Names: ``obs`` [k, B, P, *O], ``legal`` [k, B, P, A], ``first`` [k, B] (inputs of the actor at each step),
    ``action`` [k, B, P], the actor's extras, then the step output's fields (``reward``, ``done``, Hanabi's
    ``cur_player`` and ``score``, Overcooked's ``shaped_reward``...). ``carry`` holds the static inputs of
    the next call (``obs``, ``legal``, ``first`` and the actor's carry); it starts from ``env``'s current
    state with ``first`` True (write into it, e.g. ``carry["first"].fill_(False)``, to continue an episode).
    After ``env.reset()`` call ``restart()`` (graph modes notice a replaced state and restart by themselves).

    In graph modes the outputs are static tensors rewritten by the next call unless ``clone_outputs``.
    ``observe=False`` runs the state only: every ``obs`` is empty [B, P, 0] (an actor that needs none only)."""

    def __init__(
        self,
        env: BatchedEnv,
        actor: Actor,
        steps: int,
        mode: str = "auto",
        record: Sequence[str] = ALL,
        warmup: int = 2,
        clone_outputs: bool = False,
        observe: bool = True,
    ) -> None:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.env, self.actor, self.steps = env, actor, int(steps)
        self.stepper = Stepper(env, mode, observe)
        self.record, self.warmup, self.clone_outputs = tuple(record), warmup, clone_outputs
        self.carry: dict[str, Tensor] = self._fresh_carry()
        self.graph: torch.cuda.CUDAGraph | None = None

    def _fresh_carry(self) -> dict[str, Tensor]:
        env = self.env
        empty = torch.zeros(env.batch_size, env.num_agents, 0, device=env.device)
        return {
            "obs": env.observe() if self.stepper.observe else empty,
            "legal": env.legal_mask(),
            "first": torch.ones(env.batch_size, dtype=torch.bool, device=env.device),
            **self.actor.initial_carry(env),
        }

    def restart(self, **carry: Tensor) -> None:
        """Continue from the env's current state (after ``env.reset()``, or a state restored from a checkpoint):
        its observation and legal moves, ``first`` True and the actor's initial carry, except the entries given
        in ``carry`` (e.g. ``first`` and the ``hidden/...`` state of a resumed run); copied into the static buffers once
        captured."""
        if self.graph is not None and self.static.replaced():
            self.static.adopt()
        unknown = set(carry) - set(self.carry)
        if unknown:
            raise ValueError(f"restart: {sorted(unknown)} are not carried (carried: {sorted(self.carry)})")
        copy_into(self.carry, {**self._fresh_carry(), **carry})

    @property
    def mode(self) -> Mode:
        """The mode it runs in (after a fallback from a failed compilation: the uncompiled twin)."""
        return self.stepper.mode

    def _keep(self, name: str, group: str) -> bool:
        return name in self.record or group in self.record

    def body(self) -> dict[str, Tensor]:
        """The k steps (what the graph records): reads and rewrites the static carry and env state."""
        env, c = self.env, self.carry
        obs, legal, first = c["obs"], c["legal"], c["first"]
        actor_carry = {k: v for k, v in c.items() if k not in ("obs", "legal", "first")}
        rec: dict[str, list[Tensor]] = {}

        def keep(name: str, x: Tensor, group: str = "") -> None:
            if self._keep(name, group):
                rec.setdefault(name, []).append(x)

        with torch.no_grad():
            for _ in range(self.steps):
                actions, actor_carry, extras = self.actor(obs, legal, first, actor_carry)
                keep("obs", obs)
                keep("legal", legal)
                keep("first", first)
                keep("action", actions)
                for k, v in extras.items():
                    keep(k, v, "*extras")
                out = self.stepper(actions)
                for k, v in out._asdict().items():
                    if k not in ("obs", "legal"):
                        keep(k, v, "*step")
                obs, first, legal = out.obs, out.done, step_legal(env, out)
            stacked = {k: torch.stack(v) for k, v in rec.items()}  # before the carry is overwritten
            copy_into(c, {"obs": obs, "legal": legal, "first": first, **actor_carry})
            if self.stepper.captures:
                self.static.write_back()
        missing = [r for r in self.record if not r.startswith("*") and r not in rec]
        if missing:
            raise ValueError(f"record: {missing[0]!r} is neither an actor input, an extra nor a step field")
        return stacked

    def __call__(self) -> dict[str, Tensor]:
        if not self.stepper.captures:
            return self.body()
        if self.graph is None:
            self.static = StaticState(self.env)
            gens = [self.env.generator, *self.actor.generators]
            self.graph, self.out = capture(self.body, self._buffers, gens, self.warmup)
        elif self.static.replaced():  # the env was reset since the last call
            self.restart()
        self.graph.replay()
        return {k: v.clone() for k, v in self.out.items()} if self.clone_outputs else self.out

    def _buffers(self) -> dict[str, Any]:
        """Every static tensor the body reads and writes (state and carry), for the warm-up snapshot."""
        return {**{f"state.{k}": v for k, v in self.static.tensors.items()}, **self.carry}
