"""Running Python code in a process of its own (a fresh interpreter: its own imports, its own peak memory, read
in the child with :func:`peak_rss_mb`)."""

from __future__ import annotations

import json
import resource
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


def run_pytest(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m pytest -q -p no:cacheprovider *args`` in ``cwd`` (default: the repository root), its output
    captured; a failing run is returned, not raised."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=timeout, cwd=cwd)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB since it started its program: ``VmHWM`` of /proc/self/status
    (Linux: the high-water mark of this process image, reset by exec), else ``ru_maxrss``. On Linux
    ``ru_maxrss`` keeps the parent's peak across fork and exec: a child of a 500 MB pytest process reported
    504 MB where its own image peaked at 13 MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
