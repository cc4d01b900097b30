"""The io layer: file formats. The MADP toolbox ``.dpomdp`` reader and writer (``dpomdp``, grammar in
``dpomdp_parse``) and the Gambit ``.efg`` export of a game's history tree (``gambit``; information sets =
possible local histories, lambda = 1 / alpha at that boundary). It imports ``model`` and ``util``.
"""

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
