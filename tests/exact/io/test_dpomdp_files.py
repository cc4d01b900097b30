"""Tests for the MADP .dpomdp reader (ers_exact.io.dpomdp) on the standard benchmark files: every file parses
(or, for the syntax demo example.dpomdp, fails naming its line) and round trips, their sizes and discounts
match the MADP problem table, hand-checked facts of Dec-Tiger, GridSmall and example.dpomdp, and the
published H = 2 optima.

The benchmark files are read from the shared folder (env ERS_DPOMDP_DIR, else <repo root>/../shared/dpomdp);
they are never copied into the repository, and the tests that need them skip when the folder is absent.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest

from ers_exact.io import DpomdpError, parse_dpomdp, read_dpomdp
from ers_exact.model.game import Game
from tests.exact.io.dpomdp_helpers import roundtrip

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("ERS_DPOMDP_DIR") or REPO_ROOT.parent / "shared" / "dpomdp")
SKIP_REASON = f"shared .dpomdp folder {SHARED} is absent (set ERS_DPOMDP_DIR to the benchmark folder)"
SHARED_FILES = sorted(p.name for p in SHARED.glob("*.dpomdp")) if SHARED.is_dir() else []
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=SKIP_REASON)

# (|S|, |A^i|, |O^i|, discount) from the MADP problem table (notes/exact-solver-anchors.md, section 2.2)
KNOWN_SIZES = {
    "2generals.dpomdp": (2, 2, 2, 1.0),
    "Grid3x3corners.dpomdp": (81, 5, 9, 1.0),
    "GridSmall.dpomdp": (16, 5, 2, 0.9),
    "Mars.dpomdp": (256, 6, 8, 1.0),
    "boxPushingUAI07.dpomdp": (100, 4, 5, 1.0),
    "broadcastChannel.dpomdp": (4, 2, 2, 1.0),
    "dectiger.dpomdp": (2, 3, 2, 1.0),
    "dectiger_skewed.dpomdp": (2, 3, 2, 1.0),
    "fireFighting_2_3_3.dpomdp": (432, 3, 2, 1.0),
    "oneDoor_2_7_0.20_0.00_0_2.dpomdp": (65, 4, 2, 0.95),
    "prisoners.dpomdp": (1, 2, 2, 1.0),
    "recycling.dpomdp": (4, 3, 2, 0.9),
    "relay4.dpomdp": (4, 3, 3, 0.95),
}
# example.dpomdp is a syntax demo, not a valid model: 'T: 1 2 :' names action 2 of agent 1, who has two.
BROKEN = {"example.dpomdp": ("T: 1 2 :", "action index 2 of agent 1 is out of range")}


def _shared_params() -> list:
    if not SHARED_FILES:
        return [pytest.param(None, id="no-shared-folder", marks=pytest.mark.skip(reason=SKIP_REASON))]
    return SHARED_FILES


def _line_of(text: str, prefix: str) -> int:
    """1-based number of the first line that starts with ``prefix``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(prefix))


# ----------------------------------------------------------------------------------- shared benchmark files
@pytest.mark.parametrize("fname", _shared_params())
def test_shared_file_parses_and_round_trips(fname: str) -> None:
    path = SHARED / fname
    text = path.read_text()
    if fname in BROKEN:
        marker, reason = BROKEN[fname]
        with pytest.raises(DpomdpError) as info:
            read_dpomdp(path)
        assert info.value.line == _line_of(text, marker)
        assert f"line {info.value.line}: {reason}" in str(info.value) and fname in str(info.value)
        return
    g = read_dpomdp(path, horizon=3)
    assert g.name == path.stem and g.horizon == 3
    assert g.discount == float(re.search(r"^discount:\s*(\S+)", text, re.M).group(1))
    if fname in KNOWN_SIZES:
        S, A, O, gamma = KNOWN_SIZES[fname]
        assert (g.n_states, g.n_actions, g.n_observations, g.discount) == (S, (A, A), (O, O), gamma)
    assert np.array_equal(g.reward, np.repeat(g.reward[:, :, :1], g.n_states, axis=2))  # R(s, a) only
    # every parsed game has an s'-independent R, so the round trip is exact even for files with s' lines
    g2 = roundtrip(g)
    assert g2 == g
    assert np.array_equal(g2.expected_reward, g.expected_reward)


