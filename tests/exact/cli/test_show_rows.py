"""Text summaries list at most ``TEXT_ROWS`` of a result's points and say how many more ``--json`` holds (a
certified optimal set of three-lever from a low incumbent printed 20,001 rows)."""

from __future__ import annotations

import pytest

from ers_exact.cli.show import TEXT_ROWS, show_optimal_set


def optimal_set_result(n: int) -> dict[str, object]:
    point = {"J": 1.0, "J_enclosure": [1.0, 1.0], "residual": 0.0, "certified": True, "optimal": True}
    return {
        "game": "g",
        "horizon": 2,
        "alpha": 0.25,
        "J_star": [1.0, 1.0],
        "complete": True,
        "n_optimal": n,
        "eps": 1e-6,
        "note": "",
        "points": [{**point, "found_by": f"p{k}"} for k in range(n)],
    }


@pytest.mark.parametrize("n", [3, TEXT_ROWS, TEXT_ROWS + 7])
def test_optimal_set_lists_at_most_text_rows(n: int, capsys: pytest.CaptureFixture[str]) -> None:
    show_optimal_set(optimal_set_result(n))
    lines = capsys.readouterr().out.splitlines()
    listed = [line for line in lines if line.split() and line.split()[-1].startswith("p")]
    assert len(listed) == min(n, TEXT_ROWS)
    assert listed[-1].split()[-1] == f"p{min(n, TEXT_ROWS) - 1}"
    more = [line for line in lines if "more row(s)" in line]
    assert more == ([f"... 7 more row(s) not shown (--json lists all {n:,})"] if n > TEXT_ROWS else [])
