"""Pairwise cross-play distributions: the pairs of a matrix, Sarle's bimodality coefficient against scipy's
skewness and kurtosis, population sources (pools and table1 folders), and the command's files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ers_deep.analysis import (
    bimodality,
    pairwise_scores,
    parse_populations,
    population_matrix,
    population_summary,
    table1_sources,
)
from ers_deep.pools import PoolError, load_pool


def test_pairs_are_the_seat_symmetrised_upper_triangle() -> None:
    m = {"rows": ["a", "b", "c"], "mean": [[5.0, 1.0, 2.0], [3.0, 6.0, 4.0], [0.0, 8.0, 7.0]]}
    assert pairwise_scores(m).tolist() == [2.0, 1.0, 6.0]
    s = population_summary(m)
    assert s["sp"]["value"] == 6.0 and s["sp"]["se"] == pytest.approx(1 / math.sqrt(3))
    assert s["xp"]["value"] == 3.0 and s["agents"] == ["a", "b", "c"]


def test_bimodality_coefficient() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    g, k = stats.skew(x, bias=False), stats.kurtosis(x, bias=False)
    assert bimodality(x) == pytest.approx((g * g + 1) / (k + 3 * 199**2 / (198 * 197)))
    assert bimodality(x) < 5 / 9 < bimodality(np.r_[rng.normal(0, 1, 100), rng.normal(10, 1, 100)])
    assert math.isnan(bimodality(np.ones(10))) and math.isnan(bimodality(np.arange(3.0)))


def test_sources(lever_pool: Path, tmp_path: Path) -> None:
    pool = load_pool(lever_pool)
    m = population_matrix(str(lever_pool), 300, seed=0)
    assert len(m["mean"]) == len(pool.policies) and m["source"] == str(pool.path)
    t1 = tmp_path / "t1"
    t1.mkdir()
    (t1 / "xp-op-er-plain.json").write_text(json.dumps({"rows": ["x", "y"], "mean": [[1, 0], [0, 1]]}))
    assert population_matrix(f"{t1}:op-er", 10)["mean"] == [[1, 0], [0, 1]]
    with pytest.raises(PoolError, match=r"xp-ippo-plain\.json"):
        population_matrix(f"{t1}:ippo", 10)
    assert list(table1_sources(t1)) == ["IPPO", "IPPO + OP-MDP", "IPPO + OP-ER"]
    assert parse_populations(["a=x", "b=y:op-er"]) == {"a": "x", "b": "y:op-er"}
    for bad in (["a"], ["a=x", "a=y"], ["=x"]):
        with pytest.raises(PoolError):
            parse_populations(bad)


def test_cli_writes_json_config_and_figure(lever_pool: Path, tmp_path: Path) -> None:
    from ers_deep.cli import main

    t1 = tmp_path / "t1"
    t1.mkdir()
    for k, tag in enumerate(("ippo", "op-mdp", "op-er")):
        mean = np.full((4, 4), float(k)) + 2 * np.eye(4)
        (t1 / f"xp-{tag}-plain.json").write_text(json.dumps({"rows": list("abcd"), "mean": mean.tolist()}))
    out = tmp_path / "xpd"
    sources = f"pool={lever_pool},er={t1}:op-er"
    assert main(["xp-distribution", "--populations", sources, "--games", "200", "--out", str(out)]) == 0
    text = (out / "xp-distribution.json").read_text()
    result = json.loads(text)["populations"]
    assert list(result) == ["pool", "er"]
    assert (
        "NaN" not in text and result["er"]["bimodality"] is None
    )  # equal pairs: no coefficient, strict JSON
    assert result["er"]["sp"]["value"] == 4.0 and result["er"]["xp"]["value"] == 2.0
    assert len(result["pool"]["pairs"]) == 6
    assert json.loads((out / "xp-distribution-config.json").read_text())["populations"] == sources
    assert (out / "xp-distribution.png").stat().st_size > 5000
    assert main(["xp-distribution", "--table1", str(t1)]) == 0
    table = json.loads((t1 / "analysis" / "xp-distribution.json").read_text())["populations"]
    assert [table[n]["xp"]["value"] for n in table] == [0.0, 1.0, 2.0]


def test_text_output_leaves_undefined_values_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The printed summary shows "-" for a bimodality coefficient that is undefined (fewer than 4 pairs or no
    spread) and the mean alone where a population of two agents has one pair, never "nan" (it printed
    "XP 0.040 ± nan   pairs 1, bimodality nan"), as the JSON has null and the legend the mean alone."""
    from ers_deep.cli import main

    t1 = tmp_path / "t1"
    t1.mkdir()
    rng = np.random.default_rng(0)
    sizes = {"ippo": 2, "op-mdp": 6, "op-er": 3}
    for tag, n in sizes.items():
        mean = rng.uniform(0, 2, size=(n, n))
        (t1 / f"xp-{tag}-plain.json").write_text(
            json.dumps({"rows": [f"s{i}" for i in range(n)], "mean": mean.tolist()})
        )
    capsys.readouterr()
    assert main(["xp-distribution", "--table1", str(t1)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " SP " in ln]
    table = json.loads((t1 / "analysis" / "xp-distribution.json").read_text())["populations"]
    assert len(lines) == 3 and "nan" not in "\n".join(lines).lower()
    for line, s in zip(lines, table.values()):
        pairs = len(s["pairs"])
        assert f"pairs {pairs}," in line
        assert line.endswith("bimodality -") == (s["bimodality"] is None)
        assert ("XP" in line and line.split("XP")[1].count("±") == 1) == (s["xp"]["se"] is not None)
    assert [len(s["pairs"]) for s in table.values()] == [1, 15, 3]
    assert table["IPPO + OP-MDP"]["bimodality"] is not None


def test_the_legend_gives_both_standard_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The legend shows mean SP and mean XP each with its standard error (XP had none), and a mean alone where a
    population of two agents has one pair (no standard error, not "± nan")."""
    import sys

    from ers_deep.analysis import distribution_figure

    labels: list[str] = []

    def keep(fig: object, path: object) -> None:
        labels.extend(t.get_text() for t in fig.axes[0].get_legend().get_texts())  # type: ignore[attr-defined]

    monkeypatch.setattr(sys.modules["ers_deep.analysis.xp_distribution"], "save_figure", keep)
    four = population_summary(
        {"rows": list("abcd"), "mean": [[2, 0, 1, 0], [0, 2, 0, 1], [1, 0, 2, 0], [0, 1, 0, 3]]}
    )
    two = population_summary({"rows": list("ab"), "mean": [[1.0, 0.5], [0.5, 1.0]]})
    distribution_figure({"four": four, "two": two}, tmp_path / "x.png")
    sp, xp = four["sp"], four["xp"]
    assert labels == [
        f"four: SP {sp['value']:.2f} ± {sp['se']:.2f}, XP {xp['value']:.2f} ± {xp['se']:.2f} (n = 6)",
        "two: SP 1.00 ± 0.00, XP 0.50 (n = 1)",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "{",
        json.dumps({"rows": ["a", "b"]}),
        json.dumps({"rows": ["a", "b"], "mean": [[1, 2], [3]]}),
        json.dumps({"rows": ["a", "b", "c"], "mean": [[1, 2], [3, 4]]}),
        json.dumps({"rows": ["a"], "mean": [[1.0]]}),
        json.dumps({"rows": ["a", "b"], "mean": [[1.0, None], [0.5, 1.0]]}),  # a NaN emptied the histogram
    ],
)
def test_a_damaged_table1_matrix_is_refused_in_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """xp-TAG-plain.json not JSON, without 'mean', ragged, not square over its rows, or of one agent: exit 2
    naming the file (it was an internal error, exit 1: JSONDecodeError, KeyError, or a ValueError of numpy's
    on the empty pairs of one agent)."""
    from ers_deep.cli import main

    t1 = tmp_path / "t1"
    t1.mkdir()
    for tag in ("ippo", "op-mdp"):
        (t1 / f"xp-{tag}-plain.json").write_text(json.dumps({"rows": ["a", "b"], "mean": [[1, 0], [0, 1]]}))
    (t1 / "xp-op-er-plain.json").write_text(text)
    assert main(["xp-distribution", "--table1", str(t1)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "xp-op-er-plain.json" in err and "internal" not in err, err
    assert not (t1 / "analysis" / "xp-distribution.json").exists()
