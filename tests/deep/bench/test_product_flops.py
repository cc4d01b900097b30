"""``bench.train.product_flops``: the learner's matrix-product FLOP per env-step, against the closed form of
Hanabi's MLP, and the rate ``bench_learner(count_flops=True)`` puts beside a device row."""

from __future__ import annotations

import pytest

from ers_deep.bench.train import bench_learner, product_flops
from ers_deep.nets import NetConfig
from ers_deep.train.config import paper_config
from tests.deep.threads import one_thread  # noqa: F401


def _hanabi(hidden: int, **kw: object):  # type: ignore[no-untyped-def]
    return paper_config(
        "hanabi",
        hanabi_knowledge="v0-belief",
        num_envs=8,
        num_steps=8,
        net=NetConfig(kind="mlp", hidden=hidden),
        **kw,
    )


@pytest.mark.parametrize("hidden", [32, 96])
def test_hanabi_update_flops_are_the_mlp_s_closed_form(hidden: int) -> None:
    """Per env-step, P = 2 entries, each epoch: the first layer forward and its weight gradient (2 O H), the
    critic's hidden layer forward and both gradients (3 H H), the actor's hidden and output layers the same on
    the acting half of the entries (1.5 (H H + H A)), 2 FLOP per multiply-add; the count ignores the layers of
    width 1 (the value head: 3 H per entry), so it agrees within a percent."""
    cfg = _hanabi(hidden)
    got = product_flops(cfg)
    O, H, A, P = 658, hidden, 21, 2  # JaxMARL's Hanabi-Full observation with the V0 belief; 21 moves
    closed = cfg.epochs * P * 2 * (2 * O * H + 3 * H * H + 1.5 * (H * H + H * A))
    assert got["update"] == pytest.approx(closed, rel=0.01)
    # collection: one forward of every layer per entry (the actor's on every entry), and after the last of the
    # T steps one more for the bootstrap value
    forward = P * 2 * (O * H + 2 * H * H + H * A)
    assert got["collect"] == pytest.approx(forward * (1 + 1 / cfg.num_steps), rel=0.01)


def test_the_counts_follow_the_epochs_and_the_steps_not_the_batch() -> None:
    """The update's count is linear in the epochs; collection's is f (1 + 1 / T) (the bootstrap value after T
    steps), evaluated at the config's T from two small twins; the number of games changes neither."""
    one = product_flops(_hanabi(32, epochs=1))
    four = product_flops(_hanabi(32, epochs=4))
    assert four["update"] == pytest.approx(4 * one["update"], rel=1e-9)
    assert four["collect"] == pytest.approx(one["collect"], rel=1e-9)
    assert product_flops(_hanabi(32).replace(num_envs=64)) == four
    long = product_flops(_hanabi(32).replace(num_steps=128))
    assert long["update"] == four["update"]
    assert long["collect"] == pytest.approx(four["collect"] * (1 + 1 / 128) / (1 + 1 / 8), rel=1e-9)


def test_bench_learner_reports_the_products_rate_per_phase() -> None:
    cfg = _hanabi(32, hanabi_preset="Hanabi-Very-Small").replace(update_mode="eager", collect_mode="eager")
    row = bench_learner(cfg, updates=1, warmup=1, count_flops=True)
    per, rate = row["product_flop_per_env_step"], row["product_tflop_s"]
    assert set(per) == set(rate) == {"collect", "update"} and all(v > 0 for v in rate.values())
    steps = cfg.steps_per_update
    assert rate["update"] == pytest.approx(per["update"] * steps / row["phase_s"]["update"] / 1e12)
    assert "product_tflop_s" not in bench_learner(cfg, updates=1, warmup=1)


def test_a_failed_count_keeps_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count runs after the measurement; its failure is recorded beside the row's figures."""
    from ers_deep.bench import train as bench

    def broken(config: object) -> dict[str, float]:
        raise RuntimeError("no such net")

    monkeypatch.setattr(bench, "product_flops", broken)
    cfg = paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3)
    row = bench.bench_learner(cfg, updates=1, warmup=1, count_flops=True)
    assert row["env_steps_per_s"] > 0 and "product_tflop_s" not in row
    assert row["product_flops_error"] == "RuntimeError: no such net"


def test_overcooked_s_cnn_and_gru_are_counted() -> None:
    """Overcooked V2's convolutions and GRU: an update does forward and backward of what collection does
    forward, over 4 epochs, so it counts more than collection per env-step, and more conv width counts more."""

    def cfg(conv: int):  # type: ignore[no-untyped-def]
        net = NetConfig(kind="cnn-gru", hidden=8, conv=conv)
        return paper_config("overcooked-v2", num_envs=4, num_steps=8, minibatches=2, net=net)

    small, wide = product_flops(cfg(8)), product_flops(cfg(16))
    assert 0 < small["collect"] < small["update"]
    assert wide["collect"] > small["collect"] and wide["update"] > small["update"]


def test_the_device_table_shows_the_products_rate() -> None:
    """``bench.train_table.markdown`` puts an ers row's products' TFLOP/s (collect / PPO) in its last column;
    an anchor's row leaves it empty."""
    from ers_deep.bench.train_table import markdown

    ers = {
        "kind": "ers",
        "env": "hanabi",
        "num_envs": 8192,
        "num_steps": 128,
        "minibatches": 4,
        "env_steps_per_s": 2.4e6,
        "setup_s": 60.0,
        "phase_s": {"collect": 0.077, "gae": 0.008, "update": 0.35},
        "product_tflop_s": {"collect": 50.6, "update": 89.7},
    }
    anchor = {"kind": "anchor", "env": "hanabi", "num_envs": 8192, "env_steps_per_s": 1.9e6, "wall_s": 50.0}
    rows = markdown([anchor, ers]).splitlines()
    assert rows[0].endswith("| products TFLOP/s: collect / PPO |")
    assert rows[2].endswith("|  |") and rows[3].endswith("| 0.077 / 0.008 / 0.350 | 50.6 / 89.7 |")
