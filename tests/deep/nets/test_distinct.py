"""The 1x1 layers on distinct cells only (``nets.distinct``, the CPU update's path for integer observations):
``distinct_rows`` against ``torch.unique(dim=0)`` (one packed word and several, every integer dtype, edge
cases, bad input), ``pointwise_distinct`` against the chunked stack on every row (outputs and the gradients of
every weight and bias, stacked seeds, real Overcooked V2 observations), its fallbacks, and the Overcooked net
with it on against it off (outputs and every parameter's gradient)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import NetConfig, build_net
from ers_deep.nets.actor_critic import RecurrentCNN
from ers_deep.nets.distinct import distinct_rows, pointwise_distinct
from ers_deep.nets.layers import SConv2d
from ers_deep.nets.pointwise import pointwise_stack
from tests.deep.nets.pointwise_cases import pointwise_convs


def _check_distinct(x: torch.Tensor) -> None:
    first, inverse = distinct_rows(x)
    reference = torch.unique(x, dim=0)
    assert first.shape[0] == reference.shape[0]  # as many distinct rows as torch finds
    assert torch.equal(x[first][inverse], x)  # every row is its distinct row
    assert torch.unique(x[first], dim=0).shape[0] == first.shape[0]  # the distinct rows differ pairwise


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 300),
    cols=st.integers(1, 90),
    top=st.sampled_from([1, 2, 3, 7, 200, 255]),
    seed=st.integers(0, 2**16),
)
def test_distinct_rows_equal_torch_unique(rows: int, cols: int, top: int, seed: int) -> None:
    """One word (few narrow columns) to many (90 columns of 8 bits: 12 words)."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.randint(0, top + 1, (max(rows // 3, 1), cols), generator=g, dtype=torch.uint8)
    x = pool[torch.randint(0, pool.shape[0], (rows,), generator=g)]  # repeated rows
    _check_distinct(x)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool])
def test_distinct_rows_of_every_integer_dtype(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 2, (500, 17), generator=g).to(dtype)
    _check_distinct(x)
    wide = torch.tensor([[2**40, 0], [2**40, 1], [2**40, 0]], dtype=torch.int64)
    _check_distinct(wide)


def test_distinct_rows_edge_cases_and_bad_input() -> None:
    first, inverse = distinct_rows(torch.zeros(0, 4, dtype=torch.uint8))
    assert first.numel() == inverse.numel() == 0
    first, inverse = distinct_rows(torch.zeros(5, 3, dtype=torch.uint8))  # one distinct row
    assert first.tolist() == [0] and inverse.tolist() == [0] * 5
    first, _ = distinct_rows(torch.zeros(6, 0, dtype=torch.uint8))  # no columns: all rows alike
    assert first.tolist() == [0]
    with pytest.raises(ValueError, match="integer tensor"):
        distinct_rows(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="integer tensor"):
        distinct_rows(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="non-negative"):
        distinct_rows(torch.tensor([[1, -1]]))
    with pytest.raises(ValueError, match="62-bit"):
        distinct_rows(torch.tensor([[2**62]]))


def _grads(out: torch.Tensor, convs: list[SConv2d], weight: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad((out * weight).sum(), [p for c in convs for p in c.parameters()]))


def _assert_close(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-6 * max(y.abs().max().item(), 1.0))


@pytest.mark.parametrize("S", [1, 2])
def test_pointwise_distinct_equals_the_stack_on_every_row(S: int) -> None:
    g = torch.Generator().manual_seed(3)
    pool = torch.randint(0, 4, (S, 9, 6), generator=g, dtype=torch.uint8)  # 9 distinct cells per seed
    cells = torch.stack([p[torch.randint(0, 9, (400,), generator=g)] for p in pool])  # [S, 400, 6]
    convs = pointwise_convs(S, [6, 16, 12, 3])
    weight = torch.randn(S, 400, 3, generator=g)
    params = [c.pointwise_params() for c in convs]
    ref = pointwise_stack(cells.float(), params)
    out = pointwise_distinct(cells, params)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert torch.allclose(out, ref, atol=1e-6)
    _assert_close(_grads(out, convs, weight), _grads(ref, convs, weight))


