"""``ers_exact.util.sparse.SparseMatrix`` (the numpy-only sparse products of the evaluators) against
scipy.sparse, the reference it replaces: every product method (dense, gathered segment sums, scipy) gives
the same result (to rounding), duplicates are summed, infinite entries of X off the pattern never turn into NaN, and the
parts used by interval products are the right ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.util import sparse
from ers_exact.util.sparse import SparseMatrix


def _random(seed: int, n_rows: int, n_cols: int, nnz: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, n_rows, nnz), rng.integers(0, n_cols, nnz)
    return rng.choice([-1.0, 1.0, 2.0], nnz), rows, cols


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_rows=st.integers(1, 40),
    n_cols=st.integers(1, 40),
    nnz=st.integers(0, 120),
    width=st.sampled_from([None, 1, 3]),
    dense=st.sampled_from([None, True, False]),
)
def test_products_equal_scipy(
    seed: int, n_rows: int, n_cols: int, nnz: int, width: int | None, dense: bool | None
) -> None:
    data, rows, cols = _random(seed, n_rows, n_cols, nnz)
    ours = SparseMatrix(data, rows, cols, (n_rows, n_cols), dense=dense)
    ref = sp.coo_matrix((data, (rows, cols)), shape=(n_rows, n_cols)).tocsr()  # sums duplicates too
    x = np.random.default_rng(seed + 1).normal(size=(n_cols,) if width is None else (n_cols, width))
    np.testing.assert_allclose(ours @ x, ref @ x, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(ours.toarray(), ref.toarray())
    assert ours.max_row_entries == int(np.diff(ref.indptr).max(initial=0))


@pytest.mark.parametrize("method", ["gather", "scipy"])
def test_sparse_methods_agree(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """The gathered segment sums and scipy.sparse (for large products) give the same products."""
    data, rows, cols = _random(3, 30, 200, 900)
    x = np.random.default_rng(4).normal(size=(200, 5))
    m = SparseMatrix(data, rows, cols, (30, 200), dense=False)
    expected = sp.csr_matrix((data, (rows, cols)), shape=(30, 200)) @ x
    if method == "gather":
        monkeypatch.setattr(sparse, "SCIPY_PRODUCT", 10**12)
        monkeypatch.delitem(sparse.sys.modules, "scipy.sparse")
    else:
        monkeypatch.setattr(sparse, "SCIPY_PRODUCT", 1)
    np.testing.assert_allclose(m @ x, expected, rtol=1e-13, atol=1e-13)


def test_infinite_entries_off_the_pattern_stay_out() -> None:
    """A dense product would make 0 x inf = NaN; the entries that the matrix never touches are ignored."""
    m = SparseMatrix([1.0, -1.0], [0, 1], [0, 1], (2, 3))  # small: stored dense
    x = np.array([[1.0], [2.0], [-np.inf]])
    np.testing.assert_array_equal(m @ x, [[1.0], [-2.0]])


def test_parts_for_interval_products() -> None:
    m = SparseMatrix([2.0, -3.0, 1.0, 1.0], [0, 0, 1, 1], [0, 1, 2, 2], (2, 3))  # (1, 2) appears twice
    np.testing.assert_array_equal(m.toarray(), [[2.0, -3.0, 0.0], [0.0, 0.0, 2.0]])
    np.testing.assert_array_equal(m.positive.toarray(), [[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    np.testing.assert_array_equal(m.negative.toarray(), [[0.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(m.absolute.toarray(), [[2.0, 3.0, 0.0], [0.0, 0.0, 2.0]])
    assert m.max_row_entries == 2
    with pytest.raises(ValueError, match="do not align"):
        m @ np.zeros(4)
