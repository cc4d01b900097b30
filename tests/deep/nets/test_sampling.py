"""``nets.sample(logits, mask, generator)``, the one sampler of every learner, evaluator, discovery and
other-play run: the inverse CDF with one uniform per row (checked against the same uniforms inverted in
float64), its law (a chi-square test against softmax of the masked logits), masked actions never drawn, and
the log-probability it returns."""

from __future__ import annotations

import math

import torch

from ers_deep.nets import policy_mask, sample


def test_sample_inverts_one_uniform_per_row_of_the_generator() -> None:
    """Each row's action is the first index whose float64 cumulative probability exceeds u * total, u the
    row's uniform from a copy of the generator, and the generator advances by exactly one number per row."""
    torch.manual_seed(0)
    logits = torch.randn(7, 11, 6)
    mask = torch.rand(7, 11, 6) < 0.6
    mask[..., 2] = True  # every row has a legal action
    gen = torch.Generator().manual_seed(123)
    twin = torch.Generator().manual_seed(123)
    action, logp = sample(logits, mask, gen)
    u = torch.rand(7, 11, generator=twin, dtype=torch.float32).double()
    probs = torch.softmax(logits.double().masked_fill(~mask, -math.inf), -1)
    cdf = probs.cumsum(-1)
    want = (cdf <= u[..., None] * cdf[..., -1:]).sum(-1).clamp(max=5)
    # float32 and float64 cumulative sums may disagree on a u within rounding of a boundary: none here
    assert torch.equal(action, want)
    assert torch.equal(gen.get_state(), twin.get_state())  # 77 numbers consumed, as the twin's 77
    assert bool(mask.gather(-1, action[..., None]).all())
    torch.testing.assert_close(logp.double(), probs.gather(-1, action[..., None])[..., 0].log())


def test_sample_draws_softmax_of_the_masked_logits() -> None:
    """200,000 draws of one row: the counts fit softmax(logits) over the legal actions (chi-square, 4 degrees of
    freedom, below its 0.999 quantile 18.47) and an illegal action is never drawn."""
    logits = torch.tensor([0.3, -1.0, 2.0, 0.0, 5.0, 1.2])
    mask = torch.tensor([True, True, True, True, False, True])
    n = 200_000
    action, _ = sample(logits.expand(n, 6), mask.expand(n, 6), torch.Generator().manual_seed(7))
    counts = torch.bincount(action, minlength=6).double()
    assert counts[4] == 0
    p = torch.softmax(logits.double().masked_fill(~mask, -math.inf), -1)
    legal = mask.nonzero()[:, 0]
    chi2 = float(((counts[legal] - n * p[legal]) ** 2 / (n * p[legal])).sum())
    assert chi2 < 18.47, chi2


def test_a_seat_with_no_legal_move_samples_under_the_policy_mask() -> None:
    """Hanabi's waiting player (no legal move): ``policy_mask`` allows every action, so the draw and its
    log-probability are finite."""
    legal = torch.zeros(4, 3, dtype=torch.bool)
    action, logp = sample(torch.randn(4, 3), policy_mask(legal), torch.Generator().manual_seed(1))
    assert bool(((action >= 0) & (action < 3)).all()) and bool(torch.isfinite(logp).all())
