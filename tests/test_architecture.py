"""The layering of both packages, checked on their source (no imports executed).

Folders name the layers and imports point down them: a module may import from its own layer or a lower one,
never a higher one; there is no import cycle between modules; no module imports another module's private
(underscore) names or reads them through an object; ers-exact never imports ers-deep or torch. Also: imports
are absolute (the checks read no relative ones), every public function is annotated, and no module passes
MAX_MODULE_LINES.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1] / "packages"
SOURCES = {
    "ers_exact": ROOT / "ers-exact" / "src" / "ers_exact",
    "ers_deep": ROOT / "ers-deep" / "src" / "ers_deep",
}

# Layer rank of each top-level subpackage / module (lower = more basic). A new folder must be placed here.
LAYERS: dict[str, dict[str, int]] = {
    "ers_exact": {
        "util": 0,
        "model": 1,
        "io": 2,
        "games": 3,
        "interface": 4,
        "zsc_report": 4,
        "symmetry_match": 4,
        "deployment": 4,
        "solve": 5,
        "symmetry": 6,
        "zsc": 7,
        "analysis": 8,
        "cli": 9,
        "__init__": 10,
    },
    "ers_deep": {
        "seed_layout": 0,  # constants only (the population runs' seed bounds)
        "ray_cluster": 0,  # the Ray connection and its error (ers_exact.util only)
        "envs": 1,
        "nets": 2,
        "accel": 3,
        "train": 4,
        "policies": 5,
        "pools": 5,
        "crossplay": 6,
        "discovery": 7,
        "other_play": 8,
        "zsc": 9,
        "analysis": 10,
        "bench": 11,
        "cli": 12,
        "__init__": 13,
    },
}
# Inside ers_deep.envs: the shared base modules sit below the env folders, which never import each other.
ENV_FOLDERS = ("hanabi", "overcooked_v2", "tabular")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, src in SOURCES.items():
        for path in src.rglob("*.py"):
            parts = path.relative_to(src).with_suffix("").parts
            name = ".".join((pkg, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, imported names) for every import of ers_exact / ers_deep / torch in the module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
    return [(m, names) for m, names in found if m.split(".")[0] in ("ers_exact", "ers_deep", "torch")]


def _resolve(module: str, names: list[str]) -> list[str]:
    """The package modules an import statement depends on (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
    return targets or ([module] if module in MODULES else [])


def _rank(module: str) -> tuple[str, int]:
    parts = module.split(".")
    pkg, top = parts[0], (parts[1] if len(parts) > 1 else "__init__")
    ranks = LAYERS[pkg]
    assert top in ranks, f"{module}: folder/module '{top}' has no layer in tests/test_architecture.py LAYERS"
    return pkg, ranks[top]


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for module, names in _imports(name, path):
            for target in _resolve(module, names):
                if (
                    target != name
                    and not name.startswith(target + ".")
                    and target.split(".")[-1] != "__init__"
                ):
                    g.add_edge(name, target)
    return g


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _rank(name)


@pytest.mark.parametrize("pkg", sorted(SOURCES))
def test_imports_point_down_the_layers(pkg: str) -> None:
    bad = []
    for src, dst in _graph().edges:
        if not src.startswith(pkg + ".") and src != pkg:
            continue
        if src == pkg:  # the package's own __init__ re-exports from anywhere below it
            continue
        (sp, sr), (dp, dr) = _rank(src), _rank(dst)
        if sp == dp and dr > sr:
            bad.append(f"{src} -> {dst}")
        if sp == "ers_exact" and dp == "ers_deep":
            bad.append(f"{src} -> {dst} (ers-exact must not depend on ers-deep)")
    assert not bad, "imports pointing up the layers:\n" + "\n".join(sorted(bad))


def test_env_folders_do_not_import_each_other() -> None:
    bad = []
    for src, dst in _graph().edges:
        s, d = src.split("."), dst.split(".")
        if s[:2] == d[:2] == ["ers_deep", "envs"] and len(s) > 2 and len(d) > 2:
            if s[2] in ENV_FOLDERS and d[2] in ENV_FOLDERS and s[2] != d[2]:
                bad.append(f"{src} -> {dst}")
            if s[2] not in ENV_FOLDERS and d[2] in ENV_FOLDERS and s[2] != "__init__":
                bad.append(f"{src} -> {dst} (the shared env base must not depend on one env)")
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    g = _graph()
    packages = {
        n for n in MODULES if (SOURCES[n.split(".")[0]] / Path(*n.split(".")[1:]) / "__init__.py").exists()
    }
    g = g.subgraph(n for n in g if n not in packages)  # package __init__ re-exports are not dependencies
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_private_names_across_modules() -> None:
    bad = []
    for name, path in MODULES.items():
        for module, names in _imports(name, path):
            if module.split(".")[0] == "torch":
                continue
            bad += [
                f"{name}: from {module} import {n}"
                for n in names
                if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))
            ]
            bad += [
                f"{name}: import {module}"
                for part in module.split(".")
                if part.startswith("_") and part != "__init__"
            ]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_ers_exact_never_imports_torch() -> None:
    bad = [
        f"{n}: {m}"
        for n, p in MODULES.items()
        if n.startswith("ers_exact")
        for m, _ in _imports(n, p)
        if m.split(".")[0] in ("torch", "ers_deep")
    ]
    assert not bad, "\n".join(bad)


