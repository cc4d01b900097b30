"""The progress bar's estimate of the time left (``util/progress.py``): scaled from the count done, and never
beyond the deadline of work that stops at a time limit (``optimal-set --max-seconds``)."""

from __future__ import annotations

import re
import time

import pytest

from ers_exact.util.progress import Progress


class _Clock:
    """A fake ``time.perf_counter`` that the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _etas(err: str) -> list[float]:
    return [float(m) for m in re.findall(r"eta\s+([0-9.]+|nan)s", err)]


def test_eta_scales_the_elapsed_time_by_the_share_left(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    with Progress(100, "work", enabled=True) as bar:
        clock.now += 10.0
        bar.update(25)  # a quarter in 10 s: 30 s left
    assert _etas(capsys.readouterr().err) == [30.0]


def test_eta_is_capped_by_the_deadline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """400,000 boxes allowed, 155 done in 4 s, the search stops 1 s later: 1 s left, not ~10,300 s (the bar of
    ``optimal-set GridSmall.dpomdp --alpha 0.1 --max-seconds 5`` showed ``155/400,000 eta 6100.8s``)."""
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    with Progress(400_000, "optimal set", enabled=True, deadline=clock.now + 5.0) as bar:
        clock.now += 4.0
        bar.update(155)
        clock.now += 2.0  # past the deadline: nothing left
        bar.update(1)
    assert _etas(capsys.readouterr().err) == [1.0, 0.0]


def test_an_optimal_set_search_stopped_by_its_time_limit_shows_an_eta_within_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Dec-Tiger H=3 at alpha 1 is not proven within seconds (README: not at any alpha tried): its bar counts
    boxes against ``max_boxes`` = 400,000, and each estimate must stay within the 3 s the search may run."""
    from ers_exact.games import get_game
    from ers_exact.model.histories import enumerate_histories
    from ers_exact.solve.config import OptimalSetConfig, SolverConfig
    from ers_exact.solve.optimal_set import certified_optimal_set

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    limit = 3.0
    cfg = OptimalSetConfig(max_seconds=limit, progress=True)
    result = certified_optimal_set(tree, 1.0, cfg, solver=SolverConfig(n_starts=4, progress=False))
    assert not result.complete
    etas = [e for e in _etas(capsys.readouterr().err) if e == e]  # drop nan (nothing done yet)
    assert etas, "no progress line was drawn"
    assert max(etas) <= limit
