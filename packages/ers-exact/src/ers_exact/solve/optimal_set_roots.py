"""Root bookkeeping of the certified optimal-set search (:mod:`ers_exact.solve.optimal_set`): root boxes proven
to hold exactly one fixed point, each with an enclosure of J and a region proven to hold only it; Krawczyk
certificates around given points (the solver's candidates, images under relabellings, Newton points of the
search's most promising boxes)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.box_enclosure import BoxEnclosure
from ers_exact.solve.certify import BoxVerdict, certified_boxes
from ers_exact.solve.config import NewtonSettings, OptimalSetConfig
from ers_exact.solve.krawczyk_batch import UNIQUE, UNKNOWN, krawczyk_batch
from ers_exact.solve.local_symmetry import LocalDomain
from ers_exact.solve.newton import newton
from ers_exact.solve.orbit_domain import OrbitDomain
from ers_exact.util.progress import Progress

__all__ = ["MAP_CHUNK", "Roots", "add_root", "certify_candidates", "map_roots", "newton_from_boxes"]

#: images of roots certified per batch by :func:`map_roots` (its deadline is checked between batches)
MAP_CHUNK = 256


class BoxStack:
    """``Roots.lo`` / ``Roots.hi`` as [n, D] arrays (capacity doubled as roots are added), brought up to date
    with the lists by :meth:`sync`, so that :meth:`Roots.first_overlap` tests every box at once."""

    def __init__(self) -> None:
        self.n = 0
        self.lo = self.hi = np.zeros((0, 0))

    def sync(self, lo: list[np.ndarray], hi: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The first ``len(lo)`` rows, the rows added to the lists since the last call copied in."""
        n = len(lo)
        if n > len(self.lo):
            lo_new, hi_new = (np.zeros((max(n, 2 * len(self.lo), 16), lo[0].size)) for _ in range(2))
            if self.n:
                lo_new[: self.n], hi_new[: self.n] = self.lo[: self.n], self.hi[: self.n]
            self.lo, self.hi = lo_new, hi_new
        if n > self.n:
            self.lo[self.n : n], self.hi[self.n : n] = lo[self.n : n], hi[self.n : n]
            self.n = n
        return self.lo[:n], self.hi[:n]

    def set_row(self, r: int, lo: np.ndarray, hi: np.ndarray) -> None:
        if r < self.n:
            self.lo[r], self.hi[r] = lo, hi


@dataclass
class Roots:
    """Root boxes found so far, each proven to hold exactly one fixed point."""

    lo: list[np.ndarray] = field(default_factory=list)
    hi: list[np.ndarray] = field(default_factory=list)
    J: list[tuple[float, float]] = field(default_factory=list)
    by: list[str] = field(default_factory=list)
    region_lo: list[np.ndarray] = field(default_factory=list)  # a box proven to hold only this root
    region_hi: list[np.ndarray] = field(default_factory=list)
    ambiguous: int = 0  # overlapping root boxes not proven to be one root
    unmapped: int = 0  # images of roots under the relabellings not certified (failed, or out of time)
    stacked: BoxStack = field(default_factory=BoxStack, init=False, repr=False, compare=False)

    def first_overlap(self, lo: np.ndarray, hi: np.ndarray) -> int | None:
        """The first root box (in the order they were added) that meets the box [lo, hi], or None: one
        vectorised test over the stacked boxes (first on one coordinate, then on all of them)."""
        if not self.lo:
            return None
        LO, HI = self.stacked.sync(self.lo, self.hi)
        near = (
            np.arange(len(LO)) if lo.size == 0 else np.flatnonzero((LO[:, 0] <= hi[0]) & (lo[0] <= HI[:, 0]))
        )
        meet = near[np.all(LO[near] <= hi, axis=1) & np.all(lo <= HI[near], axis=1)]
        return int(meet[0]) if meet.size else None

    def set_box(self, r: int, lo: np.ndarray, hi: np.ndarray) -> None:
        """Replace root ``r``'s box (a tighter enclosure of the same root)."""
        self.lo[r], self.hi[r] = lo, hi
        self.stacked.set_row(r, lo, hi)


