"""The PPO update phase of the IPPO learner: ``epochs`` x ``minibatches`` minibatch steps, run eagerly, compiled,
or CUDA-graph-captured (``update_mode``).

One minibatch step (``PPOUpdate.step``): zero the gradients, the loss (``ppo.ppo_loss``, or its exact-advantage
terms), backward, per-seed clipping to ``max_grad_norm`` (``ppo.clip_grads_per_seed``), Adam (the fused
kernel, learning rate a tensor: a schedule changes its value, never a compiled or captured step). Modes:

* ``"eager"``; ``"compile"``: the loss (forward and, through AOTAutograd, backward) and the clipping through
  ``torch.compile`` (a recurrent net's fused GRU stays outside the compiled graph).
* ``"graph"`` / ``"compile-graph"`` (CUDA): the whole step (gather of the minibatch from static copies of the
  rollout, loss, backward, clipping, Adam, the sums of the logged parts) recorded once as a CUDA graph and
  replayed for every minibatch: one graph launch and one index copy per minibatch instead of hundreds of
  kernel launches. The first step of a run is the warm-up (run for real, on a side stream), then the capture;
  a checkpoint load (``invalidate``) re-captures. Needs equal minibatches, a sync-free net
  (``ActorCritic.traceable``; a recurrent net, one with a GRU, also a static bound on the resets per sequence,
  ``max_resets``: ``nets.recurrent.gru_bounded``) and the sampled-advantage mode; a capture that fails falls
  back to the uncaptured twin with a warning.
* ``"auto"``: on CUDA ``"compile-graph"`` for feed-forward nets, ``"graph"`` for recurrent nets with a reset
  bound, else as on CPU: ``"compile"`` for feed-forward nets on minibatches of ``COMPILE_MIN_SAMPLES`` or more,
  else ``"eager"``. Other-play's net on a feed-forward pi (index symmetries) and discovery's on a feed-forward
  pool count as feed-forward: their state (actor ids, episodes started) needs no bound. A net that is not
  ``traceable`` (host syncs: other-play with learned symmetries unless ``grouped``, as on CUDA; tabular
  discovery) is neither compiled by ``"auto"`` nor captured.

``TrainConfig.bf16_update`` runs the loss's forward under bfloat16 autocast in every mode (off by default: on
Hanabi-Full its learning curve was not float32's, packages/ers-deep/README.md).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, get_args

import torch
from torch import Tensor

from ers_deep.accel.capture import capture
from ers_deep.nets import ActorCritic
from ers_deep.nets.actor_critic import RecurrentCNN
from ers_deep.train.config import TrainConfig, UpdateMode
from ers_deep.train.ppo import clip_grads_per_seed, exact_policy_terms, ppo_loss
from ers_exact.util.options import UsageError

UPDATE_MODES: tuple[str, ...] = get_args(UpdateMode)

#: minibatch size (samples) from which ``"auto"`` compiles a feed-forward update on CPU (compilation ~40 s)
COMPILE_MIN_SAMPLES = 8192
#: compiled variants kept per compiled function of the update (``compiled``): learners of one config share one
#: (the loss reads S from its input), and each other config (a width, a batch, a loss coefficient) adds one.
#: torch's ``recompile_limit`` (8) counted them across the process: from a 9th config on, a learner's update
#: ran eagerly, with only a log line (measured 2026-12-07: MLP widths 8 to 18, the 9th on did not compile)
RECOMPILE_LIMIT = 64


def resolve_update_mode(
    mode: str,
    recurrent: bool,
    samples: int,
    device: torch.device | str = "cpu",
    capturable: bool = False,
    traceable: bool = True,
) -> str:
    """The update mode ``mode`` resolves to (see the module docstring); ``capturable``: the update can be
    captured (equal minibatches, sampled advantages, a sync-free net); ``traceable``: the net has no host syncs
    (``ActorCritic.traceable``; else "auto" does not compile it). Measured on the 2-core CPU, one thread,
    in one run (README): Hanabi-Full's MLP update compiled ran the learner at 1.28x the eager one; Overcooked
    V2's CNN + fused GRU at 0.51x."""
    if mode not in UPDATE_MODES:
        raise UsageError(f"unknown update mode {mode!r}; choose from {', '.join(UPDATE_MODES)}")
    cuda = torch.device(device).type == "cuda"
    if mode == "auto":
        if cuda and capturable:
            return "graph" if recurrent else "compile-graph"
        return "compile" if not recurrent and traceable and samples >= COMPILE_MIN_SAMPLES else "eager"
    if mode.endswith("graph") and not cuda:
        raise UsageError(f"update mode {mode!r} captures a CUDA graph: it needs a CUDA device, not {device}")
    if mode.endswith("graph") and not capturable:
        raise UsageError(
            f"update mode {mode!r}: this update cannot be captured (it needs equal minibatches, sampled "
            "advantages, a net without host syncs (other-play: index symmetries, or learned ones grouped, as on CUDA) and, for a recurrent net, "
            "episodes at least as long as the rollout)"
        )
    return mode


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` through ``torch.compile(dynamic=False)``, compiling up to ``RECOMPILE_LIMIT`` variants (torch's
    ``recompile_limit`` raised to it while ``fn`` runs, not for the rest of the process)."""
    inner = torch.compile(fn, dynamic=False)

    def call(*args: Any) -> Any:
        limit = max(RECOMPILE_LIMIT, torch._dynamo.config.recompile_limit)
        with torch._dynamo.config.patch(recompile_limit=limit):
            return inner(*args)

    return call


@contextlib.contextmanager
def bounded_resets(net: ActorCritic, max_resets: int | None) -> Iterator[None]:
    """Within the block, the recurrent nets inside ``net`` run sequences with at most ``max_resets`` resets
    after t = 0 through ``gru_bounded`` (fixed shapes, sync-free); ``None``: unchanged."""
    mods = [m for m in net.modules() if isinstance(m, RecurrentCNN)] if max_resets is not None else []
    before = [m.max_resets for m in mods]
    for m in mods:
        m.max_resets = max_resets
    try:
        yield
    finally:
        for m, b in zip(mods, before, strict=True):
            m.max_resets = b


def select(data: dict[str, Tensor], idx: Tensor) -> dict[str, Tensor]:
    """A minibatch of the update data: ``idx`` [M], the actors ``idx`` (whole sequences): [S, T, N, ...] fields
    along N, the state's ``hidden0/<field>`` [S, N, ...] along N; ``idx`` [S, T, M], at each step t the actors
    ``idx[s, t]`` (turn streams, ``ppo.turn_streams``), the state before step 0 that of ``idx[:, 0]``."""
    if idx.dim() == 1:
        return {k: v[:, idx] if k.startswith("hidden0/") else v[:, :, idx] for k, v in data.items()}
    S, T, M = idx.shape
    N = data["acting"].shape[2]
    flat = (torch.arange(S * T, device=idx.device).view(S, T, 1) * N + idx).flatten()  # rows of [S T N]
    seeds = torch.arange(S, device=idx.device).view(S, 1)
    return {
        k: v[seeds, idx[:, 0]]
        if k.startswith("hidden0/")
        else v.reshape(S * T * N, *v.shape[3:]).index_select(0, flat).view(S, T, M, *v.shape[3:])
        for k, v in data.items()
    }


class PPOUpdate:
    """The update phase in ``mode``: ``__call__(data, batches, table)`` runs one minibatch step per index
    tensor of ``batches`` (actors of the update data, see ``ippo.Learner.update_data``) and returns the mean
    of the detached loss parts and of the per-seed gradient norm."""

    def __init__(
        self,
        net: ActorCritic,
        optimizer: torch.optim.Optimizer,
        cfg: TrainConfig,
        mode: str,
        legal_table: Tensor | None = None,
        samples: int = 0,
        max_resets: int | None = None,
        equal_batches: bool = True,
        acting_share: int | None = None,
    ) -> None:
        self.net, self.optimizer, self.cfg, self.legal_table = net, optimizer, cfg, legal_table
        self.acting_share = acting_share  # ppo_loss: the actor head on acting entries only
        self.params = list(net.parameters())
        self.S = len(net.seeds)
        # a GRU inside: a captured update needs a static bound on the resets per sequence. Other state (other-play's
        # actor ids and episodes started) follows the resets through cumulative sums and needs none, so other-play
        # on a feed-forward pi compiles and captures as self-play does (before 2026-12-07 any state made it eager)
        recurrent = net.hidden_size > 0
        self.max_resets = max_resets if recurrent else None
        device = self.params[0].device
        capturable = (
            equal_batches
            and legal_table is None
            and net.traceable
            and (not recurrent or max_resets is not None)
            and all(g.get("capturable", False) for g in optimizer.param_groups)
        )
        self.mode = resolve_update_mode(mode, recurrent, samples, device, capturable, net.traceable)
        if not self.mode.endswith("graph"):  # unbounded: gru_scan on a CPU, gru_segments on CUDA (no capture)
            self.max_resets = None
        self.loss_fn: Callable[..., tuple[Tensor, dict[str, Tensor]]] = self._loss
        self.clip_fn: Callable[[], Tensor] = self._clip
        if self.mode in ("compile", "compile-graph"):
            self.loss_fn = compiled(self._loss)
            self.clip_fn = compiled(self._clip)
        self.graph: Any = None  # the captured step, its static inputs and sums (graph modes)
        self.static: dict[str, Tensor] = {}
        self.idx = torch.empty(0, dtype=torch.long)
        self.sums: dict[str, Tensor] = {}

    # ---- one minibatch step -----------------------------------------------------------------------------------
    def _loss(self, mb: dict[str, Tensor], table: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
        exact = None
        if table is not None:
            assert self.legal_table is not None
            exact = exact_policy_terms(self.net, self.legal_table, table)
        loss, parts = ppo_loss(self.net, self.cfg, mb, exact, self.acting_share)
        return loss.sum(), parts

    def _clip(self) -> Tensor:
        return clip_grads_per_seed(self.params, self.S, self.cfg.max_grad_norm)

    def _autocast(self) -> torch.autocast:
        """``TrainConfig.bf16_update``: the forward pass under bfloat16 autocast (matmuls and convolutions in
        bfloat16, softmax and losses in float32; the backward follows the forward's dtypes)."""
        device = self.params[0].device.type
        return torch.autocast(device, dtype=torch.bfloat16, enabled=self.cfg.bf16_update)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr

    def step(self, mb: dict[str, Tensor], table: Tensor | None = None) -> dict[str, Tensor]:
        """One minibatch step; the detached loss parts and the per-seed gradient norm [S]."""
        self.optimizer.zero_grad(set_to_none=True)
        try:
            with bounded_resets(self.net, self.max_resets), self._autocast():
                loss, parts = self.loss_fn(mb, table)
            loss.backward()
            parts["grad_norm"] = self.clip_fn()
        except Exception as e:  # compilation failed before anything was applied: redo the step eagerly
            # eager (``==``: each ``self._loss`` is a new bound method, never ``is`` the stored one), or steps
            # were applied: a real error
            if self.loss_fn == self._loss or self.optimizer.state:
                raise
            warnings.warn(f"torch.compile failed ({type(e).__name__}: {e}); updating eagerly", stacklevel=2)
            self.loss_fn, self.clip_fn = self._loss, self._clip
            self.mode = "graph" if self.mode == "compile-graph" else "eager"
            return self.step(mb, table)
        self.optimizer.step()  # fused Adam: one kernel, the learning rate read from its tensor
        return parts

    # ---- the update phase -------------------------------------------------------------------------------------
    def __call__(
        self, data: dict[str, Tensor], batches: Sequence[Tensor], table: Tensor | None = None
    ) -> dict[str, Tensor]:
        if self.mode.endswith("graph"):
            return self._captured(data, batches)
        sums: dict[str, Tensor] = {}
        for idx in batches:
            for k, v in self.step(select(data, idx), table).items():
                sums[k] = sums[k] + v if k in sums else v
        return {k: v / len(batches) for k, v in sums.items()}

    def invalidate(self) -> None:
        """Forget the captured step (the optimizer state was replaced, e.g. by a checkpoint load)."""
        self.graph, self.static, self.sums = None, {}, {}

    def _mutated(self) -> dict[str, Tensor]:
        """What a step writes: parameters, Adam's state, the sums (a warm-up or an emulated capture undoes it)."""
        out = {f"p{i}": p.data for i, p in enumerate(self.params)}
        for i, p in enumerate(self.params):
            for k, v in self.optimizer.state.get(p, {}).items():
                if isinstance(v, Tensor):
                    out[f"o{i}/{k}"] = v
        return out | {f"sum/{k}": v for k, v in self.sums.items()}

    def _body(self) -> dict[str, Tensor]:
        for k, v in self.step(select(self.static, self.idx)).items():
            self.sums[k].add_(v)
        return {}

    def _captured(self, data: dict[str, Tensor], batches: Sequence[Tensor]) -> dict[str, Tensor]:
        done = 0
        if self.graph is None:  # warm-up: the first step for real, on a side stream; then the capture
            self.static = {k: v.clone() for k, v in data.items()}
            self.idx = batches[0].clone()
            dev = self.static["obs"].device
            side = (
                torch.cuda.Stream(dev) if dev.type == "cuda" else None
            )  # the data's device, not the current
            if side is not None:
                side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
                first = self.step(select(self.static, batches[0]))
            if side is not None:
                torch.cuda.current_stream(dev).wait_stream(side)
            self.sums = {k: v.clone() for k, v in first.items()}
            done = 1
            try:
                self.graph, _ = capture(self._body, self._mutated, [], warmup=0)
            except Exception as e:  # e.g. a kernel that cannot be captured: the uncaptured twin from here on
                warnings.warn(
                    f"capturing the update failed ({type(e).__name__}: {e}); not capturing", stacklevel=2
                )
                self.mode = "compile" if self.mode == "compile-graph" else "eager"
                self.invalidate()
                rest = self(data, batches[1:]) if len(batches) > 1 else {k: 0.0 * v for k, v in first.items()}
                return {k: (v + rest[k] * (len(batches) - 1)) / len(batches) for k, v in first.items()}
        else:
            for k, v in data.items():
                self.static[k].copy_(v)
            for v in self.sums.values():
                v.zero_()
        for idx in batches[done:]:
            self.idx.copy_(idx)
            self.graph.replay()
        return {k: v / len(batches) for k, v in self.sums.items()}
