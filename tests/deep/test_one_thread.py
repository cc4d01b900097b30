"""``tests/deep/conftest.py`` pins torch to one CPU thread for any selection of deep tests, not only the full
suite (before 2026-12-07 four test modules set it when imported, so a file run alone got the machine's count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]


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
