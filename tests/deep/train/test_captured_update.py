"""The captured update's bookkeeping on CPU, with the CUDA graph emulated (``tests/deep/accel/
test_graph_emulated.py``: the capture runs the step once and undoes it, a replay reruns it): static copies of
the rollout, the minibatch index buffer, the warm-up step, the sums of the logged parts, and re-capture after
a checkpoint load. Against the eager update: parameters after 3 updates within 1e-6 (Hanabi's MLP; Overcooked
V2's CNN + GRU, whose captured update runs the GRU over a static number of segments, ``gru_bounded``, with
episodes ending mid-rollout). What only a GPU can check (the recorded kernels) is in ``test_gpu.py``."""

from __future__ import annotations

import pytest
import torch

from ers_deep.train import Learner
from ers_deep.train import update as update_module
from ers_deep.train.ippo import max_resets_per_rollout
from ers_deep.train.update import resolve_update_mode  # the real one (the fixture patches the module's)
from tests.deep.accel.test_graph_emulated import emulated_capture
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import mode_vs_eager_params, tiny_config


@pytest.fixture(autouse=True)
def emulated_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(update_module, "capture", emulated_capture)
    real = update_module.resolve_update_mode

    def on_cpu(
        mode: str,
        recurrent: bool,
        samples: int,
        device: object = "cpu",
        capturable: bool = False,
        traceable: bool = True,
    ) -> str:
        return (
            mode if mode.endswith("graph") else real(mode, recurrent, samples, device, capturable, traceable)
        )

    monkeypatch.setattr(update_module, "resolve_update_mode", on_cpu)


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_emulated_captured_update_equals_eager_update(env: str) -> None:
    cfg = tiny_config(env, collect_mode="eager")
    diff = mode_vs_eager_params(cfg, "graph", updates=3, staggered=True)
    assert diff < 1e-6, diff


def test_captured_update_recaptures_after_a_checkpoint_load() -> None:
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="graph")
    whole = Learner(cfg)
    for _ in range(3):
        whole.train_step()
    first = Learner(cfg)
    first.train_step()
    resumed = Learner(cfg)
    resumed.train_step()  # its own capture, then the state of `first` replaces everything
    resumed.load_state_tensors(first.state_tensors(), first.counters())
    assert resumed.updater.graph is None
    for _ in range(2):
        resumed.train_step()
    for p, q in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(p, q)


def test_max_resets_per_rollout_follows_the_episode_length() -> None:
    learner = Learner(tiny_config("overcooked-v2", collect_mode="eager"))
    assert max_resets_per_rollout(learner.env, 256) == 1  # 400-step episodes
    assert max_resets_per_rollout(learner.env, 402) == 2
    assert max_resets_per_rollout(Learner(tiny_config("hanabi", collect_mode="eager")).env, 128) is None


def test_graph_modes_need_cuda_and_a_capturable_update() -> None:
    assert resolve_update_mode("auto", False, 10**6, "cuda", capturable=True) == "compile-graph"
    assert resolve_update_mode("auto", True, 10**6, "cuda", capturable=True) == "graph"
    assert resolve_update_mode("auto", True, 10**6, "cuda", capturable=False) == "eager"
    assert resolve_update_mode("auto", False, 10**6, "cpu", capturable=True) == "compile"
    assert resolve_update_mode("auto", False, 10**6, "cpu", traceable=False) == "eager"  # host syncs
    assert resolve_update_mode("auto", False, 10**6, "cuda", capturable=False, traceable=False) == "eager"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        resolve_update_mode("graph", False, 10, "cpu", capturable=True)
    with pytest.raises(ValueError, match="cannot be captured"):
        resolve_update_mode("compile-graph", False, 10, "cuda", capturable=False)
    with pytest.raises(ValueError, match="unknown update mode"):
        resolve_update_mode("fast", False, 10)
