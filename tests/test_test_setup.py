"""The test suite's own set-up: a hanging test fails on its own instead of running into CI's time limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CI_MINUTES = 90  # .ci/run's limit on the whole run


def test_every_test_has_a_time_limit(pytestconfig: pytest.Config) -> None:
    """pytest-timeout is installed and pyproject.toml sets a per-test limit well inside CI's."""
    limit = float(pytestconfig.getini("timeout"))  # a ValueError (unknown ini key) without the plugin
    assert 0 < limit <= CI_MINUTES * 60 / 4


def test_a_hanging_test_fails_with_a_timeout(tmp_path: Path) -> None:
    """The limit stops a test that never returns and names the timeout (a 1 s limit on a 60 s sleep)."""
    (tmp_path / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(60)\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout", "1", str(tmp_path)],
        capture_output=True,
        check=False,
        text=True,
        timeout=50,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Timeout" in run.stdout and "1 failed" in run.stdout
