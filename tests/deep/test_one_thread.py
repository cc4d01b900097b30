"""``tests/deep/conftest.py`` pins torch to one CPU thread for any selection of deep tests, not only the full
suite (before 2026-12-08 four test modules set it when imported, so a file run alone got the machine's count), on
machines without CUDA."""

from __future__ import annotations

import pytest
import torch

from tests.own_process import run_pytest

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine keeps torch's thread count")


def test_torch_runs_one_thread_here() -> None:
    assert torch.get_num_threads() == 1


def test_one_thread_when_this_file_runs_alone() -> None:
    run = run_pytest(f"{__file__}::test_torch_runs_one_thread_here")
    assert run.returncode == 0, run.stdout + run.stderr
