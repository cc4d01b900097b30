"""The README's examples run as written (its Python block), so the documentation cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_a_python_example() -> None:
    assert _python_blocks(), "README.md lost its Python example"


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_block_runs(index: int) -> None:
    code = _python_blocks()[index]
    namespace: dict[str, object] = {}
    exec(compile(code, f"README.md python block {index}", "exec"), namespace)
    if "self_play_optimum(tree).value" in code:  # the block states J* of Dec-Tiger H=3 in a comment
        value = eval("self_play_optimum(tree).value", namespace)
        assert value == pytest.approx(5.1908125, abs=1e-6)
