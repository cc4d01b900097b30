"""File formats: the MADP toolbox ``.dpomdp`` reader and writer, and the Gambit ``.efg`` export."""

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
