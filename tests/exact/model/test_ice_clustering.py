"""The type clustering of GMAA*-ICE: its fast row numbering against numpy's row-wise unique."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.model import ice_clustering
from ers_exact.model.ice_clustering import cluster_types, joint_type_codes


@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 40))
@settings(max_examples=60, deadline=None)
def test_integerjoint_type_codes_merge_as_rowwise_unique(seed: int, n: int, m: int) -> None:
    """Clustering with one integer per joint type row gives what np.unique(axis=0) gives (the fallback for
    codes past 63 bits), including the order of the merged rows."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, size=n)
    jt = np.unique(np.stack([rng.integers(0, k, size=m) for k in sizes], axis=1), axis=0)
    bid = rng.integers(0, 3, size=len(jt))
    w = rng.choice([0.25, 0.5, 1.0], size=len(jt))
    legal = [rng.integers(0, 2, size=int(jt[:, i].max()) + 1) for i in range(n)]
    fast = cluster_types(jt, bid, w, [x.copy() for x in legal], True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ice_clustering, "joint_type_codes", lambda rows: None)
        slow = cluster_types(jt, bid, w, [x.copy() for x in legal], True)
    for a, b in zip(fast[:3], slow[:3]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(fast[3] + fast[4], slow[3] + slow[4]):
        np.testing.assert_array_equal(a, b)


def testjoint_type_codes_refuse_what_would_overflow() -> None:
    wide = np.array([[2**31, 2**31, 3]], dtype=np.int64)
    assert joint_type_codes(wide) is None
    rows = np.array([[1, 0], [0, 2], [1, 1]])
    codes = joint_type_codes(rows)
    assert codes is not None and list(np.argsort(codes)) == [1, 0, 2]  # [0, 2] < [1, 0] < [1, 1]
