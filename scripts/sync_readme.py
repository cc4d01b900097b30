"""Regenerate the README's option tables from the CLIs' options classes (``make readme``).

The README holds one block per CLI between ``<!-- BEGIN PROG options -->`` and ``<!-- END PROG options -->``;
``tests/test_readme.py`` fails when a block differs from what this script writes, so the tables cannot drift.

    python scripts/sync_readme.py           # rewrite the blocks (make readme)
    python scripts/sync_readme.py --check   # exit 1, naming the stale blocks, and write nothing

The tables come from the ``ers_exact`` / ``ers_deep`` that Python imports. They must be this checkout's: in a
second git worktree the venv's editable install still points at the first one's sources, so the script refuses
unless PYTHONPATH puts this checkout's ``packages/*/src`` first.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def foreign_packages() -> list[str]:
    """The packages Python imports from outside this checkout, as 'name (path)' (none: the tables are ours)."""
    out = []
    for name in ("ers_exact", "ers_deep"):
        path = Path(importlib.import_module(name).__file__ or "").resolve()
        if README.parent not in path.parents:
            out.append(f"{name} ({path.parent})")
    return out


def tables() -> dict[str, str]:
    """PROG -> the markdown of every command's options."""
    from ers_deep.cli import COMMANDS as DEEP
    from ers_exact.cli import COMMANDS as EXACT
    from ers_exact.util.cli import commands_markdown

    return {
        "ers-exact": commands_markdown("ers-exact", EXACT),
        "ers-deep": commands_markdown("ers-deep", DEEP),
    }


def block_pattern(prog: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN {prog} options -->\n)(.*?)(<!-- END {prog} options -->)", re.S)


def block(text: str, prog: str) -> str:
    """The body of ``prog``'s options block in ``text`` ('' where there is none)."""
    found = block_pattern(prog).search(text)
    return found.group(2) if found else ""


def sync(text: str) -> str:
    """``text`` with every options block replaced by the generated tables."""
    for prog, md in tables().items():
        pattern = block_pattern(prog)
        if not pattern.search(text):
            raise SystemExit(
                f"README.md has no '<!-- BEGIN {prog} options -->' ... '<!-- END {prog} options -->' block"
            )
        text = pattern.sub(lambda m, md=md: m.group(1) + "\n" + md + "\n" + m.group(3), text)
    return text


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    from ers_exact.util.cli import script_parser

    p = script_parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="report stale blocks (exit 1) and write nothing")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    foreign = foreign_packages()
    if foreign:
        print(
            f"{README}: the tables would come from another checkout's packages: {', '.join(foreign)}; "
            f"put {README.parent}/packages/*/src first on PYTHONPATH",
            file=sys.stderr,
        )
        return 2
    old = README.read_text()
    new = sync(old)
    if args.check:
        stale = [prog for prog in ("ers-exact", "ers-deep") if block(old, prog) != block(new, prog)]
        print(f"{README}: {'stale: ' + ', '.join(stale) if stale else 'up to date'}", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(new)
    print(f"{README}: {'updated' if new != old else 'already up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
