"""The GRU over a sequence with episode resets as one autograd function, for the CPU update.

``gru_scan(cell, x, first, h0)`` computes what :func:`~ers_deep.nets.recurrent.gru_steps` computes (the
torch / flax GRU equations of :class:`~ers_deep.nets.layers.SGRUCell`, h reset to zero before every step
with ``first``), with the work arranged for a CPU, where a minibatch holds few actors (8 in the paper's
Overcooked V2 setting) over many steps (256), so per-step work is a few tiny ops and the cost is their
number:

* forward: the input projections of all T steps as one matrix product, gi = x W_ih + b_ih [S, T, N, 3H];
  per step t (h~ = h_{t-1} * keep_t, keep = not first):
  gh = h~ W_hh + b_hh, (r, z) = sig(gi_rz + gh_rz), n = tanh(gi_n + r gh_n), h_t = n + z (h~ - n);
  six ops per step, each writing into a preallocated time-major buffer.
* backward (reverse loop), with every factor that does not depend on the incoming gradient computed for all
  steps at once before the loop: A = (1 - z)(1 - n^2), B = (h~ - n) z (1 - z), C = gh_n r (1 - r).
  Per step (dh = dL/dh_t, incoming plus carried): da_n = dh A, da_z = dh B, da_r = da_n C, dgh_n = da_n r,
  dh~ = dh z + [da_r, da_z, dgh_n] W_hh^T, carried dL/dh_{t-1} = dh~ * keep_t. Weight and input gradients
  are then one matrix product each over all T N entries: dW_hh = h~^T dgh, dW_ih = x^T dgi, dx = dgi W_ih^T.

Measured (one thread, S = 1, T = 256, N = 8, H = 128, forward + backward): 36-42 ms, against 104-111 ms
through torch's native GRU kernel over segments (``gru_segments``) and 207-223 ms through the step loop
(``tests/deep/nets/test_gru_segments.py::test_timing_loop_vs_fused`` prints all three). Float rounding differs
from the step loop by ~1e-6 (checked against ``gru_steps`` and by ``torch.autograd.gradcheck`` in float64).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ers_deep.nets.layers import SGRUCell


def _seeds_first(t: Tensor) -> Tensor:
    """[T, S, ...] -> [S, T, ...] contiguous (a view for one seed)."""
    return t.transpose(0, 1).contiguous()


class _GRUScan(torch.autograd.Function):
    """ys [S, T, N, H] = the GRU over x [S, T, N, in] from h0 [S, N, H], with keep [T, S, N, 1] (0: reset) and
    ``resets`` the steps with any reset. Buffers are time-major, so a step's slice is contiguous for one seed
    (strided operands make a tiny op 2-3x slower)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        keep: Tensor,
        resets: list[bool],
        h0: Tensor,
        w_ih: Tensor,
        w_hh: Tensor,
        b_ih: Tensor,
        b_hh: Tensor,
    ) -> Tensor:
        S, T, N, n_in = x.shape
        H = h0.shape[-1]
        gi = torch.baddbmm(b_ih, x.reshape(S, T * N, n_in), w_ih).view(S, T, N, 3 * H).transpose(0, 1)
        gi_rz = gi[..., : 2 * H] + b_hh[..., : 2 * H]  # [T, S, N, 2H]: both biases of r and z
        gi_n = gi[..., 2 * H :].contiguous()
        w_rz, w_n = w_hh[..., : 2 * H].contiguous(), w_hh[..., 2 * H :].contiguous()
        b_n = b_hh[..., 2 * H :].contiguous()
        rz, gh_n = x.new_empty(T, S, N, 2 * H), x.new_empty(T, S, N, H)
        n, ys = x.new_empty(T, S, N, H), x.new_empty(T, S, N, H)
        # per-step views made once (indexing in the loop costs more than the tiny ops themselves)
        steps = zip(
            resets,
            keep.unbind(),
            gi_rz.unbind(),
            gi_n.unbind(),
            rz.unbind(),
            rz[..., :H].unbind(),
            rz[..., H:].unbind(),
            gh_n.unbind(),
            n.unbind(),
            ys.unbind(),
            strict=True,
        )
        h = h0
        for reset, keep_t, gi_rz_t, gi_n_t, rz_t, r_t, z_t, gh_n_t, n_t, y_t in steps:
            if reset:
                h = h * keep_t
            torch.baddbmm(gi_rz_t, h, w_rz, out=rz_t).sigmoid_()
            torch.baddbmm(b_n, h, w_n, out=gh_n_t)
            torch.addcmul(gi_n_t, r_t, gh_n_t, out=n_t).tanh_()
            h = torch.lerp(n_t, h, z_t, out=y_t)
        hp = torch.cat([h0[None], ys[:-1]]) * keep  # h~_t: the state entering step t, after its reset
        ctx.save_for_backward(x, keep, w_ih, w_hh, hp, rz, gh_n, n)
        ctx.resets = resets
        return _seeds_first(ys)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dys: Tensor) -> tuple[Tensor | None, ...]:
        x, keep, w_ih, w_hh, hp, rz, gh_n, n = ctx.saved_tensors
        T, S, N, H = hp.shape
        r, z = rz[..., :H], rz[..., H:]
        a = (1 - z) * (1 - n * n)  # dh_t / da_n
        # dgh_t = dh_t * [a gh_n r (1 - r), (h~ - n) z (1 - z), a r]: the gradient of (gh_r, gh_z, gh_n)
        m = torch.stack([a * gh_n * r * (1 - r), (hp - n) * z * (1 - z), a * r], -2)  # [T, S, N, 3, H]
        z = z.contiguous()
        dys_t = dys.transpose(0, 1).contiguous()
        w_t = w_hh.transpose(1, 2).contiguous()  # [S, 3H, H]
        dgh, dh_all = x.new_empty(T, S, N, 3 * H), x.new_empty(T, S, N, H)
        steps = zip(
            ctx.resets,
            keep.unbind(),
            dys_t.unbind(),
            dh_all.unbind(),
            m.unbind(),
            dgh.unbind(),
            dgh.view(T, S, N, 3, H).unbind(),
            z.unbind(),
            strict=True,
        )
        dh = torch.zeros_like(hp[0])
        for reset, keep_t, dy_t, dh_t, m_t, dgh_t, dgh3_t, z_t in reversed(list(steps)):
            dh = torch.add(dh, dy_t, out=dh_t)
            torch.mul(dh.unsqueeze(-2), m_t, out=dgh3_t)
            dh = torch.baddbmm(dh * z_t, dgh_t, w_t)  # dL/dh~_t
            if reset:
                dh = dh * keep_t
        dgi = _seeds_first(torch.cat([dgh[..., : 2 * H], dh_all * a], -1)).view(S, T * N, 3 * H)
        dgh_s = _seeds_first(dgh).view(S, T * N, 3 * H)
        hp_s = _seeds_first(hp).view(S, T * N, H)
        x_s = x.reshape(S, T * N, -1)
        dx = torch.bmm(dgi, w_ih.transpose(1, 2)).view_as(x) if ctx.needs_input_grad[0] else None
        return (
            dx,
            None,
            None,
            dh,  # the gradient of h0 (masked at t = 0 above)
            torch.bmm(x_s.transpose(1, 2), dgi),
            torch.bmm(hp_s.transpose(1, 2), dgh_s),
            dgi.sum(1, keepdim=True),
            dgh_s.sum(1, keepdim=True),
        )


