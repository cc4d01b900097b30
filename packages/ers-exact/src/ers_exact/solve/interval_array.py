"""Vectorised interval arithmetic on numpy arrays, with outward rounding (for the Krawczyk test of
:mod:`ers_exact.solve.certify` at any dimension).

An :class:`IArray` holds two float arrays ``lo <= hi`` of one shape and encloses every real array between
them. Each elementary operation is computed in floating point on the end points and then widened outward:
by one ulp for +, -, *, / (IEEE 754 rounds each to nearest, so the exact result is within half an ulp), by
a few ulps for exp and log (numpy's libm is accurate to about one ulp; :data:`LIBM_ULPS` leaves a margin),
and by the standard summation bound gamma_k * sum |x| (Higham, *Accuracy and Stability of Numerical
Algorithms*, eq. 4.4) for sums and sparse 0/1 matrix products of k terms. The operations are the ones the
logit-map evaluator of :mod:`ers_exact.solve.derivatives` needs; the same evaluator code runs on plain
float arrays and on ``IArray`` (helpers :func:`exp`, :func:`log`, :func:`spmm`, :func:`concat`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from ers_exact.util.sparse import SparseMatrix
from ers_exact.util.ulp import next_down, next_up

__all__ = ["LIBM_ULPS", "IArray", "concat", "exp", "log", "spmm", "take"]

_EPS = np.finfo(float).eps  # 2^-52 = 2u
_U = _EPS / 2
LIBM_ULPS = 4
_TINY = np.finfo(float).tiny

Operand = Union["IArray", np.ndarray, float]


_dn = next_down  # np.nextafter(x, -inf), the same bits, faster


_up = next_up  # np.nextafter(x, +inf), the same bits, faster


def _gamma(k: int) -> float:
    """gamma_k = k u / (1 - k u): the relative error bound of a floating-point sum of k + 1 terms."""
    k = max(int(k), 1)
    return k * _U / (1 - k * _U)


class IArray:
    """An array of closed intervals [lo, hi] (numpy broadcasting rules; end points are float64)."""

    __slots__ = ("hi", "lo")
    __array_ufunc__ = None  # numpy defers binary operators to ours (ndarray + IArray -> IArray.__radd__)

    def __init__(self, lo: Any, hi: Any = None) -> None:
        self.lo = np.asarray(lo, dtype=np.float64)
        self.hi = self.lo if hi is None else np.asarray(hi, dtype=np.float64)

    # ----- shape -----
    @property
    def shape(self) -> tuple[int, ...]:
        return self.lo.shape

    @property
    def ndim(self) -> int:
        return self.lo.ndim

    @property
    def mid(self) -> np.ndarray:
        return 0.5 * (self.lo + self.hi)

    @property
    def width(self) -> np.ndarray:
        return self.hi - self.lo

    def reshape(self, *shape: Any) -> IArray:
        return IArray(self.lo.reshape(*shape), self.hi.reshape(*shape))

    def transpose(self, *axes: Any) -> IArray:
        return IArray(self.lo.transpose(*axes), self.hi.transpose(*axes))

    def __getitem__(self, idx: Any) -> IArray:
        return IArray(self.lo[idx], self.hi[idx])

    def __len__(self) -> int:
        return len(self.lo)

    def __repr__(self) -> str:
        return f"IArray(lo={self.lo!r}, hi={self.hi!r})"

    # ----- arithmetic -----
    @staticmethod
    def lift(x: Operand) -> IArray:
        return x if isinstance(x, IArray) else IArray(x)

    def __add__(self, other: Operand) -> IArray:
        o = IArray.lift(other)
        return IArray(_dn(self.lo + o.lo), _up(self.hi + o.hi))

    __radd__ = __add__

    def __neg__(self) -> IArray:
        return IArray(-self.hi, -self.lo)

    def __sub__(self, other: Operand) -> IArray:
        o = IArray.lift(other)
        return IArray(_dn(self.lo - o.hi), _up(self.hi - o.lo))

    def __rsub__(self, other: Operand) -> IArray:
        return IArray.lift(other) - self

    def __mul__(self, other: Operand) -> IArray:
        """The hull of the four corner products, rounded outward; 0 * inf = 0 (it only arises from exact
        zeros, probabilities of 0). Where a factor is a point, or both are nonnegative, the extreme corners
        are known in advance (rounding to nearest is monotone), so fewer products give the same bits."""
        o = IArray.lift(other)
        with np.errstate(invalid="ignore", over="ignore"):  # an overflow to +-inf is an outward bound
            if o.lo is o.hi or self.lo is self.hi:  # a point factor: two corners
                p, q = (self.lo * o.lo, self.hi * o.lo) if o.lo is o.hi else (self.lo * o.lo, self.lo * o.hi)
                lo, hi = np.minimum(p, q), np.maximum(p, q)
            elif (o.lo >= 0).all():  # x b over b >= 0 is extreme at x's ends: two corners each
                if (self.lo >= 0).all():  # lo * lo <= every corner <= hi * hi
                    lo, hi = self.lo * o.lo, self.hi * o.hi
                else:
                    lo = np.minimum(self.lo * o.lo, self.lo * o.hi)
                    hi = np.maximum(self.hi * o.lo, self.hi * o.hi)
            elif (self.lo >= 0).all():  # the same with the factors' roles swapped
                lo = np.minimum(self.lo * o.lo, self.hi * o.lo)
                hi = np.maximum(self.lo * o.hi, self.hi * o.hi)
            else:
                p, q, r, s = self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi
                lo = np.minimum(np.minimum(p, q), np.minimum(r, s))
                hi = np.maximum(np.maximum(p, q), np.maximum(r, s))
            if np.isnan(lo).any() or np.isnan(hi).any():  # some 0 * inf: every corner, NaN read as 0
                c = np.stack(
                    np.broadcast_arrays(self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
                )
                c = np.where(np.isnan(c), 0.0, c)
                lo, hi = c.min(axis=0), c.max(axis=0)
        return IArray(_dn(lo), _up(hi))

    __rmul__ = __mul__

    def __truediv__(self, other: Operand) -> IArray:
        o = IArray.lift(other)
        if np.any((o.lo <= 0) & (o.hi >= 0)):
            lo = np.where((o.lo <= 0) & (o.hi >= 0), -np.inf, 0.0)
            safe = IArray(np.where(lo == 0, o.lo, 1.0), np.where(lo == 0, o.hi, 1.0))
            q = self / safe
            return IArray(np.where(lo == 0, q.lo, -np.inf), np.where(lo == 0, q.hi, np.inf))
        p = np.stack(np.broadcast_arrays(self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi))
        return IArray(_dn(p.min(axis=0)), _up(p.max(axis=0)))

    def __rtruediv__(self, other: Operand) -> IArray:
        return IArray.lift(other) / self

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> IArray:
        lo = self.lo.sum(axis=axis, keepdims=keepdims)
        hi = self.hi.sum(axis=axis, keepdims=keepdims)
        n = self.lo.size // max(lo.size, 1)
        mag = np.maximum(np.abs(self.lo), np.abs(self.hi)).sum(axis=axis, keepdims=keepdims)
        err = _gamma(n) * mag + _TINY
        return IArray(_dn(lo - err), _up(hi + err))

    def exp(self) -> IArray:
        with np.errstate(over="ignore"):
            lo = np.exp(self.lo) * (1 - LIBM_ULPS * _EPS)
            hi = np.exp(self.hi) * (1 + LIBM_ULPS * _EPS)
        return IArray(np.maximum(_dn(lo), 0.0), _up(hi))

    def log(self) -> IArray:
        """log over the interval; a lower end <= 0 (e.g. a sum of positive terms whose rounding margin reaches
        below 0) gives -inf there, never NaN (a NaN end would later be dropped by min / max unnoticed)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            # a subnormal end keeps its own log (log 5e-324 = -744.4): raised to the smallest normal float it
            # gave -708.4, a lower bound above the true log (a lse over a box wider than ~708 logits did)
            lo = np.where(self.lo > 0, np.log(np.where(self.lo > 0, self.lo, 1.0)), -np.inf)
            hi = np.where(self.hi > 0, np.log(np.where(self.hi > 0, self.hi, 1.0)), -np.inf)
            hi = np.where(np.isnan(self.hi), np.nan, hi)
            return IArray(_dn(lo - LIBM_ULPS * _EPS * np.abs(lo)), _up(hi + LIBM_ULPS * _EPS * np.abs(hi)))

    def contains(self, x: np.ndarray) -> np.ndarray:
        return (self.lo <= x) & (x <= self.hi)


