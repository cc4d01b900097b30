"""The networks of deep discovery without training: the identity-initialised phi_O, a hand-built phi equal to a
Hanabi colour permutation, DiscoveryNet against the symmetriser it must equal (sp and xp modes, per-episode
draws), ``compose`` and the invertibility penalty."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from ers_deep.discovery import DiscoveryNet, LearnedSymmetry, compose
from ers_deep.envs.hanabi import HanabiEnv, colour_permutations
from ers_deep.envs.hanabi.config import MOVE_PLAY
from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import ActorCritic, NetConfig, build_net, masked_logits
from ers_deep.nets.layers import SLinear
from ers_deep.nets.phi import ObsMap
from ers_deep.train.config import paper_config
from ers_deep.train.evaluate import Agent, play
from tests.deep.discovery.random_policies import random_tabular_nets

SMALL = "Hanabi-Small"  # 2 colours: the colour swap is its one non-identity Dec-POMDP symmetry


@pytest.fixture(scope="module")
def hanabi_obs() -> Tensor:
    """[n, O] observations of both seats from real Hanabi-Small states (random legal play, 40 steps)."""
    env = HanabiEnv(SMALL, batch_size=32, seed=3)
    gen = torch.Generator().manual_seed(3)
    seen = []
    for _ in range(40):
        obs, legal = env.observe(), env.legal_mask()
        seen.append(obs.reshape(-1, obs.shape[-1]))
        legal = legal | ~legal.any(-1, keepdim=True)  # a player not to move: any move (ignored by the env)
        probs = legal.float() / legal.float().sum(-1, keepdim=True)
        env.step(torch.multinomial(probs.view(-1, probs.shape[-1]), 1, generator=gen).view(legal.shape[:2]))
    out = torch.cat(seen)
    assert out.abs().sum() > 0 and set(out.unique().tolist()) <= {0.0, 1.0}
    return out


def _hanabi_net(seed: int, sharp: float = 30.0, play_penalty: float = 3.0) -> ActorCritic:
    """A random-init Hanabi-Small policy whose logits are far from uniform (the official init scales the actor
    output by 0.01, here undone by ``sharp``) and that rarely plays a card (``play_penalty`` off the play logits):
    with one life a blind play usually bombs, which scores 0, so a policy that plays often always scores 0."""
    env = HanabiEnv(SMALL, batch_size=1)
    net = build_net(NetConfig(hidden=32), [seed], env.obs_shape, env.num_actions)
    plays = torch.as_tensor(env.config.move_table()[:, 0] == MOVE_PLAY)
    with torch.no_grad():
        out = net.actor_out
        assert isinstance(out, SLinear) and out.bias is not None
        out.weight.mul_(sharp)
        out.bias[..., plays] -= play_penalty
    return net


def _permutation_map(sym: IndexSymmetry) -> ObsMap:
    """phi_O = the gather ``o[sym.obs_index]`` as a one-candidate ObsMap: ObsMap computes x @ W, so the first
    layer holds W[obs_index[j], j] = 1 and the other two stay the identity (ReLU is exact on 0/1 inputs)."""
    n = sym.obs_index.numel()
    phi = ObsMap(1, n)
    with torch.no_grad():
        w = torch.zeros(n, n)
        w[sym.obs_index, torch.arange(n)] = 1.0
        phi.weights[0][0] = w
    return phi


def _logits(agent: Agent, obs: Tensor) -> Tensor:
    n = obs.shape[0]
    out, _ = agent.logits(obs, torch.ones(n, dtype=torch.bool), agent.initial_state(n, obs.device))
    return out


def test_identity_obs_map_is_exactly_the_identity_on_hanabi(hanabi_obs: Tensor) -> None:
    n, size = hanabi_obs.shape
    phi = ObsMap(3, size)
    x = hanabi_obs[None].expand(3, n, size).contiguous()
    assert torch.equal(phi(x), x)
    net = _hanabi_net(0)
    sym = LearnedSymmetry(ObsMap(1, size), torch.arange(net.num_actions), "identity", (size,))
    assert torch.equal(sym.apply_obs(hanabi_obs), hanabi_obs)
    assert torch.equal(_logits(Agent(net, (sym,)), hanabi_obs), _logits(Agent(net), hanabi_obs))


def test_hand_built_colour_permutation_is_the_index_symmetry(hanabi_obs: Tensor) -> None:
    env = HanabiEnv(SMALL, batch_size=1)
    sym = colour_permutations(env.config)[1]
    assert not sym.is_identity()
    learned = LearnedSymmetry(_permutation_map(sym), sym.action_map.clone(), "learned-swap", env.obs_shape)
    assert torch.equal(learned.apply_obs(hanabi_obs), sym.apply_obs(hanabi_obs))
    net = _hanabi_net(1)
    deep, exact = _logits(Agent(net, (learned,)), hanabi_obs), _logits(Agent(net, (sym,)), hanabi_obs)
    assert torch.equal(deep, exact)
    assert not torch.allclose(deep, _logits(Agent(net), hanabi_obs))  # the swap changes this policy


@pytest.mark.slow  # ~16 s of sampled games; the exact logit equality above stays in the default suite
def test_hand_built_colour_permutation_scores_as_an_er_symmetry() -> None:
    """J(phi(pi)) = J(pi) for every pi of a small pool of random-init policies, and so the pool's mean J: a
    Dec-POMDP symmetry preserves the return of *any* policy (it relabels a game onto an equally likely one), so it
    maps the optimal set onto itself and is an ER symmetry; untrained (but non-uniform, scoring) policies
    therefore suffice for the check. Sampled returns over 4000 games each, equal within 4 standard errors of the
    difference; the learned phi plays exactly as the IndexSymmetry (same games, same return)."""
    env = HanabiEnv(SMALL, batch_size=1)
    sym = colour_permutations(env.config)[1]
    learned = LearnedSymmetry(_permutation_map(sym), sym.action_map.clone(), "learned-swap", env.obs_shape)
    cfg = paper_config("hanabi", hanabi_preset=SMALL)
    base_J, mapped_J, ses = [], [], []
    for seed in (0, 1):
        net = _hanabi_net(seed)
        base = play([Agent(net)] * 2, cfg, 4000, seed=11)
        mapped = play([Agent(net, (learned,))] * 2, cfg, 4000, seed=11)
        assert mapped == play([Agent(net, (sym,))] * 2, cfg, 4000, seed=11)
        assert base["mean"] > 0.05  # the policy scores at all, so equality is not 0 = 0
        assert abs(base["mean"] - mapped["mean"]) < 4 * math.hypot(base["se"], mapped["se"])
        base_J.append(base["mean"])
        mapped_J.append(mapped["mean"])
        ses.append(math.hypot(base["se"], mapped["se"]))
    assert abs(sum(base_J) - sum(mapped_J)) / 2 < 4 * math.hypot(*ses) / 2  # the pool's J


# ----- DiscoveryNet -------------------------------------------------------------------------------------------
def _tabular_net(mode: str = "sp", members: int = 3, **kw: object) -> tuple[DiscoveryNet, list[ActorCritic]]:
    env = TabularEnv("three-lever")
    pool = random_tabular_nets(env, list(range(members)))
    maps = torch.tensor([[2, 1, 0], [1, 0, 2]])
    net = DiscoveryNet(
        (0, 1),
        pool,
        NetConfig(kind="tabular"),
        maps,
        env.num_agents,
        mode=mode,  # type: ignore[arg-type]
        lift=env.history_lift,
        obs_map_size=env.n_observations,
        **kw,  # type: ignore[arg-type]
    )
    with torch.no_grad():  # move every candidate well away from the identity
        g = torch.Generator().manual_seed(7)
        for w in net.phi.weights:
            w.add_(0.5 * torch.randn(w.shape, generator=g))
    return net, pool


def _actor_obs(N: int, T: int = 1, L: int = 2) -> Tensor:
    """[L, T, N, K] one-hot local histories of three-lever (actor n sees history (n + t) mod K)."""
    eye = TabularEnv("three-lever").history_obs()
    K = eye.shape[0]
    idx = (torch.arange(N)[None] + torch.arange(T)[:, None]) % K
    return eye[idx][None].expand(L, T, N, K).contiguous()


def test_discovery_net_sp_is_the_symmetriser_of_the_assigned_member() -> None:
    net, pool = _tabular_net("sp", members=3)
    N, P = 12, 2
    obs = _actor_obs(N)
    logits, _, hidden = net(obs, torch.ones(2, 1, N, dtype=torch.bool), net.initial_state(N))
    assert torch.equal(hidden.episode, torch.ones(2, N, dtype=torch.long))  # one episode started per actor
    for c in range(2):
        sym = net.symmetry(c)
        for n in range(N):
            member = (n // P) % len(pool)  # actor n plays in game n // P, which plays member game mod M
            ref = _logits(Agent(pool[member], (sym,)), obs[c, 0, n : n + 1])[0]
            torch.testing.assert_close(logits[c, 0, n], ref, rtol=1e-5, atol=1e-5)


def test_discovery_state_of_an_old_checkpoint_is_read_from_its_columns() -> None:
    """Before the named state, a discovery net's state was one tensor [L, N, 2 + H]: actor id and episodes
    started (as floats), then the pool's state; ``state_from_columns`` reads it into the named fields."""
    net, _ = _tabular_net("sp", members=3)
    N = 6
    first = torch.zeros(2, 3, N, dtype=torch.bool)
    first[:, 1, ::2] = True
    _, _, state = net(_actor_obs(N, T=3), first, net.initial_state(N))
    assert state.actor is not None and state.episode is not None and state.gru is None
    columns = torch.stack([state.actor.float(), state.episode.float()], -1)
    old = net.state_from_columns(columns)
    assert torch.equal(old.actor, state.actor) and torch.equal(old.episode, state.episode)
    assert old.gru is None and old.episode.dtype == torch.long


