"""The 1x1 convolutions of the Overcooked V2 net on each *distinct* cell only, for the CPU update.

The three leading layers map every grid cell's channel vector on its own, h = f(o_cell) (38 -> 128 -> 128 -> 8
channels, ReLUs), and a minibatch repeats a handful of cell vectors over and over: walls, counters, empty floor,
the pot in its few states. Measured on ``grounded_coord_simple`` (paper observation, a rollout of 64 envs x 256
steps): 35-45 distinct cells among the 51,200 of a minibatch of 8 actors x 256 steps. So the stack runs on the
U distinct rows and its output is gathered back, y[r] = f(o_u(r)): the same function of every row (each row's
output depends on that row alone), its gradient w.r.t. the weights the sum over rows regrouped by cell (the
gather's backward adds each row's gradient into its cell's, then the layers' backward runs on U rows). Float
rounding aside (the products run over U rows instead of 2,048-row chunks, ~1e-6), the numbers are those of
:func:`~ers_deep.nets.pointwise.pointwise_stack`, which stays the path where this one does not apply:

* the observation is not of an integer dtype (a learned transformation's output, say), or needs its own
  gradient (the gather would hand it to one row per cell only);
* fewer than four rows per distinct cell: the dedup would not pay;
* entries that ``distinct_rows`` cannot pack (negative, or too wide for the 62-bit words).

Distinct rows are found exactly (:func:`distinct_rows`): each row's entries, non-negative integers of b bits,
packed into int64 words, the words folded into one dense id per distinct row by 1-D ``torch.unique`` calls (a
sort each), ~19 ms for the 51,200 x 38 rows of a minibatch against ~220 ms for the stack on all of them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ers_deep.nets.pointwise import CHUNK, pointwise_stack

#: the dedup is used when the rows are at least this many times the distinct ones
MIN_REPEATS = 4
_WORD_BITS = 62  # bits per packed int64 word (no sign bit, room for the shifts)


def distinct_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """(first [U], inverse [R]) for x [R, C] of non-negative integers: ``first[u]`` the index of one row of the
    u-th distinct row, ``inverse[r]`` the distinct row of row r, so ``x[first][inverse]`` equals x and the
    rows of ``x[first]`` are pairwise different. Exact for any integer dtype; ValueError for entries that do
    not pack: negative ones, and wider ones than a 62-bit word holds (beside the row ids, for C > 1)."""
    if x.dim() != 2 or x.is_floating_point() or x.is_complex():
        raise ValueError(f"distinct_rows needs an integer tensor [R, C]; got {x.dtype} {tuple(x.shape)}")
    R, C = x.shape
    if R == 0:
        return x.new_zeros(0, dtype=torch.long), x.new_zeros(0, dtype=torch.long)
    if C and int(x.min()) < 0:
        raise ValueError("distinct_rows needs non-negative entries")
    bits = max(int(x.max()).bit_length(), 1) if C else 1
    if bits > _WORD_BITS:
        raise ValueError(f"distinct_rows: entries of {bits} bits do not fit a {_WORD_BITS}-bit word")
    ids: Tensor | None = None  # dense ids of the distinct rows over the columns packed so far
    lo = 0
    while lo < C or ids is None:
        room = _WORD_BITS if ids is None else _WORD_BITS - max(R.bit_length(), 1)
        cols = min(room // bits, C - lo)
        if cols <= 0 and lo < C:
            raise ValueError(f"distinct_rows: entries of {bits} bits do not pack beside {R} row ids")
        word = _pack(x[:, lo : lo + cols], bits)
        key = word if ids is None else (ids << (bits * cols)) | word
        ids = torch.unique(key, return_inverse=True)[1]
        lo += cols
    first = torch.full((int(ids.max()) + 1,), R, dtype=torch.long, device=x.device)
    first.scatter_reduce_(0, ids, torch.arange(R, device=x.device), reduce="amin")
    return first, ids


def _pack(cols: Tensor, bits: int) -> Tensor:
    """[R] int64: column j of ``cols`` [R, k] in bits j b .. (j + 1) b - 1 (k b <= 62)."""
    shifts = torch.arange(cols.shape[1], device=cols.device, dtype=torch.long) * bits
    return (cols.long() << shifts).sum(1)


@torch.compiler.disable  # data-dependent sizes: eager between the compiled parts of a compiled update
def pointwise_distinct(
    cells: Tensor, params: list[tuple[Tensor, Tensor]], chunk: int = CHUNK, dtype: torch.dtype = torch.float32
) -> Tensor:
    """relu(... relu(o W_1 + b_1) ... W_L + b_L) for every row o of ``cells`` [S, M, C] (the observation's
    cells as stored, integers) and ``params`` [(W_l [S, C_{l-1}, C_l], b_l [S, 1, C_l])], run on the distinct
    rows (over all seeds) and gathered back; [S, M, C_L] of ``dtype``. Falls back to ``pointwise_stack`` over
    the rows as ``dtype`` where the dedup does not apply (module docstring)."""
    if cells.dim() != 3 or not params:
        shape = tuple(cells.shape)
        raise ValueError(f"pointwise_distinct needs cells [S, M, C] and at least one layer; got {shape}")
    S, M, C = cells.shape
    if cells.is_floating_point() or M == 0:  # integer tensors never need a gradient
        return pointwise_stack(cells.to(dtype), params, chunk)
    try:
        first, inverse = distinct_rows(cells.reshape(S * M, C))
    except ValueError:  # entries that do not pack (negative, or too wide): the rows as they are
        return pointwise_stack(cells.to(dtype), params, chunk)
    U = first.shape[0]
    if U * MIN_REPEATS > S * M:
        return pointwise_stack(cells.to(dtype), params, chunk)
    h = cells.reshape(S * M, C)[first].to(dtype).expand(S, U, C)  # every seed's layers on all distinct rows
    for w, b in params:
        h = torch.baddbmm(b, h, w).relu_()
    index = inverse.view(S, M, 1).expand(S, M, h.shape[-1])
    return h.gather(1, index)
