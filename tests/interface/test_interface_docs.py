"""The shared interface explains itself to ``help()``: every public method of its result types has a
docstring, DiscoveryResult's docstring describes each of its fields (``game`` included: the two packages name
the same tabular game differently) and both result types write strict JSON through ``dumps`` and read it back
equal (a DiscoveryResult had no ``dumps``: ``json.dumps(result.to_json())`` writes NaN, which is not JSON)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from typing import Any

import pytest

from ers_exact import interface
from ers_exact.interface import DiscoveryResult, Estimate, PopulationRow, Transformation, ZSCReport
from ers_exact.zsc_report import ZSCReport as ReportType

RESULT_TYPES = [getattr(interface, n) for n in interface.__all__ if inspect.isclass(getattr(interface, n))]


def _public_methods(cls: type) -> list[str]:
    return [
        k
        for k, v in vars(cls).items()
        if not k.startswith("_") and inspect.isfunction(getattr(v, "__func__", v))
    ]


@pytest.mark.parametrize("cls", RESULT_TYPES, ids=lambda c: c.__name__)
def test_every_public_method_of_the_interface_has_a_docstring(cls: type) -> None:
    missing = [m for m in _public_methods(cls) if not (inspect.getdoc(getattr(cls, m)) or "").strip()]
    assert not missing, f"{cls.__name__}: {missing} have no docstring"


def test_the_discovery_result_docstring_describes_every_field() -> None:
    doc = DiscoveryResult.__doc__ or ""
    missing = [f.name for f in dataclasses.fields(DiscoveryResult) if f"``{f.name}``" not in doc]
    assert not missing, f"DiscoveryResult's docstring does not describe {missing}"
    assert "tabular:" in doc  # how ers-deep names an ers-exact game


def _nan_free(text: str) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_a_discovery_result_with_undefined_metrics_dumps_strict_json_and_reads_back_equal() -> None:
    phi = Transformation.from_json(
        {"states": [0], "actions": [[1, 0], [1, 0]], "observations": [[0, 1], [0, 1]]}
    )
    result = DiscoveryResult("two-lever", "sp-max", (phi,), (1.0,), 1.5, 1.0, math.nan, math.nan, math.nan)
    data = _nan_free(result.dumps())
    assert data["J_2"] is None and data["reconstruction_loss"] is None
    assert DiscoveryResult.from_json(data) == result


def test_a_zsc_report_dumps_strict_json_as_a_discovery_result_does() -> None:
    nan = Estimate(math.nan, math.nan)
    row = PopulationRow("SP", Estimate(1.0, math.nan), nan, nan, nan, nan, op=Estimate(0.5, 0.1))
    report = ZSCReport("two-lever", (row,))
    assert ReportType is ZSCReport
    assert ZSCReport.from_json(_nan_free(report.dumps())) == report
