"""Learning-curve figures and time-to-fraction from a run directory; TensorBoard scalars when installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ers_deep.analysis import curves, learning_curve, pool_curve, pool_run_dirs, time_to_fraction
from ers_deep.analysis.curves import seed_mean
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
def test_tensorboard_scalars_equal_the_metrics(run_dir: Path) -> None:
    """The run's TensorBoard events, read back by TensorBoard's own reader, hold per seed the returns and
    entropies of ``metrics.csv`` at its env-steps (``make test`` installs the extra)."""
    import csv
    import math

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    for key in ("return", "entropy"):
        for seed in (0, 1):
            logged = [(e.step, e.value) for e in events.Scalars(f"{key}/seed{seed}")]
            mine = [(int(r["env_steps"]), float(r[key])) for r in rows if int(r["seed"]) == seed]
            assert [step for step, _ in logged] == [step for step, _ in mine] and len(mine) == 30
            for (_, a), (_, b) in zip(logged, mine, strict=True):
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6)


def _metrics(folder: Path, rows: list[tuple[int, int, int, float]]) -> None:
    """A metrics.csv of (update, env_steps, seed, return) rows (the other columns zero, 1 s per update)."""
    folder.mkdir(parents=True)
    head = "update,env_steps,seed,return,shaped_return,entropy,seconds"
    lines = [head] + [f"{u},{n},{s},{r},0.0,0.5,1.0" for u, n, s, r in rows]
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")


def test_the_mean_over_seeds_is_taken_at_equal_env_steps(tmp_path: Path) -> None:
    """An update where one seed finished no episode (NaN return) is left out of the mean, not averaged with
    the other seed's next update (the curve's mean was positional)."""
    nan = float("nan")
    rows = [
        (1, 10, 0, 1.0),
        (1, 10, 1, 3.0),
        (2, 20, 0, nan),
        (2, 20, 1, 5.0),
        (3, 30, 0, 2.0),
        (3, 30, 1, 7.0),
    ]
    _metrics(tmp_path / "run", rows)
    steps, mean = seed_mean(curves(tmp_path / "run"))
    assert steps == [10, 30] and mean == [2.0, 4.5]
    t = time_to_fraction(tmp_path / "run", 0.9, smooth=1)
    assert t["best"] == 4.5 and t["env_steps"] == 30 and t["seconds"] == 3.0 and t["total_seconds"] == 3.0


def test_pool_curve_reads_a_ray_pool_and_shows_an_update_without_episodes(tmp_path: Path) -> None:
    """A Ray pool keeps one run per seed (runs/seed-N); every seed is drawn; a column without any finished
    episode is a labelled empty panel, not an error."""
    nan = float("nan")
    _metrics(tmp_path / "ray" / "runs" / "seed-0", [(1, 10, 0, 1.0), (2, 20, 0, 2.0)])
    _metrics(tmp_path / "ray" / "runs" / "seed-3", [(1, 10, 3, 2.0), (2, 20, 3, 4.0)])
    assert [p.name for p in pool_run_dirs(tmp_path / "ray")] == ["seed-0", "seed-3"]
    assert sorted(curves(pool_run_dirs(tmp_path / "ray"))) == [0, 3]
    path = pool_curve(tmp_path / "ray")
    assert path == tmp_path / "ray" / "learning-curve.png" and path.stat().st_size > 2000
    _metrics(tmp_path / "empty" / "run", [(1, 10, 0, nan)])
    assert pool_curve(tmp_path / "empty") is not None
    assert pool_curve(tmp_path / "nothing") is None


def test_time_to_fraction_of_a_negative_curve_is_none(tmp_path: Path) -> None:
    """Every return negative (Overcooked at CPU scale): 0.9 x best lies above the best, so no update reaches
    it; the times are None (strict JSON), not a StopIteration. A curve at 0 reaches 0.9 x 0 at once."""
    from ers_exact.util.output import dumps

    _metrics(tmp_path / "neg" / "run", [(1, 10, 0, -5.0), (2, 20, 0, -3.0), (3, 30, 0, -4.0)])
    t = time_to_fraction(tmp_path / "neg" / "run", 0.9, smooth=1)
    assert t["best"] == -3.0 and t["seconds"] is None and t["env_steps"] is None and t["total_seconds"] == 3.0
    assert "NaN" not in dumps(t)
    _metrics(tmp_path / "zero" / "run", [(1, 10, 0, -1.0), (2, 20, 0, 0.0)])
    assert time_to_fraction(tmp_path / "zero" / "run", 0.9, smooth=1)["env_steps"] == 20


def test_a_smoothing_window_below_one_is_refused(run_dir: Path, tmp_path: Path) -> None:
    """smooth = 0 (or less) names the window in a ValueError (it was a ZeroDivisionError); 1 leaves a curve."""
    from ers_deep.analysis.curves import trailing_mean

    assert trailing_mean([1.0, 3.0, 5.0], 1) == [1.0, 3.0, 5.0] and trailing_mean([1.0, 3.0], 2) == [1.0, 2.0]
    for k in (0, -2):
        with pytest.raises(ValueError, match=f"smoothing window {k}"):
            trailing_mean([1.0, 2.0], k)
    with pytest.raises(ValueError, match="smoothing window 0"):
        time_to_fraction(run_dir, 0.9, smooth=0)
    with pytest.raises(ValueError, match="smoothing window 0"):
        learning_curve(run_dir, tmp_path / "c.png", smooth=0)


def test_a_gap_in_the_updates_does_not_restart_the_clock(tmp_path: Path) -> None:
    """Rows of update 3 missing (a kill cut them; resume names such gaps): update 4's time is the seconds of
    the updates logged before it plus its own (it was its own alone, as if the run had restarted: update 4 at
    1 s, before update 2 at 2 s, and total_seconds 2 of the 4 logged)."""
    rows = [(u, 100 * u, s, float(u)) for u in (1, 2, 4, 5) for s in (0, 1)]
    _metrics(tmp_path / "run", rows)
    got = curves(tmp_path / "run")
    logged = dict.fromkeys((1, 2, 4, 5), 1.0)  # _metrics: 1 s per update
    want = [sum(sec for v, sec in logged.items() if v <= u) for u in (1, 2, 4, 5)]
    for seed in (0, 1):
        assert [t for _, _, t in got[seed]] == want
    t = time_to_fraction(tmp_path / "run", 0.7, smooth=1)  # 0.7 x 5 = 3.5: first reached at update 4
    assert t["env_steps"] == 400 and t["seconds"] == want[2] and t["total_seconds"] == sum(logged.values())
