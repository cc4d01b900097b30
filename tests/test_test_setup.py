"""The test suite's own set-up: a hanging test fails on its own instead of running into CI's time limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.own_process import run_pytest

CI_MINUTES = 90  # .ci/run's limit on the whole run


def test_every_test_has_a_time_limit(pytestconfig: pytest.Config) -> None:
    """pytest-timeout is installed and pyproject.toml sets a per-test limit well inside CI's."""
    limit = float(pytestconfig.getini("timeout"))  # a ValueError (unknown ini key) without the plugin
    assert 0 < limit <= CI_MINUTES * 60 / 4


def test_a_hanging_test_fails_with_a_timeout(tmp_path: Path) -> None:
    """The limit stops a test that never returns and names the timeout (a 1 s limit on a 60 s sleep)."""
    (tmp_path / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(60)\n")
    run = run_pytest("--timeout", "1", str(tmp_path), cwd=tmp_path, timeout=50)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Timeout" in run.stdout and "1 failed" in run.stdout


def test_hypothesis_runs_fixed_examples_by_default(pytestconfig: pytest.Config) -> None:
    """The ``ci`` profile (tests/conftest.py): the same examples on every run, no database, no deadline; a test's
    own ``@settings`` inherit it. ``--hypothesis-profile explore`` is the random search."""
    from hypothesis import given, settings, strategies

    if pytestconfig.getoption("hypothesis_profile", None) not in (None, "ci"):
        pytest.skip("another Hypothesis profile was asked for")
    assert settings.default.derandomize is True
    assert settings.default.database is None and settings.default.deadline is None
    assert settings(max_examples=5).derandomize is True  # a test's own settings keep the profile's fields
    seen: list[int] = []

    @given(strategies.integers(0, 10**9))
    @settings(max_examples=20)
    def draw(x: int) -> None:
        seen.append(x)

    draw()
    first = list(seen)
    seen.clear()
    draw()
    assert seen == first and len(set(first)) > 5  # two runs, the same twenty draws


def test_no_test_file_fixes_what_the_profiles_decide() -> None:
    """``derandomize`` and ``database`` are the profiles' (tests/conftest.py): a test's own ``@settings`` that set
    them override ``--hypothesis-profile explore``, whose runs then repeat that test's fixed examples (8 files
    did, so the explore runs of 2026-12-08's note searched 32 of the property-test files, not all)."""
    root = Path(__file__).parent
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "conftest.py" and path != Path(__file__)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "derandomize=" in line or "database=" in line
    ]
    assert not found, found