@torch.compiler.disable  # a Python loop of tiny ops: eager between the compiled parts of a compiled update
def gru_scan(cell: SGRUCell, x: Tensor, first: Tensor, h0: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`~ers_deep.nets.recurrent.gru_steps` as one autograd function (module docstring): x [S, T, N, in],
    first [S, T, N] bool (h reset to zero before step t), h0 [S, N, H] -> (all states [S, T, N, H], last state
    [S, N, H]). Differentiable once w.r.t. x, h0 and the cell's parameters."""
    if x.dim() != 4 or first.shape != x.shape[:3] or h0.shape != (x.shape[0], x.shape[2], cell.hidden):
        raise ValueError(
            f"gru_scan needs x [S, T, N, in], first [S, T, N], h0 [S, N, {cell.hidden}]; "
            f"got {tuple(x.shape)}, {tuple(first.shape)}, {tuple(h0.shape)}"
        )
    inp, rec = cell.inp, cell.rec
    assert inp.bias is not None and rec.bias is not None
    keep = (~first).transpose(0, 1).unsqueeze(-1).to(x.dtype)  # [T, S, N, 1]
    resets = first.any(2).any(0).tolist()  # the steps with a reset (one host sync: this is the CPU path)
    ys = _GRUScan.apply(x, keep, resets, h0, inp.weight, rec.weight, inp.bias, rec.bias)
    return ys, ys[:, -1]
