"""Issue 23, point 4: a fast command line. Whole-process wall time of ``ers-exact`` commands (the console script
beside this interpreter, else ``python -m ers_exact.cli``), interpreter start and imports included, plus the
import time alone (the top-level cumulative sum of ``python -X importtime``). Targets on the shared 2-core
machine: ``games`` under 0.3 s, ``solve dectiger --alpha 1`` (H=2) under 0.8 s; they are reported, not asserted
(wall times there move with the other users' load). What each command may import is pinned, untimed, by
``tests/exact/test_lazy_imports.py``. Bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``, warmed up by a
first run) even where ``PYTHONDONTWRITEBYTECODE`` is set, as for an installed package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("ers-exact")
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "ers_exact.cli"]

# (arguments, target seconds or None)
COMMANDS = [
    (["games"], 0.3),
    (["games", "--json"], 0.3),
    (["solve", "dectiger", "--alpha", "1"], 0.8),
    (["--help"], None),
]

_IMPORTTIME = """
import contextlib, io
from ers_exact.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
"""


@pytest.fixture(scope="module")
def cached_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment with bytecode caching on, into a temporary folder."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path_factory.mktemp("pycache")))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run([*ENTRY, *argv], stdout=subprocess.DEVNULL, check=True, cwd=ROOT, env=env, timeout=120)


def import_seconds(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds of imports of one run (sum of the top-level cumulative times ``-X importtime`` reports)."""
    code = _IMPORTTIME.format(argv=argv)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    )
    top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| \S", out.stderr, flags=re.M)
    return sum(int(us) for us in top) / 1e6


@pytest.mark.parametrize("argv, target", COMMANDS, ids=["_".join(a).replace("-", "") for a, _ in COMMANDS])
def test_cli_whole_process(
    benchmark, cached_env: dict[str, str], argv: list[str], target: float | None
) -> None:
    benchmark.pedantic(_run, args=(argv, cached_env), rounds=5, iterations=1, warmup_rounds=1)
    imports = min(import_seconds(argv, cached_env) for _ in range(3))
    best = benchmark.stats.stats.min
    benchmark.extra_info.update(
        {"command": ["ers-exact", *argv], "target_seconds": target, "import_seconds": imports}
    )
    verdict = "" if target is None else f" (target {target} s: {'met' if best < target else 'missed'})"
    print(f"\ners-exact {' '.join(argv)}: min {best:.3f} s of 5 runs, imports {imports:.3f} s{verdict}")
