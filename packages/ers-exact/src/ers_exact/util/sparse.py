"""A sparse matrix for the products ``M @ X`` of the exact evaluators that loads scipy only where it pays
(scipy.sparse costs 0.3 s of import, more than a whole small solve).

:class:`SparseMatrix` is built once from coordinates (duplicates summed, as ``scipy.sparse.coo_matrix``
does) and multiplies a 1-D or 2-D float array on its left, by one of three methods: a small or dense
matrix as one dense BLAS product (when X is finite: 0 x inf is NaN); a sparse one with a small product
(``nnz x P`` below :data:`SCIPY_PRODUCT`, and scipy not yet loaded by anything else) as a gather of the
rows of ``X`` it needs and a segmented sum per row (``np.add.reduceat``); a larger product through
``scipy.sparse`` (imported then; 10x faster per entry than numpy's gathers on many columns). The methods
order each row's sum differently; the entries in the solvers are exact (0, +-1), so all have the error
bound of a sum of k nonzero terms (exact zeros add no rounding), which is what the interval product of
:func:`ers_exact.solve.interval_array.spmm` assumes. ``positive``, ``negative`` and ``absolute`` (the
parts that interval products need) are built on first use and kept.
"""

from __future__ import annotations

import sys
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["DENSE_ENTRIES", "SCIPY_PRODUCT", "SparseMatrix"]

#: a matrix with at most this many entries (or at least 1/16 of them nonzero) is multiplied as a dense array
DENSE_ENTRIES = 4096
#: a sparse product with at least this many nonzero terms (nnz x columns of X) goes through scipy.sparse
SCIPY_PRODUCT = 200_000


def _index_dtype(*sizes: int) -> type[np.signedinteger[Any]]:
    """int32 row and column indices where every size fits (half the bytes of int64; scipy keeps them)."""
    return np.int32 if max(sizes, default=0) < 2**31 else np.int64


class SparseMatrix:
    """An immutable sparse matrix [rows, cols] with ``@`` on numpy arrays (see the module docstring)."""

    def __init__(
        self, data: Any, rows: Any, cols: Any, shape: tuple[int, int], dense: bool | None = None
    ) -> None:
        """``dense``: multiply as a dense array (True), by gathering the nonzero entries' rows of X only
        (False: infinite entries of X off the pattern never meet a zero), or by size (None)."""
        n_rows, n_cols = int(shape[0]), int(shape[1])
        rows = np.asarray(rows, dtype=np.int64).ravel()
        cols = np.asarray(cols, dtype=np.int64).ravel()
        data = np.broadcast_to(np.asarray(data, dtype=np.float64), rows.shape).ravel()
        key = rows * n_cols + cols
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
        self.shape = (n_rows, n_cols)
        self.data = np.add.reduceat(data[order], first) if len(key) else np.zeros(0)
        idx = _index_dtype(n_rows, n_cols, len(first))
        self.rows = (key[first] // max(n_cols, 1)).astype(idx)
        self.cols = (key[first] % max(n_cols, 1)).astype(idx)
        self._finish(dense)

    @classmethod
    def _sorted(
        cls, data: np.ndarray, rows: np.ndarray, cols: np.ndarray, like: SparseMatrix, same_rows: bool
    ) -> SparseMatrix:
        """A matrix of ``like``'s shape from entries already sorted by (row, column) and unique; with
        ``same_rows`` (the same pattern as ``like``) its row index is shared too."""
        out = cls.__new__(cls)
        out.shape, out.data, out.rows, out.cols = like.shape, data, rows, cols
        out._finish(None, (like._row_ids, like._starts) if same_rows else None)
        return out

    def _finish(self, dense: bool | None, row_index: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.nnz = len(self.data)
        # rows that hold an entry, and where each one's entries start (entries are sorted by row, then column)
        if row_index is None:
            empty = np.zeros(0, self.rows.dtype)
            ids, starts = np.unique(self.rows, return_index=True) if self.nnz else (empty, empty)
            row_index = ids, starts.astype(self.rows.dtype)
        self._row_ids, self._starts = row_index
        self._ones = bool(np.all(self.data == 1.0))
        size = self.shape[0] * self.shape[1]
        if dense is None:
            dense = size <= max(DENSE_ENTRIES, 16 * self.nnz)
        self._dense = self.toarray() if dense else None

    @classmethod
    def from_dense(cls, matrix: np.ndarray) -> SparseMatrix:
        rows, cols = np.nonzero(matrix)
        return cls(matrix[rows, cols], rows, cols, matrix.shape)

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[self.rows, self.cols] = self.data
        return out

    @property
    def max_row_entries(self) -> int:
        """The most nonzero entries in one row (the k of a k-term sum's rounding bound)."""
        return int(np.diff(np.r_[self._starts, self.nnz]).max(initial=0))

    def _part(self, keep: np.ndarray, values: np.ndarray) -> SparseMatrix:
        if keep.all():  # the same pattern (e.g. |M|): its index arrays are shared, not copied
            return SparseMatrix._sorted(values, self.rows, self.cols, self, same_rows=True)
        return SparseMatrix._sorted(values[keep], self.rows[keep], self.cols[keep], self, same_rows=False)

    @cached_property
    def positive(self) -> SparseMatrix:
        """max(M, 0)."""
        return self._part(self.data > 0, self.data)

    @cached_property
    def negative(self) -> SparseMatrix:
        """max(-M, 0)."""
        return self._part(self.data < 0, -self.data)

    @cached_property
    def absolute(self) -> SparseMatrix:
        """|M|."""
        return self._part(self.data != 0, np.abs(self.data))

    @property
    def parts_built(self) -> bool:
        """Whether ``positive``, ``negative`` and ``absolute`` are built (they hold memory then)."""
        return all(name in self.__dict__ for name in ("positive", "negative", "absolute"))

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """M @ x for x [cols] or [cols, P]."""
        return self.dot(x)

    def dot(self, x: np.ndarray, finite: bool = False) -> np.ndarray:
        """M @ x; ``finite``: the caller knows x is finite, or accepts NaN where an infinite entry of x
        meets a zero of M (saves the check on the dense path)."""
        x = np.asarray(x)
        if x.shape[0] != self.shape[1]:
            raise ValueError(f"matmul: shapes {self.shape} and {x.shape} do not align")
        if self._dense is not None and (finite or np.isfinite(x).all()):  # 0 x inf is NaN where no entry is
            return self._dense @ x
        columns = x.size // max(1, x.shape[0])
        if self.nnz * columns >= SCIPY_PRODUCT or "scipy.sparse" in sys.modules:
            return self._scipy @ x
        out = np.zeros((self.shape[0], *x.shape[1:]), dtype=np.result_type(x.dtype, np.float64))
        if self.nnz:
            gathered = x[self.cols]
            if not self._ones:
                gathered = gathered * self.data.reshape(-1, *([1] * (x.ndim - 1)))
            out[self._row_ids] = np.add.reduceat(gathered, self._starts, axis=0)
        return out

    @cached_property
    def _scipy(self) -> Any:
        """The same matrix as a ``scipy.sparse.csr_matrix`` (entries in the same order)."""
        import scipy.sparse as sp  # lazy: see the module docstring

        indptr = np.searchsorted(self.rows, np.arange(self.shape[0] + 1)).astype(self.cols.dtype)
        return sp.csr_matrix((self.data, self.cols, indptr), shape=self.shape)  # shares data and cols

    def __repr__(self) -> str:
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz})"
