"""``discover``'s ``pool`` and ``held_out`` take a pool folder as the CLI does (``load_pool``): a path string
failed with an AttributeError deep inside; anything else is a TypeError saying how to load a pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from ers_deep.discovery import discover
from ers_deep.pools import PoolError, load_pool
from ers_exact.interface import DiscoveryResult
from tests.deep.discovery.conftest import TOY_DISCOVERY


def test_a_pool_folder_gives_the_run_of_the_loaded_pool(
    toy_pool: Path, toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path
) -> None:
    """The same config and seed on the folder (str) as on ``load_pool(folder)`` (the fixture): the same result."""
    _, expected = toy_discovery
    got = discover(str(toy_pool), TOY_DISCOVERY, tmp_path / "out", progress=False)
    assert got.scores == expected.scores and got.J_1 == expected.J_1


def test_other_pool_arguments_are_refused_by_name(toy_pool: Path, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"pool must be a Pool or a pool folder .*load_pool"):
        discover(42, TOY_DISCOVERY, tmp_path / "out")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"held_out must be a Pool or a pool folder .*load_pool"):
        discover(load_pool(toy_pool), TOY_DISCOVERY, tmp_path / "out", held_out=[1])  # type: ignore[arg-type]
    with pytest.raises(PoolError, match="not a pool"):
        discover(str(tmp_path), TOY_DISCOVERY, tmp_path / "out")
    assert not (tmp_path / "out").exists()
