"""Helpers shared by the CLI robustness tests (``tests/test_cli_*.py`` of issue 22's classes of careless-user
inputs): two small .dpomdp games that are not two-player (one agent, three agents), the refusal contract
(exit status 2, ONE stderr line ``PROG CMD: error: ...`` naming the value, no traceback), strict JSON (no
NaN / Infinity tokens) and finiteness checks, a caller of one CLI's ``main`` that returns (exit status,
stdout, stderr), the ``@OUT`` substitution of an argv and the tiny training options. The ``exact``, ``deep``
and ``pools`` fixtures built on them are in ``tests/conftest.py``."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ONE_AGENT = """agents: 1
discount: 1
values: reward
states: 2
start:
uniform
actions:
2
observations:
2
T: * : * : * : 0.5
O: * : * : * : 0.5
R: 0 : * : * : * : 1
"""

THREE_AGENTS = """agents: 3
discount: 1
values: reward
states: 2
start:
uniform
actions:
2
2
2
observations:
2
2
2
T: * : * : * : 0.5
O: * : * : * : 0.125
R: 0 0 0 : * : * : * : 1
"""


def run(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """The exit status of one CLI's ``main`` on ``argv`` (argparse's ``SystemExit`` included)."""
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits
        return int(exc.code or 0)


def assert_refused(prog: str, code: int, err: str, *names: str) -> str:
    """The refusal contract; returns the line."""
    assert code == 2, f"exit status {code}, stderr: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith(f"{prog} "), lines[0]
    assert ": error: " in lines[0], lines[0]
    for name in names:
        assert name in lines[0], f"the message does not name {name!r}: {lines[0]}"
    return lines[0]


def strict(text: str) -> Any:
    """JSON that a strict parser accepts (no NaN / Infinity tokens)."""

    def bad(token: str) -> None:
        raise AssertionError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=bad)


def finite(x: Any) -> bool:
    """Whether every float in a parsed JSON value (nested dicts and lists) is finite."""
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(finite(v) for v in x.values())
    if isinstance(x, list):
        return all(finite(v) for v in x)
    return True


def caller(
    main: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """``call(*argv) -> (exit status, stdout, stderr)`` of one CLI's ``main``."""

    def call(*argv: str) -> tuple[int, str, str]:
        code = run(main, list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


def fill(argv: list[str], tmp_path: Path) -> tuple[list[str], Path]:
    """``argv`` with ``@OUT...`` replaced by ``tmp_path/out...``, and that output (``tmp_path`` when none)."""
    out: list[str] = []
    target = tmp_path
    for a in argv:
        if a.startswith("@OUT"):
            target = tmp_path / ("out" + a[4:])
            a = str(target)
        out.append(a)
    return out, target


#: the tiny self-play training of a pool (4 envs x 4 steps, 64 env-steps)
SMALL_TRAIN = ["--total-steps", "64", "--num-envs", "4", "--num-steps", "4", "--minibatches", "1"]
