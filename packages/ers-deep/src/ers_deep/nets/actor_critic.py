"""Actor-critic networks of the IPPO learner, one code path with the variant as a config field.

Every net maps observations to *unmasked* logits and a value, for S seeds at once (``ers_deep.nets.layers``):

    forward(obs [S, T, N, *O], first [S, T, N] bool, state: NetState) -> (logits [S, T, N, A],
                                                                            value [S, T, N], state: NetState)

T time steps of N actors (games x agents, parameters shared by the agents). ``first[t]`` is True where step
t starts a new episode (the previous step was done): a recurrent net resets its state to zero *before*
step t there, in collection and in the update alike (the ordering JaxMARL PR #191 fixed; storing the
post-step done and resetting after it misaligns the reset by one step). The state is a ``NetState`` of named
tensors [S, N, ...] (``ers_deep.nets.state``): the GRU's h in ``gru`` [S, N, H]; feed-forward nets carry none.
Illegal actions are masked afterwards by :func:`masked_logits` (logit - 1e10, as the official code), so the
symmetriser can average unmasked logits.

Variants (``NetConfig.kind``):

* ``"mlp"``: the official Hanabi net: obs -> Dense(512) ReLU (shared embedding, orthogonal sqrt 2); actor
  Dense(512) ReLU (orthogonal 2) -> Dense(A) (0.01); critic Dense(512) ReLU (2) -> Dense(1) (1.0).
* ``"cnn-gru"``: the official Overcooked V2 net: 1x1 convs 128, 128, 8, 3x3 'SAME' convs 16, 32, 32 (ReLU,
  orthogonal sqrt 2), flatten, Dense(128) ReLU, LayerNorm, GRU(128), actor Dense(128) ReLU -> Dense(A)
  (0.01), critic Dense(128) ReLU -> Dense(1) (1.0). ``NetConfig.spatial``: the 3x3 convolutions as
  ``F.conv2d`` (``"conv"``) or each as one matrix product over the whole grid (``"matmul"``,
  ``ers_deep.nets.spatial``); the same parameters either way.
* ``"tabular"``: logits and value are tables over the env's one-hot observation (bias-free linear maps;
  logits start random (orthogonal, gain ``tabular_init``; 0: the uniform policy, which is itself a fixed
  point of symmetric games), value zero): exactly the tabular softmax policy of ers-exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

import torch
from torch import Tensor, nn

from ers_deep.nets.distinct import pointwise_distinct
from ers_deep.nets.gru_scan import gru_scan
from ers_deep.nets.layers import SConv2d, SGRUCell, SLayerNorm, SLinear
from ers_deep.nets.pointwise import pointwise_stack
from ers_deep.nets.recurrent import gru_bounded, gru_segments, gru_steps
from ers_deep.nets.spatial import spatial_index, spatial_matrix
from ers_deep.nets.state import NetState
from ers_exact.util.options import at_least, check_fields, check_types, non_negative

NetKind = Literal["mlp", "cnn-gru", "tabular"]
Spatial = Literal["conv", "matmul"]


@dataclass(frozen=True, kw_only=True)
class NetConfig:
    """Which network (``kind``) and its widths (``hidden``: the Hanabi embedding and heads, the Overcooked
    dense, GRU and heads)."""

    kind: NetKind = "mlp"
    hidden: int = 512
    tabular_init: float = 1.0  # tabular: gain of the random initial logits (0: uniform policy)
    conv: int = (
        128  # cnn-gru: width of the two wide 1x1 convolutions (the official 128; smaller for CPU runs)
    )
    spatial: Spatial = (
        "conv"  # cnn-gru: the 3x3 convolutions as F.conv2d or as matrix products (nets.spatial)
    )

    def __post_init__(self) -> None:
        check_types(self)  # kind and spatial among their choices, integer widths
        check_fields(self, hidden=non_negative, conv=at_least(1), tabular_init=non_negative)
        if self.kind != "tabular":  # the tabular net has no hidden layer (hidden 0)
            check_fields(self, hidden=at_least(1))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def take_rows(x: Tensor, rows: Tensor) -> Tensor:
    """The entries ``rows`` [S, K] (indices into the flattened T x N entries) of x [S, T, N, ...]: [S, K, ...]
    (what ``forward_rows`` computes the actor head on, and the loss reads beside it)."""
    flat = x.flatten(1, 2)
    index = rows.view(*rows.shape, *(1,) * (flat.dim() - 2)).expand(*rows.shape, *flat.shape[2:])
    return flat.gather(1, index)


class ActorCritic(nn.Module):
    """Base: S seeds, obs shape, A actions, GRU state size H (0 for feed-forward nets)."""

    hidden_size: int = 0
    takes_rows: bool = False  # has ``forward_rows`` (the actor head on chosen entries only)
    #: its forward has no host synchronisation (no data-dependent Python branch): a compiled update traces it
    #: whole and a CUDA graph can capture it (``train.update``); with a GRU, given a bound on the resets
    traceable: bool = True

    def __init__(self, seeds: Sequence[int], obs_shape: tuple[int, ...], num_actions: int) -> None:
        super().__init__()
        self.seeds = tuple(int(s) for s in seeds)
        # S, read by code that compiled updates trace (``initial_state`` in the exact mode): a guard on an int keeps
        # one compiled graph for every learner with S seeds, where one on ``seeds`` recompiled per learner
        self.num_seeds = len(self.seeds)
        self.obs_shape, self.num_actions = tuple(obs_shape), int(num_actions)

    def generators(self) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(s) for s in self.seeds]

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> NetState:
        """The state of n actors at an episode start: ``gru`` [S, n, H] zeros (none for feed-forward nets)."""
        if not self.hidden_size:
            return NetState()
        return NetState(gru=torch.zeros(self.num_seeds, n, self.hidden_size, device=device))

    def state_from_columns(self, hidden: Tensor) -> NetState:
        """The state stored as one tensor [S, N, H] (checkpoints written before issue 21): the GRU's h."""
        return NetState(gru=hidden) if self.hidden_size else NetState()

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        raise NotImplementedError

    def stored_inputs(self, obs: Tensor, first: Tensor, state: NetState) -> Tensor:
        """A rollout's observations [S, T, N, *O] (its ``first`` flags and the state before its step 0) as the PPO
        update feeds them to ``on_stored_inputs()``: ``obs`` here; other-play with learned symmetries maps them
        once per rollout (``nets.other_play``), not once per epoch."""
        return obs

    def on_stored_inputs(self) -> ActorCritic:
        """The net the PPO update runs on ``stored_inputs`` (the same parameters): ``self`` here."""
        return self

    def auxiliary_loss(self, obs: Tensor) -> Tensor:
        """[S] a term the learner adds to its loss on a minibatch's observations [S, T, N, *O] (zero here;
        learned symmetries add their invertibility penalty)."""
        # S from the input, not ``len(self.seeds)``: a compiled loss would guard on the seeds' values and recompile
        # for every learner of other seeds in one process (torch stops compiling after 8: the recompile limit)
        return torch.zeros(obs.shape[0], device=obs.device)


