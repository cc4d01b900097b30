"""A ``SymmetryMatch`` and a ``LearnedTransformation`` check their fields when made, as ``DiscoveryResult`` does
(``SymmetryMatch(index="a", name=3, agreement=2.0, same_actions="yes", varying=-1)``, an action map
``(0, "x")``, a list (a frozen record's field that could change and broke nothing until hashed), a distance
of -1 or inf, or an observation "permutation" (0, 0) were all accepted); the checks name the class and the
field. The contract is the docstrings', the paper's (phi_A is a bijection of the actions) and what
``ers_deep.discovery.rounding`` makes: ``match_known``'s agreement is a count over ``varying`` features (NaN
when none varies), ``nearest_permutation`` / ``round_tabular`` give permutations and distances >= 0, the
action maps are ``action_candidates``' permutations. A file off the contract is a RecordError from
``from_json``."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_exact.interface import DiscoveryResult, LearnedTransformation, SymmetryMatch, Transformation
from ers_exact.util.output import dumps as strict_dumps
from ers_exact.util.records import RecordError

PHI = Transformation((1, 0), ((1, 0), (0, 1)), ((0, 1), (1, 0)))
# T^-1 for T = (the identity on states, phi_A = (1, 0), the rounding (2, 0, 1) on each agent's observations)
NEAR = Transformation((0,), ((1, 0), (1, 0)), ((1, 2, 0), (1, 2, 0)))
MATCH: dict[str, Any] = {"index": 1, "name": "swap", "agreement": 0.75, "same_actions": True, "varying": 4}
LEARNED: dict[str, Any] = {
    "name": "phi0",
    "checkpoint": "phi.safetensors",
    "sha256": "ab" * 32,
    "key": "phi/0/",
    "action_map": (1, 0),
    "obs_permutation": (2, 0, 1),
    "distance": 0.5,
    "nearest": NEAR,
    "known": SymmetryMatch(**MATCH),
}

# (field, a value breaking its contract, the exception, what the message must name)
BAD_MATCH = [
    ("index", "a", TypeError, r"SymmetryMatch\.index must be an integer"),
    ("index", 1.0, TypeError, r"SymmetryMatch\.index must be an integer"),
    ("index", True, TypeError, r"SymmetryMatch\.index must be an integer"),
    ("index", -1, ValueError, r"SymmetryMatch\.index must be >= 0"),
    ("name", 3, TypeError, r"SymmetryMatch\.name must be a string"),
    ("agreement", "1", TypeError, r"SymmetryMatch\.agreement must be a number"),
    ("agreement", None, TypeError, r"SymmetryMatch\.agreement must be a number"),
    ("agreement", 2.0, ValueError, r"SymmetryMatch\.agreement must be in \[0, 1\]"),
    ("agreement", -0.25, ValueError, r"SymmetryMatch\.agreement must be in \[0, 1\]"),
    ("agreement", math.inf, ValueError, r"SymmetryMatch\.agreement must be finite or NaN"),
    ("agreement", math.nan, ValueError, r"SymmetryMatch\.agreement must be NaN exactly when varying is 0"),
    ("same_actions", "yes", TypeError, r"SymmetryMatch\.same_actions must be True or False"),
    ("same_actions", 1, TypeError, r"SymmetryMatch\.same_actions must be True or False"),
    ("varying", -1, ValueError, r"SymmetryMatch\.varying must be >= 0"),
    ("varying", 2.5, TypeError, r"SymmetryMatch\.varying must be an integer"),
    ("varying", 0, ValueError, r"SymmetryMatch\.agreement must be NaN exactly when varying is 0"),
]
BAD_LEARNED = [
    ("name", None, TypeError, r"LearnedTransformation\.name must be a string"),
    ("checkpoint", 7, TypeError, r"LearnedTransformation\.checkpoint must be a string"),
    ("sha256", b"ab", TypeError, r"LearnedTransformation\.sha256 must be a string"),
    ("sha256", "0", ValueError, r"LearnedTransformation\.sha256 must be 64 lowercase hex digits"),
    ("sha256", "AB" * 32, ValueError, r"LearnedTransformation\.sha256 must be 64 lowercase hex digits"),
    (
        "sha256",
        "ab" * 32 + "\n",
        ValueError,
        r"LearnedTransformation\.sha256 must be 64 lowercase hex digits",
    ),
    ("sha256", "g" * 64, ValueError, r"LearnedTransformation\.sha256 must be 64 lowercase hex digits"),
    ("key", 0, TypeError, r"LearnedTransformation\.key must be a string"),
    ("action_map", (0, "x"), TypeError, r"LearnedTransformation\.action_map \(phi_A\) must hold integers"),
    ("action_map", (0, True), TypeError, r"LearnedTransformation\.action_map \(phi_A\) must hold integers"),
    ("action_map", "10", TypeError, r"LearnedTransformation\.action_map \(phi_A\) must be a sequence"),
    ("action_map", 1, TypeError, r"LearnedTransformation\.action_map \(phi_A\) must be a sequence"),
    ("action_map", (0, 0), ValueError, r"LearnedTransformation\.action_map \(phi_A\) is not a permutation"),
    ("action_map", (1, 2), ValueError, r"LearnedTransformation\.action_map \(phi_A\) is not a permutation"),
    ("obs_permutation", (0, 2), ValueError, r"LearnedTransformation\.obs_permutation is not a permutation"),
    ("obs_permutation", (0, 1.0), TypeError, r"LearnedTransformation\.obs_permutation must hold integers"),
    ("distance", -1.0, ValueError, r"LearnedTransformation\.distance must be >= 0"),
    ("distance", math.inf, ValueError, r"LearnedTransformation\.distance must be finite or NaN"),
    ("distance", "0.5", TypeError, r"LearnedTransformation\.distance must be a number"),
    ("nearest", "phi", TypeError, r"LearnedTransformation\.nearest must be None or a Transformation"),
    ("nearest", PHI.to_json(), TypeError, r"LearnedTransformation\.nearest must be None or a Transformation"),
    (
        "nearest",
        PHI,
        ValueError,
        r"LearnedTransformation\.nearest: its inverse must be the identity on states",
    ),
    (
        "nearest",
        Transformation((0,), ((0, 1), (1, 0)), ((1, 2, 0), (1, 2, 0))),
        ValueError,
        r"LearnedTransformation\.nearest: agent 0's inverse maps actions \(0, 1\)",
    ),
    (
        "nearest",
        Transformation((0,), ((1, 0), (1, 0)), ((1, 2, 0), (2, 0, 1))),
        ValueError,
        r"LearnedTransformation\.nearest: agent 1's inverse maps actions \(1, 0\) and observations \(1, 2, 0\)",
    ),
    ("known", MATCH, TypeError, r"LearnedTransformation\.known must be None or a SymmetryMatch"),
    ("known", PHI, TypeError, r"LearnedTransformation\.known must be None or a SymmetryMatch"),
]


@pytest.mark.parametrize(
    ("field", "value", "error", "message"), BAD_MATCH, ids=[f"{b[0]}-{k}" for k, b in enumerate(BAD_MATCH)]
)
def test_a_match_field_off_its_contract_is_refused_naming_it(
    field: str, value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        SymmetryMatch(**{**MATCH, field: value})


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    BAD_LEARNED,
    ids=[f"{b[0]}-{k}" for k, b in enumerate(BAD_LEARNED)],
)
def test_a_learned_field_off_its_contract_is_refused_naming_it(
    field: str, value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        LearnedTransformation(**{**LEARNED, field: value})


def test_the_brief_examples_are_refused() -> None:
    with pytest.raises(TypeError, match=r"^SymmetryMatch\.index"):
        SymmetryMatch(index="a", name=3, agreement=2.0, same_actions="yes", varying=-1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^LearnedTransformation\.distance must be NaN without"):
        LearnedTransformation(**{**LEARNED, "obs_permutation": None, "distance": 0.5})


def test_records_within_their_contract_are_kept_in_their_stored_form() -> None:
    """numpy integers, floats and bools, lists and arrays are within the contract (match_known and the
    rounding's tensors make such values); they are stored as Python ints, floats, bools and tuples, so the
    record is hashable and equals its JSON round trip."""
    match = SymmetryMatch(np.int64(1), "swap", np.float32(0.75), np.bool_(True), np.int32(4))
    assert match == SymmetryMatch(**MATCH) and type(match.same_actions) is bool
    assert (type(match.index), type(match.agreement), type(match.varying)) == (int, float, int)
    assert SymmetryMatch(0, "identity", math.nan, False, 0).match is None  # nothing varies: NaN
    learned = LearnedTransformation(
        **{
            **LEARNED,
            "action_map": [1, 0],
            "obs_permutation": np.array([2, 0, 1]),
            "distance": np.float64(0.5),
        }
    )
    assert learned.action_map == (1, 0) and learned.obs_permutation == (2, 0, 1)
    assert all(type(k) is int for k in (*learned.action_map, *learned.obs_permutation))
    assert learned == LearnedTransformation(**LEARNED) and hash(learned) == hash(
        LearnedTransformation(**LEARNED)
    )
    bare = LearnedTransformation("phi0", "phi.safetensors", "ab" * 32, "phi/0/", (0,))
    assert bare.obs_permutation is None and math.isnan(bare.distance) and bare.known is None
    assert (
        LearnedTransformation(**{**LEARNED, "distance": 0.0, "nearest": None, "known": None}).distance == 0.0
    )


# (where in a learned record, a value off the contract, what the message must name); each was read before:
# int("3") read a string, float(True) a flag, tuple(int(a) for a in "10") a string, and the rest unchecked
BAD_FILES = [
    (("known", "index"), "3", r"SymmetryMatch\.index must be an integer"),
    (("known", "agreement"), True, r"SymmetryMatch\.agreement must be a number"),
    (("known", "agreement"), 1.5, r"SymmetryMatch\.agreement must be in \[0, 1\]"),
    (("action_map",), "10", r"LearnedTransformation\.action_map \(phi_A\) must be a sequence"),
    (("action_map",), [0, 0], r"LearnedTransformation\.action_map \(phi_A\) is not a permutation"),
    (("obs_permutation",), [1.5, 0, 2], r"LearnedTransformation\.obs_permutation must hold integers"),
    (("distance",), -0.5, r"LearnedTransformation\.distance must be >= 0"),
    (
        ("nearest",),
        PHI.to_json(),
        r"LearnedTransformation\.nearest: its inverse must be the identity on states",
    ),
]


@pytest.mark.parametrize(
    ("where", "value", "message"), BAD_FILES, ids=[str(k) for k in range(len(BAD_FILES))]
)
def test_a_file_off_the_contract_is_a_record_error_from_from_json(
    where: Any, value: Any, message: str
) -> None:
    data = json.loads(strict_dumps(LearnedTransformation(**LEARNED).to_json()))
    *path, last = where
    owner = data
    for k in path:
        owner = owner[k]
    owner[last] = value
    what = "SymmetryMatch" if path else "LearnedTransformation"
    with pytest.raises(RecordError, match=rf"^{what}\.from_json.*{message}"):
        LearnedTransformation.from_json(data)
    result = DiscoveryResult("g", "sp-max", (PHI,), (0.5,), 0.5, 0.5, 0.5, 0.5, 0.0).to_json()
    result["transformations"] = [data]
    with pytest.raises(ValueError, match=rf"^{what}\.from_json.*{message}"):  # nested: passes through
        DiscoveryResult.from_json(result)


def _numpy_or_python(n: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([n, np.int64(n), np.int32(n)])


@st.composite
def _permutations(draw: st.DrawFn, n: int) -> Any:
    images = draw(st.permutations(range(n)))
    kind = draw(st.sampled_from(["tuple", "list", "numpy"]))
    return tuple(images) if kind == "tuple" else list(images) if kind == "list" else np.array(images)


@st.composite
def _matches(draw: st.DrawFn) -> SymmetryMatch:
    varying = draw(st.integers(0, 700))
    agreement = math.nan if varying == 0 else draw(st.integers(0, varying)) / varying  # as match_known
    index = draw(st.integers(0, 30).flatmap(_numpy_or_python))
    name, same = draw(st.text(max_size=12)), draw(st.sampled_from([True, False, np.bool_(True)]))
    return SymmetryMatch(index, name, agreement, same, draw(_numpy_or_python(varying)))


@st.composite
def _learned(draw: st.DrawFn) -> LearnedTransformation:
    n_actions, n_obs = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    rounded = draw(st.booleans())
    distance = draw(st.floats(0.0, 1e6, allow_nan=False)) if rounded else math.nan
    action_map = draw(_permutations(n_actions))
    obs_permutation = draw(_permutations(n_obs)) if rounded else None
    nearest = None
    if obs_permutation is not None and draw(st.booleans()):  # T^-1 of the rounding, as round_tabular makes it
        agents, states = draw(st.integers(1, 3)), tuple(range(draw(st.integers(1, 4))))
        acts, obs = tuple(int(a) for a in action_map), tuple(int(o) for o in obs_permutation)
        nearest = Transformation(states, (acts,) * agents, (obs,) * agents).inverse()
    name, checkpoint, key = draw(st.tuples(*[st.text(max_size=8)] * 3))
    return LearnedTransformation(
        name,
        checkpoint,
        draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
        key,
        action_map=action_map,
        obs_permutation=obs_permutation,
        distance=distance,
        nearest=nearest,
        known=draw(st.none() | _matches()),
    )


@settings(max_examples=150, deadline=None)
@given(_learned())
def test_any_record_within_the_contract_is_stored_normalised_and_round_trips(
    t: LearnedTransformation,
) -> None:
    """Records built with lists, numpy arrays and numpy numbers store tuples of ints, floats and bools, hash, and
    equal their strict-JSON round trip, alone and inside a DiscoveryResult."""
    assert type(t.action_map) is tuple and all(type(a) is int for a in t.action_map)
    assert t.obs_permutation is None or type(t.obs_permutation) is tuple
    assert t.known is None or (type(t.known.index), type(t.known.same_actions)) == (int, bool)
    again = LearnedTransformation.from_json(json.loads(strict_dumps(t.to_json())))
    assert again == t and hash(again) == hash(t)
    result = DiscoveryResult("g", "deep-sp-max", (t,), (0.5,), 0.5, 0.5, math.nan, 0.5, 0.0)
    assert DiscoveryResult.from_json(json.loads(result.dumps())) == result


def test_a_nearest_without_the_rounding_it_inverts_is_refused() -> None:
    """``nearest`` is the ers-exact form of ``obs_permutation`` (with phi_A): a record with the one and not the
    other is inconsistent. (Files of earlier discoveries satisfy the check: 75 on 2026-12-07.)"""
    with pytest.raises(ValueError, match=r"nearest is the rounding of an obs_permutation, which is None"):
        LearnedTransformation(**{**LEARNED, "obs_permutation": None, "distance": math.nan})
