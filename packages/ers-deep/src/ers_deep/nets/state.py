"""The state a network carries for every actor from one step to the next, in named fields.

    forward(obs [S, T, N, *O], first [S, T, N] bool, state: NetState) -> (logits, value, state: NetState)

Every field is a tensor [S, N, ...] (S seed stacks, N actors) or None where the net has no such part:

* ``gru`` [S, N, H] float: the GRU state h_t of the CNN + GRU net (set to zero before a step that starts an
  episode, inside the net);
* ``actor`` [S, N] long: the actor's index n, and ``episode`` [S, N] long: the episodes it has started (the
  keys of other-play's per-episode draw of phi and of discovery's per-episode draws, ``nets.other_play``).

Feed-forward nets carry ``NetState()`` (no tensor). A net's ``initial_state(n, device)`` is its state at the
start of the first episode. Everything that stores, moves or slices a state (the collections, the PPO
update's minibatches, checkpoints) does it through the helpers here, by name, never by position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["NetState"]


class NetState(NamedTuple):
    """A network's per-actor state (see the module docstring); immutable, a pytree of its tensors."""

    gru: Tensor | None = None  # [S, N, H] float
    actor: Tensor | None = None  # [S, N] long
    episode: Tensor | None = None  # [S, N] long

    def tensors(self, prefix: str = "") -> dict[str, Tensor]:
        """The fields that hold a tensor, by name (``prefix`` + name): for checkpoints and static buffers."""
        return {prefix + k: v for k, v in self._asdict().items() if v is not None}

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, Tensor], prefix: str = "") -> NetState:
        """The inverse of ``tensors``: the entries ``prefix`` + field of ``tensors`` (other keys ignored)."""
        return cls(**{k: tensors[prefix + k] for k in cls._fields if prefix + k in tensors})

    def map(self, fn: Callable[[Tensor], Tensor]) -> NetState:
        """``fn`` applied to every tensor (None fields stay None)."""
        return NetState(*(None if v is None else fn(v) for v in self))

    def select(self, idx: Tensor) -> NetState:
        """The actors ``idx`` (indices along N) of every field."""
        return self.map(lambda v: v[:, idx])

    def clone(self) -> NetState:
        return self.map(torch.clone)

    def to(self, device: torch.device | str) -> NetState:
        return self.map(lambda v: v.to(device))

    def is_(self, other: NetState) -> bool:
        """Whether both hold the very same tensor objects (not copies) in the same fields."""
        return all((a is None and b is None) or (a is not None and a is b) for a, b in zip(self, other))
