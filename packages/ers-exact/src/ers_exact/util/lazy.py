"""Lazy re-exports for package ``__init__`` files (PEP 562), so that ``import ers_exact`` and the command
line load only the modules a caller uses (numpy, scipy, sympy and networkx come with those modules).

A package lists its public names and the module each lives in::

    __getattr__, __dir__ = lazy_exports(__name__, {"Game": "game", "enumerate_histories": "histories"})

and keeps an ``if TYPE_CHECKING:`` block importing the same names, so that mypy and IDEs see them. The first
``package.name`` (or ``from package import name``) imports the module and caches the value in the package.

Where a public function has the name of its own module (``ers_exact.solve.continuation``), importing the
module binds the module to that package attribute; the package then keeps the function under that name,
as the eager ``from .continuation import continuation`` did.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


class _SameNamePackage(types.ModuleType):
    """A package some of whose public names are also the names of its modules (see the module doc)."""

    _shadowed: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._shadowed and isinstance(value, types.ModuleType):
            return  # the import system binding the submodule: the function keeps the name
        super().__setattr__(name, value)


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """PEP 562 ``__getattr__`` and ``__dir__`` for ``package``, importing ``exports[name]`` (a module of the
    package, relative name) on first access of ``name``."""
    targets = {name: f"{package}.{module}" for name, module in exports.items()}
    module = sys.modules[package]
    shadowed = frozenset(name for name, source in exports.items() if source == name)
    if shadowed:
        module.__class__ = _SameNamePackage
        module._shadowed = shadowed  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(target), name)
        types.ModuleType.__setattr__(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(targets))

    return __getattr__, __dir__
