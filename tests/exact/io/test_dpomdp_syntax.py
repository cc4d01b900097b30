"""Tests for the MADP .dpomdp parser (ers_exact.io.dpomdp) on inline models: the syntax forms of T, O, R and
start (wildcards, matrices, ``uniform`` / ``identity``, names and indices, counts, comments, MADP's reward
semantics), and malformed input: a DpomdpError that names the line and the reason, a GameError naming the
entry of an incomplete model, and errors of a file that name the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ers_exact.io import DpomdpError, parse_dpomdp, read_dpomdp
from ers_exact.model.game import GameError


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
    pytest.param(pre(states="s0 T"), 4, "invalid state name 'T'", id="reserved-name"),
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


def test_a_row_that_does_not_sum_to_one_names_the_line_that_wrote_it(tmp_path: Path) -> None:
    """A transition or observation row off the simplex is refused at the line of the entry that last wrote
    into it (it named the row's indices alone, as the game's own check does); a row no entry wrote names
    no line."""
    text = pre() + "T: * :\nuniform\nT: a c : s1 : s0 : 0.3\nO: * :\nuniform\n"
    with pytest.raises(DpomdpError, match=r"^line 15: transition\[s=1, a=0\] sums to \S*0\.8") as info:
        parse_dpomdp(text)
    assert info.value.line == 15
    (tmp_path / "bad.dpomdp").write_text(text)
    with pytest.raises(GameError, match=r"bad\.dpomdp: line 15: transition\[s=1, a=0\]"):
        read_dpomdp(tmp_path / "bad.dpomdp")
    rows = pre() + "T: * :\nuniform\nO: * :\nuniform\nO: b d : s0 :\n0.5 0.5 0.5 0\n"
    with pytest.raises(DpomdpError, match=r"^line 17: observation\[a=3, s'=0\] sums to 1\.5") as info:
        parse_dpomdp(rows)
    with pytest.raises(
        DpomdpError, match=r"observation\[a=0, s'=0\] sums to \S*0\.0.*written by no entry"
    ) as info:
        parse_dpomdp(pre() + "T: * :\nuniform\n")  # O left at its default 0
    assert info.value.line is None and str(info.value).startswith("observation")


def test_an_empty_file_names_no_line(tmp_path: Path) -> None:
    """An empty file was "line 0: missing preamble entry 'agents:'"; it has no line to name."""
    with pytest.raises(DpomdpError, match=r"^the file is empty: no preamble \(agents, discount") as info:
        parse_dpomdp("")
    assert info.value.line is None
    (tmp_path / "empty.dpomdp").write_text("")
    with pytest.raises(DpomdpError, match=r"^\S*empty\.dpomdp: the file is empty"):
        read_dpomdp(tmp_path / "empty.dpomdp")
    with pytest.raises(DpomdpError, match=r"^line 2: missing preamble entry 'agents:' \(end of file\)"):
        parse_dpomdp("# a comment\n\n")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "oops.dpomdp"
    path.write_text(pre() + "T: a c : s0 : s1 : abc\n")
    with pytest.raises(DpomdpError, match=r"oops\.dpomdp: line 13: expected a probability"):
        read_dpomdp(path)


@pytest.mark.parametrize("char", ["\f", "\v", "\x1c", "\x85", "\u2028"])
def test_a_comment_runs_to_the_end_of_its_line_whatever_it_holds(char: str) -> None:
    """Lines end at \\n, \\r\\n or \\r only: a form feed (or U+2028, ...) in a comment once split it, the rest
    read as a preamble line, and every later line number was off by one."""
    text = f"# page{char}break\n" + pre() + UNIFORM_TO + "R: * : * : * : * : 1\n"
    assert parse_dpomdp(text).reward.max() == 1.0
    with pytest.raises(DpomdpError, match=r"^line 19: expected a reward, got 'oops'"):
        parse_dpomdp(text + "R: * : * : * : * : oops\n")


def test_a_number_beyond_the_largest_float_names_its_line() -> None:
    """1e400 read as inf and was refused after parsing, with no line."""
    with pytest.raises(
        DpomdpError, match=r"^line 17: expected a reward, got '1e400' \(beyond the largest float\)"
    ):
        parse_dpomdp(pre() + UNIFORM_TO + "R: * : * : * : * : 1e400\n")


@pytest.mark.parametrize("agents, actions", [(8, 256), (7, 512)])
def test_joint_sizes_past_int64_are_refused_before_anything_is_allocated(agents: int, actions: int) -> None:
    """256^8 = 2^64 wrapped to 0 joint actions in numpy's int64 (512^7 to a negative count), which passed the
    model-size budget and failed later as an internal error."""
    text = pre(states="1", actions=(str(actions),) * agents, obs=("1",) * agents, start="start:\nuniform")
    with pytest.raises(DpomdpError, match=f"{actions**agents} joint actions"):
        parse_dpomdp(text)
