"""One whole IPPO update of ers (GAE, the PPO minibatch steps, per-seed gradient clipping, Adam) against the
same update computed by JAX and optax, as the JAX anchor (``../shared/anchors/ippo_hanabi_jax.py``, JaxMARL's
``ippo_ff_hanabi.py``) computes it (``ers_deep.bench.jax_update``): its ``gae`` scan, its ``loss_fn`` under
``jax.grad``, and ``optax.chain(clip_by_global_norm, adam(eps=1e-5))``, on the same rollout, the same parameters and
the same minibatches. What no one here wrote does the arithmetic on the reference side: autodiff, the optimizer and
the clipping are JAX's and optax's.

The reference runs in float32 and in float64. ers's float32 parameters must lie from the float64 update no further
than twice JAX's own float32 update does, plus a thousandth of how far the update moved them (measured: at most
~0.06 of that bound here; an update that computes something else lies ~as far as the parameters moved).

The test needs the ``reference`` extra of ers-deep (jax, optax); it skips without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ers_deep.bench.jax_update import compare_update, main
from ers_deep.nets import NetConfig
from ers_deep.train import TrainConfig
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config

pytest.importorskip("jax")
pytest.importorskip("optax")


def assert_as_exact_as_jax_float32(result: dict[str, Any]) -> None:
    """Every tensor moved, and ers's float32 update lies from the float64 one within 2 x JAX float32's distance
    + 1e-3 x the move; ers's advantages likewise."""
    for name, v in result["layers"].items():
        assert v["moved"] > 1e-4, f"{name} did not move"
        bound = 2 * v["jax32_vs_f64"] + 1e-3 * v["moved"]
        assert v["ers_vs_f64"] <= bound, f"{name}: {v}"
    adv = result["adv_vs_f64"]
    assert adv["ers"] <= 2 * adv["jax32"] + 1e-6, adv
    assert result["episode_ends_in_rollout"] > 0, "the rollout should hold an episode end"


def _config(acting_rows: bool) -> TrainConfig:
    cfg = tiny_config(
        "hanabi", collect_mode="eager", update_mode="eager", seeds=(0,), acting_rows=acting_rows
    )
    return cfg.replace(epochs=2, minibatches=2)


@pytest.mark.parametrize("acting_rows", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_one_update_equals_the_jax_anchors_update(acting_rows: bool) -> None:
    result = compare_update(_config(acting_rows))
    assert result["minibatch_steps"] == 4
    assert result["minibatch_unit"] == ("turn-streams" if acting_rows else "actors")
    assert_as_exact_as_jax_float32(result)


def test_the_five_minute_runs_update_equals_the_jax_anchors_update() -> None:
    """Hanabi-Full with the V0 belief, turn streams, acting rows and the paper's 4 x 4 minibatches (the H200
    learning runs' update at 64 x 32 and MLP 64; ``python -m ers_deep.bench.jax_update`` runs it at their size)."""
    cfg = tiny_config(
        "hanabi",
        collect_mode="eager",
        update_mode="eager",
        seeds=(0,),
        hanabi_preset="Hanabi-Full",
        hanabi_knowledge="v0-belief",
        num_envs=64,
        num_steps=32,
        net=NetConfig(kind="mlp", hidden=64),
    )
    result = compare_update(cfg.replace(epochs=4, minibatches=4))
    assert result["minibatch_steps"] == 16 and result["minibatch_unit"] == "turn-streams"
    assert_as_exact_as_jax_float32(result)


def test_a_wrong_update_fails_the_bound() -> None:
    """The bound can fail: ers's loss before the official one (the policy and entropy means over acting entries
    only, ``loss_mean="acting"``) lies from the anchor's float64 update by up to ~1.2 x the move."""
    result = compare_update(_config(True).replace(loss_mean="acting"))
    with pytest.raises(AssertionError, match=r"embed|actor"):
        assert_as_exact_as_jax_float32(result)


def test_the_command_writes_its_json(tmp_path: Path) -> None:
    args = ["--num-envs", "8", "--num-steps", "16", "--hidden", "16", "--preset", "Hanabi-Very-Small"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "jax-update.json").read_text())
    assert record["config"]["num_envs"] == 8 and record["config"]["hidden"] == 16
    assert set(record["layers"]) >= {"embed.kernel", "critic_out.bias"}
    assert_as_exact_as_jax_float32(record)
