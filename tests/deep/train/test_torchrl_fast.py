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
