"""Field checks of the frozen result records (``__post_init__`` of :mod:`ers_exact.interface`'s records and
of :class:`~ers_exact.model.transformation.Transformation`): each takes a value and ``what``, the field it is
(``"SymmetryMatch.index"``), and returns the value in its stored form or raises a ``TypeError`` (wrong type)
/ ``ValueError`` (right type, outside the contract) whose message names ``what``."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["flag", "integer", "null_as_nan", "permutation", "real", "sequence", "text"]


def text(v: Any, what: str) -> str:
    """A string."""
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a string, not {type(v).__name__} {v!r}")
    return v


def flag(v: Any, what: str) -> bool:
    """True or False (Python's or numpy's), stored as Python's bool; never 0 / 1 or a string."""
    if not isinstance(v, bool | np.bool_):
        raise TypeError(f"{what} must be True or False, not {type(v).__name__} {v!r}")
    return bool(v)


def integer(v: Any, what: str, *, entries: bool = False, minimum: int | None = None) -> int:
    """An integer (Python's, numpy's or a 0-d integer tensor), never a bool, a float or a string (``int("1")``
    read a digit string as 1, ``int(1.5)`` truncated), stored as Python's int; ``minimum``: the least value
    allowed (``ValueError`` below it). ``entries``: ``v`` is an entry of the sequence ``what`` (the message
    says the sequence must hold integers)."""
    try:
        if isinstance(v, bool | np.bool_):
            raise TypeError
        n = operator.index(v)
    except TypeError:
        need = "hold integers (index images)" if entries else "be an integer"
        raise TypeError(f"{what} must {need}, not {type(v).__name__} {v!r}") from None
    if minimum is not None and n < minimum:
        raise ValueError(f"{what} must be >= {minimum}, not {n}")
    return n


def real(v: Any, what: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """A real number (not a bool or a string) as a float, finite or NaN (undefined; strict JSON writes it as
    null); +-inf would come back from its JSON as NaN. ``minimum`` / ``maximum``: the range a defined value
    must lie in (bounds included; ``ValueError`` outside)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{what} must be a number (NaN: undefined), not {type(v).__name__} {v!r}")
    if math.isinf(v):
        raise ValueError(f"{what} must be finite or NaN (undefined), not {v!r}")
    x = float(v)
    low, high = -math.inf if minimum is None else minimum, math.inf if maximum is None else maximum
    if not (math.isnan(x) or low <= x <= high):
        if maximum is None:
            raise ValueError(f"{what} must be >= {low:g} or NaN (undefined), not {x!r}")
        raise ValueError(f"{what} must be in [{low:g}, {high:g}] or NaN (undefined), not {x!r}")
    return x


def sequence(v: Any, what: str) -> tuple[Any, ...]:
    """A tuple or list, stored as a tuple (a record is frozen and hashable: a list in it is neither)."""
    if not isinstance(v, tuple | list):
        raise TypeError(f"{what} must be a tuple or list, not {type(v).__name__} {v!r}")
    return tuple(v)


def permutation(x: Any, what: str) -> tuple[int, ...]:
    """A permutation of 0..n-1 (the image of index k at position k): a sequence of :func:`integer` s (not a
    string), stored as a tuple of ints; a sequence that is not a permutation is a ``ValueError``."""
    if isinstance(x, str | bytes) or not isinstance(x, Iterable):
        raise TypeError(f"{what} must be a sequence of integers (index images), not {type(x).__name__} {x!r}")
    arr = tuple(integer(v, what, entries=True) for v in x)
    if sorted(arr) != list(range(len(arr))):
        raise ValueError(f"{what} is not a permutation of 0..{len(arr) - 1}: {list(arr)}")
    return arr


def null_as_nan(v: Any) -> Any:
    """A number of a result file: strict JSON writes an undefined value (NaN) as null; read it back as NaN (the
    record's ``__post_init__`` checks the rest: a string or true is refused, float() read them)."""
    return math.nan if v is None else v
