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

__all__ = ["MAP_CHUNK", "Roots", "add_root", "certify_candidates", "map_roots", "newton_from_boxes"]

#: images of roots certified per batch by :func:`map_roots` (its deadline is checked between batches)
MAP_CHUNK = 256


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
    """Record a root box unless it overlaps a known one and their hull provably holds a single root."""
    for r in range(len(roots.lo)):
        if np.all(lo <= roots.hi[r]) and np.all(roots.lo[r] <= hi):
            hl, hh = np.minimum(lo, roots.lo[r]), np.maximum(hi, roots.hi[r])
            pad = 1e-3 * (hh - hl) + 1e-12 * np.maximum(1.0, np.abs(hl))
            status, _, _ = krawczyk_batch(coords, (hl - pad)[None], (hh + pad)[None], alpha)
            if status[0] == UNIQUE:
                if J[0] > roots.J[r][0]:  # keep the tighter enclosure of the same root
                    roots.lo[r], roots.hi[r], roots.J[r] = lo, hi, J
                if region is not None and np.sum(region[1] - region[0]) > np.sum(
                    roots.region_hi[r] - roots.region_lo[r]
                ):
                    roots.region_lo[r], roots.region_hi[r] = region
                return
            roots.ambiguous += 1
            break
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
    (an orbit cut short as one). Certificates run :data:`MAP_CHUNK` images at a time."""
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
    for k in range(0, len(ys), MAP_CHUNK):
        if deadline is not None and time.perf_counter() > deadline:
            break
        certified += certify_candidates(coords, enc, ys[k : k + MAP_CHUNK], alpha, cfg, roots, "orbit")
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
