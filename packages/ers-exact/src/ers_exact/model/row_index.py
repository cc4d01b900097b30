"""Distinct rows of a float matrix, numbered as they arrive in chunks: the layers of the belief DAG
(:mod:`ers_exact.model.belief_dag`), where millions of (belief, joint action, joint observation) children
collapse onto far fewer distinct beliefs or reward rows.

Rows are compared by a *key*: the row rounded to a fixed number of decimals (``key_of``), so equal rows
merge. A chunk's keys are hashed to 64 bits and merged in numpy (``np.unique`` on integers); a dictionary
over the hashes numbers each distinct hash once, in order of first appearance. The hash only proposes: every
row's key is compared with the key of the row its id stands for, and a row whose key differs (a hash
collision) is numbered through an exact dictionary over the key's bytes instead. So the numbering is exact
whatever the hash does (``tests/exact/model/test_row_index.py`` forces collisions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

__all__ = ["RowIndex", "row_hash"]


@functools.lru_cache(maxsize=8)
def _multipliers(width: int) -> np.ndarray:
    """``width`` odd 64-bit multipliers, the same for the same width (a fixed seed).  # [W] uint64"""
    return np.random.default_rng(0x5EED).integers(1, 2**63, size=width, dtype=np.uint64) | np.uint64(1)


def row_hash(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of ``keys`` (float64 [L, W]): the bit patterns mixed (x ^ x >> 29) and
    summed with odd random multipliers, modulo 2^64.  # [L] int64"""
    bits = np.ascontiguousarray(keys, dtype=np.float64).view(np.uint64)
    mixed = bits ^ (bits >> np.uint64(29))
    with np.errstate(over="ignore"):
        return (mixed * _multipliers(keys.shape[1])).sum(axis=1, dtype=np.uint64).view(np.int64)


class RowIndex:
    """The distinct rows seen so far (``rows``), in order of first appearance, and ``add`` to number a chunk.

    ``key_of(rows)``: the rounded rows two rows are compared by (equal keys: the same row); ``hash_rows``:
    the hash of keys (``row_hash``; tests pass a weak one to force collisions)."""

    def __init__(
        self,
        width: int,
        key_of: Callable[[np.ndarray], np.ndarray],
        hash_rows: Callable[[np.ndarray], np.ndarray] = row_hash,
    ) -> None:
        self.key_of, self.hash_rows = key_of, hash_rows
        self._buf = np.empty((64, width))
        self.n = 0
        self._by_hash: dict[int, int] = {}
        self._exact: dict[bytes, int] = {}

    @property
    def rows(self) -> np.ndarray:
        """The distinct rows, ``n`` of them (a view).  # [n, W]"""
        return self._buf[: self.n]

    def _append(self, rows: np.ndarray) -> np.ndarray:
        """Store ``rows`` as new distinct rows; their ids."""
        k = len(rows)
        if self.n + k > len(self._buf):
            grown = np.empty((max(2 * len(self._buf), self.n + k), self._buf.shape[1]))
            grown[: self.n] = self._buf[: self.n]
            self._buf = grown
        self._buf[self.n : self.n + k] = rows
        self.n += k
        return np.arange(self.n - k, self.n)

    def add(self, rows: np.ndarray) -> np.ndarray:
        """The id of every row of ``rows`` [L, W]: a known row's id, or a new one (new rows are stored).  # [L]"""
        if len(rows) == 0:
            return np.empty(0, dtype=np.int64)
        keys = self.key_of(rows)
        uh, first, inverse = np.unique(self.hash_rows(keys), return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(first, kind="stable")  # the distinct hashes in order of first appearance
        hashes = uh[order].tolist()
        ids_in_order = np.array(
            [-1 if i is None else i for i in map(self._by_hash.get, hashes)], dtype=np.int64
        )
        known = np.flatnonzero(ids_in_order >= 0)
        new = np.flatnonzero(ids_in_order < 0)
        ids_in_order[new] = fresh = self._append(rows[first[order[new]]])
        self._by_hash.update(zip([hashes[k] for k in new.tolist()], fresh.tolist()))
        ids_by_hash = np.empty(len(uh), dtype=np.int64)
        ids_by_hash[order] = ids_in_order
        ids = ids_by_hash[inverse]
        # the hash only proposes: a row must equal its group's first row, and a known group's first row the
        # stored row of its id; any other row (a collision) is numbered by its exact key
        clash = (keys != keys[first[inverse]]).any(axis=1)
        heads = first[order[known]]
        wrong = (self.key_of(self._buf[ids_in_order[known]]) != keys[heads]).any(axis=1)
        clash[np.isin(inverse, order[known[wrong]])] = True
        suspects = np.flatnonzero(clash)  # a row whose proposed id is its own stored row keeps it
        suspects = suspects[(self.key_of(self._buf[ids[suspects]]) != keys[suspects]).any(axis=1)]
        for k in suspects.tolist():
            key = keys[k].tobytes()
            got = self._exact.get(key)
            if got is None:
                got = self._exact[key] = int(self._append(rows[k : k + 1])[0])
            ids[k] = got
        return ids
