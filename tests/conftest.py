"""Shared fixtures: the standard .dpomdp problem files live beside the repository (never inside it); the CLI
robustness tests' callers of ``ers-exact`` and ``ers-deep`` and their tiny real pools
(``tests/test_cli_finite_results.py``, ``_outputs``, ``_budgets``, ``_inputs``); Hypothesis's profiles.

Hypothesis runs the ``ci`` profile unless told otherwise: the same examples on every run (``derandomize``), no
example database, no per-example deadline (a loaded 2-core machine is no place to time one example), so a
property test fails on CI only where it fails here. ``pytest --hypothesis-profile explore`` draws fresh random
examples (with a database under ``.hypothesis/``) for a search beyond the fixed ones; a failure it finds prints
the ``@reproduce_failure`` blob to pin it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from tests.cli_helpers import ONE_AGENT, caller, run

REPO_ROOT = Path(__file__).resolve().parents[1]
DPOMDP_DIR = Path(os.environ.get("ERS_DPOMDP_DIR", REPO_ROOT.parent / "shared" / "dpomdp"))

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile("ci")  # before the plugin reads --hypothesis-profile, which overrides it


@pytest.fixture(scope="session")
def dpomdp_dir() -> Path:
    """Folder of the MADP benchmark files; tests using it skip with a clear reason when it is absent."""
    if not DPOMDP_DIR.is_dir():
        pytest.skip(f"standard .dpomdp files not found at {DPOMDP_DIR} (set ERS_DPOMDP_DIR)")
    return DPOMDP_DIR


@pytest.fixture
def exact(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``call(*argv) -> (exit status, stdout, stderr)`` of ``ers-exact``."""
    from ers_exact.cli import main

    return caller(main, capsys)


@pytest.fixture
def deep(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``call(*argv) -> (exit status, stdout, stderr)`` of ``ers-deep``."""
    from ers_deep.cli import main

    return caller(main, capsys)


@pytest.fixture(scope="session")
def pools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny real pools: two of toy-coordination (one stopped early), one of three-lever, one of a one-agent
    game (seconds each); built once for the session (the CLI robustness files share it, read-only)."""
    from ers_deep.cli import main

    root = tmp_path_factory.mktemp("pools")
    (root / "one.dpomdp").write_text(ONE_AGENT)
    small = ["--total-steps", "64", "--num-envs", "4", "--num-steps", "4", "--minibatches", "1"]
    made = {
        "toy": ["--env", "tabular:toy-coordination", "--seeds", "0-1", *small],
        "lever": ["--env", "tabular:three-lever", "--seeds", "0-1", *small],
        "one": ["--env", str(root / "one.dpomdp"), "--seeds", "0-1", *small],
        "partial": [
            "--env",
            "tabular:toy-coordination",
            "--seeds",
            "0",
            "--total-steps",
            "256",
            "--num-envs",
            "4",
            "--num-steps",
            "4",
            "--minibatches",
            "1",
            "--max-updates",
            "12",
        ],
    }
    out = {}
    for name, argv in made.items():
        assert run(main, ["train-sp", *argv, "--eval-games", "4", "--out", str(root / name)]) == 0
        out[name] = root / name
    op = ["--env", "tabular:toy-coordination", "--seeds", "0", *small[2:], "--total-steps", "256"]
    argv = ["train-op", *op, "--symmetries", "mdp", "--max-updates", "4", "--eval-games", "4"]
    assert run(main, [*argv, "--out", str(root / "op-partial")]) == 0
    out["op-partial"] = root / "op-partial"
    return out
