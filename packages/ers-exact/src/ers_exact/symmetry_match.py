"""A learned phi's rounding against the env's known Dec-POMDP symmetries (:class:`SymmetryMatch`, torch-free; part
of :mod:`ers_exact.interface`, which re-exports it)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ers_exact.util.fields import flag, integer, null_as_nan, real, text
from ers_exact.util.nan_equality import nan_equal, nan_hash
from ers_exact.util.records import read_record

__all__ = ["SymmetryMatch"]

_MATCH_KEYS = ("index", "name", "agreement", "same_actions", "varying")


@dataclass(frozen=True)
class SymmetryMatch:
    """A learned phi's rounding against the env's known Dec-POMDP symmetries (index permutations: Hanabi's
    colour permutations, Overcooked V2's vertical flip; ``ers_deep.discovery.rounding.match_known``).

    ``index`` and ``name`` give the known symmetry nearest the rounding (its position in the env's list,
    identity first at 0); ``agreement`` is the fraction of the ``varying`` observation features (those not
    constant over the sampled observations the rounding was measured on) on which the rounded observation
    permutation and that symmetry agree (NaN when no feature varies: nothing to compare); ``same_actions``
    whether phi_A is its action map. The rounding *is* that symmetry (``match``: its name, else None) when
    the action maps are equal and they agree on every varying feature."""

    index: int
    name: str
    agreement: float
    same_actions: bool
    varying: int

    __eq__ = nan_equal
    __hash__ = nan_hash

    def __post_init__(self) -> None:
        """Check each field (TypeError / ValueError naming it): ``index`` and ``varying`` integers >= 0,
        ``name`` a string, ``same_actions`` True or False, ``agreement`` a number in [0, 1], NaN exactly when
        ``varying`` is 0 (no feature to compare on). Numbers are stored as Python's int and float."""
        set_ = object.__setattr__
        for key in ("index", "varying"):
            set_(self, key, integer(getattr(self, key), f"SymmetryMatch.{key}", minimum=0))
        text(self.name, "SymmetryMatch.name")
        set_(self, "same_actions", flag(self.same_actions, "SymmetryMatch.same_actions"))
        agreement = real(self.agreement, "SymmetryMatch.agreement", minimum=0.0, maximum=1.0)
        if math.isnan(agreement) != (self.varying == 0):
            raise ValueError(
                f"SymmetryMatch.agreement must be NaN exactly when varying is 0 (no feature to compare on), "
                f"not {agreement!r} with varying={self.varying}"
            )
        set_(self, "agreement", agreement)

    @property
    def match(self) -> str | None:
        """The known symmetry's name when the rounding equals it, else None."""
        return self.name if self.same_actions and self.agreement == 1.0 else None

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``match`` included for readers; an undefined ``agreement``, NaN, as null)."""
        return {
            "match": self.match,  # derived, for readers of the file; from_json ignores it
            "index": self.index,
            "name": self.name,
            "agreement": None if math.isnan(self.agreement) else self.agreement,
            "same_actions": self.same_actions,
            "varying": self.varying,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SymmetryMatch:
        """The inverse of :meth:`to_json` (``match`` is derived, not read); a missing key or mistyped value is a
        ``RecordError`` (a ValueError) naming the keys it expects."""
        return read_record("SymmetryMatch", data, cls._build, _MATCH_KEYS, ("match",))

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> SymmetryMatch:
        return cls(  # __post_init__ checks the values (int("3") read a string, int(1.5) truncated)
            index=data["index"],
            name=data["name"],
            agreement=null_as_nan(data["agreement"]),
            same_actions=data["same_actions"],
            varying=data["varying"],
        )
