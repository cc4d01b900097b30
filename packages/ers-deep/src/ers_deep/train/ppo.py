"""The PPO update of the IPPO learner: advantages, the loss, per-seed gradient clipping, the minibatch step.

Plain PPO (CleanRL's / PureJaxRL's ``ppo.py``), per seed s of a stacked network, on a minibatch of actors
(whole sequences, time-major [S, T, M]):

    ratio   = exp(log pi(a | o) - log pi_old(a | o))
    actor   = -mean min(ratio A, clip(ratio, 1 - eps, 1 + eps) A)
    critic  = 1/2 mean max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)     (clipped value loss)
    entropy = mean H(pi(. | o))
    loss    = actor + c_V critic - alpha entropy (+ the network's auxiliary loss)

``mean`` averages over the entries of ``TrainConfig.loss_mean``: ``"all"`` (the official code: every entry,
Hanabi's waiting seat included) or ``"acting"`` (the entries whose move is played); advantages are normalised
over the same entries when ``normalize_advantage``. In the official code a waiting seat's only legal move is
the no-op: its ratio is 1 and its entropy 0, so its actor term is a constant (-A) and its entropy term zero.
ers's rollouts let a waiting seat draw any move (the env ignores it; ``legal`` is every move there), so both
sums run over the acting entries only (``acting``), which drops what the official code holds constant. So
"all" differs from "acting" only in the count it divides by (and in the entries the advantages are normalised
over), and is the official loss up to a constant, with the same gradient
(``tests/deep/train/test_torchrl_loss.py``: TorchRL's ``ClipPPOLoss`` against both). With
"all", Hanabi's policy terms weigh half as much beside the value loss as with "acting". The exact-advantage
mode of tabular games replaces the actor and entropy terms by ``exact_policy_terms`` (the expected update on
every local history; see ``ers_deep.train.ippo``).

The minibatch steps and their modes (eager, compiled, CUDA-graph-captured) are ``ers_deep.train.update``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from ers_deep.nets import ActorCritic, NetState, masked_logits, take_rows
from ers_deep.train.collect import Rollout
from ers_deep.train.config import TrainConfig


def gae(
    rewards: Tensor, values: Tensor, last_value: Tensor, done: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over time dim 1 of [S, T, N] tensors (``last_value`` [S, N], the value
    after the last step; ``done`` stops the bootstrap): A_t = delta_t + gamma lam (1 - d_t) A_{t+1},
    delta_t = r_t + gamma (1 - d_t) V_{t+1} - V_t. Returns (advantage, value target = A + V)."""
    not_done = (~done).to(values.dtype)
    next_values = torch.cat([values[:, 1:], last_value[:, None]], 1)
    delta = rewards + gamma * next_values * not_done - values
    decay = gamma * lam * not_done
    # CUDA: a few dozen kernels instead of 4 T small launches; CPU: the loop (memory-bound scan, see below)
    adv = reverse_linear_scan(delta, decay) if values.is_cuda else reverse_linear_loop(delta, decay)
    return adv, adv + values


def reverse_linear_loop(x: Tensor, c: Tensor) -> Tensor:
    """y_t = x_t + c_t y_{t+1} over dim 1 (y_T = 0), one step at a time (what the CPU runs)."""
    out, acc = torch.empty_like(x), torch.zeros_like(x[:, 0])
    for t in range(x.shape[1] - 1, -1, -1):
        acc = x[:, t] + c[:, t] * acc
        out[:, t] = acc
    return out


