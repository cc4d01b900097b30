"""Inverse-CDF draws for the branch-free tabular step (``ers_deep.envs.tabular.env``): a table of cumulative
distributions built once from the game's arrays (b_0, T, U) and a draw k ~ p from a uniform u per game, by a
count of comparisons (no ``torch.multinomial``, no branch, no device sync)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["cumulative_table", "draw_from_cdf"]


def cumulative_table(p: np.ndarray, device: torch.device) -> Tensor:
    """The inverse-CDF table of the distributions ``p`` [..., n] (float64): F[..., k] = sum_{j <= k} p[..., j],
    +inf from each row's last positive entry on, so that ``draw_from_cdf`` never returns an outcome of
    probability 0 (a rounded row sum below a uniform would otherwise fall past the last one). Every row needs a
    positive entry (a ``Game``'s rows are distributions: checked when it is built); an all-zero row would draw
    its last outcome."""
    cdf = np.cumsum(np.asarray(p, dtype=np.float64), axis=-1)
    n = cdf.shape[-1]
    last = n - 1 - np.argmax(np.asarray(p)[..., ::-1] > 0, axis=-1)  # each row's last positive entry
    cdf[np.arange(n) >= last[..., None]] = np.inf
    return torch.as_tensor(cdf, device=device)


def draw_from_cdf(cdf: Tensor, u: Tensor) -> Tensor:
    """[B] long: the outcome k with F[k - 1] <= u < F[k] of each row of ``cdf`` [B, n] (``cumulative_table``)
    at the uniforms ``u`` [B] in [0, 1), i.e. a draw of k ~ p: a count of comparisons, no branch, no sync."""
    return (cdf <= u[:, None]).sum(-1)
