"""File formats: the MADP toolbox ``.dpomdp`` reader and writer."""

from ers_exact.io.dpomdp import DpomdpError, parse_dpomdp, read_dpomdp, save_dpomdp, write_dpomdp

__all__ = ["DpomdpError", "parse_dpomdp", "read_dpomdp", "save_dpomdp", "write_dpomdp"]
