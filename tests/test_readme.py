"""The READMEs' examples run as written (their Python blocks) and the option tables are generated, so the
documentation cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
DEEP_README = README.parent / "packages" / "ers-deep" / "README.md"
EXACT_README = README.parent / "packages" / "ers-exact" / "README.md"


def _python_blocks() -> list[str]:
    return [
        b
        for path in (README, DEEP_README, EXACT_README)
        for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    ]


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
    if "symmetry_report(tree, alpha=0.25)" in code:  # ers-exact's README: the toy game's groups (the paper)
        report: dict = namespace["report"]  # type: ignore[assignment]
        assert (report["mdp"]["order"], report["er"]["order_on_policies"]) == (1, 2)
        assert report["fixed_points_complete"] is True


def load_sync_readme() -> Any:
    """scripts/sync_readme.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_readme", README.parent / "scripts" / "sync_readme.py")
    assert spec is not None and spec.loader is not None
    sync_readme = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync_readme)
    return sync_readme


def test_readme_lists_every_option_of_every_command() -> None:
    """The option tables in the README are exactly what the options classes generate (`make readme`)."""
    sync_readme = load_sync_readme()
    text = README.read_text()
    assert sync_readme.sync(text) == text, "README option tables are stale: run `make readme`"
    assert sync_readme.main(["--check"]) == 0


def test_sync_readme_checks_without_writing_and_refuses_another_checkouts_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--check` names a stale block and writes nothing; a README outside the imported packages' checkout (a
    second worktree whose venv points at the first) is refused, not rewritten from the other's options."""
    sync_readme = load_sync_readme()
    stale = sync_readme.block_pattern("ers-deep").sub(r"\1| stale |\n\3", README.read_text())
    copy = tmp_path / "repo" / "README.md"
    copy.parent.mkdir()
    copy.write_text(stale)
    monkeypatch.setattr(sync_readme, "README", copy)
    monkeypatch.setattr(sync_readme, "foreign_packages", list)
    assert sync_readme.main(["--check"]) == 1
    assert "stale: ers-deep" in capsys.readouterr().err
    assert copy.read_text() == stale
    monkeypatch.undo()
    sync_readme = load_sync_readme()
    monkeypatch.setattr(sync_readme, "README", copy)
    assert sync_readme.main([]) == 2
    assert "another checkout's packages" in capsys.readouterr().err
    assert copy.read_text() == stale
