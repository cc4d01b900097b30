"""IPPO self-play with parameter sharing, for S seeds at once (stacked parameters, one optimiser).

One update, top to bottom (CleanRL-style phases):

1. **collect** ``num_steps`` joint steps of ``num_envs`` games per seed (``collect``): every agent of every
   game is an *actor* (N = num_envs x P per seed) acting with the shared network; the recurrent state is reset
   where an episode starts, before the step (``first`` flags, the fix of JaxMARL PR #191);
2. **advantages** (``ppo.gae``, checked against TorchRL's ``generalized_advantage_estimate``), team reward
   (plus the agent's annealed shaped reward on Overcooked V2), done = episode end (no bootstrap);
3. **update** (``ppo_update``: ``ers_deep.train.update.PPOUpdate`` over ``ers_deep.train.ppo``): ``epochs`` passes over ``minibatches`` groups of actors (whole sequences, as
   the official code shuffles along the actor axis), PureJaxRL's clipped PPO: clipped surrogate, clipped value
   loss, entropy bonus ``alpha``; gradients clipped to ``max_grad_norm`` per seed; Adam with the learning
   rate of the schedule at this update;
4. **log**: per seed, the mean return of the episodes that ended during the collection.

Turn-based games (Hanabi): only the player to move acts. Its entries carry the actor and entropy terms
(``acting`` mask); the other players' entries (their moves are ignored by the env) add only to the value
loss, whose targets are the same team returns. The means of the actor and entropy terms, and the advantage
normalisation when on, run over the entries of ``TrainConfig.loss_mean`` (default ``"all"``: every entry, as
the official code; see ``ers_deep.train.ppo``).

Boltzmann reading (the paper): with ``normalize_advantage=False`` the stationary points of the update are
pi(a | tau) proportional to exp(A(tau, a) / alpha) on every visited history, i.e. the Boltzmann fixed points
pi = softmax(Q_pi / alpha), when the advantages are unbiased (GAE lambda = 1; the tabular defaults).

Exact mode (``advantage="exact"``, tabular games only): the actor and entropy terms become the expected
update on *every* local history, each weighted equally: -mean_tau [sum_a pi(a | tau) (Q_pi(tau, a) - V_pi(tau))
+ alpha H(pi(. | tau))], with Q_pi computed exactly by ers-exact for the policy at the start of the update
(``ers_deep.train.exact.advantage_table``); the critic still learns from the collected samples. Per history
this is the sampled update's expectation rescaled by 1 / reach(tau), so its stationary points are the same
Boltzmann fixed points; but its gradient vanishes exactly at a fixed point and rarely visited histories are
not starved, so the learner converges to a fixed point (residual ~1e-7 in float32) instead of hovering
around it at the sampling noise.

Collection (``TrainConfig.collector``): ``"fast"`` (default) is ``ers_deep.train.collect.FastCollection``, the
env and the policy stepped together by ``ers_deep.accel.FastRollout`` (compiled and CUDA-graph-captured on CUDA,
compiled on CPU where it wins; ``collect_mode``), the step's own observations feeding the next step. Two
references give the same ``Rollout`` for the same seeds (``tests/deep/train/test_collect.py``): ``"torchrl"``,
``torchrl.collectors.Collector`` over a TorchRL env wrapping the same env and a TensorDict policy with the same
sampler (``ers_deep.train.collector``), and ``"native"``, the earlier per-step loop with re-observation
(``ers_deep.train.native``), kept as the speed baseline of the benchmarks.

The update (``ers_deep.train.ppo``) is ours in every path, not TorchRL's ``ClipPPOLoss``: its advantage
standardisation ignores the loss mask of non-acting Hanabi players (``../shared/notes/torchrl-and-hle.md`` 1.3);
``update_mode`` runs its minibatch steps eagerly, compiled or CUDA-graph-captured (``ers_deep.train.update``).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from ers_deep.accel import actors_to_game
from ers_deep.nets import ActorCritic, blas, build_net
from ers_deep.nets.blas import resolve_bf16_gradients, use_bf16_gradients
from ers_deep.nets.int8 import resolve_int8_inputs, use_int8_inputs
from ers_deep.nets.layers import SLinear, frozen_limbs
from ers_deep.train.collect import FastCollection, Rollout, RunnerState
from ers_deep.train.config import TrainConfig
from ers_deep.train.exact import advantage_table
from ers_deep.train.learner_setup import (
    CPU_COMPILE_MIN_STEPS,
    ProductSwitches,
    acting_share,
    check_exact_discount,
    collect_mode,
    compile_settings,
    learner_env,
    max_resets_per_rollout,
    minibatch_unit,
    net_collect_mode,
)
from ers_deep.train.memory import freed_memory_kept, keep_freed_memory
from ers_deep.train.native import collect_native
from ers_deep.train.ppo import (
    epoch_minibatches,
    gae,
    make_optimizer,
    turn_streams,
    update_data,
)
from ers_deep.train.precompile import UpdatePrecompile, wanted
from ers_deep.train.schedule import lr_at, shaped_coef
from ers_deep.train.update import PPOUpdate
from ers_exact.util.options import UsageError

__all__ = [
    "CPU_COMPILE_MIN_STEPS",
    "Learner",
    "ProductSwitches",
    "Rollout",
    "RunnerState",
    "acting_share",
    "check_exact_discount",
    "collect_mode",
    "compile_settings",
    "learner_env",
    "lr_at",
    "max_resets_per_rollout",
    "minibatch_unit",
    "net_collect_mode",
    "shaped_coef",
]


class PhaseClock:
    """``clock(name)`` records into ``timings`` the seconds since the previous call (or since construction),
    after synchronising ``device``; a no-op without ``timings``."""

    def __init__(self, timings: dict[str, float] | None, device: torch.device) -> None:
        self.timings, self.device = timings, device
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        if self.timings is None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the learner's device, not the current one
        now = time.perf_counter()
        self.timings[name], self.last = now - self.last, now


class Learner:
    """The state of one IPPO run of S seeds: env, network, optimiser, RNG streams, runner state, counters.

    ``train_step()`` runs one update and returns its metrics; ``state_tensors()`` / ``load_state_tensors()``
    capture and restore everything a resume needs (see ``ers_deep.train.run``)."""

    def __init__(self, config: TrainConfig, net: ActorCritic | None = None) -> None:
        before = ProductSwitches.now()
        try:
            self._build(config, net)
        finally:
            before.set()  # the learner's switches hold inside its collection and update only (``switches``)

    def _build(self, config: TrainConfig, net: ActorCritic | None) -> None:
        self.config = cfg = config
        S, B = len(cfg.seeds), cfg.num_envs
        self.env, mode = learner_env(cfg)
        self.P, self.S, self.B = self.env.num_agents, S, B
        self.N = B * self.P  # actors per seed
        if cfg.minibatches > self.N:
            raise UsageError(
                f"TrainConfig.minibatches = {cfg.minibatches}: more than the {self.N} actors per seed "
                f"({B} games x {self.P} agents)"
            )
        dev = self.env.device
        self._process_switches(dev)
        # ``net``: any ActorCritic over S = len(seeds) stacks (discovery and other-play pass composite nets)
        self.net: ActorCritic = (
            net
            if net is not None
            else build_net(cfg.net, cfg.seeds, self.env.obs_shape, self.env.num_actions, self.binary_obs)
        )
        self.net.to(dev)
        # as resolved (config.json records it)
        self.collect_mode = mode = net_collect_mode(cfg, mode, self.net)
        self._int8_switch()
        self.switches = ProductSwitches.now()
        self._build_update(mode, own_net=net is None)
        self.generator = torch.Generator(device=dev).manual_seed(10_007 * cfg.seeds[0] + 1)
        game = getattr(self.env, "game", None)  # a tabular env's ers-exact game: its own discount
        self.gamma: float = cfg.gamma if cfg.gamma is not None else float(game.discount if game else 0.99)
        check_exact_discount(cfg, game)
        self._start(mode)

    def _process_switches(self, dev: torch.device) -> None:
        """The device's settings: process-wide, TF32 and cuDNN benchmarking on CUDA (the last learner built
        sets them) and on CPU the kept freed memory (for the rest of the process); the learner's own, which
        ``switches`` records and its collection and update enter, the products of the nets' SLinear layers
        (``nets.blas``; ``cpu_products``, "torch" on CUDA, numpy's BLAS threads set only inside; ``bf16_gradients``
        as resolved, off on CUDA; ``int8_inputs`` as resolved, ``nets.int8``)."""
        cfg = self.config
        if dev.type == "cuda":
            # the legacy flags, not torch 2.9's ``fp32_precision``: once that is set, reading the legacy cuBLAS flag
            # raises (torch 2.13, checked 2026-12-07), and inductor's conv templates still read the legacy cuDNN
            # one; a switch waits for a device to test it on
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = cfg.tf32
            torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        elif cfg.keep_cpu_memory:
            keep_freed_memory()
        self.cpu_products = blas.resolve_cpu_products(cfg.cpu_products) if dev.type == "cpu" else "torch"
        blas.set_cpu_products(self.cpu_products)
        self.bf16_gradients = resolve_bf16_gradients(
            cfg.bf16_gradients, dev.type, cfg.bf16_update, cfg.net.kind
        )
        use_bf16_gradients(self.bf16_gradients)
        self.binary_obs = bool(getattr(self.env, "binary_obs", False))
        if cfg.int8_inputs is True and not self.binary_obs:
            raise UsageError(
                f"TrainConfig.int8_inputs: the observations of {cfg.env!r} are not all 0/1 (for Hanabi: "
                "hanabi_knowledge='plausible')"
            )

    def _int8_switch(self) -> None:
        """``int8_inputs`` as resolved where the net has a layer on 0/1 inputs (set here, then ``switches``). Only the MLP built
        here has one: other-play and discovery nets (their observations may pass through learned maps, and
        their configs come from pools that may have it on) keep float32 and record False."""
        cfg = self.config
        binary_layer = any(isinstance(m, SLinear) and m.binary_input for m in self.net.modules())
        device, kept = self.env.device.type, freed_memory_kept()
        resolved = resolve_int8_inputs(
            cfg.int8_inputs, device, cfg.bf16_update, cfg.net.kind, self.binary_obs, kept
        )
        self.int8_inputs = resolved and binary_layer
        use_int8_inputs(self.int8_inputs)

    def _build_update(self, mode: str, own_net: bool) -> None:
        """The optimiser and the PPO update of ``self.net`` (num_steps x ceil(N / minibatches) samples per
        minibatch), and the update compiled ahead in a helper process where ``precompile.wanted``."""
        cfg, dev = self.config, self.env.device
        self.optimizer = make_optimizer(self.net, cfg, dev)
        legal_table = self.env.legal_table() if cfg.advantage == "exact" else None  # type: ignore[attr-defined]
        samples = cfg.num_steps * -(-self.N // cfg.minibatches)
        self.acting_share = acting_share(cfg, self.env, self.net)
        self.minibatch_unit = minibatch_unit(cfg, self.acting_share, self.net)
        # other-play with learned symmetries: the update reads phi_O(o) mapped once per rollout (``stored_inputs``);
        # the exact-advantage mode also runs the net on every local history, so it keeps the net that maps
        self.update_net = self.net.on_stored_inputs() if legal_table is None else self.net
        self.updater = PPOUpdate(
            self.update_net,
            self.optimizer,
            cfg,
            cfg.update_mode,
            legal_table,
            samples,
            max_resets=max_resets_per_rollout(self.env, cfg.num_steps),
            equal_batches=(self.B if self.minibatch_unit == "games" else self.N) % cfg.minibatches == 0,
            acting_share=self.acting_share,
        )
        self.precompile = (
            UpdatePrecompile(cfg) if wanted(cfg, mode, self.updater.mode, dev.type, own_net) else None
        )

    def _start(self, mode: str) -> None:
        """Update 0: the envs reset with the first seed, every episode starting (``RunnerState``), and the
        collection (``collector``: fast, or TorchRL's)."""
        cfg, dev, S, B = self.config, self.env.device, self.S, self.B
        self.update = 0
        self.env_steps = 0  # per seed
        self.env.reset(seed=cfg.seeds[0])
        zeros = torch.zeros(S, B, device=dev)
        self.runner = RunnerState(
            torch.ones(S * B, dtype=torch.bool, device=dev), self.net.initial_state(self.N, dev), zeros, zeros
        )
        self.fast: FastCollection | None = None
        self.torchrl: Any = None
        if cfg.collector == "fast":
            shaped = cfg.env_kind == "overcooked-v2"
            args = (self.env, self.net, self.generator, cfg.num_steps, mode, shaped)
            # the learner's switches as they are at each collection (TorchRL's FastCollector enters them too)
            self.fast = FastCollection(*args, switches=lambda: self.switches)
        elif cfg.collector == "torchrl":  # the reference: torchrl's Collector over self.env and self.net
            from ers_deep.train.collector import TorchRLCollection

            self.torchrl = TorchRLCollection(self)

    # ---- collection -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def collect(self) -> tuple[Rollout, dict[str, Tensor]]:
        """One rollout of ``num_steps`` joint steps and the returns of the episodes that ended in it."""
        cfg = self.config
        coef = shaped_coef(cfg, self.env_steps)
        # the learner's switches, and the int8 limbs once per collection (nets.layers)
        with self.switches.applied(), frozen_limbs(self.net):
            if self.fast is not None:
                ro, self.runner, stats = self.fast.collect(self.runner, coef)
            elif self.torchrl is not None:
                ro, self.runner, stats = self.torchrl.collect(self.runner, coef)
            else:
                ro, self.runner, stats = collect_native(
                    self.env, self.net, self.generator, self.runner, cfg.num_steps, coef
                )
        self.env_steps += cfg.num_steps * self.B
        return ro, stats

    # ---- update ---------------------------------------------------------------------------------------------
    def minibatches(self, ro: Rollout) -> list[Tensor]:
        """The update's ``epochs`` x ``minibatches`` random groups of ``minibatch_unit`` (whole sequences of
        actors, of turn streams or of games), drawn from the learner's generator."""
        cfg, unit = self.config, self.minibatch_unit
        streams = turn_streams(ro.acting, self.P) if unit == "turn-streams" else None
        return [
            mb
            for _ in range(cfg.epochs)
            for mb in epoch_minibatches(unit, self.B, self.P, cfg.minibatches, self.generator, streams)
        ]

    def ppo_update(
        self, ro: Rollout, adv: Tensor, target: Tensor, batches: list[Tensor] | None = None
    ) -> dict[str, Tensor]:
        """PPO over ``batches`` (by default ``minibatches(ro)``: ``epochs`` passes over ``minibatches`` random
        groups); mean parts. Given ``batches`` (another learner's, say) the generator is left alone."""
        cfg = self.config
        self.await_precompile()
        self.updater.set_lr(lr_at(cfg, self.update))
        batches = self.minibatches(ro) if batches is None else batches
        data = update_data(ro, adv, target)
        with self.switches.applied():
            table = advantage_table(self.net, self.env) if cfg.advantage == "exact" else None  # type: ignore[arg-type]
            if self.update_net is not self.net:
                with torch.no_grad():
                    data["obs"] = self.net.stored_inputs(ro.obs, ro.first, ro.hidden0)
            return self.updater(data, batches, table)

    def await_precompile(self) -> dict[str, Any] | None:
        """Wait for the update's helper compilation (``train.precompile``), if one runs; its report."""
        return self.precompile.wait() if self.precompile is not None else None

    def advantages(self, ro: Rollout) -> tuple[Tensor, Tensor]:
        """(advantage, value target) [S, T, N] of a rollout."""
        return gae(ro.reward, ro.value, ro.last_value, ro.done, self.gamma, self.config.gae_lambda)

    def train_step(self, timings: dict[str, float] | None = None) -> dict[str, Any]:
        """One update (collect, GAE, PPO); per-seed metrics as lists. ``timings`` (benchmarks): filled with the
        seconds of each phase, the device synchronised after each."""
        clock = PhaseClock(timings, self.env.device)
        with compile_settings(self.config), self.switches.applied():
            ro, stats = self.collect()
            clock("collect")
            adv, target = self.advantages(ro)
            clock("gae")
            if self.precompile is not None and self.precompile.report is None:
                self.await_precompile()
                clock("precompile_wait")
            parts = self.ppo_update(ro, adv, target)
            clock("update")
        self.update += 1
        out: dict[str, Any] = {
            "update": self.update,
            "env_steps": self.env_steps,
            "lr": lr_at(self.config, self.update - 1),
            "shaped_coef": shaped_coef(self.config, self.env_steps - self.config.steps_per_update),
        }
        for k, v in {**stats, **parts}.items():
            out[k] = [float(x) for x in v]
        return out

    # ---- resume ---------------------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, Tensor]:
        """Every tensor a resume needs: parameters, Adam moments, env state, RNG streams, runner state."""
        out = {f"net/{k}": v for k, v in self.net.state_dict().items()}
        for i, p in enumerate(self.net.parameters()):
            for k, v in self.optimizer.state.get(p, {}).items():
                out[f"opt/{i}/{k}"] = v
        for k, v in vars(self.env.state).items():
            out[f"env/{k}"] = v
        out["rng/env"] = self.env.generator.get_state()
        out["rng/learner"] = self.generator.get_state()
        out.update({f"runner/{k}": v for k, v in self.runner.tensors().items()})
        return {k: v.detach().cpu().contiguous() for k, v in out.items()}

    def _runner_state(self, tensors: dict[str, Tensor]) -> RunnerState:
        """The runner state of checkpoint ``tensors`` (``runner/...``) on the env's device. Checkpoints written
        before issue 21 stored ``first`` per actor [S, N] and the net's state as one tensor ``runner/hidden``
        (other-play's and discovery's bookkeeping in its columns): both are converted."""
        dev, prefix = self.env.device, "runner/"
        runner = {k.removeprefix(prefix): v.to(dev) for k, v in tensors.items() if k.startswith(prefix)}
        if runner["first"].shape == (self.S, self.N):  # per actor
            runner["first"] = actors_to_game(runner["first"], self.S, self.P)
        if "hidden" in runner:  # one tensor [S, N, H]
            runner |= self.net.state_from_columns(runner.pop("hidden")).tensors("hidden/")
        return RunnerState.from_tensors(runner)

    def counters(self) -> dict[str, int]:
        return {"update": self.update, "env_steps": self.env_steps}

    def load_state_tensors(self, tensors: dict[str, Tensor], counters: dict[str, int]) -> None:
        """Restore what ``state_tensors`` captured (same config)."""
        dev = self.env.device
        with torch.no_grad():  # in place: a captured collection keeps reading the same parameter tensors
            for k, v in self.net.state_dict().items():
                v.copy_(tensors[f"net/{k}"])
        params = list(self.net.parameters())
        state: dict[int, dict[str, Tensor]] = {}
        for k, v in tensors.items():
            if k.startswith("opt/"):
                _, index, name = k.split("/")
                on_dev = name != "step" or isinstance(self.optimizer.param_groups[0]["lr"], Tensor)
                state.setdefault(int(index), {})[name] = v.to(dev) if on_dev else v
        self.optimizer.state.clear()
        for i, st in state.items():
            self.optimizer.state[params[i]] = st
        env_state = {k[4:]: v.to(dev) for k, v in tensors.items() if k.startswith("env/")}
        self.env.state = type(self.env.state)(**env_state)
        self.env.generator.set_state(tensors["rng/env"])
        self.generator.set_state(tensors["rng/learner"])
        self.runner = self._runner_state(tensors)
        if self.fast is not None:
            self.fast.load(self.runner)
        self.updater.invalidate()  # a captured update recorded the replaced Adam state
        self.update, self.env_steps = int(counters["update"]), int(counters["env_steps"])
