"""Regenerate the README's option tables from the CLIs' options classes (``make readme``).

The README holds one block per CLI between ``<!-- BEGIN PROG options -->`` and ``<!-- END PROG options -->``;
``tests/test_readme.py`` fails when a block differs from what this script writes, so the tables cannot drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


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


if __name__ == "__main__":
    new = sync(README.read_text())
    changed = new != README.read_text()
    README.write_text(new)
    print(f"{README}: {'updated' if changed else 'already up to date'}", file=sys.stderr)
