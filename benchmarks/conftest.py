"""Benchmarks import the slow references that live in tests/ (one copy, shared)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