def _which(net: DiscoveryNet, pool: list[ActorCritic], c: int, x: Tensor, got: Tensor) -> tuple[str, int]:
    """Which of pi_m (raw) or phi_c(pi_m) (transformed) produced logits ``got`` at observation ``x``."""
    sym = net.symmetry(c)
    found = []
    for m, p in enumerate(pool):
        for kind, agent in (("raw", Agent(p)), ("phi", Agent(p, (sym,)))):
            if torch.allclose(_logits(agent, x[None])[0], got, atol=1e-5):
                found.append((kind, m))
    assert len(found) == 1, found
    return found[0]


def test_discovery_net_xp_plays_one_seat_raw_and_the_other_transformed_per_episode() -> None:
    net, pool = _tabular_net("xp", members=3)
    games, P, T = 6, 2, 6
    N = games * P
    obs = _actor_obs(N, T=1).expand(2, T, N, -1).contiguous()  # the same history at every step
    first = torch.zeros(2, T, N, dtype=torch.bool)
    first[:, 0] = True
    first[:, 3] = True  # a second episode starts at step 3
    logits, _, hidden = net(obs, first, net.initial_state(N))
    assert torch.equal(hidden.episode, torch.full((2, N), 2))
    seen_pairs = set()
    for c in range(2):
        for g in range(games):
            for episode, steps in ((0, range(3)), (1, range(3, T))):
                seats = []
                for seat in range(P):
                    n = g * P + seat
                    drawn = {_which(net, pool, c, obs[c, t, n], logits[c, t, n]) for t in steps}
                    assert len(drawn) == 1  # constant within the episode
                    seats.append(drawn.pop())
                kinds = sorted(k for k, _ in seats)
                assert kinds == ["phi", "raw"]  # one seat plays pi_m, the other phi(pi_m')
                raw = next(m for k, m in seats if k == "raw")
                other = next(m for k, m in seats if k == "phi")
                assert raw != other
                seen_pairs.add((g, episode, raw, other, tuple(k for k, _ in seats)))
    assert len({(raw, other, order) for _, _, raw, other, order in seen_pairs}) > 2  # draws vary


