"""``RowIndex`` (the belief DAG's de-duplication of rows) against a dictionary over the rounded rows' bytes,
with the 64-bit hash and with hashes that collide on purpose."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.model.row_index import RowIndex, row_hash


def _key(rows: np.ndarray) -> np.ndarray:
    return np.round(rows, 12) + 0.0


def _reference(chunks: list[np.ndarray]) -> list[np.ndarray]:
    """Ids by first appearance, one dictionary lookup per row (the belief DAG's former loop)."""
    index: dict[bytes, int] = {}
    return [np.array([index.setdefault(r.tobytes(), len(index)) for r in _key(c)]) for c in chunks]


def _chunks(seed: int, n_chunks: int, width: int, distinct: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    pool = rng.random((distinct, width))
    pool[rng.random((distinct, width)) < 0.3] = 0.0  # zeros, as beliefs have
    out = []
    for _ in range(n_chunks):
        rows = pool[rng.integers(0, distinct, size=int(rng.integers(0, 40)))].copy()
        rows += rng.choice([0.0, 1e-14, -0.0], size=rows.shape)  # equal to 12 decimals, other bits
        out.append(rows)
    return out


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    return len(pairs) == len(np.unique(a)) == len(np.unique(b))


HASHES = {
    "row_hash": row_hash,
    "constant (every row collides)": lambda k: np.zeros(len(k), dtype=np.int64),
    "first column": lambda k: (k[:, 0] * 4).astype(np.int64),
}


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n_chunks=st.integers(1, 6),
    width=st.integers(1, 5),
    distinct=st.integers(1, 30),
    hash_name=st.sampled_from(sorted(HASHES)),
)
def test_row_index_numbers_rows_like_a_dictionary(
    seed: int, n_chunks: int, width: int, distinct: int, hash_name: str
) -> None:
    chunks = _chunks(seed, n_chunks, width, distinct)
    index = RowIndex(width, _key, HASHES[hash_name])
    ids = [index.add(c) for c in chunks]
    ref = _reference(chunks)
    flat, flat_ref = np.concatenate([*ids, [0]])[:-1], np.concatenate([*ref, [0]])[:-1]
    assert index.n == (flat_ref.max() + 1 if len(flat_ref) else 0)  # one stored row per distinct key
    assert _same_partition(flat, flat_ref)
    for c, i in zip(chunks, ids):
        assert np.array_equal(_key(index.rows[i]), _key(c))  # every row's id stands for its own key
    if hash_name == "row_hash":  # no collision here: the same numbering, first appearance first
        assert np.array_equal(flat, flat_ref)


def test_row_hash_separates_rows_that_differ_in_one_bit_or_place() -> None:
    rows = np.array([[0.5, 0.25], [0.25, 0.5], [0.5, 0.25 + 2**-40], [0.0, 0.0], [-0.0 + 0.0, 0.0]])
    h = row_hash(rows)
    assert len(set(h[:4].tolist())) == 4 and h[3] == h[4]


def test_wide_rows_are_numbered_too() -> None:
    """Rows wider than any fixed table of multipliers (beliefs over thousands of states)."""
    rng = np.random.default_rng(1)
    pool = rng.random((3, 5000))
    rows = pool[[0, 1, 0, 2, 1]]
    index = RowIndex(5000, _key)
    assert index.add(rows).tolist() == [0, 1, 0, 2, 1] and index.n == 3
