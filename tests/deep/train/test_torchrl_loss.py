"""TorchRL's own PPO pieces on a ``FastCollector`` batch (Hanabi, tiny config, MLP) against ers's:

* ``MultiAgentGAE`` reads the batch's team-shared ``("next", "done")`` [G, T, 1] beside the per-agent values
  [G, T, P, 1] (no expanding) and gives ``ppo.gae`` of the batch's rollout;
* ``ClipPPOLoss`` over a ``ProbabilisticActor`` with ``MaskedCategorical`` (the logits of the collection's own
  net, the batch's ``("agents", "action_mask")``) and a critic on the same net gives ``ppo.ppo_loss``: the
  entropy term, the actor objective and its gradient, the critic loss and its gradient, at the collection's
  parameters (ratio 1) and after a perturbation (ratios and values clipped on both sides);
* ``TensorDictReplayBuffer`` over ``LazyTensorStorage(ndim=2)`` with ``SliceSampler`` returns consecutive steps
  of one game, holding the batch's entries there.

The conventions set to match: advantages and value targets from TorchRL's ``MultiAgentGAE`` on both sides;
``normalize_advantage`` off on both (TorchRL normalises over the whole batch, ers per seed over ``loss_mean``'s
entries); ``clip_epsilon`` = ``clip_eps``; ``clip_value=True`` (the value clip at ``clip_epsilon``) for
``clip_value_loss``; ``loss_critic_type="l2"`` with ``critic_coeff=1/2`` for ers's ``1/2 mean (V - R)^2`` (in a
whole loss ``critic_coeff = vf_coef / 2``); ``entropy_coeff`` = ``alpha``. The net runs in float32 (it casts
its input to float32), hence float32 tolerances (``assert_close``'s defaults).

The convention ers does not share: the batch's ``action_mask`` is the policy's mask, which allows every move
to Hanabi's waiting seat (``nets.policy_mask``; the official code's waiting seat has the one legal no-op), so
its ratio moves with the parameters and TorchRL's objective, unmasked, differentiates the waiting seats'
surrogate terms, which ers leaves out (its actor gradient differs, ratio 1 or not). With
``loss_mask_key=("agents", "mask")`` TorchRL's actor and entropy terms are ers's ``loss_mean="acting"``
terms (ers's default ``"all"`` divides the same sums by every entry: x acting / all entries); but TorchRL's
mask also restricts the critic loss to the acting entries, where ers's critic averages over every entry: the
critic is compared with ``loss_mask_key=None``. So no single ``ClipPPOLoss`` call gives ers's loss.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import Tensor, nn
from torchrl.data import LazyTensorStorage, SliceSampler, TensorDictReplayBuffer
from torchrl.modules import MaskedCategorical, ProbabilisticActor
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import MultiAgentGAE

from ers_deep.nets import ActorCritic
from ers_deep.nets.switches import ProductSwitches
from ers_deep.train import Learner, TrainConfig
from ers_deep.train.ppo import gae, ppo_loss, update_data
from ers_deep.train.torchrl_fast import FastCollector
from tests.deep.threads import one_thread, single_thread  # noqa: F401
from tests.deep.train.twins import tiny_config

MASK = ("agents", "mask")


@dataclass
class Batch:
    """One Hanabi batch: its learner's net, config and discount, the TensorDict with ``MultiAgentGAE``'s advantages
    and targets, the same data in ers's layout (``update_data``: [S, T, N]) and ers's ``gae`` of the rollout
    (advantages, targets) in the batch's layout."""

    net: ActorCritic
    cfg: TrainConfig
    td: TensorDictBase
    data: dict[str, Tensor]
    ers_gae: tuple[Tensor, Tensor]
    gamma: float
    switches: ProductSwitches  # the learner's, under which its collection ran the net

    @property
    def S(self) -> int:
        return len(self.cfg.seeds)