def test_composed_rollouts_are_drawn_once_per_episode() -> None:
    """Algorithm 2: with earlier symmetries and lambda_1 = 1/2 each game and episode draws whether and with
    which phi_i, phi_j to compose; the draw is a function of (game, episode), constant within an episode."""
    base, _ = _tabular_net("sp", members=2)
    earlier = [base.symmetry(0), base.symmetry(1)]
    net, _ = _tabular_net("sp", members=2, earlier=earlier, compose_prob=0.5)
    games, P, T = 16, 2, 4
    N = games * P
    obs = _actor_obs(N, T=1).expand(2, T, N, -1).contiguous()
    first = torch.zeros(2, T, N, dtype=torch.bool)
    first[:, 0] = first[:, 2] = True
    logits, _, _ = net(obs, first, net.initial_state(N))
    torch.testing.assert_close(logits[:, 0], logits[:, 1])  # episode 1
    torch.testing.assert_close(logits[:, 2], logits[:, 3])  # episode 2
    plain, _, _ = _tabular_net("sp", members=2)[0](obs, first, net.initial_state(N))
    composed = ~torch.isclose(logits, plain, atol=1e-5).all(-1)  # [L, T, N]
    assert 0 < composed[:, 0].float().mean() < 1  # some games compose, others do not
    assert not torch.equal(composed[:, 0], composed[:, 2])  # and the draw changes with the episode


