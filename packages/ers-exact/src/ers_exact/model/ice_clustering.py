"""Incremental clustering of a stage's Bayesian game in GMAA*-ICE (:mod:`ers_exact.model.ice`): two types of an
agent are merged when they have the same legal actions and the same conditional distribution
P(theta^{-i}, b | theta^i) over the others' joint type and the belief index (lossless: Oliehoek, Whiteson &
Spaan 2009; JAIR 46, 2013, Thm. 1)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["cluster_types", "equivalent_types", "joint_type_codes"]


def cluster_types(
    jt: np.ndarray, bid: np.ndarray, w: np.ndarray, legal_row: list[np.ndarray], cluster: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Merge probabilistically equivalent types of each agent in turn until nothing merges (module
    docstring of :mod:`ers_exact.model.ice`). Returns the joint types, belief indices, weights, per agent the class of each input type,
    and the legal row of each class."""
    n = jt.shape[1]
    maps = [np.arange(len(r)) for r in legal_row]
    changed = cluster
    while changed:
        changed = False
        for i in range(n):
            cls = equivalent_types(jt, bid, w, i, legal_row[i])
            k = int(cls.max()) + 1
            if k == len(legal_row[i]):
                continue
            changed = n > 1
            first = np.unique(cls, return_index=True)[1]
            legal_row[i] = legal_row[i][first]
            maps[i] = cls[maps[i]]
            jt = jt.copy()
            jt[:, i] = cls[jt[:, i]]
            codes = joint_type_codes(jt)
            if codes is None:
                jt, head, inv = np.unique(jt, axis=0, return_index=True, return_inverse=True)
            else:  # the same distinct rows in the same (lexicographic) order, on one int64 per row
                _, head, inv = np.unique(codes, return_index=True, return_inverse=True)
                jt = jt[head]
            w = np.bincount(inv.reshape(-1), weights=w, minlength=len(jt))
            bid = bid[head]
    return jt, bid, w, maps, legal_row


def joint_type_codes(jt: np.ndarray) -> np.ndarray | None:
    """One integer per joint type row, ordered as the rows lexicographically (first column most significant);
    None when the codes would not fit in 63 bits.  # [m]"""
    radix = [int(jt[:, j].max()) + 1 for j in range(jt.shape[1])]
    if math.prod(radix) >= 2**62:
        return None
    code = np.zeros(len(jt), dtype=np.int64)
    for j, base in enumerate(radix):
        code = code * base + jt[:, j]
    return code


def equivalent_types(
    jt: np.ndarray, bid: np.ndarray, w: np.ndarray, agent: int, legal_row: np.ndarray
) -> np.ndarray:
    """The class of each type of ``agent``: equal legal row and equal conditional distribution over
    (the others' joint type, belief index), probabilities rounded to 12 decimals.  # [K]"""
    K = len(legal_row)
    x = jt[:, agent]
    others = np.delete(jt, agent, axis=1)
    y = joint_type_codes(others) if others.shape[1] else np.zeros(len(jt), dtype=np.int64)
    if y is None or (len(y) and int(y.max()) >= 2**53):  # records hold y as float64: keep it exact
        y = np.unique(others, axis=0, return_inverse=True)[1].reshape(-1)
    px = np.bincount(x, weights=w, minlength=K)
    cond = np.round(w / px[x], 12) + 0.0
    order = np.lexsort((y, x))
    rec = np.stack([y.astype(np.float64), bid.astype(np.float64), cond], axis=1)[order]
    blocks = np.split(rec, np.cumsum(np.bincount(x, minlength=K))[:-1])
    index: dict[tuple[int, bytes], int] = {}
    cls = np.empty(K, dtype=np.int64)
    for k, blk in enumerate(blocks):
        cls[k] = index.setdefault((int(legal_row[k]), blk.tobytes()), len(index))
    return cls