def estimator(value_network: TensorDictModule | None, gamma: float, lmbda: float) -> MultiAgentGAE:
    """TorchRL's ``MultiAgentGAE`` on the batch's keys: team-shared done / terminated at the root."""
    est = MultiAgentGAE(gamma=gamma, lmbda=lmbda, value_network=value_network)
    est.set_keys(
        value=("agents", "state_value"),
        reward=("agents", "reward"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    return est


class Head(nn.Module):
    """One head of the seed-stacked net over [G, T, P, O] observations (G = S x B games, seed-major): the
    logits [G, T, P, A] (``head`` 0) or the value [G, T, P, 1] (``head`` 1), every entry one step of its own."""

    def __init__(self, net: ActorCritic, S: int, head: int) -> None:
        super().__init__()
        self.net, self.S, self.head = net, S, head

    def forward(self, obs: Tensor) -> Tensor:
        x = obs.reshape(self.S, 1, -1, obs.shape[-1])
        first = torch.zeros(x.shape[:3], dtype=torch.bool)
        out = self.net(x, first, self.net.initial_state(x.shape[2]))[self.head]
        return out.reshape(*obs.shape[:-1], -1)


def critic(net: ActorCritic, S: int) -> TensorDictModule:
    """The net's value head V(o) as a ``TensorDictModule`` writing ``("agents", "state_value")``."""
    return TensorDictModule(Head(net, S, 1), [("agents", "observation")], [("agents", "state_value")])


def torchrl_loss(net: ActorCritic, S: int, cfg: TrainConfig, clip_epsilon: float) -> ClipPPOLoss:
    """``ClipPPOLoss`` over a ``MaskedCategorical`` actor and the value head, both the net itself
    (``functional=False``: the gradients land on the net's parameters)."""
    logits = TensorDictModule(Head(net, S, 0), [("agents", "observation")], [("agents", "logits")])
    actor = ProbabilisticActor(
        logits,
        in_keys={"logits": ("agents", "logits"), "mask": ("agents", "action_mask")},
        out_keys=[("agents", "action")],
        distribution_class=MaskedCategorical,
        return_log_prob=True,
    )
    loss = ClipPPOLoss(
        actor,
        critic(net, S),
        clip_epsilon=clip_epsilon,
        clip_value=True,
        entropy_coeff=cfg.alpha,
        critic_coeff=0.5,
        loss_critic_type="l2",
        normalize_advantage=False,
        functional=False,
    )
    loss.set_keys(
        sample_log_prob=("agents", "logp"),
        action=("agents", "action"),
        value=("agents", "state_value"),
        advantage=("agents", "advantage"),
        value_target=("agents", "value_target"),
    )
    return loss


@pytest.fixture(scope="module")
def batch() -> Batch:
    """The second batch of a fresh Hanabi learner (games ended inside it, others run past its end), with
    ``MultiAgentGAE``'s advantages; ``data``: the same rollout in ers's layout with those advantages."""
    with single_thread():
        cfg = tiny_config("hanabi", collect_mode="eager", normalize_advantage=False)
        learner = Learner(cfg)
        assert learner.fast is not None
        S, B, P = learner.S, learner.B, learner.P
        collector = FastCollector(learner.fast, learner.fast.state, total_batches=2)
        td = list(collector)[-1]
        ro = collector.rollout
        assert ro is not None and ro.done.any() and (~ro.done[:, -1]).any()
        T = td.batch_size[1]

        def games(x: Tensor) -> Tensor:  # [S, T, B*P] -> [S*B, T, P, 1]
            return x.reshape(S, T, B, P).transpose(1, 2).reshape(S * B, T, P, 1)

        def actors(x: Tensor) -> Tensor:  # [S*B, T, P, 1] -> [S, T, B*P]
            return x.reshape(S, B, T, P).transpose(1, 2).reshape(S, T, B * P)

        gamma = learner.gamma
        adv, target = gae(ro.reward, ro.value, ro.last_value, ro.done, gamma, cfg.gae_lambda)
        with torch.no_grad():
            estimator(None, gamma, cfg.gae_lambda)(td)
        data = update_data(ro, actors(td["agents", "advantage"]), actors(td["agents", "value_target"]))
        return Batch(learner.fast.net, cfg, td, data, (games(adv), games(target)), gamma, learner.switches)


def test_multi_agent_gae_reads_the_team_done_and_gives_ers_gae(batch: Batch) -> None:
    """``MultiAgentGAE`` broadcasts the team-shared done [G, T, 1] over the agents: with the stored values and
    with the value head run as a ``TensorDictModule``, its advantages and targets are ers's ``gae``."""
    for value_network in (None, critic(batch.net, batch.S)):
        td = batch.td.exclude(("agents", "advantage"), ("agents", "value_target"))
        assert td["next", "done"].shape == (*td.batch_size, 1)
        with torch.no_grad(), batch.switches.applied():  # the value head multiplies as the collection did
            estimator(value_network, batch.gamma, batch.cfg.gae_lambda)(td)
        torch.testing.assert_close(td["agents", "advantage"], batch.ers_gae[0])
        torch.testing.assert_close(td["agents", "value_target"], batch.ers_gae[1])


def perturbed(batch: Batch, scale: float) -> ActorCritic:
    """A copy of the collection's net, every parameter moved by ``scale`` x standard normal noise."""
    net = copy.deepcopy(batch.net)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return net


def grads(loss: Tensor, net: ActorCritic) -> Tensor:
    """d loss / d (every parameter of ``net``), flattened into one vector."""
    params = list(net.parameters())
    gs = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for g, p in zip(gs, params)])


