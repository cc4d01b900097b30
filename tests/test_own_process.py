"""``tests.own_process``: a child's peak memory is its own, not its parent's (``ru_maxrss`` carries the parent's
peak over fork and exec on Linux; the benchmarks' peak columns read ``peak_rss_mb`` in the child)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.own_process import peak_rss_mb, run_json

CHILD = (
    "import json; from tests.own_process import peak_rss_mb; print(json.dumps({'peak_mb': peak_rss_mb()}))"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_a_child_reports_its_own_peak_not_its_parents() -> None:
    held = np.ones(400 * 2**20 // 8)  # 400 MB resident in this process
    assert peak_rss_mb() >= 400
    child = run_json(CHILD, timeout=60)
    assert child["peak_mb"] < 200, child  # a bare interpreter: tens of MB
    assert held[-1] == 1.0
