"""The standalone command lines (``python -m ers_deep.bench.MODULE``, ``scripts/*.py``) refuse abbreviated flags
as the two CLIs do: argparse's default read ``--num-env 8`` as ``--num-envs 8`` and ``--er`` as ``--ers``,
silently. Each builds its parser with ``ers_exact.util.cli.script_parser`` (``allow_abbrev=False``) and exposes
it as ``parser()``; the second test keeps the list below complete."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (the module: a dotted name or a script path, flags that parse, the same with one flag abbreviated, its dest)
CASES = [
    ("ers_deep.bench.jax_update", ["--out", "o", "--num-envs", "8"], "--num-env", "num_envs"),
    (
        "ers_deep.bench.learn_pair",
        ["--ers", "e", "--anchor", "a", "--out", "o", "--window", "2"],
        "--wind",
        "window",
    ),
    ("ers_deep.bench.precision", ["--out", "o", "--threads", "2"], "--thread", "threads"),
    ("scripts/cpu_learner_bounds.py", ["--pairs", "3"], "--pair", "pairs"),
    ("scripts/gpu_env_table.py", ["--budget-s", "5"], "--budget", "budget_s"),
    ("scripts/gpu_train_table.py", ["--learn-sides", "ers"], "--learn-side", "learn_sides"),
    ("scripts/switch_ab.py", ["--rounds", "2", "--num-envs", "64"], "--num-env", "num_envs"),
    ("scripts/sync_readme.py", ["--check"], "--ch", "check"),
]


def _load(where: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    if not where.endswith(".py"):
        return importlib.import_module(where)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # cpu_learner_bounds sets it on import; restored after
    spec = importlib.util.spec_from_file_location(Path(where).stem, ROOT / where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("where", "argv", "short", "dest"),
    CASES,
    ids=[c[0].removesuffix(".py").replace("/", ".").rsplit(".", 1)[-1] for c in CASES],
)
def test_an_abbreviated_flag_is_refused(
    where: str, argv: list[str], short: str, dest: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    module = _load(where, monkeypatch)
    full = module.parser().parse_args(argv)  # the flags in full parse
    assert getattr(full, dest) not in (None, False)
    abbreviated = [short if a == f"--{dest.replace('_', '-')}" else a for a in argv]
    assert abbreviated != argv
    with pytest.raises(SystemExit) as e:
        module.parser().parse_args(abbreviated)
    assert e.value.code == 2
    assert f"unrecognized arguments: {short}" in capsys.readouterr().err


def test_every_standalone_parser_is_built_by_script_parser_and_listed() -> None:
    """No module of the packages or scripts/ builds an argparse parser of its own (the CLIs' is
    ``ers_exact.util.cli``'s); each one that calls ``script_parser`` is a case above."""
    files = [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("scripts/*.py")]
    cli = ROOT / "packages/ers-exact/src/ers_exact/util/cli.py"
    own = [str(f.relative_to(ROOT)) for f in files if f != cli and "ArgumentParser(" in f.read_text()]
    assert not own, f"argparse parsers not built by script_parser: {own}"
    users = {f for f in files if f != cli and "script_parser(" in f.read_text()}
    listed = {ROOT / w if w.endswith(".py") else _source(w) for w, *_ in CASES}
    assert users == listed


def _source(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).resolve()


def test_a_cpu_learner_bounds_child_reads_run_sides_command_without_the_parser(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The child of side ``before`` runs on the old commit's ers packages, which lack ``script_parser``: the
    child reads the command ``run_side`` writes without building ``parser`` (it did, and failed, on 12-06)."""
    import json
    import subprocess
    import sys

    module = _load("scripts/cpu_learner_bounds.py", monkeypatch)
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout='{"env_steps_per_s": 1.0}\n')

    monkeypatch.setattr(module.subprocess, "run", fake_run)
    module.run_side("before", 2, Path("old"), "hanabi")

    def no_parser() -> None:
        raise ImportError("cannot import name 'script_parser' (the old commit)")

    monkeypatch.setattr(module, "parser", no_parser)
    monkeypatch.setattr(
        module, "learner_side", lambda side, updates, env: {"side": side, "n": updates, "env": env}
    )
    monkeypatch.setattr(sys, "argv", calls[0][1:])
    module.main()
    assert json.loads(capsys.readouterr().out) == {"side": "before", "n": 2, "env": "hanabi"}
