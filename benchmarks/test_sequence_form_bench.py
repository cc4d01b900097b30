"""J, dJ/dpi and the local Q^i of a batch of 64 policies on two-agent games: the sequence form (model/sequence_form.py, one
sparse product) against the pass over the joint history tree (model/values.py, ``sequence=False``), measured
in the same run. Ratio = tree seconds / sequence-form seconds; both must agree to 1e-12 of the values' size, and the
timed side must take the sequence form (``sequence_form(tree)`` is built for the tree: a game beyond its size
limit would time the tree pass against itself)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.sequence_form import sequence_form
from ers_exact.model.values import expected_return, local_q_values, return_gradient

#: horizon 0: the game's own (three-lever takes no horizon; its tree has H = 2); extra_info records the tree's
CASES = [
    (g, h, what)
    for g, h in (("three-lever", 0), ("dectiger", 3), ("dectiger", 4))
    for what in ("J", "dJ", "Q")
]


def _policies(tree, P: int = 64) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    out = []
    for h in tree.local:
        p = rng.dirichlet(np.ones(h.legal.shape[1]), size=(P, len(h))) * h.legal[None]
        out.append(p / p.sum(axis=2, keepdims=True))
    return tuple(out)


@pytest.mark.parametrize("name, horizon, what", CASES, ids=[f"{g}-H{h}-{w}" for g, h, w in CASES])
def test_sequence_form_vs_tree_pass(benchmark, name: str, horizon: int, what: str) -> None:
    tree = enumerate_histories(get_game(name, horizon=horizon) if horizon else get_game(name))
    assert sequence_form(tree) is not None  # what the timed call (sequence=True, the default) runs
    pols = _policies(tree)
    fn = {"J": expected_return, "dJ": return_gradient, "Q": local_q_values}[what]
    want = fn(tree, pols, sequence=False)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn(tree, pols, sequence=False)
        best = min(best, time.perf_counter() - t0)
    got = benchmark(fn, tree, pols)
    for a, b in zip(*((np.asarray(x)[None],) if what == "J" else x for x in (got, want))):
        scale = max(1.0, float(np.nanmax(np.abs(b))))
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale, equal_nan=True)
    seq = benchmark.stats.stats.min
    benchmark.extra_info.update(
        game=name,
        horizon=tree.game.horizon,
        policies=64,
        quantity=what,
        tree_seconds=best,
        sequence_seconds=seq,
        speedup=best / seq,
    )
    print(
        f"\n{name} H={tree.game.horizon} {what} of 64 policies: sequence form {seq * 1e3:.2f} ms, tree {best * 1e3:.2f} ms "
        f"({best / seq:.1f}x)"
    )
    if not benchmark.disabled:  # one untimed call (--benchmark-disable) is not a measurement
        assert best / seq > 1.0
