"""Tests and benchmarks drive ``HanabiEnv`` through its public API (``current_legal``, ``legal_mask``,
``observe``, ``state``), so a refactor of its internals cannot silently change what they check. The only private
members read are the two observation paths that ``observe`` picks between (eager in-place writes, the compiled
concatenation): their equality is what the accel tests check, and no user calls them apart."""

from __future__ import annotations

import ast

from ers_deep.envs import HanabiEnv
from tests.own_process import ROOT

INTERNALS_UNDER_TEST = {"_observe_concat", "_observe_inplace"}


def _private_members() -> set[str]:
    """Private names of the class and of a built env (attributes set in ``__init__``)."""
    env = HanabiEnv("Hanabi-Very-Small", batch_size=2, seed=0)
    names = set(dir(HanabiEnv)) | set(vars(env))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _own(node: ast.Attribute) -> bool:
    """``self._x`` / ``cls._x``: a class's own member, whatever class it is."""
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def test_tests_and_benchmarks_read_no_private_env_members() -> None:
    private = _private_members() - INTERNALS_UNDER_TEST
    assert {"_legal_cur", "_output"} <= private  # the analysis sees the members that were read before
    bad = []
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in private and not _own(node):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not bad, "private HanabiEnv members read (use the public API):\n" + "\n".join(bad)
