"""``ers_deep.bench.precision``: one training run per product format, the format kept on resume, and the
comparison read back from the runs' metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ers_deep.analysis.curves import value_at
from ers_deep.bench.precision import FORMATS, compare, emulated_learner, format_config, main, run_format
from ers_deep.nets import NetConfig
from ers_deep.train import paper_config
from ers_deep.train.run import RunError, read_metrics
from tests.deep.threads import one_thread  # noqa: F401


def _config(updates: int = 3):  # type: ignore[no-untyped-def]
    return paper_config(
        "hanabi",
        hanabi_preset="Hanabi-Very-Small",
        num_envs=8,
        num_steps=30,
        seeds=(0, 1),
        net=NetConfig(kind="mlp", hidden=16),
        total_env_steps=updates * 8 * 30,
    )


def test_each_format_is_a_run_and_the_comparison_reads_them(tmp_path: Path) -> None:
    for fmt in ("float32", "tf32"):
        summary = run_format(_config(), fmt, tmp_path, progress=False)
        assert summary["finished"] and summary["updates"] == 3
        assert json.loads((tmp_path / fmt / "matmul.json").read_text())["fmt"] == fmt
    a, b = (read_metrics(tmp_path / f) for f in ("float32", "tf32"))
    assert len(a) == len(b) == 6  # 3 updates x 2 seeds
    assert [r["value_loss"] for r in a] != [r["value_loss"] for r in b]  # the products differ
    result = compare(tmp_path, marks=[240, 720])
    assert set(result["return_at"]) == {"float32", "tf32"} and sorted(result["per_seed"]["tf32"]) == [0, 1]
    assert (tmp_path / "compare.png").stat().st_size > 0
    assert json.loads((tmp_path / "compare.json").read_text())["marks"] == [240, 720]


def test_a_run_resumes_with_its_own_format_only(tmp_path: Path) -> None:
    run_format(_config(), "tf32", tmp_path, progress=False)
    (tmp_path / "tf32" / "matmul.json").write_text(json.dumps({"fmt": "bf16"}))
    with pytest.raises(RunError, match="other products"):
        run_format(_config(), "tf32", tmp_path, progress=False)
    with pytest.raises(ValueError, match="fmt"):
        run_format(_config(), "fp8", tmp_path, progress=False)
    (tmp_path / "tf32" / "matmul.json").write_text(json.dumps({"fmt": "tf32"}))
    with pytest.raises(RunError, match="another config"):
        run_format(_config(updates=4), "tf32", tmp_path, progress=False)
    assert run_format(_config(), "tf32", tmp_path, progress=False)["updates"] == 3  # resumed, nothing left


def test_the_learner_is_emulated_from_its_construction() -> None:
    learner = emulated_learner("tf32")(_config())
    assert all("forward" in vars(getattr(learner.net, n)) for n in ("embed", "actor_out", "critic_hidden"))
    assert "forward" not in vars(emulated_learner("float32")(_config()).net.embed)


def test_return_at_averages_the_updates_near_a_mark() -> None:
    curves = {0: [(100, 1.0, 0.0), (200, 3.0, 0.0)], 1: [(100, 2.0, 0.0), (400, 9.0, 0.0)]}
    assert value_at(curves.values(), 150, 50) == 2.0
    assert math.isnan(value_at(curves.values(), 1000, 50))


def test_the_command_needs_a_format_or_compare(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path)])
    with pytest.raises(RunError, match="no run"):
        main(["--out", str(tmp_path), "--compare"])


def test_the_comparison_joins_folders_of_other_seeds_of_one_config(tmp_path: Path) -> None:
    run_format(_config(updates=2), "tf32", tmp_path / "a", progress=False)
    run_format(_config(updates=2).replace(seeds=(5,)), "tf32", tmp_path / "b", progress=False)
    result = compare(tmp_path / "a", marks=[240], figure=False, more=[tmp_path / "b"])
    assert sorted(result["per_seed"]["tf32"]) == [0, 1, 5]
    run_format(_config(updates=2).replace(gamma=0.9), "tf32", tmp_path / "c", progress=False)
    with pytest.raises(RunError, match="another config"):
        compare(tmp_path / "a", marks=[240], figure=False, more=[tmp_path / "c"])


def test_a_switched_format_is_the_learners_own_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bf16-gradients`` trains with ``TrainConfig.bf16_gradients`` on (no emulation), its numbers differ from
    float32's (MIN_MACS 0: the tiny net's products take the switch), and the comparison joins it with float32's
    run although the two configs differ in that switch."""
    from ers_deep.nets import blas

    monkeypatch.setattr(blas, "MIN_MACS", 0)
    monkeypatch.setattr(blas, "_bf16_gradients", blas.bf16_gradients())  # the process's switch, back after
    learner = emulated_learner("bf16-gradients")(_config().replace(bf16_gradients=True))
    assert "forward" not in vars(learner.net.embed) and learner.switches.bf16_gradients
    for fmt in ("float32", "bf16-gradients"):
        run_format(_config(), fmt, tmp_path, progress=False)
    stored = json.loads((tmp_path / "bf16-gradients" / "config.json").read_text())["config"]
    assert stored["bf16_gradients"] is True
    a, b = (read_metrics(tmp_path / f) for f in ("float32", "bf16-gradients"))
    assert [r["value_loss"] for r in a] != [r["value_loss"] for r in b]
    assert set(compare(tmp_path, marks=[240], figure=False)["return_at"]) == {"float32", "bf16-gradients"}


def test_every_format_but_the_switch_has_float32_gradient_products() -> None:
    """A format's config pins ``bf16_gradients`` and ``int8_inputs`` (default "auto", which would turn them on
    where the CPU has bfloat16 / int8 units): bfloat16 gradients for ``bf16-gradients`` and ``int8-inputs`` (the
    int8 embedding beside the default learner's gradients), int8 for ``int8-inputs`` only, so float32 is float32
    on every CPU."""
    cfg = paper_config("hanabi")
    assert cfg.bf16_gradients == "auto" and cfg.int8_inputs == "auto"
    pinned = {fmt: format_config(cfg, fmt).bf16_gradients for fmt in FORMATS}
    assert pinned == {fmt: fmt in ("bf16-gradients", "int8-inputs") for fmt in FORMATS}
    assert {fmt: format_config(cfg, fmt).int8_inputs for fmt in FORMATS} == {
        fmt: fmt == "int8-inputs" for fmt in FORMATS
    }
