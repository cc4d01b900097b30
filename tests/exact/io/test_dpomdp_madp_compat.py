"""Tests for the .dpomdp reader's agreement with MADP's grammar and its input hygiene: an all-stars joint
observation is the wildcard in R entries, MADP's (short) list of reserved words, a UTF-8 byte-order mark,
text with ``\\r`` line breaks only, a start vector or discount out of range named by line, and ASCII digits
only.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from ers_exact.io import DpomdpError, parse_dpomdp, read_dpomdp, write_dpomdp
from ers_exact.model.game import make_game
from tests.exact.io.test_dpomdp_syntax import UNIFORM_TO, pre


# ----------------------------------------------------------------------------------- 1. all-stars jo
def test_all_star_joint_observation_is_the_wildcard_in_R() -> None:
    """MADP's grammar reads ``* * ... *`` as the wildcard observation: with s' = ``*`` it sets R(s, ja),
    with a named s' it adds T(s'|s, ja) r. It was expanded to every joint observation, so the line added
    T U r with the O parsed so far (0 before any O entry)."""
    set_twice = pre() + UNIFORM_TO + "R: * : * : * : * * : -1\nR: a c : s0 : * : * * : 10\n"
    assert parse_dpomdp(set_twice).reward[0, 0, 0] == 10  # was -1 + 10 = 9
    before_t = pre() + "R: * : * : * : * * : 5\n" + UNIFORM_TO
    assert np.all(parse_dpomdp(before_t).reward == 5)  # was 0: T and U were still 0
    # a named s' before any O entry: adds T(s1|s0) r = 0.5 * 4, as with the single '*'
    body = "T: * :\nuniform\nR: * : * : * : * : 1\nR: a c : s0 : s1 : {jo} : 4\nO: * :\nuniform\n"
    star = parse_dpomdp(pre() + body.format(jo="*")).reward
    stars = parse_dpomdp(pre() + body.format(jo="* *")).reward
    assert star[0, 0, 0] == 3 and np.array_equal(stars, star)
    # three agents: '* * *'; and a joint action written '* * *' is every joint action, as '*' is
    three = pre(actions=("a b", "c d", "e"), obs=("x y", "z w", "v"))
    one = parse_dpomdp(three + UNIFORM_TO + "R: * : * : * : * : 2\n").reward
    per_agent = parse_dpomdp(three + UNIFORM_TO + "R: * * * : * : * : * * * : 2\n").reward
    assert np.array_equal(one, per_agent) and np.all(one == 2)
    # a count of stars that is neither 1 nor one per agent is still refused
    with pytest.raises(DpomdpError, match=r"^line 17: joint observation '\* \* \*' has 3 component"):
        parse_dpomdp(pre() + UNIFORM_TO + "R: * : * : * : * * * : 1\n")


def test_repro_files_of_the_audit_read_as_madp_does() -> None:
    """The two reproductions of the audit (inline here): R(s0, a c) = 10 and 5 (were 9 and 0)."""
    head = pre()
    repro1 = head + UNIFORM_TO + "R: * : * : * : * * : -1\nR: a c : s0 : * : * * : 10\n"
    repro1b = head + "R: * : * : * : * * : 5\n" + UNIFORM_TO
    assert parse_dpomdp(repro1).reward[0, 0].tolist() == [10.0, 10.0]
    assert parse_dpomdp(repro1b).reward[0, 0].tolist() == [5.0, 5.0]


# ----------------------------------------------------------------------------------- 2. reserved words
@pytest.mark.parametrize(
    "word",
    ["start", "values", "states", "uniform", "identity", "reward", "cost", "include", "exclude", "reset"],
)
def test_names_madp_allows_are_read(word: str) -> None:
    """MADP reserves only agents, discount, actions, observations, T, O and R; 'start' and the other format
    keywords were refused as names."""
    text = pre(states=f"{word} s1", actions=(f"{word} b", "c d"), obs=("x y", f"z {word}"))
    g = parse_dpomdp(
        text + UNIFORM_TO + f"T: {word} c : {word} : s1 : 1\nT: {word} c : {word} : {word} : 0\n"
    )
    assert g.state_names == (word, "s1") and g.action_names[0] == (word, "b")
    assert g.observation_names[1] == ("z", word)
    assert g.transition[0, 0].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("word", ["agents", "discount", "actions", "observations", "T", "O", "R"])
def test_madp_reserved_words_are_still_refused(word: str) -> None:
    with pytest.raises(DpomdpError, match=rf"^line 4: invalid state name '{word}' .*not a keyword"):
        parse_dpomdp(pre(states=f"s0 {word}") + UNIFORM_TO)


def test_start_uniform_names_a_state_called_uniform() -> None:
    """As in MADP's grammar, ``start: uniform`` on one line names a state; only when no state is called
    'uniform' is it read as the uniform distribution. ``uniform`` on the next line is always the
    distribution."""
    same_line = parse_dpomdp(pre(states="s0 uniform s2", start="start: uniform") + UNIFORM_TO)
    assert same_line.initial_belief.tolist() == [0.0, 1.0, 0.0]
    next_line = parse_dpomdp(pre(states="s0 uniform s2", start="start:\nuniform") + UNIFORM_TO)
    assert next_line.initial_belief.tolist() == [1 / 3] * 3
    include = parse_dpomdp(pre(states="s0 uniform s2", start="start include: uniform s2") + UNIFORM_TO)
    assert include.initial_belief.tolist() == [0.0, 0.5, 0.5]
    no_such_state = parse_dpomdp(pre(states="s0 s1", start="start: uniform") + UNIFORM_TO)
    assert no_such_state.initial_belief.tolist() == [0.5, 0.5]


def test_the_writer_still_avoids_every_keyword_as_a_name() -> None:
    """The writer keeps its stricter set: a state named 'start' or 'uniform' is written under a generated
    name (other readers may reserve them), and the text reads back."""
    g = make_game(
        "kw",
        ["start", "uniform"],
        [["identity", "b"]],
        [["cost"]],
        np.full((2, 2, 2), 0.5),
        np.ones((2, 2, 1)),
        np.zeros((2, 2)),
        np.array([0.5, 0.5]),
        horizon=1,
    )
    back = read_dpomdp(write_dpomdp(g), horizon=1, name="kw")
    assert back.state_names == ("s0", "s1") and back.action_names == (("a0", "b"),)
    assert back.observation_names == (("o0",),)


# ----------------------------------------------------------------------------------- 3. byte-order mark
def test_a_utf8_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    """A BOM at the start of a file (or text) failed with "missing preamble entry 'agents:', got
    '\\ufeffagents: 2'"."""
    text = "# described\n" + pre() + UNIFORM_TO
    plain = parse_dpomdp(text)
    assert plain.description == "described"
    assert parse_dpomdp("\ufeff" + text) == plain
    assert parse_dpomdp("\ufeff" + text).description == "described"
    assert read_dpomdp("\ufeff" + text) == plain
    (tmp_path / "bom.dpomdp").write_bytes(("\ufeff" + text).encode("utf-8"))
    assert read_dpomdp(tmp_path / "bom.dpomdp", name="dpomdp") == plain
    with gzip.open(tmp_path / "bom.dpomdp.gz", "wb") as fh:
        fh.write(("\ufeff" + text).encode("utf-8"))
    assert read_dpomdp(tmp_path / "bom.dpomdp.gz", name="dpomdp") == plain
    # without a leading comment the BOM sat on the preamble line itself
    assert parse_dpomdp("\ufeff" + pre() + UNIFORM_TO) == plain