class FeedForward(ActorCritic):
    """The official Hanabi net (``"mlp"``)."""

    def __init__(
        self,
        seeds: Sequence[int],
        obs_shape: tuple[int, ...],
        num_actions: int,
        hidden: int = 512,
        binary_obs: bool = False,
    ) -> None:
        super().__init__(seeds, obs_shape, num_actions)
        g = self.generators()
        n_in = math.prod(obs_shape)
        # ``binary_obs``: observations of 0s and 1s, whose embedding may go through int8 products (nets.int8)
        self.embed = SLinear(n_in, hidden, g, binary_input=binary_obs)
        self.actor_hidden = SLinear(hidden, hidden, g, gain=2.0)
        self.actor_out = SLinear(hidden, num_actions, g, gain=0.01)
        self.critic_hidden = SLinear(hidden, hidden, g, gain=2.0)
        self.critic_out = SLinear(hidden, 1, g, gain=1.0)

    #: ``forward_rows`` exists: the PPO loss can run the actor head on the acting entries only
    takes_rows = True

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        S, T, N = obs.shape[:3]
        logits, value, state = self.forward_rows(obs, first, state, None)
        return logits.view(S, T, N, -1), value, state

    def forward_rows(
        self, obs: Tensor, first: Tensor, state: NetState, rows: Tensor | None
    ) -> tuple[Tensor, Tensor, NetState]:
        """``forward`` with the actor head on the entries ``rows`` [S, K] (indices into the flattened T x N
        entries) only: logits [S, K, A] (None: all entries, [S, T N, A]), value [S, T, N] of every entry."""
        S, T, N = obs.shape[:3]
        x = torch.relu(self.embed(obs.reshape(S, T * N, -1).float()))
        value = self.critic_out(torch.relu(self.critic_hidden(x)))
        if rows is not None:
            x = take_rows(x.view(S, T, N, -1), rows)
        logits = self.actor_out(torch.relu(self.actor_hidden(x)))
        return logits, value.view(S, T, N), state


