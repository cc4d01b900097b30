"""Shared fixtures of the analysis tests: one torch thread, and per tabular game a small self-play pool, its
deep discovery output and an other-play pool trained with the discovered set (the inputs of
``op_preservation``), trained once for the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from ers_deep.discovery import TABULAR_SETTINGS, DeepDiscoveryConfig, discover
from ers_deep.other_play import train_op_pool
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import paper_config
from tests.deep.threads import one_thread, single_thread  # noqa: F401 (one_thread: autouse)

#: per game: (self-play seeds, updates of SP and OP, discovery candidates, kept, discovery steps per candidate)
SETTINGS = {
    "toy-coordination": ((0, 1, 2, 3), 40, 3, 2, 60_000),
    # three transpositions of the levers, one per candidate; the two best kept (converged: distance < 0.01)
    "three-lever": ((0, 1, 2, 3), 80, 3, 2, 150_000),
}


def _op_inputs(root: Path, game: str) -> dict[str, Path]:
    seeds, updates, candidates, top, steps = SETTINGS[game]
    env = f"tabular:{game}"
    with single_thread():
        sp = paper_config(env, seeds=seeds, total_env_steps=4096 * 2 * updates)
        train_pool(sp, root / "sp", eval_games=200, progress=False)
        config = DeepDiscoveryConfig(
            candidates=candidates, top=top, **{**TABULAR_SETTINGS, "total_env_steps": steps}
        )
        discover(load_pool(root / "sp"), config, root / "discovery", progress=False)
        op = paper_config(env, seeds=(10, 11), total_env_steps=4096 * 2 * updates)
        train_op_pool(op, str(root / "discovery"), root / "op", eval_games=200, progress=False)
    return {"sp": root / "sp", "discovery": root / "discovery", "op": root / "op"}


@pytest.fixture(scope="package")
def toy_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Toy game: SP pool (4 seeds), discovery (the action swap), OP pool of 2 seeds (~15 s)."""
    return _op_inputs(tmp_path_factory.mktemp("toy"), "toy-coordination")


@pytest.fixture(scope="package")
def lever_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three-lever: a self-play pool of 4 seeds after 2 updates (~2 s), for tests that need policies of the
    game, not trained ones (the trained pool is ``lever_inputs["sp"]``, ~50 s with its discovery and OP)."""
    out = tmp_path_factory.mktemp("lever-pool") / "sp"
    with single_thread():
        cfg = paper_config("tabular:three-lever", seeds=(0, 1, 2, 3), total_env_steps=4096 * 2 * 2)
        train_pool(cfg, out, eval_games=50, progress=False)
    return out


@pytest.fixture(scope="package")
def lever_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three-lever: SP pool (2 seeds), discovery (2 lever transpositions), OP pool of 2 seeds (~25 s)."""
    return _op_inputs(tmp_path_factory.mktemp("lever"), "three-lever")
