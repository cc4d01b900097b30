"""``bench.train.bench_learner``'s row says what ran: the product switches as the learner resolved them and whether
the process keeps freed memory (process-wide, set by the first CPU learner); ``BASELINE`` turns both switches off
besides the native collection and the eager update (what ``benchmarks/test_train_bench.py`` compares against)."""

from __future__ import annotations

from ers_deep.bench.train import BASELINE, bench_learner
from ers_deep.nets import NetConfig
from ers_deep.train.config import paper_config
from ers_deep.train.memory import freed_memory_kept
from tests.deep.threads import one_thread  # noqa: F401


def test_the_baseline_row_records_native_eager_float32_and_the_memory_setting() -> None:
    cfg = paper_config(
        "hanabi",
        hanabi_preset="Hanabi-Very-Small",
        seeds=(0,),
        num_envs=4,
        num_steps=4,
        net=NetConfig(kind="mlp", hidden=16),
    )
    row = bench_learner(cfg.replace(**BASELINE), updates=1, warmup=1)
    assert {k: row[k] for k in ("collector", "collect_mode", "update_mode")} == {
        "collector": "native",
        "collect_mode": "eager",
        "update_mode": "eager",
    }
    assert row["bf16_gradients"] is False and row["int8_inputs"] is False
    assert row["freed_memory_kept"] is freed_memory_kept()
    forced = bench_learner(
        cfg.replace(bf16_gradients=True, update_mode="eager", collect_mode="eager"), updates=1, warmup=1
    )
    assert forced["bf16_gradients"] is True and forced["collector"] == "fast"