def reverse_linear_scan(x: Tensor, c: Tensor) -> Tensor:
    """y_t = x_t + c_t y_{t+1} over dim 1 (y_T = 0), for every other index at once, in ceil(log2 T) rounds
    (Hillis and Steele's scan, run backwards in time): after round r, entry t holds the composition of steps
    t .. t + 2^r - 1, (x, c) o (x', c') = (x + c x', c c'). About 4 log2(T) tensor operations instead of the
    recursion's 3 T, but each over all of x: on CUDA a few dozen kernels instead of hundreds of launches; on
    one CPU thread 2-10x the loop at 128-512 actors, 0.3-2.7x at 2,048 (cache-bound) and 5-17x slower at
    16,384 (memory-bound), so the CPU keeps the loop (``benchmarks/test_train_bench.py::test_gae_scan_vs_loop``).
    The sums run in another order than the recursion's (float32: ~1e-6 apart)."""
    T = x.shape[1]
    k = 1
    while k < T:
        x = torch.cat([torch.addcmul(x[:, : T - k], c[:, : T - k], x[:, k:]), x[:, T - k :]], 1)
        if 2 * k < T:  # the last round needs no products of c
            c = torch.cat([c[:, : T - k] * c[:, k:], c[:, T - k :]], 1)
        k *= 2
    return x


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean over all but the seed dim of x where mask; [S]."""
    m = mask.to(x.dtype)
    return (x * m).flatten(1).sum(1) / m.flatten(1).sum(1).clamp_min(1.0)


def update_data(ro: Rollout, adv: Tensor, target: Tensor) -> dict[str, Tensor]:
    """Every field the loss reads, of all actors, as one flat dict of tensors: [S, T, N, ...], and the net's
    state before step 0 as ``hidden0/<field>`` [S, N, ...]; a minibatch is ``train.update.select(data, idx)``."""
    out = {k: getattr(ro, k) for k in ("obs", "first", "legal", "action", "logp", "acting", "value")}
    return out | {"adv": adv, "target": target} | ro.hidden0.tensors("hidden0/")


def turn_streams(acting: Tensor, P: int) -> Tensor:
    """The turn streams of a rollout whose games have exactly one acting seat of P per step (Hanabi), [S, T, N]
    long: stream b P + r at step t reads actor b P + p, p the seat of game slot b that moves at the steps
    t' = r (mod P) of the game running at t. Seats move in turn within a game, so a stream follows one seat per
    game (changing seat only where a game starts) and acts at exactly the steps t = r (mod P): when P divides
    T, any M streams hold exactly T M / P acting entries (what ``ppo_loss(acting_share=P)`` needs). Minibatches
    of random streams then split each game's seats as the JAX anchor's minibatches of random actors do;
    minibatches of whole games kept both seats together, whose value errors are correlated
    (``benchmarks/test_train_bench.py::test_minibatch_gradient_noise``)."""
    S, T, N = acting.shape
    B = N // P
    dev = acting.device
    mover = acting.view(S, T, B, P).to(torch.uint8).argmax(-1)  # [S, T, B]: the seat that moves at t
    r = torch.arange(P, device=dev)
    t = torch.arange(T, device=dev).view(T, 1, 1)
    seat = (mover[..., None] + r - t) % P  # [S, T, B, P]: the seat that moves (r - t) mod P steps after
    return (torch.arange(B, device=dev).view(B, 1) * P + seat).view(S, T, N)


MinibatchUnit = Literal["actors", "turn-streams", "games"]


def epoch_minibatches(
    unit: MinibatchUnit, B: int, P: int, minibatches: int, generator: torch.Generator, streams: Tensor | None
) -> list[Tensor]:
    """One epoch's ``minibatches`` minibatches, as ``update.select`` takes them: a random permutation of the
    B P actors split into groups (``"actors"``: indices [M]; ``"turn-streams"``: those of ``streams`` [S, T, M],
    ``turn_streams``), or of the B games, each with its P seats (``"games"``: indices [M])."""
    dev = generator.device
    if unit == "games":
        seats = torch.arange(P, device=dev)
        games = torch.randperm(B, generator=generator, device=dev).tensor_split(minibatches)
        return [(g[:, None] * P + seats).flatten() for g in games]
    perm = torch.randperm(B * P, generator=generator, device=dev).tensor_split(minibatches)
    if unit == "turn-streams":
        assert streams is not None, "turn-stream minibatches need the rollout's streams (turn_streams)"
        return [streams[:, :, b] for b in perm]
    return list(perm)


def ppo_loss(
    net: ActorCritic,
    cfg: TrainConfig,
    mb: dict[str, Tensor],
    exact: tuple[Tensor, Tensor] | None = None,
    acting_share: int | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-seed PPO loss [S] on one minibatch (``minibatch``) and its detached parts; ``exact``: the actor
    and entropy terms of the exact-advantage mode (``exact_policy_terms``). ``acting_share`` P: exactly
    T M / P of the minibatch's T M entries act (M turn streams, ``turn_streams``, or M / P whole games:
    Hanabi), so the actor and entropy terms, which count acting entries only, run the actor head on those
    K entries only (``net.forward_rows``; the same loss, ~20 % less work on Hanabi's MLP)."""
    state = NetState.from_tensors(mb, "hidden0/")
    acting = mb["acting"]
    over = acting if cfg.loss_mean == "acting" else torch.ones_like(acting)  # the entries the means count
    count = over.flatten(1).sum(1).clamp_min(1).to(mb["adv"].dtype)  # [S]
    adv = mb["adv"]
    if cfg.normalize_advantage:
        shape = (-1,) + (1,) * (adv.dim() - 1)
        mean = masked_mean(adv, over).view(shape)
        var = masked_mean((adv - mean) ** 2, over).view(shape)
        adv = (adv - mean) / (var.sqrt() + 1e-8)
    policy = {k: mb[k] for k in ("legal", "action", "logp", "acting")} | {"adv": adv}
    if acting_share is not None and exact is None and net.takes_rows:
        flat = mb["acting"].flatten(1)  # [S, T M]: the acting entries first (stable), K of them
        rows = torch.argsort((~flat).to(torch.uint8), dim=1, stable=True)[:, : flat.shape[1] // acting_share]
        logits, value, _ = net.forward_rows(mb["obs"], mb["first"], state, rows)  # type: ignore[operator]
        policy = {k: take_rows(v, rows) for k, v in policy.items()}
    else:
        logits, value, _ = net(mb["obs"], mb["first"], state)
    logp_all = torch.log_softmax(masked_logits(logits, policy["legal"]), -1)
    logp = logp_all.gather(-1, policy["action"][..., None])[..., 0]
    a, played = policy["adv"], policy["acting"].to(logp.dtype)
    ratio = torch.exp(logp - policy["logp"])
    surrogate = torch.minimum(ratio * a, ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps) * a)
    if exact is None:  # sums over the acting entries, divided by the count of ``loss_mean``'s entries
        actor = -(surrogate * played).flatten(1).sum(1) / count
        ent = (-(logp_all.exp() * logp_all).sum(-1) * played).flatten(1).sum(1) / count
    else:
        actor, ent = exact
    t, old_v = mb["target"], mb["value"]
    v_loss = (value - t) ** 2
    if cfg.clip_value_loss:
        clipped = old_v + (value - old_v).clamp(-cfg.clip_eps, cfg.clip_eps)
        v_loss = torch.maximum(v_loss, (clipped - t) ** 2)
    critic = 0.5 * v_loss.flatten(1).mean(1)
    loss = actor + cfg.vf_coef * critic - cfg.alpha * ent + net.auxiliary_loss(mb["obs"])
    return loss, {"actor_loss": actor.detach(), "value_loss": critic.detach(), "entropy": ent.detach()}


