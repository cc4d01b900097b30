"""The one action sampler of ers-deep: every learner, evaluator, discovery and other-play run draws through it.

``sample(logits, mask, generator)`` draws a ~ softmax(masked logits) by inverting the cumulative distribution:
one uniform u per row from ``generator``, a = the first action whose cumulative probability exceeds
u * (total), the law of ``torch.multinomial`` with its consumption of one number per row, but as elementwise
ops, a cumulative sum and a count, so it runs inside compiled regions and CUDA graphs with no host sync
(``torch.multinomial`` synchronises on CUDA). The generator advances by the number of rows whatever the
mask, so two runs of the same seed draw the same actions, captured or not.

Gumbel-max (argmax of logits + Gumbel noise, one uniform per action) draws the same law and was the first
choice; but with it the deep discovery of three-lever's symmetries (``tests/deep/analysis``) stopped short of
the lever permutations in 4 of 4 runs (seeds 0 and 1, 150k and 400k steps; distance to the nearest
permutation ~0.62), where this sampler (2 of 2 seeds; 1 partly) and ``torch.multinomial`` (3 of 4) converged
to within 0.02. The per-step law was checked equal (1e5 draws); the cause is not known.
"""

from __future__ import annotations

import torch
from torch import Tensor

ILLEGAL_LOGIT = -1e10


def masked_logits(logits: Tensor, legal: Tensor) -> Tensor:
    """Logits with illegal actions pushed to -1e10 (the official code's ``logits - (1 - avail) * 1e10``)."""
    return logits.masked_fill(~legal, ILLEGAL_LOGIT)


def policy_mask(legal: Tensor) -> Tensor:
    """The mask a policy samples under: ``legal`` [..., A], with every action allowed for an agent that has
    none (Hanabi's waiting player, whose move the env ignores)."""
    return legal | ~legal.any(-1, keepdim=True)


def inverse_cdf(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """[...] one draw per row of ``probs`` [..., A] (non-negative, rows need not sum to exactly 1): the first
    index whose cumulative sum exceeds u * (row total), u ~ U[0, 1) from ``generator``. An action of
    probability 0 is never drawn."""
    c = probs.cumsum(-1)
    u = torch.rand(c.shape[:-1] + (1,), generator=generator, device=c.device, dtype=c.dtype) * c[..., -1:]
    return (c <= u).sum(-1).clamp(max=c.shape[-1] - 1)


def sample(logits: Tensor, mask: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """(action [...] long, log pi(action) [...]) for ``logits`` [..., A] under the legal ``mask`` [..., A]
    (use ``policy_mask`` for agents that may have no legal move)."""
    logp_all = torch.log_softmax(masked_logits(logits, mask), -1)
    action = inverse_cdf(logp_all.exp(), generator)
    return action, logp_all.gather(-1, action[..., None])[..., 0]
