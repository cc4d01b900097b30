"""Running Python code in a process of its own (a fresh interpreter: its own imports, its own peak memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_json(code: str, *args: str, timeout: float | None = None) -> Any:
    """``python -c code *args`` from the repository root; the last line it prints, parsed as JSON (a failing
    process raises ``CalledProcessError``)."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=timeout,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