def test_composed_rollouts_apply_the_earlier_symmetries_as_learned() -> None:
    """Algorithm 2 on a tabular game: a composed rollout plays phi_i o phi_l o phi_j (pi_m), phi_i and phi_j the
    earlier symmetries *as learned* (their last layer linear: softmax rows of its logits) or the identity. The
    earlier maps were rebuilt with a ReLU on their output, which clips the negative logits and moves the rows
    (by up to 0.13 on a learned toy-game map), so the rollouts composed with other maps than the earlier ones."""
    base, _ = _tabular_net("sp", members=2)
    earlier = base.symmetry(1)
    assert not earlier.obs_map.relu_output
    assert (earlier.obs_map(torch.eye(3)[None]) < 0).any()  # ReLU on the output would change this map
    net, pool = _tabular_net("sp", members=2, earlier=[earlier], compose_prob=1.0)
    games, P = 16, 2
    N = games * P
    obs = _actor_obs(N)
    logits, _, _ = net(obs, torch.ones(2, 1, N, dtype=torch.bool), net.initial_state(N))
    used = set()
    for c in range(2):
        sym = net.symmetry(c)
        for n in range(N):
            member = (n // P) % len(pool)
            matches = [
                (i, j)
                for i in (earlier, None)
                for j in (earlier, None)
                if torch.allclose(
                    _logits(
                        Agent(pool[member], (compose([p for p in (i, sym, j) if p]),)), obs[c, 0, n : n + 1]
                    )[0],
                    logits[c, 0, n],
                    atol=1e-5,
                )
            ]
            assert matches, (c, n)  # one of phi_i o phi_l o phi_j, i, j in {earlier, identity}
            used.update(matches)
    assert (earlier, earlier) in used  # some games compose with the earlier symmetry on both sides


def test_compose_applies_phi_2_then_phi_1_as_documented() -> None:
    """compose([phi_1, phi_2]) is phi_1 o phi_2: phi_1(phi_2(pi))(a | o) = pi(A_2(A_1(a)) | O_2(O_1(o))); on
    index symmetries it equals ``phi_1.compose(phi_2)`` ("first phi_1, then phi_2" on observations)."""
    env = HanabiEnv("Hanabi-Full", batch_size=4, seed=0)
    perms = {p.label_perm: p for p in colour_permutations(env.config)}
    s1, s2 = perms[(1, 0, 2, 3, 4)], perms[(0, 2, 1, 3, 4)]  # two transpositions that do not commute
    both = compose([s1, s2])
    assert both.name == f"{s1.name} o {s2.name}"
    obs = env.observe().reshape(-1, *env.obs_shape)
    ref = s1.compose(s2)
    assert torch.equal(both.apply_obs(obs), s2.apply_obs(s1.apply_obs(obs)))
    assert torch.equal(both.apply_obs(obs), ref.apply_obs(obs))
    assert torch.equal(both.action_map, s2.action_map[s1.action_map])
    assert torch.equal(both.action_map, ref.action_map)
    assert not torch.equal(both.action_map, compose([s2, s1]).action_map)  # S_5 is not abelian
    net = build_net(NetConfig(hidden=16), [0], env.obs_shape, env.num_actions)
    pi = _logits(Agent(net), s2.apply_obs(s1.apply_obs(obs)))
    manual = pi.index_select(-1, s2.action_map[s1.action_map])
    torch.testing.assert_close(_logits(Agent(net, (both,)), obs), manual)


def test_invertibility_penalty_is_zero_at_an_involution(hanabi_obs: Tensor) -> None:
    env = HanabiEnv(SMALL, batch_size=1)
    swap = colour_permutations(env.config)[1]
    pool = [_hanabi_net(0), _hanabi_net(1)]
    maps = swap.action_map[None].expand(2, -1)
    net = DiscoveryNet((0, 1), pool, NetConfig(hidden=32), maps, 2, invertibility=1.0)
    with torch.no_grad():
        net.phi.weights[0][0] = _permutation_map(swap).weights[0][0]  # candidate 0: the swap (an involution)
        net.phi.weights[0][1].add_(0.05 * torch.randn(net.phi.weights[0][1].shape))  # candidate 1: not
    obs = hanabi_obs[:64].view(1, 1, 64, -1).expand(2, 1, 64, -1)
    loss = net.auxiliary_loss(obs)
    assert loss[0].item() == 0.0
    assert loss[1].item() > 0
    plain = DiscoveryNet((0, 1), pool, NetConfig(hidden=32), maps, 2)
    assert torch.equal(plain.auxiliary_loss(obs), torch.zeros(2))  # lambda_2 = 0: no penalty


def test_untrained_tabular_candidates_start_apart_and_near_the_identity() -> None:
    """Tabular maps start as softmax rows of a noisy identity: every row puts most mass on its own observation,
    and two candidates with the same phi_A do not start equal (the seeded noise)."""
    env = TabularEnv("three-lever")
    pool = random_tabular_nets(env, [0])
    maps = torch.tensor([[2, 1, 0], [2, 1, 0]])
    net = DiscoveryNet(
        (0, 1),
        pool,
        NetConfig(kind="tabular"),
        maps,
        2,
        lift=env.history_lift,
        obs_map_size=env.n_observations,
    )
    rows = [torch.softmax(3.0 * net.symmetry(c).obs_map(torch.eye(3)[None])[0], -1) for c in range(2)]
    assert not torch.allclose(rows[0], rows[1])
    legal = env.legal_table()
    K = env.obs_shape[0]
    for c in range(2):
        probs = torch.softmax(
            masked_logits(_logits(Agent(pool[0], (net.symmetry(c),)), env.history_obs()), legal), -1
        )
        assert torch.isfinite(probs).all() and probs.shape == (K, env.num_actions)
