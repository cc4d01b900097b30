"""``FastCollector``: the fast collection behind TorchRL's collector interface yields [games, time]
TensorDicts whose entries and layout equal those of the reference ``torchrl.collectors.Collector`` batch, in
memory of their own (graph modes too), that TorchRL's advantage modules and slice samplers read along time;
its TorchRL interface (stats, weights, frames) holds, set_seed restarts the returns too, and its state_dict
resumes the stream exactly."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import BaseCollector

from ers_deep.accel import rollout as rollout_module
from ers_deep.accel import step as step_module
from ers_deep.train import Learner
from ers_deep.train import learner_setup as learner_setup_module
from ers_deep.train.torchrl_fast import FastCollector
from tests.deep.accel.test_graph_emulated import emulated_capture
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
        assert td.batch_size == torch.Size([cfg.num_envs * len(cfg.seeds), cfg.num_steps])
        assert td.names == want.names == [None, "time"]
        for key in KEYS:
            assert torch.equal(td[key], want[key]), key


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


def test_graph_mode_batches_are_not_rewritten_by_the_next_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a graph mode (CUDA's default; emulated here) the rollout's tensors are the capture's static buffers:
    a batch kept from the stream still holds what it held when it was yielded."""
    monkeypatch.setattr(rollout_module, "capture", emulated_capture)
    for module in (step_module, learner_setup_module):
        monkeypatch.setattr(module, "resolve_mode", lambda mode, env: "eager" if mode == "auto" else mode)
    learner = Learner(tiny_config("hanabi", collect_mode="graph"))
    assert learner.fast is not None and learner.fast.mode == "graph"
    kept, copies = [], []
    for td in FastCollector(learner.fast, learner.fast.state, total_batches=3):
        kept.append(td)
        copies.append(td.clone())
    assert not torch.equal(copies[0]["agents", "action"], copies[2]["agents", "action"])
    for td, copy in zip(kept, copies, strict=True):
        assert all(torch.equal(td[k], copy[k]) for k in KEYS)


def test_torchrl_gae_and_slice_sampler_read_the_batch_along_time() -> None:
    """TorchRL's GAE on a fast batch equals it on the reference batch (time found by name), and a
    ``SliceSampler`` over an ``ndim=2`` storage returns consecutive steps of one game."""
    from torchrl.data import LazyTensorStorage, ReplayBuffer, SliceSampler
    from torchrl.objectives.value.functional import generalized_advantage_estimate

    cfg = tiny_config("hanabi", collect_mode="eager")
    fast, ref = Learner(cfg.replace(collector="fast")), Learner(cfg.replace(collector="torchrl"))
    assert fast.fast is not None
    td = next(iter(FastCollector(fast.fast, fast.runner, total_batches=1)))
    ref.collect()
    want = ref.torchrl.last_batch
    G, T = td.batch_size
    td["game"] = torch.arange(G)[:, None].expand(G, T).clone()
    td["step"] = torch.arange(T)[None, :].expand(G, T).clone()
    rb = ReplayBuffer(
        storage=LazyTensorStorage(G * T, ndim=2), sampler=SliceSampler(slice_len=2), batch_size=8
    )
    rb.extend(td)
    sample = rb.sample()
    game, step = sample["game"].view(-1, 2), sample["step"].view(-1, 2)
    assert bool((game[:, 0] == game[:, 1]).all() and (step[:, 1] == step[:, 0] + 1).all())

    def advantage(batch: TensorDictBase) -> torch.Tensor:
        value = batch["agents", "state_value"]
        done = batch["next", "done"][..., None, :].expand_as(value)
        return generalized_advantage_estimate(
            0.99,
            0.95,
            value,
            value.roll(-1, dims=1),
            batch["next", "agents", "reward"],
            done,
            done,
            time_dim=batch.names.index("time"),
        )[0]

    assert torch.equal(advantage(td), advantage(want))


