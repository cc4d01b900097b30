"""The zero-shot-coordination report shared by ers-exact and ers-deep (torch-free): per population the columns
of the paper's Table 1 (:class:`PopulationRow`), each an :class:`Estimate` (a mean or median with its standard
error), in a :class:`ZSCReport` with a JSON round trip and a Markdown table. :mod:`ers_exact.interface`, which
describes the columns, re-exports all three."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.deployment import OP_COLUMN_READING_BEFORE
from ers_exact.util.nan_equality import nan_equal, nan_hash
from ers_exact.util.output import dumps as strict_dumps
from ers_exact.util.records import read_record

__all__ = ["Estimate", "PopulationRow", "ZSCReport"]


@dataclass(frozen=True)
class Estimate:
    """A mean (or median) with its standard error."""

    value: float
    se: float

    def __str__(self) -> str:
        """``value ± se``; an undefined value (NaN: e.g. XP(*)+MDP of a pool without the env's symmetries) is
        ``-``, an undefined standard error (one sample) leaves the value alone."""
        if math.isnan(self.value):
            return "-"
        return f"{self.value:.3f}" if math.isnan(self.se) else f"{self.value:.3f} ± {self.se:.3f}"

    __eq__ = nan_equal
    __hash__ = nan_hash

    @classmethod
    def of(cls, values: Any, median: bool = False, seed: int = 0) -> Estimate:
        """The mean of ``values`` with its standard error std(ddof=1) / sqrt(n), or (``median``) their median
        with the standard deviation of 500 bootstrap medians drawn with ``seed``. One value has no spread to
        estimate (se NaN, not 0); no values give NaN for both. ers-exact's ZSC pipeline and ers-deep's
        cross-play tables report their columns through it."""
        x = np.asarray(values, dtype=float).ravel()
        if x.size == 0:
            return cls(math.nan, math.nan)
        if x.size == 1:
            return cls(float(x[0]), math.nan)
        if not median:
            return cls(float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)))
        rng = np.random.default_rng(seed)
        boot = [np.median(rng.choice(x, size=x.size)) for _ in range(500)]
        return cls(float(np.median(x)), float(np.std(boot)))


def _estimate(d: Any, column: str) -> Estimate:
    """An estimate from JSON (the row's ``column``), null (undefined) as NaN."""
    return read_record("Estimate", d, _read_estimate, ("value", "se"), where=f"column {column!r}")


def _read_estimate(d: Mapping[str, Any]) -> Estimate:
    if any(isinstance(d[k], (str, bool)) for k in ("value", "se")):
        raise TypeError(f"value and se are numbers or null, not {d['value']!r} and {d['se']!r}")
    return Estimate(*(math.nan if d[k] is None else float(d[k]) for k in ("value", "se")))


def _row(r: Any) -> PopulationRow:
    """A :class:`PopulationRow` from JSON (no ``op``: None)."""
    return read_record("PopulationRow", r, _read_row, ("name", *PopulationRow.COLUMNS), ("op",))


def _read_row(r: Mapping[str, Any]) -> PopulationRow:
    if not isinstance(r["name"], str):
        raise TypeError(f"name is a string, not {r['name']!r}")
    return PopulationRow(
        name=r["name"],
        **{c: _estimate(r[c], c) for c in PopulationRow.COLUMNS},
        op=_estimate(r["op"], "op") if r.get("op") else None,
    )


@dataclass(frozen=True)
class PopulationRow:
    """One population's line of Table 1."""

    name: str
    sp: Estimate  # self-play J of the deployed policies
    xp: Estimate  # mean within-population cross-play (pairs of distinct agents)
    xp_median: Estimate  # XP(*): median cross-play
    xp_median_mdp: Estimate  # XP(*) after symmetrising every deployed policy with Phi_MDP
    xp_median_er: Estimate  # XP(*) after symmetrising with the learned Phi_ER
    # mean OP^Phi of the deployed policies, Phi = the population's OP set (SP row: Phi_MDP); None: not given
    op: Estimate | None = None

    COLUMNS = ("sp", "xp", "xp_median", "xp_median_mdp", "xp_median_er")  # required; ``op`` is optional


@dataclass(frozen=True)
class ZSCReport:
    """Within-population cross-play of independently trained agents (the paper's Table 1): what ers-exact's
    ``run_zsc`` and ers-deep's ``run_table1`` both return. ``game`` is named as in
    :class:`~ers_exact.interface.DiscoveryResult` (ers-deep: ``tabular:NAME`` for an ers-exact game); ``rows``
    one :class:`PopulationRow` per population (their names differ: ``SP (iql)`` / ``IPPO``, ...); ``config``
    the run's settings with ``select_by``, ``op_reading`` and ``op_column_reading`` (not compared).

    Conventions both producers share: returns are the game's (discounted by its discount on tabular games);
    ``xp`` and ``xp_median`` are over unordered pairs of distinct agents, standard errors over those pairs.
    One they do not share by default: the symmetriser S(pi) of ``xp_median_mdp`` / ``xp_median_er``. ers-exact
    averages probabilities (the paper's S(pi) = mean of phi(pi)); ers-deep averages logits unless its config's
    ``symmetriser`` is ``"probabilities"`` (its default, ``"logits"``, is the official code's), so compare those
    columns across packages with ``--symmetriser probabilities``."""

    game: str
    rows: tuple[PopulationRow, ...]
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``report.json``, ``table1.json``); NaN included: :meth:`dumps` writes strict JSON."""
        return {
            "game": self.game,
            "config": self.config,
            "rows": [
                {
                    "name": r.name,
                    **{
                        c: {"value": getattr(r, c).value, "se": getattr(r, c).se}
                        for c in PopulationRow.COLUMNS
                    },
                    "op": None if r.op is None else {"value": r.op.value, "se": r.op.se},
                }
                for r in self.rows
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ZSCReport:
        """The inverse of :meth:`to_json`: null numbers read as NaN, a report without the OP column as
        ``op = None``; a missing key or mistyped value is a ``RecordError`` (a ValueError) naming the type
        (ZSCReport, PopulationRow, Estimate) and the keys it expects."""
        return read_record("ZSCReport", data, cls._build, ("game", "rows"), ("config",))

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> ZSCReport:
        if not isinstance(data["game"], str) or not isinstance(data["rows"], list):
            raise TypeError(
                f"game is a string and rows a list, not {type(data['game']).__name__} and "
                f"{type(data['rows']).__name__}"
            )
        rows = tuple(_row(r) for r in data["rows"])
        config = dict(data.get("config", {}))
        if any(r.op is not None for r in rows):  # written before the field: what every version computed
            config.setdefault("op_column_reading", OP_COLUMN_READING_BEFORE)
        return cls(game=data["game"], rows=rows, config=config)

    def to_markdown(self) -> str:
        """Table 1 as Markdown: one line per population, ``value ± se`` per column (``-`` where undefined)."""
        head = (
            "| population | Self-Play | OP | XP | XP(*) | XP(*)+MDP | XP(*)+ER |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n"
        )
        cells = [
            [
                str(r.sp),
                "-" if r.op is None else str(r.op),
                *(str(getattr(r, c)) for c in PopulationRow.COLUMNS[1:]),
            ]
            for r in self.rows
        ]
        return head + "\n".join(f"| {r.name} | " + " | ".join(c) + " |" for r, c in zip(self.rows, cells))

    def dumps(self) -> str:
        """Strict JSON (an undefined estimate, NaN, is written as null and read back as NaN)."""
        return strict_dumps(self.to_json(), indent=2)