def exp(x: Any) -> Any:
    """exp of a float array or an :class:`IArray`."""
    return x.exp() if isinstance(x, IArray) else np.exp(x)


def log(x: Any) -> Any:
    """log of a float array or an :class:`IArray`."""
    return x.log() if isinstance(x, IArray) else np.log(x)


def spmm(matrix: SparseMatrix, x: Any) -> Any:
    """``matrix @ x`` for a sparse matrix with exactly representable entries (e.g. 0, +-1) and a 2-D float
    array or :class:`IArray`."""
    if not isinstance(x, IArray):  # floats: an overflow gives a non-finite result either way
        return matrix.dot(x, finite=True)
    pos, neg = matrix.positive, matrix.negative
    lo = pos @ x.lo - neg @ x.hi
    hi = pos @ x.hi - neg @ x.lo
    k = max(matrix.max_row_entries, 1)
    err = _gamma(k + 1) * (matrix.absolute @ np.maximum(np.abs(x.lo), np.abs(x.hi))) + _TINY
    return IArray(_dn(lo - err), _up(hi + err))


def concat(parts: Sequence[Any], axis: int = 0) -> Any:
    """np.concatenate for float arrays or :class:`IArray` (all of one kind or exact floats)."""
    if any(isinstance(p, IArray) for p in parts):
        lifted = [IArray.lift(p) for p in parts]
        return IArray(
            np.concatenate([p.lo for p in lifted], axis=axis),
            np.concatenate([p.hi for p in lifted], axis=axis),
        )
    return np.concatenate(parts, axis=axis)


def take(x: Any, idx: np.ndarray, axis: int) -> Any:
    """np.take for float arrays or :class:`IArray`."""
    if isinstance(x, IArray):
        return IArray(np.take(x.lo, idx, axis=axis), np.take(x.hi, idx, axis=axis))
    return np.take(x, idx, axis=axis)
