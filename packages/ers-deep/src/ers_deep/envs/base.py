"""The protocol every batched env of ers-deep follows, and the shared seeding rule.

An env is a batch of B games of one Dec-POMDP advanced together by tensor ops (on CPU or GPU). Shapes:
B games, P agents (``num_agents``), A actions per agent (``num_actions``), ``*O`` the per-agent observation
shape (``obs_shape``). Every env keeps its current batched state in ``env.state`` and its own
``torch.Generator`` (``env.generator``): every random draw of the env (deals, start positions, recipes) comes
from it.

Seeding rule (the same for every env):

* the constructor's ``seed`` seeds the env's generator (``None``: a fresh random seed from torch);
* ``reset(seed=None)`` continues the generator; ``reset(seed=s)`` re-seeds it with ``s`` first, so a reset
  with the same ``s`` reproduces the same episodes (for the same actions), whatever ran before;
* nothing else touches the generator's seed (TorchRL's ``set_seed`` goes through ``torch_rl_seed``).
"""

from __future__ import annotations

import numbers
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor


@runtime_checkable
class Step(Protocol):
    """What ``reset``/``step`` return (each env's own NamedTuple adds fields, e.g. Hanabi's ``legal``).

    After an auto-reset, ``obs`` describes the new episode while ``reward``/``done`` describe the step that
    ended the old one."""

    @property
    def obs(self) -> Tensor: ...  # [B, P, *O] observation of every agent

    @property
    def reward(self) -> Tensor: ...  # [B] float32 team reward of the step (zeros after a reset)

    @property
    def done(self) -> Tensor: ...  # [B] bool the step ended the episode


@runtime_checkable
class Transition(Protocol):
    """What the pure ``transition`` returns: the next state (never reset) and the step's outputs."""

    @property
    def state(self) -> Any: ...  # the next batched state (a new object; the input state is left unchanged)

    @property
    def reward(self) -> Tensor: ...  # [B] float32 team reward

    @property
    def done(self) -> Tensor: ...  # [B] bool the step ended the episode


@runtime_checkable
class BatchedEnv(Protocol):
    """A batch of B games stepped together (see the module docstring for the seeding rule).

    Constructors take ``batch_size``, ``device``, ``seed`` and ``auto_reset`` as keywords, plus the env's own
    configuration (Hanabi: ``config``; Overcooked V2: ``layout`` and JaxMARL's switches). Optional: an int
    ``min_episode_steps``, a lower bound on every episode's length (Overcooked V2, tabular games), with which
    the learner bounds the resets in a rollout and captures its recurrent update; a bool ``binary_obs``, True
    where every observation entry is 0 or 1 (Hanabi's canonical bits), with which the learner's MLP may embed
    them through int8 products (``ers_deep.nets.int8``)."""

    state: Any  # the current batched state (a dataclass of tensors with leading dim B)
    generator: torch.Generator  # the env's own source of randomness
    auto_reset: bool  # ``step`` restarts finished games

    @property
    def batch_size(self) -> int: ...  # B

    @property
    def device(self) -> torch.device: ...

    @property
    def num_agents(self) -> int: ...  # P

    @property
    def num_actions(self) -> int: ...  # A

    @property
    def obs_shape(self) -> tuple[int, ...]: ...  # O, the per-agent observation shape

    def reset(self, seed: int | None = None) -> Step:
        """Start every game anew (``seed``: see the seeding rule) and return the first observations.
        Env-specific keyword-only extras inject a start (Hanabi ``decks=``, Overcooked V2 ``state=``)."""
        ...

    def step(self, actions: Tensor) -> Step:
        """Apply ``actions`` [B, P] long (one per agent; a turn-based env plays the current player's) to every
        game; with ``auto_reset`` finished games restart inside the step."""
        ...

    def transition(self, state: Any, actions: Tensor) -> Transition:
        """The pure transition: the next state and the step's outputs, without any reset, leaving ``state``
        unchanged (and ``env.state`` too). Randomness inside a step still draws from ``env.generator``."""
        ...

    def observe(self, state: Any = None) -> Tensor:
        """[B, P, *O] observation of every agent of ``state`` (default: ``env.state``)."""
        ...

    def legal_mask(self, state: Any = None) -> Tensor:
        """[B, P, A] bool legal actions of every agent of ``state`` (default: ``env.state``)."""
        ...

    def reset_games(self, mask: Tensor) -> None:
        """Restart the games where ``mask`` [B] is True (in ``env.state``), drawing from ``env.generator``."""
        ...


