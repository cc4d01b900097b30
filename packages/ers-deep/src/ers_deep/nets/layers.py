"""Layers whose parameters carry a leading *seed* dimension S: S independent networks evaluated together.

Every tensor flowing through them is [S, M, features] (M = any flattened batch). A pool of S seeds then
trains in one process with one optimiser: Adam is elementwise, so one Adam over stacked parameters is S
independent Adams; gradient-norm clipping is done per seed by the learner. Seed slice ``s`` is initialised
from its own generator (seeded by the pool's seed ``s``), so seed s of a pool starts exactly where a
single-seed run with seed s starts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ers_deep.nets import blas, int8


def _orthogonal(shape: tuple[int, ...], gains: float, generators: Sequence[torch.Generator]) -> Tensor:
    """[S, *shape] with slice s orthogonal (gain ``gains``) drawn from ``generators[s]``; gain 0: zeros."""
    out = torch.empty(len(generators), *shape)
    for s, g in enumerate(generators):
        if gains == 0:
            out[s].zero_()
        else:
            nn.init.orthogonal_(out[s], gain=gains, generator=g)
    return out


class SLinear(nn.Module):
    """y = x W_s + b_s per seed; x [S, M, in] -> [S, M, out]. ``gain`` of the orthogonal init (0: zeros). The
    product is ``nets.blas.bmm``: torch's, or OpenBLAS's where the process's CPU products are (``cpu_products``);
    with ``binary_input`` (x is 0s and 1s: an env's ``binary_obs``) ``nets.int8.binary_bmm`` on the CPU while the
    process's ``int8_inputs`` is on, or, inside ``frozen_limbs`` and without a gradient, ``nets.int8.limb_bmm``
    on the limbs of W computed once on entry (buffers ``limbs``, ``limb_scale``; not saved)."""

    limbs: Tensor  # [S, in, 2 out] int8, with binary_input
    limb_scale: Tensor  # [S, 1, out]

    def __init__(
        self,
        n_in: int,
        n_out: int,
        generators: Sequence[torch.Generator],
        gain: float = 2**0.5,
        bias: bool = True,
        binary_input: bool = False,
    ) -> None:
        super().__init__()
        # orthogonal on [out, in] as torch/flax do, stored transposed for x @ W
        self.weight = nn.Parameter(_orthogonal((n_out, n_in), gain, generators).transpose(1, 2).contiguous())
        self.bias = nn.Parameter(torch.zeros(len(generators), 1, n_out)) if bias else None
        self.binary_input = binary_input
        self.limbs_frozen = False
        if binary_input:
            S = len(generators)
            self.register_buffer("limbs", torch.zeros(S, n_in, 2 * n_out, dtype=torch.int8), persistent=False)
            self.register_buffer("limb_scale", torch.zeros(S, 1, n_out), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if self.binary_input and int8.int8_inputs() and x.device.type == "cpu":
            if self.limbs_frozen and not (torch.is_grad_enabled() and self.weight.requires_grad):
                y = int8.limb_bmm(x, self.limbs, self.limb_scale)
            else:
                y = int8.binary_bmm(x, self.weight)
        else:
            y = blas.bmm(x, self.weight)
        return y + self.bias if self.bias is not None else y


@contextmanager
def frozen_limbs(net: nn.Module) -> Iterator[None]:
    """Inside, while the process's ``int8_inputs`` is on, every ``SLinear`` of ``net`` with ``binary_input``
    multiplies without a gradient through the limbs of its weight as it was on entry, computed once (a
    collection, ``train.evaluate.play``'s games: the weights stay fixed over their steps, and recomputing the
    limbs at every step cost ~1 ms, as much as a 512-row product saves). A weight changed inside, in place or
    through ``.data``, is refused on exit (``RuntimeError``): its products there used the limbs of the old one
    (compared with a copy taken on entry, ~1 MB per seed)."""
    layers = (
        [m for m in net.modules() if isinstance(m, SLinear) and m.binary_input] if int8.int8_inputs() else []
    )
    entry = []
    with torch.no_grad():
        for m in layers:
            limbs, scale = int8.int8_limbs(m.weight)
            m.limbs.copy_(limbs)
            m.limb_scale.copy_(scale)
            m.limbs_frozen = True
            entry.append(m.weight.detach().clone())
    try:
        yield
    finally:
        for m in layers:
            m.limbs_frozen = False
    if any(not torch.equal(m.weight, w) for m, w in zip(layers, entry, strict=True)):
        raise RuntimeError(
            "frozen_limbs: a weight of a binary-input layer changed inside; its products there used the old limbs"
        )


class SConv2d(nn.Module):
    """A k x k 'SAME' convolution per seed; x [S, M, C, H, W] -> [S, M, out, H, W]. One ``conv2d`` per seed: on
    CPU that is faster than one grouped convolution (whose backward pass is slow) or im2col + bmm."""

    def __init__(
        self, n_in: int, n_out: int, kernel: int, generators: Sequence[torch.Generator], gain: float = 2**0.5
    ) -> None:
        super().__init__()
        S = len(generators)
        w = _orthogonal((n_out, n_in * kernel * kernel), gain, generators)
        self.weight = nn.Parameter(w.view(S * n_out, n_in, kernel, kernel))
        self.bias = nn.Parameter(torch.zeros(S * n_out))
        self.n_out, self.pad, self.kernel = n_out, kernel // 2, kernel

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        """[S, M, in, H, W] -> [S, M, out, H, W]; ``relu``: followed by a ReLU, in place on each product."""
        o = self.n_out
        # one seed: squeeze, not x[0], whose backward would fill a zero tensor and copy the gradient into it
        xs = [x.squeeze(0)] if x.shape[0] == 1 else list(x)
        ys = [
            F.conv2d(xi, self.weight[s * o : (s + 1) * o], self.bias[s * o : (s + 1) * o], padding=self.pad)
            for s, xi in enumerate(xs)
        ]
        if relu:
            ys = [y.relu_() for y in ys]
        # one seed: no stack, so a channels-last input stays channels last (mkldnn's faster layout on CPU)
        return ys[0].unsqueeze(0) if len(ys) == 1 else torch.stack(ys)

    def pointwise_params(self) -> tuple[Tensor, Tensor]:
        """This 1x1 convolution as a per-seed matrix and bias: W [S, in, out] (a view), b [S, 1, out]."""
        S = self.bias.shape[0] // self.n_out
        return self.weight.view(S, self.n_out, -1).transpose(1, 2), self.bias.view(S, 1, -1)

    def pointwise(self, x: Tensor, relu: bool = False) -> Tensor:
        """A 1x1 convolution on channels-last input: x [S, ..., in] -> [S, ..., out], one bmm (equal to
        ``forward`` on the permuted input up to float rounding). ``relu``: followed by a ReLU, in place on the
        product (no second activation-sized tensor; in place on the base, not on the view, which would make
        autograd copy the gradient)."""
        if self.kernel != 1:
            raise ValueError(f"pointwise needs a 1x1 convolution, this one is {self.kernel}x{self.kernel}")
        w, b = self.pointwise_params()
        y = torch.baddbmm(b, x.reshape(x.shape[0], -1, x.shape[-1]), w)
        if relu:
            y = y.relu_()
        return y.view(*x.shape[:-1], self.n_out)


class SLayerNorm(nn.Module):
    """LayerNorm over the last dim with per-seed scale and shift; x [S, M, D]."""

    def __init__(self, dim: int, seeds: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(seeds, 1, dim))
        self.bias = nn.Parameter(torch.zeros(seeds, 1, dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class SGRUCell(nn.Module):
    """A GRU cell per seed (the torch / flax equations):
    r = sig(W_ir x + W_hr h + b_r), z = sig(W_iz x + W_hz h + b_z), n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
    h' = (1 - z) n + z h.  x [S, M, in], h [S, M, H]."""

    def __init__(self, n_in: int, hidden: int, generators: Sequence[torch.Generator]) -> None:
        super().__init__()
        self.inp = SLinear(n_in, 3 * hidden, generators, gain=1.0)
        self.rec = SLinear(hidden, 3 * hidden, generators, gain=1.0)
        self.hidden = hidden

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        xi, hh = self.inp(x), self.rec(h)
        H = self.hidden
        r = torch.sigmoid(xi[..., :H] + hh[..., :H])
        z = torch.sigmoid(xi[..., H : 2 * H] + hh[..., H : 2 * H])
        n = torch.tanh(xi[..., 2 * H :] + r * hh[..., 2 * H :])
        return (1 - z) * n + z * h
