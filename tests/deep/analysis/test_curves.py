"""Learning-curve figures and time-to-fraction from a run directory; TensorBoard scalars when installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ers_deep.analysis import curves, learning_curve, time_to_fraction
from ers_deep.train.config import paper_config
from ers_deep.train.run import train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "toy"
    cfg = paper_config("tabular:toy-coordination", num_envs=256, seeds=(0, 1), total_env_steps=256 * 2 * 30)
    train(cfg, out)
    return out


def test_curves_and_time_to_fraction(run_dir: Path) -> None:
    c = curves(run_dir)
    assert sorted(c) == [0, 1] and len(c[0]) == 30 and c[0][-1][0] == 256 * 2 * 30
    t = time_to_fraction(run_dir, 0.9)
    assert 0 < t["env_steps"] <= 256 * 2 * 30 and t["best"] > 0.9 and t["seconds"] <= t["total_seconds"]


def test_learning_curve_png(run_dir: Path, tmp_path: Path) -> None:
    path = learning_curve(run_dir, tmp_path / "curve.png", ("return", "entropy"), "toy")
    assert path.stat().st_size > 2000


@pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="the tensorboard extra is not installed"
)
def test_tensorboard_scalars(run_dir: Path) -> None:
    assert any((run_dir / "tensorboard").iterdir())
