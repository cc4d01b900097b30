"""A k x k 'SAME' convolution over a small V1 x V2 grid as one matrix product (``NetConfig.spatial="matmul"``).

On a grid as small as Overcooked V2's 5 x 5 view the convolution is a linear map of the whole channels-last
input, x [M, V1 V2 C_in] -> y [M, V1 V2 C_out]:

    y = x K(W) + b,   K(W)[(p, c), (q, o)] = W[o, c, dy, dx]  where (dy, dx) = p - q + (k // 2, k // 2) is a tap
                                                                of the kernel, else 0,

for input cell p, output cell q, input channel c and output channel o (cells in row-major order). K has
(V1 V2)^2 C_in C_out entries, at most k^2 V1 V2 C_in C_out of them non-zero (36 % at 5 x 5, k = 3), so the
product does ~2.8x the convolution's multiply-adds, but as one large matrix product per seed instead of a
convolution with 8-32 channels; gradients reach W through the same gather (autograd). Equal to
``F.conv2d(..., padding=k // 2)`` up to float rounding (``tests/deep/nets/test_spatial.py``). On this
development CPU it is slower (measured: the three 3x3 layers of the Overcooked net, forward + backward, 125 ms
against 68 ms for 2,048 samples), so the default stays ``"conv"``; the option exists for GPUs, where
convolutions this narrow may use a small share of the tensor cores (to be measured: ``scripts/train-gpu.sh``).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["spatial_index", "spatial_matrix"]


def spatial_index(n_in: int, n_out: int, kernel: int, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """(``flat``, ``entry``): the non-zero entries of K(W) as positions in K flattened row-major
    ([V1 V2 n_in, V1 V2 n_out]), and for each the entry of W ([n_out, n_in, k, k] flattened) it holds."""
    V1, V2 = grid
    pad = kernel // 2
    qy, qx = torch.meshgrid(torch.arange(V1), torch.arange(V2), indexing="ij")  # output cells
    c = torch.arange(n_in)[:, None]
    o = torch.arange(n_out)[None, :]
    flats, entries = [], []
    for dy in range(kernel):
        for dx in range(kernel):
            py, px = qy + dy - pad, qx + dx - pad  # the input cell this tap reads
            inside = (py >= 0) & (py < V1) & (px >= 0) & (px < V2)
            p = (py * V2 + px)[inside][:, None, None]  # [cells, 1, 1]
            q = (qy * V2 + qx)[inside][:, None, None]
            row = p * n_in + c  # [cells, n_in, 1]
            col = q * n_out + o  # [cells, 1, n_out]
            flats.append((row * (V1 * V2 * n_out) + col).flatten())
            entry = ((o * n_in + c) * kernel + dy) * kernel + dx  # [n_in, n_out]
            entries.append(entry.expand(p.shape[0], n_in, n_out).flatten())
    return torch.cat(flats), torch.cat(entries)


def spatial_matrix(
    weight: Tensor, bias: Tensor, seeds: int, grid: tuple[int, int], index: tuple[Tensor, Tensor]
) -> tuple[Tensor, Tensor]:
    """K(W) [S, V1 V2 n_in, V1 V2 n_out] and the bias tiled over the cells [S, 1, V1 V2 n_out] of a per-seed
    convolution (weight [S n_out, n_in, k, k], bias [S n_out]; ``index`` from :func:`spatial_index` on the
    weight's device). Differentiable w.r.t. both."""
    n_out, n_in = weight.shape[0] // seeds, weight.shape[1]
    cells = grid[0] * grid[1]
    flat, entry = index
    values = weight.reshape(seeds, -1)[:, entry]  # [S, nnz]
    k = weight.new_zeros(seeds, cells * n_in * cells * n_out).index_copy(1, flat, values)
    b = bias.view(seeds, 1, 1, n_out).expand(seeds, 1, cells, n_out).reshape(seeds, 1, cells * n_out)
    return k.view(seeds, cells * n_in, cells * n_out), b
