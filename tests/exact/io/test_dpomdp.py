"""Tests for the MADP .dpomdp reader and writer (ers_exact.io.dpomdp).

The benchmark files are read from the shared folder (env ERS_DPOMDP_DIR, else <repo root>/../shared/dpomdp);
they are never copied into the repository, and the tests that need them skip when the folder is absent.
"""

from __future__ import annotations

import gzip
import itertools
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.io import DpomdpError, parse_dpomdp, read_dpomdp, save_dpomdp, write_dpomdp
from ers_exact.io.dpomdp_parse import RESERVED
from ers_exact.model.game import Game, GameError, make_game

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


def _roundtrip(g: Game) -> Game:
    return read_dpomdp(write_dpomdp(g), horizon=g.horizon, name=g.name)


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
    g2 = _roundtrip(g)
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


# ----------------------------------------------------------------------------------- inline syntax forms
def pre(
    states: str = "s0 s1",
    actions=("a b", "c d"),
    obs=("x y", "z w"),
    start: str = "start:\nuniform",
    values: str = "reward",
    discount: str = "1",
) -> str:
    """A 12-line preamble (with the defaults): the body starts on line 13."""
    return (
        "\n".join(
            [
                f"agents: {len(actions)}",
                f"discount: {discount}",
                f"values: {values}",
                f"states: {states}",
                start,
                "actions:",
                *actions,
                "observations:",
                *obs,
            ]
        )
        + "\n"
    )


UNIFORM_TO = "T: * :\nuniform\nO: * :\nuniform\n"


def test_transition_forms() -> None:
    g = parse_dpomdp(
        pre()
        + """
# comment lines and blank lines are skipped anywhere

T: * :
uniform
T: a c : s0 : s1 : 1
T: a c : s0 : s0 : 0
T: b * : s1 :
0.25 0.75
T: 3 :
identity
T: a * :   # joint actions (a, c) and (a, d), i.e. 0 and 1
0.125 0.875
1 0
T: 0 : 0 : * : 0.5
O: * :
uniform
"""
    )
    T = g.transition
    assert T[:, 0, :].tolist() == [[0.5, 0.5], [1.0, 0.0]]  # matrix, then row 0 overwritten by a wildcard
    assert T[:, 1, :].tolist() == [[0.125, 0.875], [1.0, 0.0]]
    assert T[:, 2, :].tolist() == [[0.5, 0.5], [0.25, 0.75]]  # (b, c): uniform, row s1 set by 'b *'
    assert T[:, 3, :].tolist() == [[1.0, 0.0], [0.0, 1.0]]  # identity overwrote the 'b *' row


