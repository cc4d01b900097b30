"""Scalar interval arithmetic with outward rounding, and forward-mode derivatives over intervals.

:class:`Interval` encloses every real result: each operation rounds its lower end down and its upper end
up by one ulp (``math.nextafter``), which covers IEEE round-to-nearest. :class:`IDual` carries an
interval value and a sparse interval gradient, so evaluating a function on ``IDual`` inputs over a box
encloses both the function's range and its Jacobian over that box (as needed by the Krawczyk test).
"""

from __future__ import annotations

import math

__all__ = ["IDual", "Interval", "as_interval"]

_INF = math.inf
_EXP_MAX = 709.0  # math.exp overflows just above 709.78


def _dn(x: float) -> float:
    return math.nextafter(x, -_INF)


def _up(x: float) -> float:
    return math.nextafter(x, _INF)


def _times(x: float, y: float) -> float:
    """x * y with 0 * inf = 0 (an exact zero times an overflowed bound is still zero)."""
    return 0.0 if x == 0.0 or y == 0.0 else x * y


class Interval:
    """A closed interval [lo, hi] of reals."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: float, hi: float | None = None) -> None:
        self.lo = float(lo)
        self.hi = float(lo if hi is None else hi)

    def __repr__(self) -> str:
        return f"[{self.lo!r}, {self.hi!r}]"

    @property
    def mid(self) -> float:
        return 0.5 * (self.lo + self.hi)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def __add__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        o = as_interval(other)
        return Interval(_dn(self.lo + o.lo), _up(self.hi + o.hi))

    __radd__ = __add__

    def __neg__(self) -> Interval:
        return Interval(-self.hi, -self.lo)

    def __sub__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        o = as_interval(other)
        return Interval(_dn(self.lo - o.hi), _up(self.hi - o.lo))

    def __rsub__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        return as_interval(other) - self

    def __mul__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        o = as_interval(other)
        if self.lo >= 0 and o.lo >= 0:  # common case: probabilities
            return Interval(_dn(_times(self.lo, o.lo)), _up(_times(self.hi, o.hi)))
        p = (_times(self.lo, o.lo), _times(self.lo, o.hi), _times(self.hi, o.lo), _times(self.hi, o.hi))
        return Interval(_dn(min(p)), _up(max(p)))

    __rmul__ = __mul__

    def __truediv__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        o = as_interval(other)
        if o.lo <= 0 <= o.hi:
            return Interval(-_INF, _INF)
        q = (self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi)
        return Interval(_dn(min(q)), _up(max(q)))

    def __rtruediv__(self, other: Num) -> Interval:
        if isinstance(other, IDual):
            return NotImplemented
        return as_interval(other) / self

    def exp(self) -> Interval:
        """exp over the interval; never overflows: an end above 709 is bounded by exp(709) (below) or inf."""
        lo = 0.0 if self.lo < -745 else max(0.0, _dn(math.exp(min(self.lo, _EXP_MAX))))
        hi = _INF if self.hi > _EXP_MAX else _up(math.exp(self.hi))
        return Interval(lo, hi)

    def intersect(self, other: Interval) -> Interval | None:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Interval(lo, hi) if lo <= hi else None


Num = Interval | float | int


def as_interval(x: Num) -> Interval:
    """``x`` as an :class:`Interval` (a float becomes the point interval [x, x])."""
    return x if isinstance(x, Interval) else Interval(float(x))


class IDual:
    """Interval value with a sparse interval gradient {coordinate: d value / d y_coordinate}."""

    __slots__ = ("grad", "val")

    def __init__(self, val: Num, grad: dict[int, Interval] | None = None) -> None:
        self.val = as_interval(val)
        self.grad = grad or {}

    @staticmethod
    def _lift(x: IDual | Num) -> IDual:
        return x if isinstance(x, IDual) else IDual(x)

    def __add__(self, other: IDual | Num) -> IDual:
        o = IDual._lift(other)
        grad = dict(self.grad)
        for k, g in o.grad.items():
            grad[k] = grad[k] + g if k in grad else g
        return IDual(self.val + o.val, grad)

    __radd__ = __add__

    def __neg__(self) -> IDual:
        return IDual(-self.val, {k: -g for k, g in self.grad.items()})

    def __sub__(self, other: IDual | Num) -> IDual:
        return self + (-IDual._lift(other))

    def __rsub__(self, other: IDual | Num) -> IDual:
        return IDual._lift(other) - self

    def __mul__(self, other: IDual | Num) -> IDual:
        o = IDual._lift(other)
        grad = {k: g * o.val for k, g in self.grad.items()}
        for k, g in o.grad.items():
            term = g * self.val
            grad[k] = grad[k] + term if k in grad else term
        return IDual(self.val * o.val, grad)

    __rmul__ = __mul__

    def __truediv__(self, other: IDual | Num) -> IDual:
        o = IDual._lift(other)
        inv = 1.0 / o.val
        val = self.val * inv
        grad = {k: g * inv for k, g in self.grad.items()}
        for k, g in o.grad.items():  # d(a/b) = da/b - a db / b^2
            term = -(g * val * inv)
            grad[k] = grad[k] + term if k in grad else term
        return IDual(val, grad)

    def __rtruediv__(self, other: IDual | Num) -> IDual:
        return IDual._lift(other) / self

    def exp(self) -> IDual:
        e = self.val.exp()
        return IDual(e, {k: g * e for k, g in self.grad.items()})
