"""The one action sampler of ers-deep: every learner, evaluator, discovery and other-play run draws through it.

``sample(logits, mask, generator)`` draws a ~ softmax(masked logits) by the Gumbel-max trick,
a = argmax_a (l_a - log(-log u_a)) with u_a ~ U(0, 1) from ``generator``: the same law as a multinomial draw
of the softmax, but elementwise plus one argmax, so it runs inside compiled regions and CUDA graphs with no
host sync (``torch.multinomial`` synchronises on CUDA). One uniform per action per row is drawn, so the
generator advances by ``logits.numel()`` numbers whatever the mask: two runs of the same seed draw the same
actions, captured or not.
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


def gumbel_argmax(logits: Tensor, generator: torch.Generator | None) -> Tensor:
    """[...] argmax of ``logits`` [..., A] plus standard Gumbel noise drawn from ``generator``."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device).clamp_min(1e-20)
    return (logits - (-u.log()).log()).argmax(-1)


def sample(logits: Tensor, mask: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """(action [...] long, log pi(action) [...]) for ``logits`` [..., A] under the legal ``mask`` [..., A]
    (use ``policy_mask`` for agents that may have no legal move)."""
    masked = masked_logits(logits, mask)
    action = gumbel_argmax(masked, generator)
    logp = torch.log_softmax(masked, -1).gather(-1, action[..., None])[..., 0]
    return action, logp
