"""The layering of both packages, checked on their source (no imports executed).

Folders name the layers and imports point down them: a module may import from its own layer or a lower one,
never a higher one; there is no import cycle between modules; no module imports another module's private
(underscore) names; ers-exact never imports ers-deep or torch.
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
        "solve": 5,
        "symmetry": 6,
        "zsc": 7,
        "analysis": 8,
        "cli": 9,
        "__init__": 10,
    },
    "ers_deep": {
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
