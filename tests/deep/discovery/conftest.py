"""Shared fixtures of the discovery tests: one torch thread (tiny ops: on the shared 2-core machine a second
thread, contended by other processes, made one Hanabi play() call 100x slower), and the small toy pool and its
discovery run, trained once for the package (end to end, round trips and the CLI read the same files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ers_deep.discovery import DeepDiscoveryConfig, discover
from ers_deep.pools import load_pool, train_pool
from ers_deep.train.config import paper_config
from ers_exact.interface import DiscoveryResult
from tests.deep.threads import one_thread, single_thread  # noqa: F401 (one_thread: autouse)

#: the toy game's discovery run: 3 candidates (all carry the one action swap), 2 kept
TOY_DISCOVERY = DeepDiscoveryConfig(
    candidates=3, top=2, num_envs=256, num_steps=4, lr=0.01, total_env_steps=60_000, eval_games=300
)


@pytest.fixture(scope="package")
def toy_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 IPPO seeds on the toy game at alpha 0.25 (the paper's tabular settings, 60 updates: ~2 s)."""
    out = tmp_path_factory.mktemp("discovery") / "toy-pool"
    cfg = paper_config("tabular:toy-coordination", seeds=(0, 1, 2, 3), total_env_steps=4096 * 2 * 60)
    with single_thread():
        train_pool(cfg, out, eval_games=300, progress=False)
    return out


@pytest.fixture(scope="package")
def toy_discovery(toy_pool: Path) -> tuple[Path, DiscoveryResult]:
    """The toy pool's discovery output folder and its DiscoveryResult (~3 s)."""
    out = toy_pool.parent / "toy-discovery"
    with single_thread():
        result = discover(load_pool(toy_pool), TOY_DISCOVERY, out, progress=False)
    return out, result
