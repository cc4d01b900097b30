"""Running an :class:`~ers_deep.nets.layers.SGRUCell` over a sequence with episode resets.

Shapes: x [S, T, N, in] (S seeds, T time steps, N actors), first [S, T, N] bool (True: the state is reset
to zero *before* step t), h0 [S, N, H]; both functions return all states [S, T, N, H] and the last [S, N, H].

* :func:`gru_steps`: one cell call per time step (the reference; what collection runs, T = 1, and what
  compiled / captured graphs contain).
* :func:`gru_bounded`: the fused kernel over a *static* number of segments, for sequences known to hold at
  most ``max_resets`` resets after t = 0 (Overcooked V2: 400-step episodes, 256-step sequences: one). Fixed
  shapes and no host sync, so it can be captured in a CUDA graph (the captured update); (K + 1) x the GRU work.
* :func:`gru_segments`: torch's fused GRU kernel (cuDNN on CUDA, the native kernel on CPU) over whole
  segments: each actor's sequence is cut at its resets, all segments run as one padded (or packed) batch
  per seed. On CUDA, cuDNN runs it in TF32 while ``torch.backends.cudnn.allow_tf32`` is True (torch's
  default; ~1e-3 from the fp32 loop), in fp32 otherwise (~1e-6).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ers_deep.nets.layers import SGRUCell

# gru_segments pads a seed's segments to the longest one unless that is this many times the steps (each
# kernel's speed measured on CPU and H200: padding is faster up to waste ~5-10, and bounds the memory)
MAX_PADDING_WASTE = 8


def gru_steps(cell: SGRUCell, x: Tensor, first: Tensor, h0: Tensor) -> tuple[Tensor, Tensor]:
    """The step loop: per t, h = 0 where ``first[:, t]``, then h = cell(x[:, t], h). Returns (all states
    [S, T, N, H], last state [S, N, H])."""
    outs = []
    h = h0
    for t in range(x.shape[1]):
        h = torch.where(first[:, t, :, None], torch.zeros_like(h), h)  # reset before the step
        h = cell(x[:, t], h)
        outs.append(h)
    return torch.stack(outs, 1), h


class Segments(NamedTuple):
    """The segments of S*N actor sequences (actor a = s*N + n), numbered actor-major then in time:
    ``seg`` [A, T] the segment of each step, ``pos`` [A, T] the step's position in its segment,
    ``actor`` / ``start`` [K] each segment's actor and start time, ``lengths`` [K] (on the CPU) and
    ``per_seed`` (the number of segments of each seed, whose segments are consecutive)."""

    seg: Tensor
    pos: Tensor
    actor: Tensor
    start: Tensor
    lengths: Tensor
    per_seed: list[int]


def split_segments(first: Tensor) -> Segments:
    """Cut each actor's sequence of ``first`` [S, T, N] at its resets (and at t = 0). Vectorised; two host
    syncs (the number of segments, their lengths)."""
    S, T, N = first.shape
    starts = first.permute(0, 2, 1).reshape(S * N, T).clone()  # [A, T]
    starts[:, 0] = True
    actor, start = starts.nonzero(as_tuple=True)  # row-major: actor-major, then time
    seg = starts.flatten().cumsum(0).sub_(1).view(S * N, T)  # every actor's first step starts one
    pos = torch.arange(T, device=first.device) - start[seg]
    lengths = torch.bincount(seg.flatten(), minlength=actor.numel())
    counts = torch.bincount(actor // N, minlength=S)
    host = torch.cat([lengths, counts]).cpu()
    per_seed = [int(c) for c in host[-S:]]
    return Segments(seg, pos, actor, start, host[:-S], per_seed)


@functools.cache
def _template(n_in: int, hidden: int) -> nn.GRU:
    """An nn.GRU whose own parameters are never used (``functional_call`` substitutes a seed's)."""
    return nn.GRU(n_in, hidden, device="meta")


def _seed_params(cell: SGRUCell, s: int) -> dict[str, Tensor]:
    """Seed s's cell as nn.GRU parameters: weights [3H, in] / [3H, H] (gates r, z, n in both), biases [3H].
    Fresh contiguous copies (differentiable): on CUDA the GRU re-points them into one cuDNN buffer."""
    inp, rec = cell.inp, cell.rec
    assert inp.bias is not None and rec.bias is not None
    return {
        "weight_ih_l0": inp.weight[s].T.contiguous(),
        "weight_hh_l0": rec.weight[s].T.contiguous(),
        "bias_ih_l0": inp.bias[s, 0].clone(),
        "bias_hh_l0": rec.bias[s, 0].clone(),
    }


def _run_seed(cell: SGRUCell, s: int, padded: Tensor, lengths: Tensor | None, init: Tensor) -> Tensor:
    """Seed s's GRU over its segments: padded [L, K_s, in], init [K_s, H] -> all states [L, K_s, H]
    (garbage past each segment's end). With ``lengths`` [K_s] (CPU) as a packed batch (no work past
    the ends), else over the whole padded batch."""
    gru = _template(cell.inp.weight.shape[1], cell.hidden)
    gru.train(torch.is_grad_enabled())  # cuDNN keeps what its backward pass needs only in training mode
    inp = padded if lengths is None else pack_padded_sequence(padded, lengths, enforce_sorted=False)
    out, _ = functional_call(gru, _seed_params(cell, s), (inp, init[None]))
    return out if lengths is None else pad_packed_sequence(out, total_length=padded.shape[0])[0]


@torch.compiler.disable  # data-dependent shapes and nn.GRU: eager inside a compiled update (one graph break)
def gru_segments(
    cell: SGRUCell, x: Tensor, first: Tensor, h0: Tensor, packed: bool | None = None
) -> tuple[Tensor, Tensor]:
    """:func:`gru_steps` through the fused GRU kernel. Each actor's sequence is cut into segments at its
    resets; a segment starts from h0 of its actor if it starts at t = 0 without a reset, else from zero.
    Per seed, its K_s segments run as one batch [L, K_s, in], padded to the longest segment L (the states
    past a segment's end are computed and dropped), or ``packed`` (no work past the ends, but slower
    per step; by default only where padding would exceed ``MAX_PADDING_WASTE`` times the S*N*T steps).
    The padded copy of x is built either way: L * K * in floats (at most T times x, for patterns of many
    short segments beside a long one; about x for episodes longer than T). Differentiable w.r.t. x, h0
    and the cell's parameters. Never traced by torch.compile (it runs eagerly between the compiled parts;
    under ``fullgraph=True`` only T = 1, the cell, can be compiled). Returns (all states [S, T, N, H], last state [S, N, H])."""
    S, T, N, n_in = x.shape
    H = cell.hidden
    sg = split_segments(first)
    A, K = S * N, sg.actor.numel()
    L = int(sg.lengths.max())
    if packed is None:
        packed = K * L > MAX_PADDING_WASTE * A * T
    steps = x.permute(0, 2, 1, 3).reshape(A * T, n_in)  # actor-major, as sg.seg
    padded = x.new_zeros(L, K, n_in).index_put((sg.pos.flatten(), sg.seg.flatten()), steps)
    keep = (sg.start == 0) & ~first[:, 0].reshape(A)[sg.actor]  # continues the state h0
    init = torch.where(keep[:, None], h0.reshape(A, H)[sg.actor], 0.0)  # [K, H]
    outs, k0 = [], 0
    for s, k in enumerate(sg.per_seed):
        lengths = sg.lengths[k0 : k0 + k] if packed else None
        outs.append(_run_seed(cell, s, padded[:, k0 : k0 + k], lengths, init[k0 : k0 + k]))
        k0 += k
    ys = torch.cat(outs, 1)[sg.pos, sg.seg]  # [A, T, H]
    ys = ys.view(S, N, T, H).transpose(1, 2).contiguous()
    return ys, ys[:, -1]


@torch.compiler.disable  # nn.GRU: eager between the compiled parts (a captured graph records it either way)
def gru_bounded(
    cell: SGRUCell, x: Tensor, first: Tensor, h0: Tensor, max_resets: int
) -> tuple[Tensor, Tensor]:
    """:func:`gru_steps` for sequences with at most K = ``max_resets`` resets in t = 1..T-1 (each actor), with
    fixed shapes and no host sync. Step t of an actor lies in segment c_t = #resets in (0, t]; segment k starts
    at s_k = #{t : c_t < k} (s_0 = 0), from h0 (k = 0, unless ``first[:, 0]``) or zero. Per seed, the K + 1
    segments of every actor run as one batch [T, (K + 1) N, in] of inputs x[min(s_k + j, T - 1)] (steps past
    a segment's end are computed and dropped); y_t = Y_{c_t}[t - s_{c_t}]. More resets than K give wrong
    states (not checked: that would sync); the caller guarantees the bound (episodes of at least T steps: K = 1).
    Returns (all states [S, T, N, H], last state [S, N, H])."""
    S, T, N, n_in = x.shape
    H, K1 = cell.hidden, max_resets + 1
    dev = x.device
    resets = first.clone()
    resets[:, 0] = False
    c = resets.long().cumsum(1).clamp_(max=max_resets)  # [S, T, N] segment of each step
    k = torch.arange(K1, device=dev)
    start = (c[:, :, None] < k[None, None, :, None]).sum(1)  # [S, K1, N]
    j = torch.arange(T, device=dev)
    src = (start[:, None] + j[None, :, None, None]).clamp_(max=T - 1)  # [S, T(j), K1, N]
    xs = x[:, :, None].expand(S, T, K1, N, n_in).gather(1, src[..., None].expand(S, T, K1, N, n_in))
    keep = ~first[:, 0]  # [S, N]: segment 0 continues h0
    init = torch.zeros(S, K1, N, H, device=dev, dtype=x.dtype)
    init = torch.cat([torch.where(keep[..., None], h0, 0.0)[:, None], init[:, 1:]], 1)
    outs = [
        _run_seed(cell, s, xs[s].reshape(T, K1 * N, n_in), None, init[s].reshape(K1 * N, H)) for s in range(S)
    ]
    ys = torch.stack(outs).view(S, T, K1, N, H)  # [S, j, k, N, H]
    pos = j[None, :, None] - start.gather(1, c)  # [S, T, N]: t - s_{c_t}
    flat = ys.reshape(S, T * K1, N, H)
    row = (pos * K1 + c)[..., None].expand(S, T, N, H)
    y = flat.gather(1, row)
    return y, y[:, -1]