def step_legal(env: BatchedEnv, out: Step) -> Tensor:
    """[B, P, A] bool legal actions after the step that returned ``out`` (for the next step): the output's own
    ``legal`` where it has one (Hanabi, tabular games), else ``env.legal_mask()`` (Overcooked V2, whose
    actions are always legal)."""
    legal = getattr(out, "legal", None)
    return env.legal_mask() if legal is None else legal


def real_number(value: Any, name: str, what: str = "a number") -> float:
    """A constructor's real-valued argument ``name`` (e.g. a discount gamma) as a float: ``TypeError`` naming it
    (``name must be WHAT``) unless ``value`` is a real number, not a bool or a string (``float('0.9')`` read
    one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, not {type(value).__name__} {value!r}")
    return float(value)


def whole_number(value: Any, name: str) -> int:
    """A constructor's count or size argument ``name`` as an int: ``TypeError`` naming it unless ``value`` is a
    real number (not a bool or a string: ``'2'`` failed later in a comparison), ``ValueError`` unless whole."""
    if not real_number(value, name, "a whole number").is_integer():
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return int(value)  # a numbers.Real, checked by real_number


def check_batch_size(batch_size: int) -> int:
    """B, the constructors' ``batch_size``, as an int; ``TypeError`` unless it is a number, ``ValueError``
    unless it is a whole number (``whole_number``) >= 1."""
    B = whole_number(batch_size, "batch_size")
    if B < 1:
        raise ValueError(f"batch_size must be a whole number of games >= 1, not {batch_size!r}")
    return B


def check_overrides(horizon: Any, discount: Any) -> tuple[int | None, float | None]:
    """A tabular env's overrides of H and gamma (None: the game's own) as an int and a float: ``TypeError``
    naming ``horizon`` unless it is a whole number (``whole_number``), naming ``discount`` unless it is a real
    number (``real_number``); their ranges are the game's to check."""
    H = None if horizon is None else whole_number(horizon, "horizon")
    return H, None if discount is None else real_number(discount, "discount")


def action_tensor(actions: Tensor, shapes: dict[str, tuple[int, ...]], device: torch.device) -> Tensor:
    """``actions`` as a long tensor on ``device``; ``ValueError`` naming the shapes a step takes (``shapes``:
    their names, e.g. ``{"[B, P]": (4, 2)}``) unless it has one of them (a wrong batch failed in a reshape or
    an index deep inside the step)."""
    a = torch.as_tensor(actions, device=device).long()
    if tuple(a.shape) not in shapes.values():
        want = " or ".join(f"{name} = {list(shape)}" for name, shape in shapes.items())
        raise ValueError(f"actions must have shape {want}, got {list(a.shape)}")
    return a


def batch_mask(mask: Tensor, batch_size: int, device: torch.device) -> Tensor:
    """``reset_games``' ``mask`` as a [B] bool tensor on ``device``; ``ValueError`` unless it has B entries."""
    m = torch.as_tensor(mask, device=device)
    if m.numel() != batch_size:
        raise ValueError(f"mask must have one entry per game ({batch_size}), got shape {tuple(m.shape)}")
    return m.reshape(batch_size).bool()


def make_generator(seed: int | None, device: torch.device) -> torch.Generator:
    """The env's generator on ``device``, seeded with ``seed`` (None: a non-deterministic seed of its own,
    ``Generator.seed()``; ``torch.seed()`` would also re-seed torch's global generator, undoing a caller's
    ``torch.manual_seed``)."""
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(seed))
    return generator


def reseed(generator: torch.Generator, seed: int | None) -> None:
    """``reset``'s rule: re-seed with ``seed`` when given, else keep the generator's stream."""
    if seed is not None:
        generator.manual_seed(int(seed))


def torch_rl_seed(generator: torch.Generator, seed: int | None) -> None:
    """TorchRL's ``set_seed``: re-seed with ``seed`` (None means 0, TorchRL's default)."""
    generator.manual_seed(int(seed) if seed is not None else 0)
