"""A ``Transformation``'s permutations hold integers: a digit string was read as its number (``"1"`` -> 1), a
string of digits as one permutation (``"102"`` -> (1, 0, 2)), a float truncated (1.5 -> 1) and a bool taken for
0 or 1, so a mistyped file or call made another transformation silently. Now a TypeError names the argument;
numpy's integers (what ``Transformation.random`` and the searches give) are still read."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.transformation import Transformation

GOOD: dict[str, Any] = {"states": (1, 0), "actions": ((1, 0), (0, 1)), "observations": ((0, 1), (1, 0))}

# (argument, a value off the contract, what the message names)
BAD = [
    ("states", ("1", "0"), r"states \(phi_S\) must hold integers.*str '1'"),
    ("states", "10", r"states \(phi_S\) must be a sequence of integers.*str '10'"),
    ("states", (1.0, 0.0), r"states \(phi_S\) must hold integers.*float"),
    ("states", (True, False), r"states \(phi_S\) must hold integers.*bool"),
    ("states", 2, r"states \(phi_S\) must be a sequence of integers.*int"),
    ("actions", ((1, 0), ("0", "1")), r"actions\[1\] \(phi_A\^1\) must hold integers.*str '0'"),
    ("actions", "10", r"actions must be one sequence per agent"),
    ("observations", ((0, 1), (1.5, 0)), r"observations\[1\] \(phi_O\^1\) must hold integers.*float 1.5"),
    ("observations", ((0, 1), "10"), r"observations\[1\] \(phi_O\^1\) must be a sequence.*str '10'"),
]


@pytest.mark.parametrize(
    ("argument", "value", "message"), BAD, ids=[f"{b[0]}-{k}" for k, b in enumerate(BAD)]
)
def test_an_entry_that_is_no_integer_is_a_type_error_naming_the_argument(
    argument: str, value: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        Transformation(**{**GOOD, argument: value})


def test_a_file_with_digit_strings_is_refused_by_from_json() -> None:
    data = json.loads(json.dumps(Transformation(**GOOD).to_json()))
    data["states"] = ["1", "0"]
    with pytest.raises(ValueError, match=r"^Transformation\.from_json.*states \(phi_S\) must hold integers"):
        Transformation.from_json(data)


def test_integers_of_numpy_are_read_as_python_ints() -> None:
    phi = Transformation(np.array([1, 0]), (np.array([1, 0], np.int32), (0, 1)), ((np.int64(0), 1), (1, 0)))
    assert phi == Transformation(**GOOD)
    assert all(type(v) is int for p in (phi.states, *phi.actions, *phi.observations) for v in p)
    game = get_game("dectiger")
    rng = np.random.default_rng(0)
    for _ in range(5):  # the numpy permutations Transformation.random builds from, as plain ints
        phi = Transformation.random(game, rng)
        assert Transformation.from_json(json.loads(json.dumps(phi.to_json()))) == phi
    with pytest.raises(ValueError, match="not a permutation"):
        Transformation((1, 1), *((GOOD[k]) for k in ("actions", "observations")))