def test_observation_forms() -> None:
    g = parse_dpomdp(
        pre()
        + """T: * :
identity
O: * : * : * : 0.25
O: 0 : s1 :
0.1 0.2 0.3 0.4
O: b d :
0.4 0.3 0.2 0.1
1 0 0 0
O: a d : s0 : x * : 0.5
O: a d : s0 : y * : 0
O: a d : s1 : 3 : 1
O: a d : s1 : x z : 0
O: a d : s1 : y z : 0
O: 1 : s1 : x w : 0
O: b c : s1 :
uniform
"""
    )
    U = g.observation
    assert U[0].tolist() == [[0.25] * 4, [0.1, 0.2, 0.3, 0.4]]
    assert U[1].tolist() == [[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]  # jo index 3 = (y, w)
    assert U[2].tolist() == [[0.25] * 4] * 2
    assert U[3].tolist() == [[0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 0.0, 0.0]]


def test_single_agent_counts_and_numbers() -> None:
    g = parse_dpomdp(
        """agents: 1
discount: .5
values: cost
states: 3
start include: 0 2 2
actions:
2
observations:
obs
T: * :
identity
T: 1 : 2 : 0 : +1e-0
T: 1 : 2 : 2 : 0.
O: * :
uniform
R: * : * : * : * : +20
R: 1 : 1 : * : * : -1.5e-3
""",
        horizon=4,
        name="tiny",
    )
    assert (g.name, g.horizon, g.discount) == ("tiny", 4, 0.5)
    assert g.state_names == ("0", "1", "2") and g.action_names == (("0", "1"),)
    assert g.observation_names == (("obs",),)
    assert g.initial_belief.tolist() == [0.5, 0.0, 0.5]  # include list, duplicates ignored
    assert g.transition[2, 1].tolist() == [1.0, 0.0, 0.0]
    assert g.reward[:, :, 0].tolist() == [[-20.0, -20.0], [-20.0, 0.0015], [-20.0, -20.0]]  # cost: negated


def test_agents_given_by_name_and_entries_given_by_index() -> None:
    head = pre().replace("agents: 2", "agents: alice bob")
    body = "T: 1 : 1 :\n0 1\nT: * : 0 :\nuniform\nT: 0 : 1 : 0 : 1\nO: * :\nuniform\n"
    with pytest.raises(GameError, match=r"transition\[s=1, a=2\]"):  # rows (s1, ja 2) and (s1, ja 3) unset
        parse_dpomdp(head + body)
    g = parse_dpomdp(head + body + "T: 1 * : 1 : 1 : 1\n")  # agent 0's action 1 with any action of agent 1
    assert g.n_agents == 2
    assert g.transition[1, :, 1].tolist() == [0.0, 1.0, 1.0, 1.0] and g.transition[1, 0, 0] == 1.0
    assert np.all(g.transition[0] == 0.5)


@pytest.mark.parametrize(
    "start, b0",
    [
        ("start:\n0.25 0.75 0", [0.25, 0.75, 0.0]),
        ("start: u1", [0.0, 1.0, 0.0]),
        ("start: 2", [0.0, 0.0, 1.0]),
        ("start: uniform", [1 / 3] * 3),
        ("start:\n# a comment\nuniform", [1 / 3] * 3),
        ("start include: u0 2", [0.5, 0.0, 0.5]),
        ("start exclude: u1", [0.5, 0.0, 0.5]),
    ],
    ids=["vector", "name", "index", "uniform-same-line", "uniform", "include", "exclude"],
)
def test_start_forms(start: str, b0: list[float]) -> None:
    g = parse_dpomdp(pre(states="u0 u1 u2", start=start) + UNIFORM_TO)
    assert g.initial_belief.tolist() == b0


def test_reward_semantics_follow_madp() -> None:
    """'R: ja : s : * : * : r' sets R(s, ja); naming s' adds T(s'|s,ja) r; naming jo adds T U r, with the
    T and O parsed so far (so line order matters)."""
    g = parse_dpomdp(
        pre()
        + """R: a c : s0 : s1 : * : 100
T: * :
0.25 0.75
0.5 0.5
O: * :
0.5 0.5 0 0
0 0 0.5 0.5
R: * : * : * : * : 1
R: a c : s0 : s1 : * : 8
R: a c : s0 : s1 : * : 8
R: a d : s1 : s0 : x * : 10
R: a d : s1 : * : y w : 10
R: b c : s0 : s1 :
1 2 3 4
R: b d : s1 :
1 2 3 4
5 6 7 8
R: 1 : s0 : * : * : 7
"""
    )
    R = g.reward[:, :, 0]
    # (a c, s0): the line before T was defined added 0; then set to 1, then 2 * (0.75 * 8) added
    assert R[0, 0] == 1 + 6 + 6
    # (a d, s1): T(s0|s1) [U(x z|s0) + U(x w|s0)] 10 = 0.5 * 1 * 10, plus sum_s' T(s'|s1) U(y w|s') 10
    # = 0.5 * 0 * 10 + 0.5 * 0.5 * 10
    assert R[1, 1] == 1 + 5 + 2.5
    assert R[0, 1] == 7  # the last SET line wins
    assert R[0, 2] == 1 + 0.75 * (0.5 * 3 + 0.5 * 4)  # row over jo for s' = s1: U(.|s1) = (0, 0, .5, .5)
    assert R[1, 3] == 1 + 0.5 * (0.5 * 1 + 0.5 * 2) + 0.5 * (0.5 * 7 + 0.5 * 8)  # |S| x |JO| matrix
    assert R[1, 0] == 1 and R[0, 3] == 1


# ----------------------------------------------------------------------------------- malformed input
MALFORMED = [
    pytest.param(pre() + "T: a c : s0 : s1 : abc\n", 13, "expected a probability, got 'abc'", id="bad-prob"),
    pytest.param(pre() + "T: a c : s0 : s1 : 1.5\n", 13, "outside [0, 1]", id="prob-gt-1"),
    pytest.param(pre() + "T: a c : s9 : s1 : 1\n", 13, "unknown state 's9'", id="unknown-state"),
    pytest.param(pre() + "T: a c : 2 : s1 : 1\n", 13, "state index 2 is out of range", id="state-index"),
    pytest.param(pre() + "T: a e : s0 : s1 : 1\n", 13, "unknown action 'e' for agent 1", id="unknown-action"),
    pytest.param(pre() + "T: a : s0 : s1 : 1\n", 13, "has 1 component(s)", id="joint-components"),
    pytest.param(
        pre() + "T: 4 : s0 : s1 : 1\n", 13, "joint action index 4 is out of range", id="joint-index"
    ),
    pytest.param(
        pre() + "O: 0 : s0 : x q : 1\n", 13, "unknown observation 'q' for agent 1", id="unknown-obs"
    ),
    pytest.param(
        pre() + "T: * :\nuniform\nT: a c : s0 :\n0.5 0.25 0.25\n", 16, "expected 2 numbers", id="row-length"
    ),
    pytest.param(
        pre() + "T: * :\n1 0\nO: * :\nuniform\n", 15, "expected row 2 of the |S|x|S|", id="short-matrix"
    ),
    pytest.param(pre() + "O: * :\nidentity\n", 14, "expected 4 numbers", id="O-identity"),
    pytest.param(pre() + "T: a c : s0 : s1 :\n", 13, "malformed T entry", id="missing-value"),
    pytest.param(pre() + "R: * : * : * : * : 1 : 2\n", 13, "malformed R entry", id="R-fields"),
    pytest.param(pre() + "R: * : s0 : s1 :\n1 2 3\n", 14, "expected 4 numbers", id="R-row-length"),
    pytest.param(pre() + "R: * : * : * : * : ten\n", 13, "expected a reward, got 'ten'", id="R-value"),
    pytest.param(pre() + "T: * :\n", 13, "got end of file", id="eof-matrix"),
    pytest.param(pre() + "Q: 1\n", 13, "expected a 'T:', 'O:' or 'R:' entry", id="unknown-entry"),
    pytest.param(pre() + "states: 3\n", 13, "repeated or after", id="late-preamble"),
    pytest.param(
        pre().replace("values: reward\n", ""),
        3,
        "missing preamble entry 'values:' before 'states:'",
        id="missing-values",
    ),
    pytest.param("discount: 1\nagents: 2\n", 1, "missing preamble entry 'agents:'", id="out-of-order"),
    pytest.param(
        pre().replace("discount: 1\n", "discount: 1\nagents: 2\n"),
        3,
        "repeated or out of order",
        id="repeated",
    ),
    pytest.param("agents: 2\ndiscount: 1\n", 2, "missing preamble entry 'values:' (end of file)", id="eof"),
    pytest.param(pre(values="profit"), 3, "expected 'reward' or 'cost'", id="values"),
    pytest.param(pre(discount="0.9x"), 2, "expected a discount factor", id="discount"),
    pytest.param(pre(states="s0 s0"), 4, "declared twice", id="duplicate-state"),
    pytest.param(pre(states="s0 1s"), 4, "invalid state name '1s'", id="bad-name"),
    pytest.param(pre(states="s0 uniform"), 4, "invalid state name 'uniform'", id="reserved-name"),
    pytest.param(pre(start="start:\n0.5 0.25 0.25"), 6, "expected 2 numbers", id="start-length"),
    pytest.param(pre(start="start: s7"), 5, "unknown state 's7'", id="start-state"),
    pytest.param(pre(start="start exclude: s0 s1"), 5, "excludes every state", id="start-exclude-all"),
    pytest.param(
        pre(actions=("a b",)).replace("agents: 1", "agents: 2"),
        9,
        "expected the actions of agent 1",
        id="missing-agent-line",
    ),
]


@pytest.mark.parametrize("text, line, reason", MALFORMED)
def test_malformed_input_names_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(DpomdpError) as info:
        parse_dpomdp(text)
    assert info.value.line == line, str(info.value)
    assert str(info.value).startswith(f"line {line}: ")
    assert reason in str(info.value)


def test_incomplete_model_is_a_game_error_naming_the_entry(tmp_path: Path) -> None:
    text = pre() + "T: * :\nuniform\nT: a c : s1 : s0 : 0.3\nO: * :\nuniform\n"
    with pytest.raises(GameError, match=r"transition\[s=1, a=0\] sums to \S*0\.8") as info:
        parse_dpomdp(text)
    assert not isinstance(info.value, DpomdpError)
    (tmp_path / "bad.dpomdp").write_text(text)
    with pytest.raises(GameError, match=r"bad\.dpomdp: transition"):
        read_dpomdp(tmp_path / "bad.dpomdp")
    with pytest.raises(GameError, match=r"observation\[a=0, s'=0\] sums to \S*0\.0"):
        parse_dpomdp(pre() + "T: * :\nuniform\n")  # O left at its default 0


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "oops.dpomdp"
    path.write_text(pre() + "T: a c : s0 : s1 : abc\n")
    with pytest.raises(DpomdpError, match=r"oops\.dpomdp: line 13: expected a probability"):
        read_dpomdp(path)


# ----------------------------------------------------------------------------------- writer / round trip
def _game(S: int = 2, acts=(2, 3), obs=(2, 1), seed: int = 0, **kw) -> Game:
    rng = np.random.default_rng(seed)
    A, O = math.prod(acts), math.prod(obs)
    args = dict(
        name="g",
        states=[f"s{i}" for i in range(S)],
        actions=[[f"a{i}_{k}" for k in range(n)] for i, n in enumerate(acts)],
        observations=[[f"o{i}_{k}" for k in range(n)] for i, n in enumerate(obs)],
        transition=rng.dirichlet(np.ones(S), size=(S, A)),
        observation=rng.dirichlet(np.ones(O), size=(A, S)),
        reward=rng.normal(size=(S, A)),
        initial_belief=rng.dirichlet(np.ones(S)),
        horizon=3,
        discount=0.95,
    )
    args.update(kw)
    return make_game(**args)


def test_round_trip_hand_built_and_bit_exact(tmp_path: Path) -> None:
    R = np.array([[0.1 + 0.2, 1 / 3, -0.0, 1e-300, -7.0, 2.5e17]] * 2)
    g = _game(reward=R, discount=1 / 3)
    text = write_dpomdp(g)
    assert read_dpomdp(text, horizon=3, name="g") == g
    # T and O come before R
    kinds = [ln[0] for ln in text.splitlines() if ln[:2] in ("T:", "O:", "R:")]
    assert kinds == sorted(kinds, key="TOR".index)
    save_dpomdp(g, tmp_path / "hand.dpomdp")
    back = read_dpomdp(tmp_path / "hand.dpomdp", horizon=3)
    assert back.name == "hand" and back.with_horizon(3) == g
    with gzip.open(tmp_path / "hand.dpomdp.gz", "wt") as fh:
        fh.write(text)
    gz = read_dpomdp(str(tmp_path / "hand.dpomdp.gz"), horizon=3)
    assert gz.name == "hand" and gz == g


def test_round_trip_special_matrices_and_counts() -> None:
    g = _game(
        S=3,
        acts=(2,),
        obs=(3,),
        states=["0", "1", "2"],
        actions=[["0", "1"]],
        observations=[["0", "1", "2"]],
        initial_belief=np.full(3, 1 / 3),
    )
    T = g.transition.copy()
    T[:, 0, :] = np.eye(3)
    T[:, 1, :] = 1.0 / 3
    U = np.full((2, 3, 3), 1.0 / 3)
    g = make_game(
        "counts",
        g.state_names,
        g.action_names,
        g.observation_names,
        T,
        U,
        g.reward[:, :, 0],
        g.initial_belief,
        horizon=2,
    )
    text = write_dpomdp(g)
    assert "states: 3\n" in text and "identity\n" in text and text.count("uniform") == 4  # b0, T, 2 x O
    assert _roundtrip(g) == g


def test_writer_replaces_only_invalid_names() -> None:
    g = _game(
        S=4,
        acts=(2,),
        obs=(2,),
        states=["s 0", "T", "ok", "ok"],
        actions=[["go", "go!"]],
        observations=[["o1", "1x"]],
    )
    back = _roundtrip(g)
    assert back.state_names == ("s0", "s1", "ok", "s3")
    assert back.action_names == (("go", "a1"),) and back.observation_names == (("o1", "o1_1"),)
    for k in ("transition", "observation", "reward", "initial_belief"):
        assert np.array_equal(getattr(back, k), getattr(g, k))


def test_s_prime_dependent_reward_is_j_equivalent() -> None:
    rng = np.random.default_rng(3)
    base = _game(S=3)
    T = base.transition.copy()
    T[0, 0] = [1.0, 0.0, 0.0]  # a zero T entry: its R line is dropped
    R = rng.normal(size=(3, 6, 3))
    R[1, 2] = 4.0  # one (s, a) row that is constant in s'
    g = make_game(
        "sp",
        base.state_names,
        base.action_names,
        base.observation_names,
        T,
        base.observation,
        R,
        base.initial_belief,
        horizon=3,
        discount=0.95,
    )
    text = write_dpomdp(g)
    assert "R: a0_0 a1_0 : s0 : s0 : * :" in text and "R: a0_0 a1_0 : s0 : s1 :" not in text
    assert "R: a0_0 a1_2 : s1 : * : * : 4.0" in text
    back = _roundtrip(g)
    assert not np.array_equal(back.reward, g.reward)
    np.testing.assert_allclose(back.expected_reward, g.expected_reward, rtol=1e-13, atol=1e-13)
    assert np.all(back.reward[1, 2] == 4.0)  # written as a SET line
    for k in ("transition", "observation", "initial_belief"):
        assert np.array_equal(getattr(back, k), getattr(g, k))


def test_legal_actions_are_refused() -> None:
    g = _game(acts=(2,), obs=(2,), legal_actions=[np.array([[True, False], [True, True], [True, True]])])
    with pytest.raises(DpomdpError, match="legal-action"):
        write_dpomdp(g)


_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,5}", fullmatch=True).filter(lambda s: s not in RESERVED)