# ----------------------------------------------------------------------------------- 4. '\r' line breaks
def test_text_with_carriage_returns_only_is_read_as_text() -> None:
    """A str was taken as model text only if it held '\\n'; old-Mac '\\r' text became a path and raised
    FileNotFoundError showing the whole text."""
    text = pre() + UNIFORM_TO
    assert read_dpomdp(text.replace("\n", "\r")) == read_dpomdp(text)


# ----------------------------------------------------------------------------------- 5. start, discount
@pytest.mark.parametrize(
    "start, got",
    [("start:\n0.5 0.6", "1.1"), ("start:\n0 0", "0.0"), ("start:\n0.25 0.25", "0.5")],
    ids=["over", "zero", "under"],
)
def test_a_start_vector_off_the_simplex_names_its_line(start: str, got: str) -> None:
    """The model's own check ("initial_belief sums to 1.1") named no line."""
    with pytest.raises(
        DpomdpError, match=rf"^line 6: the start distribution sums to {got}\S*, not 1"
    ) as info:
        parse_dpomdp(pre(start=start) + UNIFORM_TO)
    assert info.value.line == 6 and "\n" not in str(info.value)
    ok = parse_dpomdp(pre(start="start:\n0.1 0.9") + UNIFORM_TO)  # 0.1 + 0.9 within ROW_SUM_TOL
    assert ok.initial_belief.tolist() == [0.1, 0.9]


@pytest.mark.parametrize("discount", ["1.5", "-0.1", "2"])
def test_a_discount_outside_the_unit_interval_names_its_line(discount: str) -> None:
    with pytest.raises(
        DpomdpError, match=rf"^line 2: expected a discount factor in \[0, 1\], got {discount}$"
    ) as info:
        parse_dpomdp(pre(discount=discount) + UNIFORM_TO)
    assert info.value.line == 2
    for fine in ("0", "1", "0.95"):
        assert parse_dpomdp(pre(discount=fine) + UNIFORM_TO).discount == float(fine)


# ----------------------------------------------------------------------------------- 6. ASCII digits
@pytest.mark.parametrize(
    "entry, reason",
    [
        ("R: \u0661 \u0660 : \u0661 : * : * : 5", "unknown action '\u0661' for agent 0"),
        ("R: 1 0 : 1 : * : * : \u0665", "expected a reward, got '\u0665'"),
        ("R: \u0661 : 1 : * : * : 5", "has 1 component(s)"),
        ("R: * : \u0661 : * : * : 5", "unknown state '\u0661'"),
        ("T: * : 0 : 1 : \uff11", "expected a probability, got '\uff11'"),
    ],
    ids=["arabic-indic-action", "arabic-indic-reward", "joint-index", "state-index", "fullwidth-prob"],
)
def test_only_ascii_digits_are_numbers(entry: str, reason: str) -> None:
    """``\\d`` matched Arabic-Indic (and other) digits, so ``R: ١ ٠ : ١ : * : * : ٥`` was read as numbers."""
    with pytest.raises(DpomdpError) as info:
        parse_dpomdp(pre() + UNIFORM_TO + entry + "\n")
    assert info.value.line == 17 and reason in str(info.value)


@pytest.mark.parametrize("line, decl", [(4, "states: \u0663"), (1, "agents: \u0662")])
def test_counts_in_non_ascii_digits_are_refused(line: int, decl: str) -> None:
    text = pre().replace("states: s0 s1", decl) if line == 4 else pre().replace("agents: 2", decl)
    with pytest.raises(DpomdpError) as info:
        parse_dpomdp(text + UNIFORM_TO)
    assert info.value.line == line
