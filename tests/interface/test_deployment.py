"""The deployment rule both packages apply (``ers_exact.deployment.deploy_index``): the rule's score first,
ties (within 1e-6) by the other score, then the first seed; hand-made score lists."""

from __future__ import annotations

import pytest

from ers_exact.deployment import DEFAULT_SELECT_BY, OP_READINGS, SELECT_BY, deploy_index


@pytest.mark.parametrize(
    ("sp", "op", "rule", "index"),
    [
        pytest.param([1.0, 2.0], [4 / 3, 2 / 3], "sp_return", 1, id="the rules disagree: best J"),
        pytest.param([1.0, 2.0], [4 / 3, 2 / 3], "op_value", 0, id="the rules disagree: best OP"),
        pytest.param([2.0, 2.0 + 1e-9, 1.0], [0.5, 0.4, 0.9], "sp_return", 0, id="J ties go to the best OP"),
        pytest.param([1.0, 2.0, 1.5], [1.0, 1.0 - 1e-9, 0.2], "op_value", 1, id="OP ties go to the best J"),
        pytest.param([1.0, 1.0], [0.5, 0.5], "op_value", 0, id="full ties go to the first seed"),
        pytest.param([0.3, 0.9, 0.9], None, "sp_return", 1, id="a self-play pool: no OP scores"),
    ],
)
def test_deploy_index(sp, op, rule, index) -> None:
    assert deploy_index(sp, op, rule) == index


def test_the_papers_rule_is_the_default_and_bad_input_is_refused() -> None:
    assert DEFAULT_SELECT_BY == "sp_return" and set(SELECT_BY) == {"sp_return", "op_value"}
    assert set(OP_READINGS) == {"seatings", "per-seat"}
    with pytest.raises(ValueError, match="choose one of"):
        deploy_index([1.0], [1.0], "best")
    with pytest.raises(ValueError, match="OP scores"):
        deploy_index([1.0], None, "op_value")
    with pytest.raises(ValueError, match="one of each per seed"):
        deploy_index([1.0, 2.0], [1.0], "sp_return")
    with pytest.raises(ValueError, match="one of each per seed"):
        deploy_index([], [], "sp_return")
