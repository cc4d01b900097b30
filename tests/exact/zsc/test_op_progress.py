"""The other-play ascent's progress bar (``ers-exact op``, and ``zsc``'s OP phase): a bar over the Adam phase's
starts x steps, whose total and final count are the work the ascent did, counted independently as the rows of
every OP gradient it evaluated; drawn where every ers-exact bar is (a terminal), so not under pytest."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.util.progress import Progress
from ers_exact.zsc import op_ascent, other_play, pipeline
from ers_exact.zsc.config import OPConfig, PopulationConfig


class _RecordingProgress(Progress):
    """A :class:`Progress` that keeps every instance, to read its total and count afterwards."""

    made: ClassVar[list[_RecordingProgress]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.made.append(self)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> tuple[list[_RecordingProgress], list[int]]:
    """Bars made by the OP training and the pipeline, and the batch size of every OP gradient the Adam
    phase evaluates (the budget check's calibration steps, which also evaluate it, are switched off)."""
    bars: list[_RecordingProgress] = []
    monkeypatch.setattr(_RecordingProgress, "made", bars)
    monkeypatch.setattr(other_play, "Progress", _RecordingProgress, raising=False)
    monkeypatch.setattr(pipeline, "Progress", _RecordingProgress)
    monkeypatch.setattr(other_play, "check_budget", lambda *args: None)
    rows: list[int] = []
    gradient = op_ascent.batch_op_gradient

    def counted(tree: Any, policy: tuple[np.ndarray, ...], maps: Any) -> Any:
        rows.append(len(policy[0]))
        return gradient(tree, policy, maps)

    monkeypatch.setattr(op_ascent, "batch_op_gradient", counted)
    return bars, rows


def test_the_op_bar_counts_every_start_of_every_adam_step(
    recorded: tuple[list[_RecordingProgress], list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    bars, rows = recorded
    tree = enumerate_histories(get_game("three-lever"))
    config = OPConfig(seeds=3, restarts=4, steps=7)
    other_play.solve_other_play(tree, "mdp", config, progress=True)
    assert len(bars) == 1
    (bar,) = bars
    assert len(rows) == config.steps  # one batched gradient per Adam step, over every start
    assert bar.total == sum(rows) == bar.done
    assert bar.enabled
    err = capsys.readouterr().err
    assert f"{sum(rows)}/{sum(rows)}" in err and "other-play three-lever" in err


def test_zsc_advances_one_bar_over_every_agents_op_training(
    recorded: tuple[list[_RecordingProgress], list[int]],
) -> None:
    """Each agent trains OP twice (Phi_MDP, its learned Phi_ER): both advance the pipeline's one bar, and no
    training draws a bar of its own over it."""
    bars, rows = recorded
    tree = enumerate_histories(get_game("toy-coordination"))
    cfg = PopulationConfig(agents=2, pool_source="exact", alpha=0.3, k=2, top=2, m=2, op_steps=3)
    pipeline.run_zsc(tree, cfg, progress=True)
    assert len(bars) == 1
    (bar,) = bars
    assert len(rows) == cfg.agents * 2 * cfg.op_steps
    assert bar.total == sum(rows) == bar.done


def test_no_bar_is_drawn_where_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """The default (None) follows stderr, as every ers-exact bar: captured here, so nothing is drawn."""
    tree = enumerate_histories(get_game("three-lever"))
    other_play.solve_other_play(tree, "mdp", OPConfig(seeds=1, restarts=2, steps=3))
    assert capsys.readouterr().err == ""