def test_no_relative_imports() -> None:
    """The layering checks read absolute imports only: a relative one would pass unseen."""
    bad = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert not bad, "relative imports (write them absolute):\n" + "\n".join(bad)


NAMEDTUPLE_API = {"_asdict", "_fields", "_field_defaults", "_make", "_replace"}


def _private_uses(path: Path) -> list[str]:
    """Private attributes (``x._name``) a module reads that it does not define itself: another module's private
    names reached through an object. A class's own and inherited members (``self._x``, ``super()._x``: the
    protected hooks of a base class), attributes of third-party modules (``os._exit``) and the namedtuple API
    are not counted."""
    tree = ast.parse(path.read_text())
    defined, foreign = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            defined.add(node.value)  # __slots__, setattr(obj, "_name", ...)
        elif isinstance(node, ast.Import):
            foreign |= {
                (a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("ers_")
            }
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if node.attr in defined or node.attr in NAMEDTUPLE_API or getattr(root, "id", None) in foreign:
            continue
        if _is_self(node.value):
            continue
        bad.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return bad


def _is_self(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "super"
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def test_no_private_attributes_across_modules() -> None:
    bad = [use for path in MODULES.values() for use in _private_uses(path)]
    assert not bad, "another module's private attributes used (add a public name):\n" + "\n".join(bad)


def _public_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of module-level classes whose names have no leading underscore
    (dunders count as public: ``__init__``, ``__call__``)."""

    def public(name: str) -> bool:
        return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))

    out = []
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) and public(node.name) else [node]
        out += [
            f for f in members if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and public(f.name)
        ]
    return out


def test_public_functions_are_annotated() -> None:
    bad = []
    for name, path in MODULES.items():
        for f in _public_functions(ast.parse(path.read_text())):
            a = f.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            missing = [p.arg for p in params if p.annotation is None and p.arg not in ("self", "cls")]
            missing += ["return"] if f.returns is None and f.name != "__init__" else []
            if missing:
                bad.append(f"{name}.{f.name} (line {f.lineno}): {', '.join(missing)}")
    assert not bad, "public functions without type annotations:\n" + "\n".join(bad)


MAX_MODULE_LINES = 400  # the guide's "~400 lines"


def test_modules_stay_small() -> None:
    sizes = {name: path.read_text().count("\n") for name, path in MODULES.items()}
    bad = [f"{name}: {n} lines" for name, n in sorted(sizes.items()) if n > MAX_MODULE_LINES]
    assert not bad, f"modules over {MAX_MODULE_LINES} lines (split them by concept):\n" + "\n".join(bad)