def ers_terms(net: ActorCritic, batch: Batch, cfg: TrainConfig) -> dict[str, Tensor]:
    """ers's ``ppo_loss`` terms as TorchRL reduces them, over all seeds at once: the actor objective and the
    entropy (per-seed means over ``loss_mean``'s entries, weighed by those entries' counts), the critic
    (``vf_coef`` 1 minus 0: its 1/2 mean). Actor and critic differentiable."""
    data = batch.data
    over = data["acting"] if cfg.loss_mean == "acting" else torch.ones_like(data["acting"])
    count = over.flatten(1).sum(1).to(torch.float32)
    w = count / count.sum()
    base, parts = ppo_loss(net, cfg.replace(vf_coef=0.0, alpha=0.0), data)
    with_critic, _ = ppo_loss(net, cfg.replace(vf_coef=1.0, alpha=0.0), data)
    return {
        "actor": (base * w).sum(),
        "critic": (with_critic - base).mean(),
        "entropy": (parts["entropy"] * w).sum(),
    }


def torchrl_terms(loss: ClipPPOLoss, td: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
    """TorchRL's loss terms with the waiting seats masked out (``loss_mask_key=("agents", "mask")``) and
    without a mask."""
    loss.loss_mask_key = MASK
    masked = loss(td)
    loss.loss_mask_key = None
    return masked, loss(td)


def clipping(net: ActorCritic, batch: Batch, eps: float) -> tuple[float, float, float]:
    """Computed here from the net's heads: max |ratio - 1| over the acting entries, the share of acting
    entries whose clipped surrogate is the smaller (A (ratio - clip(ratio)) > 0: clipping acts) and the share
    of entries whose value moved by more than ``eps`` from the collection's."""
    td, S = batch.td, batch.S
    acting = td[MASK][..., 0]
    with torch.no_grad():
        logits = Head(net, S, 0)(td["agents", "observation"])
        value = Head(net, S, 1)(td["agents", "observation"])
    logits = logits.masked_fill(~td["agents", "action_mask"], float("-inf"))
    logp = torch.log_softmax(logits, -1).gather(-1, td["agents", "action"][..., None])[..., 0]
    ratio = (logp - td["agents", "logp"]).exp()
    adv = td["agents", "advantage"][..., 0]
    clipped = adv * (ratio - ratio.clamp(1 - eps, 1 + eps)) > 0
    moved = (value - td["agents", "state_value"]).abs() > eps
    return (
        (ratio - 1)[acting].abs().max().item(),
        clipped[acting].float().mean().item(),
        moved.float().mean().item(),
    )


@pytest.mark.parametrize("scale", [0.0, 0.05])
def test_clip_ppo_loss_gives_ers_ppo_loss(batch: Batch, scale: float) -> None:
    """At the collection's parameters (``scale`` 0: ratio 1, nothing clipped) and after a perturbation (some
    acting entries clipped, some not; some values clipped, some not): TorchRL's masked entropy term and actor
    objective are ers's (``loss_mean="acting"``), values and gradients; its unmasked critic loss is ers's."""
    net = perturbed(batch, scale)
    cfg = batch.cfg.replace(loss_mean="acting")
    ratio_error, policy_clipped, value_clipped = clipping(net, batch, cfg.clip_eps)
    if scale == 0:
        assert ratio_error < 1e-6 and policy_clipped == value_clipped == 0
    else:
        assert 0 < policy_clipped < 1 and 0 < value_clipped < 1
    ers = ers_terms(net, batch, cfg)
    masked, unmasked = torchrl_terms(torchrl_loss(net, batch.S, cfg, cfg.clip_eps), batch.td)
    torch.testing.assert_close(masked["loss_entropy"], -cfg.alpha * ers["entropy"])
    torch.testing.assert_close(masked["loss_objective"], ers["actor"].detach())
    torch.testing.assert_close(grads(masked["loss_objective"], net), grads(ers["actor"], net))
    torch.testing.assert_close(unmasked["loss_critic"], ers["critic"].detach())
    torch.testing.assert_close(grads(unmasked["loss_critic"], net), grads(ers["critic"], net))


@pytest.mark.parametrize("scale", [0.0, 0.05])
def test_ers_default_loss_mean_against_torchrl_masks(batch: Batch, scale: float) -> None:
    """ers's default ``loss_mean="all"``: its policy terms are TorchRL's masked ones x acting / all entries
    (1/2: one of Hanabi's two seats moves per step). The conventions ers does not share: TorchRL's unmasked
    actor gradient differs from ers's (it differentiates the waiting seats' ratios, ratio 1 or not), and its
    masked critic loss differs from ers's (it averages over the acting entries only)."""
    net = perturbed(batch, scale)
    cfg = batch.cfg
    assert cfg.loss_mean == "all"
    acting = batch.data["acting"]
    share = acting.sum() / acting.numel()
    assert share == 1 / 2
    ers = ers_terms(net, batch, cfg)
    masked, unmasked = torchrl_terms(torchrl_loss(net, batch.S, cfg, cfg.clip_eps), batch.td)
    torch.testing.assert_close(share * masked["loss_entropy"], -cfg.alpha * ers["entropy"])
    torch.testing.assert_close(share * masked["loss_objective"], ers["actor"].detach())
    torch.testing.assert_close(share * grads(masked["loss_objective"], net), grads(ers["actor"], net))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(grads(unmasked["loss_objective"], net), grads(ers["actor"], net))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(masked["loss_critic"], ers["critic"].detach())


def test_the_gradient_comparison_sees_a_different_clip(batch: Batch) -> None:
    """The comparisons of ``test_clip_ppo_loss_gives_ers_ppo_loss`` fail where ers's ``clip_eps`` (0.1) is not
    TorchRL's ``clip_epsilon`` (0.2), at the perturbed parameters where clipping acts."""
    net = perturbed(batch, 0.05)
    cfg = batch.cfg.replace(loss_mean="acting")
    assert cfg.clip_eps == 0.2
    ers = ers_terms(net, batch, cfg.replace(clip_eps=0.1))
    masked, unmasked = torchrl_terms(torchrl_loss(net, batch.S, cfg, cfg.clip_eps), batch.td)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(grads(masked["loss_objective"], net), grads(ers["actor"], net))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(grads(unmasked["loss_critic"], net), grads(ers["critic"], net))


def test_tensordict_replay_buffer_slices_the_batch_along_time(batch: Batch) -> None:
    """``TensorDictReplayBuffer`` over ``LazyTensorStorage(ndim=2)`` with ``SliceSampler`` (no trajectory
    ids: ``("next", "done")`` ends the slices): each slice is consecutive steps of one game, inside one
    episode, with the batch's entries at those steps."""
    td = batch.td.clone()
    G, T = td.batch_size
    td["game"] = torch.arange(G)[:, None].expand(G, T).clone()
    td["step"] = torch.arange(T)[None, :].expand(G, T).clone()
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(G * T, ndim=2), sampler=SliceSampler(slice_len=4), batch_size=32
    )
    rb.extend(td)
    sample = rb.sample()
    game, step = sample["game"].view(-1, 4), sample["step"].view(-1, 4)
    assert bool((game == game[:, :1]).all() and (step == step[:, :1] + torch.arange(4)).all())
    assert not sample["next", "done"].view(-1, 4)[:, :-1].any()
    for key in (("agents", "observation"), ("agents", "action"), ("next", "agents", "reward")):
        assert torch.equal(sample[key], td[key][sample["game"], sample["step"]])
