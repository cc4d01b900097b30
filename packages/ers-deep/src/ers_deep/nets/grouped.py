"""Row i of a batch through candidate g_i of a stacked ``ObsMap``, without a host synchronisation (other-play
with learned symmetries: every actor plays through its own phi_O, drawn per episode).

Selecting each candidate's rows (``x[g == k]``) has a data-dependent size, so it synchronises with the host and
can be neither compiled whole nor captured in a CUDA graph. Running every candidate on every row has static
shapes but costs K times the work. Here the rows are sorted by candidate into blocks of b rows, each candidate's
rows padded to a whole number of blocks (the grouped products of mixture-of-experts layers):

    c_k = #{i : g_i = k},  p_k = b ceil(c_k / b),  row i (the r-th of its candidate) goes to
    sum_{k < g_i} p_k + r,  block j holds candidate k_j (the k with sum_{k' < k} p_k' <= j b < sum_{k' <= k} p_k'),

and every layer is one batched product of the NB = ceil(M / b) + K blocks [NB, b, n] with their candidates'
weights gathered [NB, n, n]. NB bounds the blocks whatever the c_k (sum_k ceil(c_k / b) <= M / b + K), so
every shape is static. Work: NB b rows (about M + K b) and NB weight copies; :func:`block_rows` picks b =
ceil(M / (2 K)), at most ~1.5 M rows and 3 K + 1 weight copies. Equal to the selected rows' products up to
float rounding (``tests/deep/nets/test_grouped.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from ers_deep.nets.phi import ObsMap

__all__ = ["Blocks", "StackedMaps", "block_rows", "grouped_obs_map", "sort_into_blocks", "stack_maps"]


class Blocks(NamedTuple):
    """Where M rows go: ``dest`` [M] each row's position in the padded buffer of ``NB * b`` rows,
    ``candidate`` [NB] each block's candidate (blocks past the last candidate's: K - 1, their rows unused)."""

    dest: Tensor
    candidate: Tensor
    block: int


def block_rows(rows: int, candidates: int) -> int:
    """b = ceil(M / (2 K)) (at least 1): padding <= K b ~ M / 2 rows, NB <= 3 K + 1 blocks."""
    return max(1, math.ceil(rows / (2 * candidates)))


def sort_into_blocks(group: Tensor, candidates: int, block: int | None = None) -> Blocks:
    """The blocks of rows with candidates ``group`` [M] (long, in 0..K-1), K = ``candidates`` (module
    docstring). Sync-free: counts by ``scatter_add`` (``bincount`` sizes its output on the host on CUDA)."""
    M, K = group.numel(), candidates
    b = block_rows(M, K) if block is None else int(block)
    nb = -(-M // b) + K
    count = torch.zeros(K, dtype=torch.long, device=group.device).scatter_add_(
        0, group, torch.ones_like(group)
    )
    padded = (count + (b - 1)) // b * b
    end, pend = count.cumsum(0), padded.cumsum(0)
    order = torch.argsort(group, stable=True)
    g = group[order]
    rank = torch.arange(M, device=group.device) - (end - count)[g]  # r: the row's place among its candidate's
    dest = torch.empty_like(order).index_copy_(0, order, (pend - padded)[g] + rank)
    starts = torch.arange(nb, device=group.device) * b
    candidate = torch.searchsorted(pend, starts, right=True).clamp_(max=K - 1)
    return Blocks(dest, candidate, b)


class StackedMaps(NamedTuple):
    """K single-candidate ``ObsMap`` s as tensors (no parameters: frozen): ``weights`` per layer [K, n, n],
    ``biases`` per layer [K, 1, n] and whether the last layer has a ReLU."""

    weights: tuple[Tensor, ...]
    biases: tuple[Tensor, ...]
    relu_output: bool


def stack_maps(maps: Sequence[ObsMap]) -> StackedMaps | None:
    """``maps`` (each one candidate) stacked, detached; None where they differ in size, depth or output ReLU."""
    first = maps[0]
    shape = (len(first.weights), first.size, first.relu_output)
    if any(m.candidates != 1 or (len(m.weights), m.size, m.relu_output) != shape for m in maps):
        return None
    weights = tuple(torch.cat([m.weights[k].detach() for m in maps]) for k in range(shape[0]))
    biases = tuple(torch.cat([m.biases[k].detach() for m in maps]) for k in range(shape[0]))
    return StackedMaps(weights, biases, first.relu_output)


def grouped_obs_map(maps: StackedMaps, x: Tensor, group: Tensor, block: int | None = None) -> Tensor:
    """phi_O of candidate ``group[i]`` on row i: x [M, n] (float), group [M] (long, 0..K-1, K candidates of
    ``maps``) -> [M, n], as each candidate's ``ObsMap`` on its rows (up to float rounding), with static shapes
    and no host sync (module docstring)."""
    n = x.shape[1]
    blocks = sort_into_blocks(group, maps.weights[0].shape[0], block)
    nb, b = blocks.candidate.numel(), blocks.block
    y = x.new_zeros(nb * b, n).index_copy_(0, blocks.dest, x).view(nb, b, n)
    last = len(maps.weights) - 1
    for k, (w, bias) in enumerate(zip(maps.weights, maps.biases)):
        y = torch.baddbmm(bias[blocks.candidate], y, w[blocks.candidate])
        if k < last or maps.relu_output:
            y = torch.relu(y)
    return y.view(nb * b, n)[blocks.dest]