def exact_policy_terms(net: ActorCritic, legal_table: Tensor, table: Tensor) -> tuple[Tensor, Tensor]:
    """Exact mode (tabular games): (actor [S], entropy [S]) = (-mean_tau sum_a pi(a | tau) (Q - V)(tau, a),
    mean_tau H(pi(. | tau))) over every local history tau, from the exact advantages ``table`` [S, K, A]."""
    S, K = table.shape[:2]
    dev = table.device
    eye = torch.eye(K, device=dev).expand(S, 1, K, K)
    every, _, _ = net(eye, torch.ones(S, 1, K, dtype=torch.bool, device=dev), net.initial_state(K, dev))
    lp = torch.log_softmax(masked_logits(every[:, 0], legal_table), -1)
    return -(lp.exp() * table).sum(-1).mean(1), -(lp.exp() * lp).sum(-1).mean(1)


def clip_grads_per_seed(params: Sequence[Tensor], S: int, max_norm: float) -> Tensor:
    """Scale every seed's gradient (each parameter's leading factor is the seed) to norm <= ``max_norm``;
    returns the norms before clipping [S]."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.stack([g.view(S, -1).pow(2).sum(1) for g in grads]).sum(0).sqrt()
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.view(S, -1).mul_(scale[:, None])
    return norm


def make_optimizer(net: ActorCritic, cfg: TrainConfig, device: torch.device) -> torch.optim.Adam:
    """Adam over the stacked parameters (one Adam = S independent ones): the fused kernel (CPU and CUDA), the
    learning rate a tensor (a schedule changes its value, never a compiled or captured step), capturable on
    CUDA (its step count on the device: the captured update records it)."""
    lr = torch.tensor(cfg.lr, dtype=torch.float32, device=device)
    cuda = torch.device(device).type == "cuda"
    return torch.optim.Adam(net.parameters(), lr=lr, eps=cfg.adam_eps, fused=True, capturable=cuda)
