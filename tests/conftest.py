"""Shared fixtures: the standard .dpomdp problem files live beside the repository (never inside it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DPOMDP_DIR = Path(os.environ.get("ERS_DPOMDP_DIR", REPO_ROOT.parent / "shared" / "dpomdp"))


@pytest.fixture(scope="session")
def dpomdp_dir() -> Path:
    """Folder of the MADP benchmark files; tests using it skip with a clear reason when it is absent."""
    if not DPOMDP_DIR.is_dir():
        pytest.skip(f"standard .dpomdp files not found at {DPOMDP_DIR} (set ERS_DPOMDP_DIR)")
    return DPOMDP_DIR
