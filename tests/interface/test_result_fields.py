"""A ``DiscoveryResult`` checks its fields when it is made (a str for the transformations, a string score, a
negative reconstruction loss, one score too many were accepted and failed far from the cause, e.g. in
``dumps`` or in a later comparison); the checks name the field. Results as both packages write them, NaN for
an undefined number included, still equal their JSON round trip."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from ers_exact.interface import DiscoveryResult, LearnedTransformation, Transformation

PHI = Transformation((1, 0), ((1, 0), (0, 1)), ((0, 1), (1, 0)))
LEARNED = LearnedTransformation("phi0", "phi.safetensors", "ab" * 32, "phi0.", (1, 0))
GOOD: dict[str, Any] = {
    "game": "g",
    "algorithm": "sp-max",
    "transformations": (PHI, LEARNED),
    "scores": (0.9, math.nan),
    "pool_return": 0.8,
    "J_1": 0.9,
    "J_2": math.nan,
    "J_3": -0.5,
    "reconstruction_loss": 0.0,
    "config": {"seed": 0},
}

# (field, a value breaking its contract, the exception, what the message must name)
BAD = [
    ("game", 3, TypeError, r"DiscoveryResult\.game"),
    ("algorithm", None, TypeError, r"DiscoveryResult\.algorithm"),
    ("transformations", "phi0", TypeError, r"DiscoveryResult\.transformations"),
    ("transformations", (PHI, "phi1"), TypeError, r"DiscoveryResult\.transformations\[1\]"),
    ("transformations", (PHI,), ValueError, r"DiscoveryResult\.scores.*one score per transformation"),
    ("scores", (0.9, "1"), TypeError, r"DiscoveryResult\.scores\[1\]"),
    ("scores", 0.9, TypeError, r"DiscoveryResult\.scores"),
    ("scores", (0.9, True), TypeError, r"DiscoveryResult\.scores\[1\]"),
    ("pool_return", "0.8", TypeError, r"DiscoveryResult\.pool_return"),
    ("J_1", None, TypeError, r"DiscoveryResult\.J_1"),
    ("J_2", math.inf, ValueError, r"DiscoveryResult\.J_2.*finite or NaN"),
    ("J_3", [1.0], TypeError, r"DiscoveryResult\.J_3"),
    ("reconstruction_loss", -0.25, ValueError, r"DiscoveryResult\.reconstruction_loss.*>= 0"),
    ("config", ["seed", 0], TypeError, r"DiscoveryResult\.config"),
]


@pytest.mark.parametrize(
    ("field", "value", "error", "message"), BAD, ids=[f"{b[0]}-{k}" for k, b in enumerate(BAD)]
)
def test_a_field_off_its_contract_is_refused_naming_it(
    field: str, value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        DiscoveryResult(**{**GOOD, field: value})


def test_a_result_within_its_contract_is_kept_and_round_trips() -> None:
    """NaN (undefined) numbers, negative returns, lists, numpy numbers: all within the contract; sequences are
    stored as tuples and numbers as Python floats (what ``dumps`` writes and ``from_json`` reads back)."""
    result = DiscoveryResult(
        **{**GOOD, "transformations": [PHI, LEARNED], "scores": [np.float32(0.5), 1], "J_1": np.float64(-2)}
    )
    assert result.transformations == (PHI, LEARNED) and result.scores == (0.5, 1.0)
    assert all(type(v) is float for v in (*result.scores, result.J_1, result.pool_return))
    back = DiscoveryResult.from_json(json.loads(result.dumps()))
    assert back == result and math.isnan(back.J_2)
    assert DiscoveryResult.from_json(json.loads(DiscoveryResult(**GOOD).dumps())) == DiscoveryResult(**GOOD)


def test_a_file_off_the_contract_is_a_value_error_from_from_json() -> None:
    """What the constructor now refuses reaches ``from_json`` as its ValueError naming the type."""
    data = json.loads(DiscoveryResult(**GOOD).dumps())
    data["reconstruction_loss"] = -1.0
    with pytest.raises(ValueError, match=r"^DiscoveryResult\.from_json.*reconstruction_loss must be >= 0"):
        DiscoveryResult.from_json(data)
    data = json.loads(DiscoveryResult(**GOOD).dumps())
    data["scores"] = [0.9]
    with pytest.raises(ValueError, match=r"^DiscoveryResult\.from_json.*one score per transformation"):
        DiscoveryResult.from_json(data)


def test_a_flag_or_a_string_for_a_number_in_a_file_is_refused() -> None:
    """``from_json`` read numbers with float(), which took true as 1.0; the record's own check refuses it."""
    for key, value in (("J_1", True), ("scores", [0.9, False]), ("pool_return", "0.8")):
        data = json.loads(DiscoveryResult(**GOOD).dumps())
        data[key] = value
        with pytest.raises(ValueError, match=rf"^DiscoveryResult\.from_json.*DiscoveryResult\.{key}"):
            DiscoveryResult.from_json(data)