def test_pointwise_distinct_falls_back_where_it_does_not_apply() -> None:
    """Float cells (and cells that need their own gradient), and cells with too few repeats, take the stack; the
    input gradient then reaches every row."""
    g = torch.Generator().manual_seed(4)
    convs = pointwise_convs(1, [5, 8, 2])
    params = [c.pointwise_params() for c in convs]
    x = torch.randint(0, 3, (1, 50, 5), generator=g).float().requires_grad_(True)
    out = pointwise_distinct(x, params)
    ref = pointwise_stack(x, params)
    assert torch.allclose(out, ref)
    (gx,) = torch.autograd.grad(out.sum(), [x])
    (gr,) = torch.autograd.grad(ref.sum(), [x])
    assert torch.allclose(gx, gr)
    spread = torch.randint(0, 256, (1, 60, 5), generator=g, dtype=torch.uint8)  # ~all rows distinct
    assert torch.allclose(pointwise_distinct(spread, params), pointwise_stack(spread.float(), params))
    with pytest.raises(ValueError, match="cells \\[S, M, C\\]"):
        pointwise_distinct(spread[0], params)


@pytest.mark.parametrize("low, high", [(-2, 3), (2**61, 2**61 + 3), (2**62, 2**62 + 3)])
def test_pointwise_distinct_falls_back_on_integers_it_cannot_pack(low: int, high: int) -> None:
    """Integer cells that repeat but do not pack into the dedup's words (negative entries; entries of 62 bits
    beside the row ids; 63 bits) take the plain layers, as float cells do, instead of raising."""
    g = torch.Generator().manual_seed(6)
    w, b = (
        torch.randn(2, 5, 3, generator=g, dtype=torch.float64),
        torch.randn(2, 1, 3, generator=g, dtype=torch.float64),
    )
    cells = torch.randint(low, high, (1, 4, 5), generator=g).repeat(
        2, 10, 1
    )  # 4 distinct rows, 10 times each
    with pytest.raises(ValueError):
        distinct_rows(cells.view(-1, 5))
    out = pointwise_distinct(cells, [(w, b)], dtype=torch.float64)
    assert torch.allclose(out, torch.relu(torch.baddbmm(b, cells.double(), w)), rtol=1e-12, atol=0)


def _overcooked_batch(T: int = 16, B: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """[1, T, 2B, V, V, C] uint8 observations of random legal play on grounded_coord_simple, and ``first``."""
    from ers_deep.envs.overcooked_v2 import OvercookedV2Env

    env = OvercookedV2Env("grounded_coord_simple", batch_size=B, seed=0)
    P = env.num_agents
    g = torch.Generator().manual_seed(5)
    step, start = env.reset(), torch.ones(B * P, dtype=torch.bool)
    obs, first = [], []
    for _ in range(T):
        obs.append(step.obs.reshape(B * P, *step.obs.shape[2:]))
        first.append(start)
        step = env.step(torch.randint(0, env.num_actions, (B, P), generator=g))
        start = step.done.repeat_interleave(P)
    return torch.stack(obs)[None], torch.stack(first)[None]


def test_overcooked_cells_repeat_and_the_net_is_unchanged() -> None:
    """On real observations the cells repeat (so the dedup runs), and the net's outputs and every parameter's
    gradient with ``distinct_cells`` on equal those with it off."""
    obs, first = _overcooked_batch()
    C = obs.shape[-1]
    assert obs.dtype == torch.uint8
    rows = obs.reshape(-1, C)
    assert distinct_rows(rows)[0].shape[0] * 4 <= rows.shape[0]
    net = build_net(NetConfig(kind="cnn-gru", hidden=32, conv=16), [0], tuple(obs.shape[3:]), 6)
    assert isinstance(net, RecurrentCNN)
    results = []
    for on in (True, False):
        net.distinct_cells = on
        net.zero_grad()
        logits, value, _ = net(obs, first, net.initial_state(obs.shape[2]))
        (logits.square().sum() + value.sum()).backward()
        results.append([logits.detach(), value.detach(), *(p.grad.clone() for p in net.parameters())])
    _assert_close(results[0], results[1])