class RecurrentCNN(ActorCritic):
    """The official Overcooked V2 net (``"cnn-gru"``); observations [.., V, V, C] (channels last).
    Sequences (T > 1) run the GRU through a fused path unless ``fused_gru`` is False: where the caller bounds
    the resets per sequence (``max_resets``, set by the captured update: ``train.update.bounded_resets``), the
    fused kernel over a static number of segments (``gru_bounded``, sync-free); else on a CPU as one autograd
    function (``nets.gru_scan``: 3x torch's native GRU over segments for the paper's 8-actor minibatches); else
    the fused (cuDNN) kernel over the segments between resets (``gru_segments``, two host syncs). Single steps
    always run the cell."""

    fused_gru: bool = True
    max_resets: int | None = None
    #: the CPU update runs the 1x1 layers on the distinct cells of integer observations (``nets.distinct``)
    distinct_cells: bool = True

    def __init__(
        self,
        seeds: Sequence[int],
        obs_shape: tuple[int, ...],
        num_actions: int,
        hidden: int = 128,
        conv: int = 128,
        spatial: Spatial = "conv",
    ) -> None:
        super().__init__(seeds, obs_shape, num_actions)
        g = self.generators()
        V1, V2, C = obs_shape
        widths = [(C, conv, 1), (conv, conv, 1), (conv, 8, 1), (8, 16, 3), (16, 32, 3), (32, 32, 3)]
        self.convs = nn.ModuleList(SConv2d(i, o, k, g) for i, o, k in widths)
        self.n_pointwise = 3  # the leading 1x1 convolutions, run as matmuls on channels-last input
        self.spatial = spatial
        if spatial == "matmul":  # where each 3x3 weight entry sits in its grid matrix (not in checkpoints)
            for i, (n_in, n_out, k) in enumerate(widths[self.n_pointwise :]):
                flat, entry = spatial_index(n_in, n_out, k, (V1, V2))
                self.register_buffer(f"spatial_flat_{i}", flat, persistent=False)
                self.register_buffer(f"spatial_entry_{i}", entry, persistent=False)
        self.dense = SLinear(32 * V1 * V2, hidden, g)
        self.norm = SLayerNorm(hidden, len(self.seeds))
        self.gru = SGRUCell(hidden, hidden, g)
        self.actor_hidden = SLinear(hidden, hidden, g)
        self.actor_out = SLinear(hidden, num_actions, g, gain=0.01)
        self.critic_hidden = SLinear(hidden, hidden, g)
        self.critic_out = SLinear(hidden, 1, g, gain=1.0)
        self.hidden_size = hidden

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        S, T, N = obs.shape[:3]
        hidden = state.gru
        assert hidden is not None, "the CNN + GRU net needs its GRU state (initial_state)"
        x = obs.reshape(S, T * N, *self.obs_shape)  # [S, M, V, V, C] channels last, as stored
        pointwise = [cast(SConv2d, conv) for conv in self.convs[: self.n_pointwise]]
        if x.device.type == "cpu" and torch.is_grad_enabled():  # the CPU update: distinct cells or chunks
            cells, params = x.reshape(S, -1, x.shape[-1]), [c.pointwise_params() for c in pointwise]
            y = (
                pointwise_distinct(cells, params)
                if self.distinct_cells
                else pointwise_stack(cells.float(), params)
            )
            x = y.view(*x.shape[:-1], -1)
        else:  # 1x1 convs as matmuls (1.7x conv2d's speed on CPU)
            x = x.float()
            for conv in pointwise:
                x = conv.pointwise(x, relu=True)
        if self.spatial == "matmul":
            x = self._spatial_matmul(x)
        else:
            x = x.permute(0, 1, 4, 2, 3)  # [S, M, C, V, V]
            *spatial, last = [cast(SConv2d, c) for c in self.convs[self.n_pointwise :]]
            for conv3 in spatial:  # the permuted input is channels last, so are these convolutions
                x = conv3(x, relu=True)
            x = last(x, relu=True)
        x = self.norm(torch.relu(self._dense_channels_last(x)))  # [S, T*N, hidden]
        x = x.view(S, T, N, -1)
        # T = 1 (collection, compiled / captured graphs): the cell; sequences (the update): the fused kernel
        if T > 1 and self.fused_gru and self.max_resets is not None:
            y, h = gru_bounded(self.gru, x, first, hidden, self.max_resets)
        elif T > 1 and self.fused_gru and x.device.type == "cpu":
            y, h = gru_scan(self.gru, x, first, hidden)
        else:
            run_gru = gru_segments if T > 1 and self.fused_gru else gru_steps
            y, h = run_gru(self.gru, x, first, hidden)
        y = y.view(S, T * N, -1)
        logits = self.actor_out(torch.relu(self.actor_hidden(y)))
        value = self.critic_out(torch.relu(self.critic_hidden(y)))
        return logits.view(S, T, N, -1), value.view(S, T, N), NetState(gru=h)

    def _spatial_matmul(self, x: Tensor) -> Tensor:
        """The 3x3 convolutions (each + ReLU) on channels-last x [S, M, V1, V2, C] as grid matrix products
        (``nets.spatial``); [S, M, C_out, V1, V2] with channels-last memory, as the convolutions return it."""
        S, M, V1, V2, _ = x.shape
        y = x.reshape(S, M, -1)
        for i, conv3 in enumerate(cast(SConv2d, c) for c in self.convs[self.n_pointwise :]):
            index = (getattr(self, f"spatial_flat_{i}"), getattr(self, f"spatial_entry_{i}"))
            k, b = spatial_matrix(conv3.weight, conv3.bias, S, (V1, V2), index)
            y = torch.baddbmm(b, y, k).relu_()
        return y.view(S, M, V1, V2, -1).permute(0, 1, 4, 2, 3)

    def _dense_channels_last(self, x: Tensor) -> Tensor:
        """The dense layer on x [S, M, C, V, V] flattened in (V, V, C) order, with the weight's rows (stored in
        (C, V, V) order, the official flatten) permuted to match: on channels-last activations the flatten is
        a view and its gradient stays channels last, where a (C, V, V) flatten would copy both ways and mix
        layouts in the ReLU and convolution backward passes below (each ~3x slower on mixed layouts)."""
        S, M, C, V1, V2 = x.shape
        w = self.dense.weight.view(S, C, V1, V2, -1).permute(0, 2, 3, 1, 4).reshape(S, V1 * V2 * C, -1)
        y = torch.bmm(x.permute(0, 1, 3, 4, 2).reshape(S, M, -1), w)
        return y + self.dense.bias if self.dense.bias is not None else y


