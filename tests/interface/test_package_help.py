"""``help(ers_exact)`` and ``help(ers_deep)`` are a user's map of the packages: each top-level docstring names
every module and subpackage the package has (found on disk, not listed by hand here) and each name it
promises as an entry point exists where it says; ers-exact's example runs as written."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import pytest

import ers_deep
import ers_exact

PACKAGES = {"ers_exact": ers_exact, "ers_deep": ers_deep}


def _modules(package: ModuleType) -> list[str]:
    return [m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]


@pytest.mark.parametrize("name", list(PACKAGES))
def test_the_package_docstring_names_every_module(name: str) -> None:
    package = PACKAGES[name]
    doc = package.__doc__ or ""
    missing = [m for m in _modules(package) if f"``{m}``" not in doc]
    assert not missing, f"help({name}) does not name {missing}"


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("ers_exact.model.histories", ["enumerate_histories", "HistoryTree"]),
        ("ers_exact.model.optimal", ["optimal_value"]),
        ("ers_exact.games", ["get_game", "GAMES"]),
        ("ers_exact.interface", ["DiscoveryResult", "ZSCReport"]),
        ("ers_exact.solve.fixed_points", ["solve_fixed_points"]),
        ("ers_exact.symmetry.search", ["decpomdp_symmetries"]),
        ("ers_exact.symmetry.er", ["er_symmetries"]),
        ("ers_exact.zsc.discovery", ["discover"]),
        ("ers_exact.zsc.pipeline", ["run_zsc"]),
        ("ers_exact.analysis.report", ["symmetry_report"]),
        ("ers_deep.envs", ["HanabiEnv", "OvercookedV2Env", "TabularEnv", "ENVS"]),
        ("ers_deep.nets", ["NetConfig", "build_net"]),
        ("ers_deep.accel", ["FastStep", "FastRollout"]),
        ("ers_deep.train", ["TrainConfig", "paper_config", "train", "resume"]),
        ("ers_deep.pools", ["train_pool", "load_pool"]),
        ("ers_deep.crossplay", ["population_report"]),
        ("ers_deep.discovery", ["DeepDiscoveryConfig", "discover"]),
        ("ers_deep.zsc", ["PopulationConfig", "run_table1", "run_table2"]),
    ],
)
def test_the_entry_points_the_docstrings_name_exist(module: str, names: list[str]) -> None:
    package = module.partition(".")[0]
    doc = PACKAGES[package].__doc__ or ""
    imported = importlib.import_module(module)
    for n in names:
        assert f"``{n}``" in doc, f"{n} is not named in help({package})"
        assert hasattr(imported, n), f"{module}.{n} does not exist"


def test_the_ers_exact_example_runs() -> None:
    block = re.search(r"::\n\n((?:    .*\n|\n)+)", ers_exact.__doc__ or "")
    assert block is not None
    namespace: dict[str, object] = {}
    exec("\n".join(line[4:] for line in block.group(1).splitlines()), namespace)
    value = eval("expected_return(tree, uniform_policy(tree))", namespace)
    assert isinstance(value, float)
