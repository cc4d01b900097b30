"""``FastCollector``: the fast collection behind TorchRL's collector interface yields [steps, games]
TensorDicts whose entries equal those of the reference ``torchrl.collectors.Collector`` batch (transposed),
and its state_dict resumes the stream exactly."""

from __future__ import annotations

import pytest
import torch
from torchrl.collectors import BaseCollector

from ers_deep.train import Learner
from ers_deep.train.torchrl_fast import FastCollector
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import stagger, tiny_config

KEYS = [
    ("agents", "observation"),
    ("agents", "action_mask"),
    ("agents", "mask"),
    ("agents", "action"),
    ("agents", "logp"),
    ("agents", "state_value"),
    "is_init",
    ("next", "done"),
    ("next", "agents", "reward"),
]


@pytest.mark.parametrize("env", ["hanabi", "tabular:dectiger"])
def test_fast_collector_batches_equal_the_reference_collector(env: str) -> None:
    cfg = tiny_config(env, collect_mode="eager")
    fast, ref = Learner(cfg.replace(collector="fast")), Learner(cfg.replace(collector="torchrl"))
    assert fast.fast is not None
    collector = FastCollector(fast.fast, fast.runner, total_batches=2)
    assert isinstance(collector, BaseCollector)
    batches = list(collector)
    assert len(batches) == 2 and collector.batches == 2
    for td in batches:
        ref.collect()
        want = ref.torchrl.last_batch
        assert td.batch_size == torch.Size([cfg.num_steps, cfg.num_envs * len(cfg.seeds)])
        for key in KEYS:
            assert torch.equal(td[key], want[key].transpose(0, 1)), key


def test_fast_collector_state_dict_resumes_the_stream() -> None:
    cfg = tiny_config("overcooked-v2", collect_mode="eager")
    a = Learner(cfg)
    stagger(a)
    assert a.fast is not None
    a.fast.fast.restart()
    ca = FastCollector(a.fast, a.fast.state, total_batches=3)
    it = iter(ca)
    next(it)
    saved = ca.state_dict()
    second = next(it).clone()
    b = Learner(cfg)
    assert b.fast is not None
    cb = FastCollector(b.fast, b.fast.state, total_batches=3)
    cb.load_state_dict(saved)
    again = next(iter(cb))
    assert all(torch.equal(second[k], again[k]) for k in KEYS)


def test_fast_collector_weighs_the_shaped_reward_by_its_coefficient() -> None:
    """Overcooked V2's batches carry team + coef x shaped reward, coef = ``shaped_coef(batch index)``: the
    rewards at 1/2 are the mean of those at 0 and 1 (the same actions: the coefficient does not reach the
    policy), and some shaped reward was given (else the check would hold for a coefficient ignored)."""
    cfg = tiny_config("overcooked-v2", collect_mode="eager", num_envs=32, num_steps=32)
    rewards, seen = {}, {}
    for coef in (0.0, 0.5, 1.0):
        learner = Learner(cfg)
        assert learner.fast is not None
        calls: list[int] = []

        def coef_of(i: int, c: float = coef, log: list[int] = calls) -> float:
            log.append(i)
            return c

        collector = FastCollector(learner.fast, learner.fast.state, total_batches=2, shaped_coef=coef_of)
        rewards[coef] = [td["next", "agents", "reward"].clone() for td in collector]
        seen[coef] = calls
    assert all(calls == [0, 1] for calls in seen.values())
    for r0, half, r1 in zip(rewards[0.0], rewards[0.5], rewards[1.0], strict=True):
        torch.testing.assert_close(half, (r0 + r1) / 2)
    assert any((r1 != r0).any() for r0, r1 in zip(rewards[0.0], rewards[1.0], strict=True))