@pytest.mark.parametrize("shifted", [False, True])
def test_torchrl_gae_on_a_batch_equals_ers_gae(shifted: bool) -> None:
    """TorchRL's ``GAE`` over a batch gives ers's ``ppo.gae`` of the batch's rollout (bootstrap included),
    reading the stored values and next values (``value_network=None``) or running the collection's own critic
    as a ``TensorDictModule`` over the batch's observations and next observations; ``compact_obs`` leaves the
    next observations out. Before the batch carried them, GAE with a value network raised and, shifted,
    bootstrapped every unfinished game from V(s_{T-1}) instead of V(s_T) (advantages 1.03 apart)."""
    from tensordict.nn import TensorDictModule
    from torchrl.objectives.value import GAE

    from ers_deep.train.ppo import gae

    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    assert learner.fast is not None
    S, B, P, net = learner.S, learner.B, learner.P, learner.fast.net
    collector = FastCollector(learner.fast, learner.fast.state, total_batches=2)
    td = list(collector)[-1]
    ro = collector.rollout
    assert ro is not None and ro.done.any() and (~ro.done[:, -1]).any()
    T = td.batch_size[1]
    adv, target = gae(ro.reward, ro.value, ro.last_value, ro.done, 0.99, 0.95)

    def games(x: torch.Tensor) -> torch.Tensor:  # [S, T, N] -> [S*B, T, P, 1]
        return x.reshape(S, T, B, P).transpose(1, 2).reshape(S * B, T, P, 1)

    class Critic(torch.nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:  # [..., P, O] -> [..., P, 1]
            x = obs.reshape(S, 1, -1, obs.shape[-1])
            first = torch.zeros(x.shape[:3], dtype=torch.bool)
            return net(x, first, net.initial_state(x.shape[2]))[1].reshape(*obs.shape[:-1], 1)

    critic = TensorDictModule(Critic(), [("agents", "observation")], [("agents", "state_value")])
    for value_network in (None, critic):
        estimator = GAE(gamma=0.99, lmbda=0.95, value_network=value_network, shifted=shifted)
        estimator.set_keys(
            value=("agents", "state_value"),
            reward=("agents", "reward"),
            done=("agents", "done"),
            terminated=("agents", "terminated"),
            advantage=("agents", "advantage"),
            value_target=("agents", "value_target"),
        )
        batch = td.clone()
        for key in ("done", "terminated"):
            batch["next", "agents", key] = batch["next", key][..., None, :].expand(S * B, T, P, 1)
        with torch.no_grad(), learner.switches.applied():  # the critic multiplies as the collection did
            estimator(batch)
        torch.testing.assert_close(batch["agents", "advantage"], games(adv), atol=1e-5, rtol=0)
        torch.testing.assert_close(batch["agents", "value_target"], games(target), atol=1e-5, rtol=0)
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    assert learner.fast is not None
    compact = next(iter(FastCollector(learner.fast, learner.fast.state, total_batches=1, compact_obs=True)))
    assert ("next", "agents", "observation") not in compact.keys(True)
    assert ("next", "agents", "state_value") in compact.keys(True)


def test_fast_collector_speaks_torchrl_collector_interface() -> None:
    """``stats()`` is TorchRL's progress snapshot, ``update_policy_weights_()`` a no-op for the collection's
    own net and a copy for given weights, ``frames_per_batch`` set, an endless collector's total_frames -1."""
    learner = Learner(tiny_config("tabular:dectiger", collect_mode="eager"))
    assert learner.fast is not None
    collector = FastCollector(learner.fast, learner.fast.state, total_batches=2)
    frames = collector.frames_per_batch
    assert frames == learner.config.num_steps * learner.env.batch_size > 0
    for i, td in enumerate(collector):
        collector.update_policy_weights_()
        assert td.numel() == frames
        assert collector.stats() == {
            "frames": (i + 1) * frames,
            "batches": i + 1,
            "total_frames": 2 * frames,
            "completed": i == 1,
            "requested_frames_per_batch": frames,
        }
    net = learner.fast.net
    zeros = {k: torch.zeros_like(v) for k, v in net.state_dict().items()}
    collector.update_policy_weights_(zeros)
    assert all(not v.any() for v in net.state_dict().values())
    ones = TensorDict.from_module(net).apply(torch.ones_like)  # TorchRL's weights format (raised before)
    collector.update_policy_weights_(ones)
    assert all(bool((v == 1).all()) for v in net.state_dict().values())
    assert FastCollector(learner.fast, learner.fast.state).total_frames == -1


def test_torchrl_weights_of_a_net_with_transient_buffers_load() -> None:
    """``TensorDict.from_module`` holds a net's non-persistent buffers (Hanabi's int8 limbs; the CNN's spatial
    tables where it has them), which its state dict leaves out (a strict load refused them before): the
    parameters are copied, the net keeps its own buffers."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager")
    learner, other = Learner(cfg), Learner(cfg.replace(seeds=(5, 6)))
    assert learner.fast is not None
    net = learner.fast.net
    transient = {k for k, _ in net.named_buffers()} - set(net.state_dict())
    assert transient  # the case in question
    kept = {k: v.clone() for k, v in net.named_buffers()}
    FastCollector(learner.fast, learner.fast.state).update_policy_weights_(TensorDict.from_module(other.net))
    for k, v in other.net.state_dict().items():
        assert torch.equal(net.state_dict()[k], v), k
    assert all(torch.equal(dict(net.named_buffers())[k], v) for k, v in kept.items())


def test_total_frames_counts_env_steps_and_stops_as_torchrl_collector() -> None:
    """``total_frames`` (TorchRL's keyword; a TypeError before) counts env steps (games x steps, not agents)
    and, as ``Collector``, runs whole batches until it is reached; a second loop yields nothing."""
    learner = Learner(tiny_config("hanabi", collect_mode="eager", num_steps=4))
    assert learner.fast is not None
    frames = learner.config.num_steps * learner.env.batch_size
    collector = FastCollector(learner.fast, learner.fast.state, total_frames=2 * frames + 1)
    assert len(collector) == 3 and collector.total_frames == 2 * frames + 1
    batches = list(collector)
    assert [td.numel() for td in batches] == [frames] * 3 and batches[0]["agents", "action"].shape[-1] == 2
    assert collector.stats()["frames"] == 3 * frames and collector.stats()["completed"]
    assert list(collector) == []
    assert FastCollector(learner.fast, learner.fast.state, total_frames=-1).total_frames == -1
    with pytest.raises(ValueError, match="not both"):
        FastCollector(learner.fast, learner.fast.state, 2, total_frames=frames)


def test_reset_deals_new_games_and_restarts_the_runner() -> None:
    """``reset()`` (TorchRL's ``Collector.reset``; missing before): every game starts afresh from a new deal
    of the env's generator, running returns zeroed, the frame count kept; a partial reset is refused."""
    learner = Learner(tiny_config("tabular:dectiger", collect_mode="eager", num_envs=16, num_steps=1))
    assert learner.fast is not None
    collector = FastCollector(learner.fast, learner.fast.state)
    it = iter(collector)
    next(it)
    before = learner.env.generator.get_state()
    assert collector.runner.ep_return.abs().sum() > 0 and not collector.runner.first.all()
    collector.reset()
    assert not torch.equal(learner.env.generator.get_state(), before)  # dealt anew
    assert bool(collector.runner.first.all()) and not collector.runner.ep_return.any()
    assert bool(next(it)["is_init"].all()) and collector.stats()["frames"] == 2 * collector.frames_per_batch
    with pytest.raises(ValueError, match="partial"):
        collector.reset(index=0)


def test_set_seed_restarts_games_and_their_running_returns() -> None:
    """After ``set_seed`` every game starts afresh: the running returns of the abandoned episodes are gone, so
    the next ended episodes' mean return is the batch's own sum of their rewards."""
    learner = Learner(tiny_config("tabular:dectiger", collect_mode="eager", num_envs=16, num_steps=1))
    assert learner.fast is not None
    collector = FastCollector(learner.fast, learner.fast.state)
    it = iter(collector)
    next(it)
    assert collector.runner.ep_return.abs().sum() > 0
    collector.set_seed(7)
    assert bool(collector.runner.first.all()) and not collector.runner.ep_return.any()
    returns = torch.zeros(learner.env.batch_size)
    for _ in range(20):
        td = next(it)
        returns += td["next", "agents", "reward"][:, 0, 0, 0]
        done = td["next", "done"][:, 0, 0]
        if done.any():
            S = len(learner.config.seeds)
            want = returns.view(S, -1)
            ended = done.view(S, -1)
            for s in range(S):
                if ended[s].any():
                    torch.testing.assert_close(collector.episode_stats["return"][s], want[s][ended[s]].mean())
            return
    raise AssertionError("no episode ended in 20 steps")


def test_the_torchrl_collections_take_no_deprecated_path() -> None:
    """Both TorchRL collections (the reference ``Collector`` over ``LearnerEnv``, and ``FastCollector``):
    built, a batch collected, weights updated, a PPO step on the reference batch, with no DeprecationWarning
    or FutureWarning (TorchRL 0.14 deprecates a collector's ``weight_updater=``, ``policy_weights=`` and
    ``WeightUpdaterBase``; its own subclasses of that warn once, when ``torchrl.collectors`` is imported,
    before this test). Eager modes: ``torch.compile``'s first use imports ``torch.utils.mkldnn``, whose
    ``torch.jit.script_method`` warns inside torch."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", FutureWarning)
        ref = Learner(cfg.replace(collector="torchrl"))
        ref.train_step()
        ref.torchrl.collector.update_policy_weights_()
        fast = Learner(cfg.replace(collector="fast"))
        assert fast.fast is not None
        collector = FastCollector(fast.fast, fast.fast.state, total_batches=1)
        assert len(list(collector)) == 1
        collector.update_policy_weights_(TensorDict.from_module(fast.fast.net))
