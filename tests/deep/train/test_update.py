"""The compiled PPO update (``update_mode="compile"``) equals the eager one: parameters after 3 updates from the
same seeds within 1e-6 (Hanabi's MLP, Overcooked V2's CNN + fused GRU). Tabular heads train with learning
rate 0.5: Adam turns float32 rounding noise in near-zero gradients (~1e-9, which compiled kernels sum in
another order) into steps of lr * g / (|g| + eps) ~ 5e-5, so there the bound is 1e-3."""

from __future__ import annotations

import pytest

from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import mode_vs_eager_params, tiny_config


def test_compiled_update_equals_eager_update_hanabi() -> None:
    diff = mode_vs_eager_params(tiny_config("hanabi", collect_mode="eager"), "compile", updates=3)
    assert diff < 1e-6, diff


@pytest.mark.slow  # two minutes of compilation on the 2-core machine
@pytest.mark.parametrize("env, tol", [("overcooked-v2", 1e-6), ("tabular:dectiger", 1e-3)])
def test_compiled_update_equals_eager_update(env: str, tol: float) -> None:
    diff = mode_vs_eager_params(tiny_config(env, collect_mode="eager"), "compile", updates=3)
    assert diff < tol, diff
