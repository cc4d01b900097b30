"""Equality and hashing of frozen result dataclasses under which an undefined (NaN) number equals an undefined
one, so a result computed in the process equals its strict-JSON round trip (:mod:`ers_exact.util.output`
writes NaN as null): ``__eq__ = nan_equal`` and ``__hash__ = nan_hash`` in the class body."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

__all__ = ["nan_equal", "nan_hash"]


def _nan_key(v: Any) -> Any:
    """``v`` with every NaN float (nested in tuples and lists) replaced by a marker that equals itself."""
    if isinstance(v, float) and math.isnan(v):
        return _NAN
    if isinstance(v, (tuple, list)):
        return tuple(_nan_key(x) for x in v)
    return v


_NAN = ("nan",)


def nan_equal(self: Any, other: object) -> bool:
    """Field by field (the dataclass's compared fields), an undefined (NaN) number equal to an undefined one:
    a result computed in the process equals its strict-JSON round trip (NaN != NaN made it unequal)."""
    names = [f.name for f in fields(self) if f.compare]
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(_nan_key(getattr(self, n)) == _nan_key(getattr(other, n)) for n in names)


def nan_hash(self: Any) -> int:
    return hash(tuple(_nan_key(getattr(self, f.name)) for f in fields(self) if f.compare))
