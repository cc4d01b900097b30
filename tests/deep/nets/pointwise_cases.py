"""Shared by the 1x1-layer tests (``test_pointwise``, ``test_distinct``): seed-stacked 1x1 convolutions."""

from __future__ import annotations

import itertools

import torch

from ers_deep.nets.layers import SConv2d


def pointwise_convs(S: int, widths: list[int], dtype: torch.dtype = torch.float32) -> list[SConv2d]:
    """1x1 convolutions of ``widths`` for S seeds, with non-zero biases (so some ReLUs are off)."""
    gens = [torch.Generator().manual_seed(s) for s in range(S)]
    convs = [SConv2d(i, o, 1, gens).to(dtype) for i, o in itertools.pairwise(widths)]
    with torch.no_grad():
        for c in convs:
            c.bias.uniform_(-0.5, 0.5, generator=gens[0])
    return convs