def _names(data: st.DataObject, k: int) -> list[str]:
    if data.draw(st.booleans()):
        return [str(i) for i in range(k)]
    return data.draw(st.lists(_NAME, min_size=k, max_size=k, unique=True))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_games_round_trip_exactly(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 2))
    S = data.draw(st.integers(1, 3))
    acts = [data.draw(st.integers(1, 3)) for _ in range(n)]
    obs = [data.draw(st.integers(1, 3)) for _ in range(n)]
    A, O = math.prod(acts), math.prod(obs)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    alpha = data.draw(st.sampled_from([0.2, 1.0, 5.0]))
    T = rng.dirichlet(np.full(S, alpha), size=(S, A))
    sparse = rng.random((S, A)) < 0.3
    T[sparse] = np.eye(S)[rng.integers(0, S, size=int(sparse.sum()))]
    U = rng.dirichlet(np.full(O, alpha), size=(A, S))
    R = rng.normal(size=(S, A)) * data.draw(st.sampled_from([1.0, 1e-9, 1e6]))
    R[rng.random((S, A)) < 0.3] = 0.0
    g = make_game(
        "rand",
        _names(data, S),
        [_names(data, k) for k in acts],
        [_names(data, k) for k in obs],
        T,
        U,
        R,
        rng.dirichlet(np.ones(S)),
        horizon=data.draw(st.integers(1, 4)),
        discount=data.draw(st.floats(0.0, 1.0)),
    )
    assert _roundtrip(g) == g