@needs_shared
def test_dectiger_facts() -> None:
    text = (SHARED / "dectiger.dpomdp").read_text()
    g = read_dpomdp(SHARED / "dectiger.dpomdp")
    assert g.state_names == ("tiger-left", "tiger-right")
    assert g.action_names == (("listen", "open-left", "open-right"),) * 2
    assert g.observation_names == (("hear-left", "hear-right"),) * 2
    assert g.initial_belief.tolist() == [0.5, 0.5]
    LL, OL_OL, OR_OR, L_OL = 0, 4, 8, 1  # joint indices a1 * 3 + a2
    assert np.array_equal(g.transition[:, LL, :], np.eye(2))
    assert np.all(np.delete(g.transition, LL, axis=1) == 0.5)
    assert g.observation[LL, 0].tolist() == [0.7225, 0.1275, 0.1275, 0.0225]  # tiger-left: hl-hl .. hr-hr
    assert g.observation[LL, 1].tolist() == [0.0225, 0.1275, 0.1275, 0.7225]
    assert np.all(g.observation[1:] == 0.25)
    # (file line, s, joint action, R) -- the line must be in the file, and the parsed array must agree
    for line, s, a, r in [
        ("R: listen listen: * : * : * : -2", 0, LL, -2.0),
        ("R: listen listen: * : * : * : -2", 1, LL, -2.0),
        ("R: open-left open-left : tiger-left : * : * : -50", 0, OL_OL, -50.0),
        ("R: open-left open-left : tiger-right : * : * : +20", 1, OL_OL, 20.0),
        ("R: open-right open-right : tiger-right : * : * : -50", 1, OR_OR, -50.0),
        ("R: listen open-left: tiger-left : * : * : -101", 0, L_OL, -101.0),
        ("R: listen open-left: tiger-right : * : * : 9", 1, L_OL, 9.0),
    ]:
        assert line in text.splitlines()
        assert np.all(g.reward[s, a] == r)


@needs_shared
def test_gridsmall_reward_fold_matches_hand_computation() -> None:
    """GridSmall has only 'R: * : * : s' : * : 1.0' lines for s' in {0, 5, 10, 15} (the agents meet), so
    R(s, a) = sum of T(s'|s, a) over those s'. For s = 0, a = (up, up) the file lists T(0) = 0.64,
    T(5) = 0.01, T(10) = 0.01 and no T(15): R = 0.66."""
    text = (SHARED / "GridSmall.dpomdp").read_text()
    assert [ln for ln in text.splitlines() if ln.startswith("R")] == [
        f"R: * : * : {sp} : * : 1.0" for sp in (0, 5, 10, 15)
    ]
    listed = dict(re.findall(r"^T: up up : 0 : (\d+) : (\S+)$", text, re.M))
    assert (listed["0"], listed["5"], listed["10"], "15" in listed) == ("0.64", "0.01", "0.01", False)
    g = read_dpomdp(SHARED / "GridSmall.dpomdp")
    assert g.reward[0, 0, 0] == pytest.approx(0.66, abs=1e-15)
    assert np.allclose(g.reward[:, :, 0], g.transition[:, :, [0, 5, 10, 15]].sum(axis=2), atol=1e-15)


@needs_shared
def test_example_preamble_forms() -> None:
    """example.dpomdp mixes counts and names and uses 'start exclude:'; its preamble parses."""
    text = (SHARED / "example.dpomdp").read_text().splitlines()
    preamble = text[: _line_of("\n".join(text), "T:") - 1]
    g = parse_dpomdp("\n".join(preamble + ["T: * :", "uniform", "O: * :", "uniform"]))
    assert g.state_names == ("state-one", "s2")
    assert g.initial_belief.tolist() == [1.0, 0.0]
    assert g.action_names == (("agent1-a1", "a12", "a13"), ("0", "1"))
    assert g.observation_names == (("0", "1"), ("hear-left", "hear-right"))
    assert g.discount == 1.0 and g.n_joint_actions == 6


# published undiscounted H = 2 optima (masplan.org, notes/exact-solver-anchors.md section 2.3)
PUBLISHED_H2 = {
    "dectiger.dpomdp": -4.0,
    "broadcastChannel.dpomdp": 2.0,
    "recycling.dpomdp": 7.0,
    "GridSmall.dpomdp": 0.91,
    "boxPushingUAI07.dpomdp": 17.6,
    "fireFighting_2_3_3.dpomdp": -4.383496,
    "oneDoor_2_7_0.20_0.00_0_2.dpomdp": 0.0,
}


def _h2_optimum(g: Game) -> float:
    """Brute-force optimum of a 2-agent game at H = 2, gamma = 1, over deterministic policies: for every
    first joint action and every map o^1 -> a^1, agent 2 best-responds observation by observation."""
    T, U, R, b = g.transition, g.observation, g.expected_reward, g.initial_belief
    (A1, A2), (O1, O2) = g.n_actions, g.n_observations
    f1 = np.array(list(itertools.product(range(A1), repeat=O1)))  # [F, O1]
    best = -np.inf
    for a0 in range(A1 * A2):
        M = (((b @ T[:, a0, :])[None, :] * U[a0].T) @ R).reshape(O1, O2, A1, A2)  # stage-2 reward
        G = M[np.arange(O1)[None, :], :, f1, :].sum(axis=1)  # [F, O2, A2]
        best = max(best, float(b @ R[:, a0] + G.max(axis=2).sum(axis=1).max()))
    return best


@needs_shared
@pytest.mark.parametrize("fname", sorted(PUBLISHED_H2))
def test_published_h2_optimum(fname: str) -> None:
    """End-to-end check of the parsed models (reward fold included: GridSmall, fireFighting)."""
    g = read_dpomdp(SHARED / fname)
    assert _h2_optimum(g) == pytest.approx(PUBLISHED_H2[fname], abs=5e-7)
