"""A command loads only what it needs (issue 23, point 4): which heavy packages each CLI path imports, checked
in a fresh interpreter (module counts, never timings: those are in ``benchmarks/test_cli_bench.py``); and the
packages' lazy re-exports (PEP 562) give the same objects as the modules they come from."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import ers_exact
from tests.own_process import run_json

HEAVY = ("numpy", "scipy", "sympy", "networkx", "matplotlib", "torch")
SRC = Path(ers_exact.__file__).resolve().parent

_PROBE = """
import contextlib, io, json, sys
{setup}
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))
print(json.dumps(loaded))
"""

_RUN_CLI = """
from ers_exact.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        status = main({argv!r})
    except SystemExit as stop:  # --help
        status = stop.code
assert status == 0, status
"""


def _heavy_modules(setup: str) -> set[str]:
    """The heavy top-level packages loaded after running ``setup`` in a fresh interpreter."""
    code = _PROBE.format(setup=setup, heavy=HEAVY)
    return set(run_json(code))


@pytest.mark.parametrize(
    ("setup", "allowed"),
    [
        pytest.param("import ers_exact", set(), id="import-ers_exact"),
        pytest.param("import ers_exact.cli", set(), id="import-cli"),
        pytest.param("from ers_exact.cli import readme_tables\nreadme_tables()", set(), id="readme-tables"),
        pytest.param(
            "import ers_exact.model, ers_exact.solve, ers_exact.symmetry, ers_exact.zsc, ers_exact.analysis, "
            "ers_exact.io, ers_exact.games",
            set(),
            id="import-every-package",
        ),
    ],
)
def test_imports_load_no_heavy_package(setup: str, allowed: set[str]) -> None:
    assert _heavy_modules(setup) <= allowed


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        pytest.param(["--help"], set(), id="help"),
        pytest.param(["solve", "--help"], set(), id="solve-help"),
        pytest.param(["games"], {"numpy"}, id="games"),
        pytest.param(["games", "--json"], {"numpy"}, id="games-json"),
        pytest.param(["solve", "dectiger", "--alpha", "1"], {"numpy"}, id="solve"),
        pytest.param(["info", "dectiger"], {"numpy"}, id="info"),
        pytest.param(["optimal", "dectiger"], {"numpy"}, id="optimal"),
    ],
)
def test_command_loads_only_what_it_needs(argv: list[str], allowed: set[str]) -> None:
    """``games`` never loads scipy, sympy or networkx; no command here loads scipy (small games: the solver's
    sparse products are numpy's, ``ers_exact.util.sparse``), sympy, networkx, matplotlib or torch (the
    symmetry and plotting commands do, inside their runs)."""
    loaded = _heavy_modules(_RUN_CLI.format(argv=argv))
    assert loaded <= allowed, f"ers-exact {' '.join(argv)} imported {sorted(loaded - allowed)}"


def _lazy_packages() -> list[str]:
    """Every ers_exact package whose ``__init__`` re-exports lazily (calls ``lazy_exports``)."""
    found = []
    for init in sorted(SRC.rglob("__init__.py")):
        if "lazy_exports(" in init.read_text():
            parts = init.parent.relative_to(SRC.parent).parts
            found.append(".".join(parts))
    return found


def _type_checking_names(package: str) -> dict[str, str]:
    """name -> module of the imports in the package's ``if TYPE_CHECKING:`` block."""
    path = SRC.parent.joinpath(*package.split("."), "__init__.py")
    names = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module, ast.unparse(imp)
                names.update({a.asname or a.name: imp.module for a in imp.names})
    return names


def test_lazy_packages_are_found() -> None:
    assert {"ers_exact", "ers_exact.model", "ers_exact.solve", "ers_exact.games"} <= set(_lazy_packages())


@pytest.mark.parametrize("package", _lazy_packages())
def test_lazy_exports_match_their_modules(package: str) -> None:
    """``__all__`` = the eager names + the TYPE_CHECKING names; each lazy name is the object its module
    defines (also where a function has its module's name: ``ers_exact.solve.continuation``)."""
    pkg = importlib.import_module(package)
    declared = _type_checking_names(package)
    eager = {n for n in pkg.__all__ if n in vars(pkg)} - set(declared)
    assert set(pkg.__all__) == set(declared) | eager
    assert set(pkg.__all__) <= set(dir(pkg))
    for name, module in declared.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(module), name), f"{package}.{name}"
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = pkg.no_such_name


def test_function_keeps_its_name_when_its_module_is_imported_first() -> None:
    code = (
        "import ers_exact.solve.continuation, ers_exact.games.dectiger, ers_exact.analysis.census\n"
        "import ers_exact.solve as s, ers_exact.games as g, ers_exact.analysis as a\n"
        "from ers_exact.solve import sweep\n"
        "fs = (s.continuation, g.dectiger, a.census, sweep)\n"
        "print(all(type(f).__name__ == 'function' and f.__module__.endswith(f.__name__) for f in fs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
