"""Helpers shared by the .dpomdp reader and writer tests (test_dpomdp_files.py, test_dpomdp_writer.py)."""

from __future__ import annotations

from ers_exact.io import read_dpomdp, write_dpomdp
from ers_exact.model.game import Game


def roundtrip(g: Game) -> Game:
    """``g`` written as .dpomdp text and read back (same horizon and name)."""
    return read_dpomdp(write_dpomdp(g), horizon=g.horizon, name=g.name)
