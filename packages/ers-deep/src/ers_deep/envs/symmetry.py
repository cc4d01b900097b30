"""Dec-POMDP symmetries of a batched env as index permutations of observations and actions.

One transformation phi = (phi_O, phi_A) of an env that maps every game onto an equally valid game, written as
index maps (gathers) that act the same on every agent (the paper's Table 1: phi_O as ``obs_index``, phi_A as
``action_map``):

    obs of the mapped game    = obs.flatten(-k)[..., obs_index]        (k = len(obs_shape), per agent)
    legal of the mapped game  = legal[..., action_index]                (also logits, probabilities)
    action a of the original  = action action_map[a] of the mapped game (action_map = inverse of action_index)

Both envs build their symmetries as ``IndexSymmetry``: Hanabi's colour permutations
(``ers_deep.envs.hanabi.symmetry``) and Overcooked V2's vertical flip
(``ers_deep.envs.overcooked_v2.symmetry``). ``label_perm`` records the label permutation the symmetry was
built from (Hanabi: colour c -> label_perm[c]; Overcooked V2: ingredient i -> label_perm[i]); env-specific
extras (permuting a deal, mapping a state) read it. ``relabel_index`` turns a labelled vector layout and a
relabelling into a gather index: the one way both envs derive their maps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor


class Symmetry(Protocol):
    """Anything that acts on a policy as phi(pi)(a | o) = pi(action_map[a] | apply_obs(o)): an
    ``IndexSymmetry`` here, a learned one (``ers_deep.discovery.LearnedSymmetry``), or a composition."""

    @property
    def name(self) -> str: ...

    @property
    def action_map(self) -> Tensor: ...

    def apply_obs(self, obs: Tensor) -> Tensor: ...


def _long(x: Tensor | np.ndarray | Sequence[int], device: torch.device | str | None = None) -> Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, Tensor) else x, dtype=torch.long, device=device)


def _is_permutation(index: Tensor) -> bool:
    return bool(torch.equal(index.sort().values, torch.arange(index.numel(), device=index.device)))


@dataclass(frozen=True, eq=False)
class IndexSymmetry:
    """One symmetry as index permutations (tensors on one device; see the module docstring for the gathers).

    Args:
        obs_index: [N] long, N = prod(obs_shape): the flattened per-agent observation of the mapped game is
            ``obs.flatten()[obs_index]``.
        action_index: [A] long: the legal mask (or logits) of the mapped game is ``legal[..., action_index]``.
        name: a readable name (``"colours(1, 0, 2, 3, 4)"``, ``"vertical-flip(1, 0, 2)"``).
        obs_shape: the per-agent observation shape (``(O,)`` for Hanabi, ``(V, V, C)`` for Overcooked V2).
        label_perm: the label permutation it was built from (identity when none).
    """

    obs_index: Tensor
    action_index: Tensor
    name: str
    obs_shape: tuple[int, ...]
    label_perm: tuple[int, ...] = ()
    action_map: Tensor = field(init=False)  # [A] long: action a of the original game -> action of the mapped

    def __post_init__(self) -> None:
        obs_index = _long(self.obs_index)
        action_index = _long(self.action_index, obs_index.device)
        if obs_index.numel() != math.prod(self.obs_shape) or not _is_permutation(obs_index):
            n = math.prod(self.obs_shape)
            raise ValueError(f"obs_index is not a permutation of the {n} observation entries")
        if not _is_permutation(action_index):
            raise ValueError("action_index is not a permutation of the actions")
        if sorted(self.label_perm) != list(range(len(self.label_perm))):
            raise ValueError(f"label_perm {self.label_perm} is not a permutation")
        object.__setattr__(self, "obs_index", obs_index)
        object.__setattr__(self, "action_index", action_index)
        object.__setattr__(self, "obs_shape", tuple(int(s) for s in self.obs_shape))
        object.__setattr__(self, "label_perm", tuple(int(c) for c in self.label_perm))
        object.__setattr__(self, "action_map", torch.argsort(action_index))

    @property
    def device(self) -> torch.device:
        return self.obs_index.device

    # ---- acting on tensors ---------------------------------------------------------------------------------
    def apply_obs(self, obs: Tensor) -> Tensor:
        """[..., *obs_shape] observations of the mapped game (any leading dims, e.g. [B, P])."""
        k = len(self.obs_shape)
        flat = obs.reshape(*obs.shape[: obs.ndim - k], -1)
        return flat.index_select(-1, self.obs_index.to(obs.device)).view(obs.shape)

    def apply_actions(self, actions: Tensor) -> Tensor:
        """Long actions (any shape) of the original game -> the same actions in the mapped game."""
        return self.action_map.to(actions.device)[actions]

    def apply_legal(self, mask: Tensor) -> Tensor:
        """[..., A] legal mask (or logits, probabilities) of the original game -> that of the mapped game."""
        return mask.index_select(-1, self.action_index.to(mask.device))

    # ---- the group -----------------------------------------------------------------------------------------
    def compose(self, other: IndexSymmetry) -> IndexSymmetry:
        """First ``self``, then ``other``:
        ``self.compose(other).apply_obs(o) == other.apply_obs(self.apply_obs(o))`` (the same for actions and
        legal masks)."""
        if self.obs_shape != other.obs_shape or len(self.label_perm) != len(other.label_perm):
            raise ValueError(f"cannot compose symmetries of different envs ({self.name}, {other.name})")
        other = other.to(self.device)
        return IndexSymmetry(
            self.obs_index[other.obs_index],
            self.action_index[other.action_index],
            f"{self.name} then {other.name}",
            self.obs_shape,
            tuple(other.label_perm[c] for c in self.label_perm),
        )

    def inverse(self) -> IndexSymmetry:
        """The symmetry that undoes this one: ``self.compose(self.inverse())`` is the identity."""
        label_perm = tuple(int(c) for c in np.argsort(self.label_perm))
        return IndexSymmetry(
            torch.argsort(self.obs_index), self.action_map, f"({self.name})^-1", self.obs_shape, label_perm
        )

    def is_identity(self) -> bool:
        """Whether every map is the identity."""

        def fixed(index: Tensor) -> bool:
            return bool(torch.equal(index, torch.arange(index.numel(), device=index.device)))

        return (
            fixed(self.obs_index)
            and fixed(self.action_index)
            and self.label_perm == tuple(range(len(self.label_perm)))
        )

    def to(self, device: torch.device | str) -> IndexSymmetry:
        """The same symmetry with its index tensors on ``device``."""
        if torch.device(device) == self.device:
            return self
        return IndexSymmetry(
            self.obs_index.to(device),
            self.action_index.to(device),
            self.name,
            self.obs_shape,
            self.label_perm,
        )

    def __repr__(self) -> str:
        return f"IndexSymmetry({self.name!r}, obs_shape={self.obs_shape}, actions={len(self.action_index)})"


def relabel_index(labels: Sequence[Hashable], relabel: Callable[[Any], Hashable]) -> np.ndarray:
    """[N] gather index of a relabelling: ``labels`` names every position of a vector and ``relabel`` (a
    callable label -> label) renames it. The result ``index`` satisfies ``mapped[j] = original[index[j]]``:
    the feature at position i of the original lands at the position of ``relabel(labels[i])``."""
    position = {lab: i for i, lab in enumerate(labels)}
    if len(position) != len(labels):
        raise ValueError("labels are not unique")
    try:
        forward = np.array([position[relabel(lab)] for lab in labels], dtype=np.int64)
    except KeyError as e:
        raise ValueError(f"the relabelling leaves the labelled vector: {e.args[0]!r}") from None
    return np.argsort(forward)


def stack_symmetries(symmetries: Sequence[IndexSymmetry]) -> dict[str, Tensor]:
    """Stacked maps of G symmetries for batched gathers: ``obs_index`` [G, N], ``action_index`` [G, A],
    ``action_map`` [G, A]."""
    return {
        name: torch.stack([getattr(s, name) for s in symmetries])
        for name in ("obs_index", "action_index", "action_map")
    }
