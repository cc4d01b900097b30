"""``tests/deep/conftest.py`` pins torch to one CPU thread for any selection of deep tests, not only the full
suite (before 2026-12-08 four test modules set it when imported, so a file run alone got the machine's count), on
machines without CUDA."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine keeps torch's thread count")


def test_torch_runs_one_thread_here() -> None:
    assert torch.get_num_threads() == 1


def test_one_thread_when_this_file_runs_alone() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_torch_runs_one_thread_here",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
