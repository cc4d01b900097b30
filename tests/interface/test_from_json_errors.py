"""A result file with a missing key or a value of the wrong type is refused by ``from_json`` with a ValueError
naming the type, the key and the keys it expects (was: a bare KeyError / TypeError from inside the
constructor); files as written today, and the older ones of tests/interface/old_files, still load."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from ers_exact.interface import (
    DiscoveryResult,
    Estimate,
    LearnedTransformation,
    PopulationRow,
    SymmetryMatch,
    Transformation,
    ZSCReport,
)

PHI = Transformation((1, 0), ((1, 0), (0, 1)), ((0, 1), (1, 0)))
MATCH = SymmetryMatch(index=1, name="swap", agreement=math.nan, same_actions=True, varying=0)
NEAR = Transformation((0, 1), ((1, 0), (1, 0)), ((1, 0), (1, 0)))  # T^-1 of the record's phi_A and rounding
LEARNED = LearnedTransformation(
    "phi0", "phi.safetensors", "ab" * 32, "phi0.", (1, 0), (1, 0), 0.5, NEAR, MATCH
)
RESULT = DiscoveryResult("g", "sp-max", (PHI, LEARNED), (0.9, math.nan), 0.8, 0.9, 0.7, 0.6, 0.0)
CELL = Estimate(0.5, math.nan)
REPORT = ZSCReport("g", (PopulationRow("SP", CELL, CELL, CELL, CELL, CELL, op=Estimate(0.25, 0.125)),))

# (type, a record of it as written today, where in that record the type's own object sits)
Path_ = tuple[str | int, ...]
CASES: list[tuple[str, Any, dict[str, Any], Path_]] = [
    ("DiscoveryResult", DiscoveryResult, RESULT.to_json(), ()),
    ("Transformation", DiscoveryResult, RESULT.to_json(), ("transformations", 0)),
    ("LearnedTransformation", DiscoveryResult, RESULT.to_json(), ("transformations", 1)),
    ("SymmetryMatch", DiscoveryResult, RESULT.to_json(), ("transformations", 1, "known")),
    ("ZSCReport", ZSCReport, REPORT.to_json(), ()),
    ("PopulationRow", ZSCReport, REPORT.to_json(), ("rows", 0)),
    ("Estimate", ZSCReport, REPORT.to_json(), ("rows", 0, "xp")),
]
OPTIONAL = {"config", "kind", "obs_permutation", "distance", "nearest", "known", "op", "match"}


def _at(data: Any, where: Path_) -> Any:
    for k in where:
        data = data[k]
    return data


def _holds_records(value: Any) -> bool:
    """Whether a value is a nested record (or a list of them): its own case checks how it is refused."""
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def test_files_written_today_still_load() -> None:
    assert DiscoveryResult.from_json(json.loads(RESULT.dumps())) == RESULT
    assert ZSCReport.from_json(json.loads(REPORT.dumps())) == REPORT
    old = Path(__file__).parent / "old_files" / "zsc-toy-coordination-seed0.json"
    assert len(ZSCReport.from_json(json.loads(old.read_text())).rows) == 3


@pytest.mark.parametrize(("name", "cls", "record", "where"), CASES, ids=[c[0] for c in CASES])
def test_a_missing_key_is_a_value_error_naming_the_type_and_the_key(
    name: str, cls: Any, record: dict[str, Any], where: Path_
) -> None:
    keys = [k for k in _at(record, where) if k not in OPTIONAL]
    assert keys
    for key in keys:
        data = copy.deepcopy(record)
        del _at(data, where)[key]
        with pytest.raises(ValueError, match=rf"^{name}\.from_json.*missing key {key!r}") as e:
            cls.from_json(data)
        assert all(repr(k) in str(e.value).split("expects keys")[1] for k in keys)  # what it expects


@pytest.mark.parametrize(("name", "cls", "record", "where"), CASES, ids=[c[0] for c in CASES])
def test_a_mistyped_record_or_value_is_a_value_error_naming_the_type(
    name: str, cls: Any, record: dict[str, Any], where: Path_
) -> None:
    data = copy.deepcopy(record)
    if where:
        _at(data, where[:-1])[where[-1]] = ["not", "an", "object"]
    else:
        data = ["not", "an", "object"]
    read_as = "Transformation" if name == "LearnedTransformation" else name  # no "kind": "learned" left
    with pytest.raises(ValueError, match=rf"^{read_as}\.from_json.*a JSON object is needed, not a list"):
        cls.from_json(data)
    own = _at(record, where)
    for key in [k for k in own if k not in OPTIONAL and not _holds_records(own[k])]:
        data = copy.deepcopy(record)
        _at(data, where)[key] = {"a": "mapping"} if key != "name" else 3.5
        with pytest.raises(ValueError, match=rf"^{name}\.from_json.*expects keys"):
            cls.from_json(data)


def test_only_the_optional_fields_may_be_left_out() -> None:
    """A learned transformation without the fields recorded later, and a report without config or OP."""
    data = RESULT.to_json()
    for k in ("obs_permutation", "distance", "nearest", "known"):
        del data["transformations"][1][k]
    del data["config"]
    got = DiscoveryResult.from_json(data).transformations[1]
    assert isinstance(got, LearnedTransformation) and got.nearest is None and math.isnan(got.distance)
    report = REPORT.to_json()
    del report["rows"][0]["op"], report["config"]
    assert ZSCReport.from_json(report).rows[0].op is None