def add_root(
    coords: LogitCoordinates,
    roots: Roots,
    lo: np.ndarray,
    hi: np.ndarray,
    J: tuple[float, float],
    by: str,
    alpha: float,
    region: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Record a root box unless it overlaps a known one and their hull provably holds a single root (only the
    first known box it meets, :meth:`Roots.first_overlap`, is tried)."""
    r = roots.first_overlap(lo, hi)
    if r is not None:
        hl, hh = np.minimum(lo, roots.lo[r]), np.maximum(hi, roots.hi[r])
        pad = 1e-3 * (hh - hl) + 1e-12 * np.maximum(1.0, np.abs(hl))
        status, _, _ = krawczyk_batch(coords, (hl - pad)[None], (hh + pad)[None], alpha)
        if status[0] == UNIQUE:
            if J[0] > roots.J[r][0]:  # keep the tighter enclosure of the same root
                roots.set_box(r, lo, hi)
                roots.J[r] = J
            if region is not None and np.sum(region[1] - region[0]) > np.sum(
                roots.region_hi[r] - roots.region_lo[r]
            ):
                roots.region_lo[r], roots.region_hi[r] = region
            return
        roots.ambiguous += 1
    roots.lo.append(lo)
    roots.hi.append(hi)
    roots.J.append(J)
    roots.by.append(by)
    roots.region_lo.append(lo if region is None else region[0])
    roots.region_hi.append(hi if region is None else region[1])


def certify_candidates(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    ys: np.ndarray,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: Roots,
    by: str = "candidate",
) -> int:
    """Krawczyk boxes around the solver's points: the largest radius that proves a single fixed point (its
    box is then excluded from the search; where none does, the small boxes of epsilon-inflation), and a small
    one for the enclosure of J; returns how many were certified."""
    region: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for r in sorted(cfg.certify_radii, reverse=True):
        todo = np.array([k for k in range(len(ys)) if k not in region], dtype=np.int64)
        if not todo.size:
            break
        rad = r * np.maximum(1.0, np.abs(ys[todo]))
        status, _, _ = krawczyk_batch(coords, ys[todo] - rad, ys[todo] + rad, alpha)
        for k in todo[status == UNIQUE]:
            rk = r * np.maximum(1.0, np.abs(ys[k]))
            region[int(k)] = (ys[k] - rk, ys[k] + rk)
    rest = np.array([k for k in range(len(ys)) if k not in region], dtype=np.int64)
    if rest.size:  # low temperature: smaller boxes, grown by epsilon-inflation (certify.certified_boxes)

        def test(lo: np.ndarray, hi: np.ndarray) -> BoxVerdict:
            status, klo, khi = krawczyk_batch(coords, lo, hi, alpha)
            return status == UNIQUE, status == UNKNOWN, klo, khi

        found, blo, bhi = certified_boxes(test, ys[rest])
        for j in np.flatnonzero(found):
            region[int(rest[j])] = (blo[j], bhi[j])
    if not region:
        return 0
    sel = np.array(sorted(region))
    rad = 1e-9 * np.maximum(1.0, np.abs(ys[sel]))
    status, klo, khi = krawczyk_batch(coords, ys[sel] - rad, ys[sel] + rad, alpha)
    klo = np.where((status == UNIQUE)[:, None], klo, np.array([region[k][0] for k in sel]))
    khi = np.where((status == UNIQUE)[:, None], khi, np.array([region[k][1] for k in sel]))
    _, _, jlo, jhi = enc(klo, khi, alpha)
    for n, k in enumerate(sel):
        add_root(coords, roots, klo[n], khi[n], (float(jlo[n]), float(jhi[n])), by, alpha, region[k])
    return len(sel)


def map_roots(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    domain: OrbitDomain | None,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: Roots,
    local: LocalDomain | None = None,
    deadline: float | None = None,
) -> None:
    """List the images of every root r that may be optimal: phi^{-1}(r) for every relabelling phi, and with
        last-stage relabellings (``local``) the whole orbit under both (breadth-first closure); each image is
        certified before it is listed, and one that fails its certificate, or an orbit larger than
        :data:`~ers_exact.solve.local_symmetry.MAX_IMAGES`, counts as unmapped. At ``deadline`` (a
        ``time.perf_counter()`` value) the orbits and the certificates stop; what is left counts as unmapped
        (an orbit cut short as one). Certificates run :data:`MAP_CHUNK` images at a time, with a progress bar
    (``cfg.progress``)."""
    best = max((j[0] for j in roots.J), default=-np.inf)
    keep = [r for r in range(len(roots.lo)) if roots.J[r][1] >= best - cfg.eps]
    y = np.array([0.5 * (roots.lo[r] + roots.hi[r]) for r in keep]).reshape(len(keep), coords.dim)
    if local is None:
        ys = domain.images(coords, y) if domain is not None else y[:0]
    else:
        more = (lambda f: domain.images(coords, f)) if domain is not None else None
        parts = []
        for yk in y:
            orbit, closed = local.orbit(coords, yk, more, deadline=deadline)
            roots.unmapped += 0 if closed else 1
            parts.append(orbit[1:])
        ys = np.concatenate(parts) if parts else y[:0]
    certified = 0
    with Progress(
        len(ys), "images of near-optimal roots", cfg.progress if len(ys) else False, deadline
    ) as bar:
        for k in range(0, len(ys), MAP_CHUNK):
            if deadline is not None and time.perf_counter() > deadline:
                break
            certified += certify_candidates(coords, enc, ys[k : k + MAP_CHUNK], alpha, cfg, roots, "orbit")
            bar.update(len(ys[k : k + MAP_CHUNK]))
    roots.unmapped += len(ys) - certified


def newton_from_boxes(
    coords: LogitCoordinates,
    enc: BoxEnclosure,
    lo: np.ndarray,
    hi: np.ndarray,
    jhi: np.ndarray,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: Roots,
    bound: float,
) -> int:
    """Raise the incumbent L: Newton from the centres of the (at most ``cfg.newton_boxes``) boxes whose upper
    bound of J is highest and above L + eps, each root it reaches certified by :func:`certify_candidates`
    before it counts (a heuristic: a fixed point whose J exceeds every candidate's sits in such boxes, and
    the solver's multistart may miss it, e.g. three-lever at alpha 0.25, where the optimum plays uniformly
    at every history off its path and J* = 1.899292 is 0.003 above every candidate). Returns the number
    of points certified."""
    best = max((j[0] for j in roots.J), default=-np.inf)
    order = np.argsort(-jhi)[: cfg.newton_boxes]
    order = order[jhi[order] > best + cfg.eps]
    if not order.size:
        return 0
    settings = NewtonSettings(steps=cfg.newton_steps, tol=1e-12, max_step=4.0, line_search=6, stall_steps=6)
    y, res = newton(coords, 0.5 * (lo[order] + hi[order]), alpha, settings, bound)
    y = y[np.isfinite(res) & (res < 1e-10)]
    if roots.region_lo and len(y):  # already known: inside a root's region
        rlo, rhi = np.array(roots.region_lo), np.array(roots.region_hi)
        known = np.all((y[:, None] >= rlo[None]) & (y[:, None] <= rhi[None]), axis=2).any(axis=1)
        y = y[~known]
    if len(y) > 1:  # one Newton point per root
        y = y[np.unique(np.round(y, 6), axis=0, return_index=True)[1]]
    return certify_candidates(coords, enc, y, alpha, cfg, roots, "search") if len(y) else 0
