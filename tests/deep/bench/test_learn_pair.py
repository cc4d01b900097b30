"""``ers_deep.bench.learn_pair`` (two learners' logged curves, several seeds a side, compared at marks) and the
pieces of a multi-seed learning comparison: ``bench.selfplay`` (seeds stacked in one learner, each seed's
curve and evaluation apart), ``pools.seed_net`` and ``bench.train.bench_anchors`` (anchor processes at once)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ers_deep.bench.learn_pair import LogError, anchor_curves, compare_sides, ers_curves, main, welch_t
from tests.deep.threads import one_thread  # noqa: F401


def _write(path: Path, lines: list[dict[str, object]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + tail)
    return path


def _ers_log(path: Path, values: dict[int, list[float]], per: int = 100) -> Path:
    rows = [
        {"seed": s, "elapsed_s": 0.5 * (u + 1), "env_steps": per * (u + 1), "return": v, "episodes": 3.0}
        for u in range(len(next(iter(values.values()))))
        for s, vs in values.items()
        for v in [vs[u]]
    ]
    return _write(path, rows)


def _anchor_log(path: Path, seed: int | None, values: list[float], per: int = 500) -> Path:
    rows: list[dict[str, object]] = [
        {
            "update": 5 * (i + 1),
            "env_steps": per * (i + 1),
            "return_chunk": v,
            "episodes_chunk": 4,
            "elapsed_s": 2.0 * (i + 1),
        }
        for i, v in enumerate(values)
    ]
    if seed is not None:
        rows.append({"event": "final", "seed": seed, "env_steps": per * len(values)})
    return _write(path, rows)


floats = st.floats(-50, 50, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(floats, min_size=2, max_size=8), st.lists(floats, min_size=2, max_size=8))
def test_welch_t_equals_scipy_s(a: list[float], b: list[float]) -> None:
    ref = stats.ttest_ind(a, b, equal_var=False).statistic
    t = welch_t(a, b)
    if math.isnan(t):
        assert math.isnan(ref) or math.isinf(ref) or (len(set(a)) == 1 and len(set(b)) == 1)
    else:
        assert t == pytest.approx(float(ref), rel=1e-6, abs=1e-9)


def test_logs_read_per_seed_and_a_cut_last_line_is_left_out(tmp_path: Path) -> None:
    ers = _ers_log(tmp_path / "e.jsonl", {3: [1.0, math.nan, 2.0], 4: [0.5, 0.5, 0.5]})
    with ers.open("a") as fh:
        fh.write('{"seed": 3, "env_st')  # a run killed mid-line
    curves = ers_curves([ers])
    assert sorted(curves) == ["seed 3", "seed 4"]
    assert curves["seed 3"] == [(100, 1.0, 0.5), (300, 2.0, 1.5)]  # the NaN (no game ended) is left out
    old = _write(tmp_path / "old.jsonl", [{"elapsed_s": 1.0, "env_steps": 7, "return": 2.5}])  # no seed field
    assert ers_curves([old]) == {"seed 0": [(7, 2.5, 1.0)]}
    a = _anchor_log(tmp_path / "learn-anchor.jsonl", 2, [1.0, 2.0])
    b = _anchor_log(tmp_path / "learn-anchor-seed7.jsonl", None, [3.0])  # killed before its final line
    assert anchor_curves([a, b]) == {
        "seed 2": [(500, 1.0, 2.0), (1000, 2.0, 4.0)],
        "seed 7": [(500, 3.0, 2.0)],
    }


def test_bad_logs_are_named(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.jsonl", [{"env_steps": 1, "return": 1.0, "elapsed_s": 0.1}], "oops\n")
    with bad.open("a") as fh:
        fh.write(json.dumps({"env_steps": 2, "return": 1.0, "elapsed_s": 0.2}) + "\n")
    with pytest.raises(LogError, match=r"bad\.jsonl: line 2"):
        ers_curves([bad])
    with pytest.raises(LogError, match="not an ers learning log"):
        ers_curves([_anchor_log(tmp_path / "x.jsonl", 0, [1.0])])
    one = _ers_log(tmp_path / "one.jsonl", {0: [1.0]})
    with pytest.raises(LogError, match="given twice"):
        ers_curves([one, one])
    with pytest.raises(LogError, match="no final line and no seed"):
        anchor_curves([_anchor_log(tmp_path / "anchor.jsonl", None, [1.0])])
    with pytest.raises(LogError, match="cannot read"):
        ers_curves([tmp_path / "missing.jsonl"])


def test_reruns_of_a_seed_and_stored_measurements_are_runs_of_their_own(tmp_path: Path) -> None:
    """Two logs of the same seed (GPU reruns differ) are two runs, named by file; a measurement file of
    docs/measurements gives its stored curve (the anchor's with anchor_final's seed)."""
    a = _anchor_log(tmp_path / "day1.jsonl", 0, [1.0])
    b = _anchor_log(tmp_path / "day2.jsonl", 0, [2.0])
    assert sorted(anchor_curves([a, b])) == ["seed 0 (day1.jsonl)", "seed 0 (day2.jsonl)"]
    stored = {
        "anchor_curve": [
            {"update": 5, "env_steps": 10, "return_chunk": 4.0, "episodes_chunk": 2, "elapsed_s": 1.0}
        ],
        "anchor_final": {"event": "final", "seed": 6},
        "ers_curve_every_10th_update": [{"elapsed_s": 3.0, "env_steps": 20, "return": 5.0}],
    }
    m = tmp_path / "learn-x.json"
    m.write_text(json.dumps(stored))
    assert anchor_curves([m]) == {"seed 6": [(10, 4.0, 1.0)]}
    assert ers_curves([m]) == {"seed 0": [(20, 5.0, 3.0)]}
    m.write_text(json.dumps({"rows": []}))
    with pytest.raises(LogError, match="without a 'anchor_curve' list"):
        anchor_curves([m])


def test_cpu_parity_files_give_their_runs_per_seed(tmp_path: Path) -> None:
    """The CPU parity files' layouts: curves per seed, or one curve of the side's ``seed`` (the anchor's: its
    final line's); points with or without seconds; without them, a comparison on seconds is refused."""
    m = tmp_path / "learn-parity-cpu-x.json"
    m.write_text(
        json.dumps(
            {
                "ers": {"curve_every_10th_update_per_seed": {"2": [[10, 1.0, 0.5]], "3": [[10, 2.0, 0.5]]}},
                "anchor": {"curve": [[20, 3.0], [40, 4.0]], "final": {"event": "final", "seed": 5}},
            }
        )
    )
    assert ers_curves([m]) == {"seed 2": [(10, 1.0, 0.5)], "seed 3": [(10, 2.0, 0.5)]}
    got = anchor_curves([m])
    assert list(got) == ["seed 5"] and [x[:2] for x in got["seed 5"]] == [(20, 3.0), (40, 4.0)]
    assert all(math.isnan(x[2]) for x in got["seed 5"])
    sides = {"ers": ers_curves([m]), "anchor": got}
    assert compare_sides(sides, [10.0])["sides"]["anchor"]["n"] == [1]
    with pytest.raises(LogError, match="no seconds stored for seed 5"):
        compare_sides(sides, [1.0], axis="seconds")
    m.write_text(json.dumps({"ers": {"seed": 4, "curve": [[10, 1.0, 2.0, 9.0]]}}))
    with pytest.raises(LogError, match=r"\[env_steps, return\]"):
        ers_curves([m])


def test_the_comparison_bins_each_seed_and_tests_the_difference(tmp_path: Path) -> None:
    """Constant curves: each seed's bin mean is its constant, so the means, standard errors and Welch's t are
    those of the constants (checked against scipy). The bins are at least as wide as the coarsest log's
    spacing (the anchor logs every 500 env-steps here), so no mark of the 8 misses a side."""
    ers = ers_curves([_ers_log(tmp_path / "e.jsonl", {0: [1.0] * 40, 1: [2.0] * 40, 2: [3.0] * 40})])
    anchor = anchor_curves(
        [
            _anchor_log(tmp_path / f"a{s}.jsonl", s, [v] * 6)
            for s, v in ((0, 5.0), (1, 6.0), (2, 6.0), (3, 7.0))
        ]
    )
    r = compare_sides({"ers": ers, "anchor": anchor})
    assert r["reach"] == 3000 and r["marks"] == [375.0 * k for k in range(1, 9)] and r["window"] == 250.0
    e, a = r["sides"]["ers"], r["sides"]["anchor"]
    assert e["mean"] == pytest.approx([2.0] * 8) and e["se"] == pytest.approx([1 / math.sqrt(3)] * 8)
    assert a["mean"] == pytest.approx([6.0] * 8) and a["runs"] == ["seed 0", "seed 1", "seed 2", "seed 3"]
    t = stats.ttest_ind([1.0, 2.0, 3.0], [5.0, 6.0, 6.0, 7.0], equal_var=False).statistic
    assert r["difference"]["mean"] == pytest.approx([-4.0] * 8)
    assert r["difference"]["welch_t"] == pytest.approx([float(t)] * 8)
    timed = compare_sides({"ers": ers, "anchor": anchor}, marks=[10.0], window=2.0, axis="seconds")
    assert timed["sides"]["ers"]["mean"] == pytest.approx([2.0])
    assert timed["sides"]["anchor"]["per_run"]["seed 0"] == [5.0]


def test_a_trend_is_binned_at_its_marks(tmp_path: Path) -> None:
    """A rising curve (return = env-steps / 100): a mark's value is the mean over its bin, the mark itself."""
    ers = ers_curves([_ers_log(tmp_path / "e.jsonl", {0: [float(u + 1) for u in range(20)]})])
    r = compare_sides({"ers": ers}, marks=[500.0, 1500.0], window=200.0)
    assert r["sides"]["ers"]["per_run"]["seed 0"] == pytest.approx([5.0, 15.0]) and "difference" not in r
    far = compare_sides({"ers": ers}, marks=[500.0, 5000.0], window=200.0)  # past the run's end: n = 0
    assert far["sides"]["ers"]["n"] == [1, 0] and math.isnan(far["sides"]["ers"]["mean"][1])


def test_a_point_on_the_edge_of_two_default_bins_counts_once(tmp_path: Path) -> None:
    """64 updates of 100 env-steps: the default marks (800, 1600, ...) have bins of +-400 that share their edges
    1200, 2000, ..., 6000, which are logged points. Each counts half in either bin, as it lies as far from both
    marks (it counted fully in both: a return of 1 at the edges only gave 2/9 in every inner bin, not 1/8)."""
    edges = {1200 + 800 * k for k in range(7)}
    ers = ers_curves(
        [_ers_log(tmp_path / "e.jsonl", {0: [float(100 * (u + 1) in edges) for u in range(64)]})]
    )
    r = compare_sides({"ers": ers})
    assert r["marks"] == [800.0 * k for k in range(1, 9)] and r["window"] == 400.0
    means = r["sides"]["ers"]["per_run"]["seed 0"]
    assert means == pytest.approx([0.5 / 8.5] + [1 / 8] * 6 + [0.5 / 4.5])
    rising = ers_curves([_ers_log(tmp_path / "r.jsonl", {0: [float(u + 1) ** 2 for u in range(64)]})])
    got = compare_sides({"ers": rising})["sides"]["ers"]["per_run"]["seed 0"]
    steps = [100 * (u + 1) for u in range(64)]
    weights = [
        [0.5 if x in edges and abs(x - m) == 400 else float(abs(x - m) <= 400) for x in steps]
        for m in r["marks"]
    ]
    want = [sum(w * (x / 100) ** 2 for w, x in zip(ws, steps)) / sum(ws) for ws in weights]
    assert got == pytest.approx(want)


def test_the_command_writes_its_json_and_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    e = _ers_log(tmp_path / "e.jsonl", {0: [1.0] * 12, 1: [2.0] * 12})
    a = [_anchor_log(tmp_path / f"learn-anchor-seed{s}.jsonl", s, [1.5, 1.5]) for s in (0, 1)]
    result = main(
        ["--ers", str(e), "--anchor", *map(str, a), "--out", str(tmp_path / "o"), "--marks", "400,800"]
    )
    assert json.loads((tmp_path / "o" / "learn-pair.json").read_text())["marks"] == [400.0, 800.0]
    assert (tmp_path / "o" / "learn-pair.png").stat().st_size > 0
    assert result["difference"]["mean"] == pytest.approx([0.0, 0.0])
    assert "| 400 | 1.50 +- 0.50 | 1.50 +- 0.00 |" in capsys.readouterr().out


def test_seed_net_is_that_seed_of_the_stacked_net() -> None:
    """A stacked learner's seed i, alone, gives seed i's logits and values (and not another seed's)."""
    from ers_deep.nets import NetConfig
    from ers_deep.pools import seed_net
    from ers_deep.train import Learner, paper_config

    cfg = paper_config(
        "hanabi",
        hanabi_preset="Hanabi-Very-Small",
        num_envs=4,
        num_steps=4,
        seeds=(5, 6, 7),
        net=NetConfig(kind="mlp", hidden=8),
    )
    learner = Learner(cfg)
    obs = (torch.rand(1, 1, 6, *learner.env.obs_shape) < 0.4).float()  # 0/1, as Hanabi's HLE bits
    first = torch.ones(1, 1, 6, dtype=torch.bool)
    with torch.no_grad():
        stacked, value, _ = learner.net(
            obs.expand(3, *obs.shape[1:]).contiguous(),
            first.expand(3, -1, -1),
            learner.net.initial_state(6, torch.device("cpu")),
        )
        for i in range(3):
            net = seed_net(learner, i)
            alone, v, _ = net(obs, first, net.initial_state(6, torch.device("cpu")))
            assert torch.allclose(alone[0], stacked[i], atol=1e-6) and torch.allclose(
                v[0], value[i], atol=1e-6
            )
            assert not torch.allclose(alone[0], stacked[(i + 1) % 3], atol=1e-3)


def test_stacked_seeds_log_and_evaluate_each_seed(tmp_path: Path) -> None:
    from ers_deep.bench.selfplay import timed_selfplay
    from ers_deep.nets import NetConfig
    from ers_deep.train import paper_config

    cfg = paper_config(
        "hanabi",
        hanabi_preset="Hanabi-Very-Small",
        num_envs=8,
        num_steps=8,
        seeds=(2, 9),
        net=NetConfig(kind="mlp", hidden=8),
    )
    r = timed_selfplay(cfg, 1.0, tmp_path / "log.jsonl", eval_games=6)
    assert r["seeds"] == [2, 9] and r["updates"] >= 2 and set(r["returns_per_seed"]) == {2, 9}
    assert set(r["eval"]["per_seed"]) == {2, 9} and r["eval"]["games"] == 6
    means = [r["eval"]["per_seed"][s]["mean"] for s in (2, 9)]
    assert r["eval"]["mean"] == pytest.approx(sum(means) / 2)
    curves = ers_curves([tmp_path / "log.jsonl"])
    assert set(curves) <= {"seed 2", "seed 9"}
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [x["seed"] for x in lines] == [2, 9] * (r["updates"] - 1)
    assert [x["return"] for x in lines if x["seed"] == 9] == r["returns_per_seed"][9]


def test_anchor_processes_run_at_once(tmp_path: Path) -> None:
    """Two anchor processes that each wait for the other's file: run one after the other, the first would wait
    until its timeout; at once, both finish, each with its own arguments."""
    child = tmp_path / "child.py"
    child.write_text(
        "import json, pathlib, sys, time\n"
        "me, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
        "me.write_text('x')\n"
        "for _ in range(400):\n"
        "    if other.exists(): break\n"
        "    time.sleep(0.05)\n"
        "else: sys.exit(3)\n"
        "print(json.dumps({'env_steps_per_s': 10.0, 'me': me.name}))\n"
    )
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    from ers_deep.bench.train import bench_anchors

    out = bench_anchors(child, [[a, b], [b, a]], env=None, timeout=60)
    assert [r["lines"][-1]["me"] for r in out["runs"]] == ["a", "b"]
    assert all("error" not in r and "cores_used" not in r for r in out["runs"]) and out["cores_used"] >= 0


def test_the_table_shows_no_nan_for_a_side_of_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One anchor run: its se and the Welch t are undefined, and the table printed ``1.50 +- nan`` and
    ``+0.00 (nan)``; now the mean alone, the difference alone, and ``-`` at a mark no run reached."""
    e = _ers_log(tmp_path / "e.jsonl", {0: [1.0] * 12, 1: [2.0] * 12})
    a = _anchor_log(tmp_path / "learn-anchor-seed0.jsonl", 0, [1.5, 1.5])
    argv = ["--ers", str(e), "--anchor", str(a), "--out", str(tmp_path / "o"), "--no-figure"]
    main([*argv, "--marks", "400,800,5000", "--window", "100"])
    out = capsys.readouterr().out
    assert "nan" not in out.lower()
    assert "| 400 | 1.50 +- 0.50 | 1.50 | +0.00 |" in out
    assert "| 5,000 | - (n=0) | - (n=0) | - |" in out


def test_learn_pair_json_is_strict_where_values_are_undefined(tmp_path: Path) -> None:
    """One anchor run: its se, the Welch t and the means at a mark no run reached are NaN; learn-pair.json held
    bare ``NaN`` tokens (``json.dumps``, not strict JSON) and was written in place; now ``null``, atomically."""
    e = _ers_log(tmp_path / "e.jsonl", {0: [1.0] * 12, 1: [2.0] * 12})
    a = _anchor_log(tmp_path / "learn-anchor-seed0.jsonl", 0, [1.5, 1.5])
    out = tmp_path / "o"
    argv = ["--ers", str(e), "--anchor", str(a), "--out", str(out), "--no-figure"]
    result = main([*argv, "--marks", "400,800,5000", "--window", "100"])
    assert math.isnan(result["sides"]["anchor"]["se"][0]) and math.isnan(result["difference"]["welch_t"][0])

    def refuse(token: str) -> None:
        raise AssertionError(f"learn-pair.json holds {token}")

    stored = json.loads((out / "learn-pair.json").read_text(), parse_constant=refuse)
    assert stored["sides"]["anchor"]["se"][:2] == [None, None] and stored["difference"]["welch_t"][0] is None
    assert stored["sides"]["ers"]["mean"][2] is None and stored["sides"]["ers"]["mean"][0] == pytest.approx(
        1.5
    )
    assert sorted(p.name for p in out.iterdir()) == ["learn-pair.json"]  # no temporary left