class TabularActorCritic(ActorCritic):
    """Tables over one-hot observations (``"tabular"``): logits = onehot @ W_pi, value = onehot @ w_V."""

    def __init__(
        self,
        seeds: Sequence[int],
        obs_shape: tuple[int, ...],
        num_actions: int,
        hidden: int = 0,
        init: float = 1.0,
    ) -> None:
        super().__init__(seeds, obs_shape, num_actions)
        g = self.generators()
        n_in = math.prod(obs_shape)
        self.logits = SLinear(n_in, num_actions, g, gain=init, bias=False)
        self.value = SLinear(n_in, 1, g, gain=0.0, bias=False)

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        S, T, N = obs.shape[:3]
        x = obs.reshape(S, T * N, -1).float()
        return self.logits(x).view(S, T, N, -1), self.value(x).view(S, T, N), state


NETS: dict[str, type[ActorCritic]] = {
    "mlp": FeedForward,
    "cnn-gru": RecurrentCNN,
    "tabular": TabularActorCritic,
}


def build_net(
    config: NetConfig,
    seeds: Sequence[int],
    obs_shape: tuple[int, ...],
    num_actions: int,
    binary_obs: bool = False,
) -> ActorCritic:
    """The network of ``config.kind`` for S = len(seeds) seeds (slice s initialised from seed ``seeds[s]``);
    ``binary_obs``: the observations are 0s and 1s (the MLP's embedding may then use ``nets.int8``)."""
    if config.kind == "tabular":
        return TabularActorCritic(seeds, obs_shape, num_actions, init=config.tabular_init)
    if config.kind == "cnn-gru":
        if len(obs_shape) != 3:
            raise ValueError(
                f"NetConfig.kind = 'cnn-gru' reads grid observations (height, width, channels), not shape "
                f"{tuple(obs_shape)}: use 'mlp' (or 'tabular' for a tabular game)"
            )
        return RecurrentCNN(
            seeds, obs_shape, num_actions, hidden=config.hidden, conv=config.conv, spatial=config.spatial
        )
    return FeedForward(seeds, obs_shape, num_actions, hidden=config.hidden, binary_obs=binary_obs)
