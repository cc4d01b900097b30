"""The io layer: file formats. The MADP toolbox ``.dpomdp`` reader and writer (``dpomdp``, grammar in
``dpomdp_parse`` over the lines and tokens of ``dpomdp_lexer``) and the Gambit ``.efg`` export of a game's
history tree (``gambit``; information sets = possible local histories, lambda = 1 / alpha at that
boundary). It imports ``model`` and ``util``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.io.dpomdp import DpomdpError, parse_dpomdp, read_dpomdp, save_dpomdp, write_dpomdp
    from ers_exact.io.gambit import EfgExport, export_efg, save_efg, to_efg

__all__ = [
    "DpomdpError",
    "EfgExport",
    "export_efg",
    "parse_dpomdp",
    "read_dpomdp",
    "save_dpomdp",
    "save_efg",
    "to_efg",
    "write_dpomdp",
]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "DpomdpError": "dpomdp",
            "parse_dpomdp": "dpomdp",
            "read_dpomdp": "dpomdp",
            "save_dpomdp": "dpomdp",
            "write_dpomdp": "dpomdp",
            "EfgExport": "gambit",
            "export_efg": "gambit",
            "save_efg": "gambit",
            "to_efg": "gambit",
        },
    )
