"""``evaluate.play`` and discovery's ``sample_observations`` feed each step's own observation and legal moves to
the next step (no re-observation): each observes the env once, before the first step, and gives what a loop
that re-observes at every step (written out here as the reference) gives, on a tabular game, Hanabi and
Overcooked V2."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor

import ers_deep.discovery.scores as scores
import ers_deep.train.evaluate as evaluate
from ers_deep.discovery.scores import sample_observations
from ers_deep.nets import build_net, masked_logits, policy_mask, sample
from ers_deep.pools import Policy
from ers_deep.train import TrainConfig
from ers_deep.train.config import make_env
from ers_deep.train.evaluate import Agent, play
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config

ENVS = ["tabular:dectiger", "hanabi", "overcooked-v2"]


def _agents(cfg: TrainConfig) -> list[Agent]:
    env = make_env(cfg, 1, seed=0)
    torch.manual_seed(3)
    return [Agent(build_net(cfg.net, (s,), env.obs_shape, env.num_actions)) for s in range(env.num_agents)]


def _reobserving_play(
    agents: list[Agent], cfg: TrainConfig, games: int, greedy: bool, seed: int
) -> tuple[float, list[Tensor]]:
    """The mean return and the joint actions of ``play``'s games, observing the env before every step."""
    env = make_env(cfg, games, seed=seed)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = [a.initial_state(games, env.device) for a in agents]
    first = torch.ones(games, dtype=torch.bool)
    total = torch.zeros(games, dtype=torch.float64)
    finished = torch.zeros(games, dtype=torch.bool)
    moves = []
    while not bool(finished.all()):
        obs, legal = env.observe(), env.legal_mask()
        legal = legal | ~legal.any(-1, keepdim=True)
        joint = []
        for i, agent in enumerate(agents):
            logits, hidden[i] = agent.logits(obs[:, i], first, hidden[i], legal[:, i])
            pick = (
                masked_logits(logits, legal[:, i]).argmax(-1)
                if greedy
                else sample(logits, legal[:, i], gen)[0]
            )
            joint.append(pick)
        moves.append(torch.stack(joint, 1))
        out = env.step(moves[-1])
        total += torch.where(finished, 0.0, out.reward.double())
        finished |= out.done
        first = out.done
    return float(total.mean()), moves


def _count_observations(module: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at every ``observe()`` call, made outside the env's own step and reset, of
    the envs that ``module.make_env`` builds from now on."""
    observed: list[int] = []
    real_make_env, inside = module.make_env, [0]

    def counting_env(*a: Any, **k: Any) -> Any:
        made = real_make_env(*a, **k)
        observe = made.observe

        def counted_observe(*x: Any, **y: Any) -> Any:
            observed.extend([] if inside[0] else [1])
            return observe(*x, **y)

        def flagged(method: Any) -> Any:
            def run(*x: Any, **y: Any) -> Any:
                inside[0] += 1
                try:
                    return method(*x, **y)
                finally:
                    inside[0] -= 1

            return run

        monkeypatch.setattr(made, "observe", counted_observe)
        for name in ("step", "reset"):
            monkeypatch.setattr(made, name, flagged(getattr(made, name)))
        return made

    monkeypatch.setattr(module, "make_env", counting_env)
    return observed


@pytest.mark.parametrize("greedy", [False, True], ids=["sampled", "greedy"])
@pytest.mark.parametrize("env", ENVS)
def test_play_observes_once_and_equals_a_reobserving_loop(
    env: str, greedy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tiny_config(env)
    games = 3 if env == "overcooked-v2" else 16
    agents = _agents(cfg)
    want, moves = _reobserving_play(agents, cfg, games, greedy, seed=5)
    observed = _count_observations(evaluate, monkeypatch)
    seen: list[Tensor] = []
    got = play(agents, cfg, games, greedy=greedy, seed=5, record=lambda a, *_: seen.append(a.clone()))
    assert len(seen) == len(moves) and all(torch.equal(a, b) for a, b in zip(seen, moves, strict=True))
    assert math.isclose(got["mean"], want, rel_tol=0, abs_tol=1e-12)
    assert len(observed) == 1, f"{len(observed)} observations outside the steps of {len(moves)}"


def _reobserving_sample(policy: Policy, games: int, steps: int, seed: int) -> Tensor:
    """``sample_observations`` written with an observation of the env before every step."""
    env = make_env(policy.config, games, seed=seed)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed)
    n, seen = games * env.num_agents, []
    first = torch.ones(1, 1, n, dtype=torch.bool)
    hidden = policy.net.initial_state(n, env.device)
    for _ in range(steps):
        obs, legal = env.observe(), env.legal_mask()
        acting = legal.any(-1)
        seen.append(obs[acting])
        logits, _, hidden = policy.net(obs.reshape(1, 1, n, *env.obs_shape), first, hidden)
        action = sample(logits[0, 0], policy_mask(legal).reshape(n, -1), gen)[0].view(acting.shape)
        first = env.step(action).done[:, None].expand(games, env.num_agents).reshape(1, 1, n)
    return torch.cat(seen)


@pytest.mark.parametrize("env", ENVS)
def test_sample_observations_observes_once_and_equals_a_reobserving_loop(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery's held-out observations (``discovery.scores.sample_observations``), as ``play`` above."""
    cfg = tiny_config(env, seeds=(0,))
    policy = Policy(_agents(cfg)[0].net, cfg, 0, "random-0")
    steps = 30 if env == "hanabi" else 12
    want = _reobserving_sample(policy, 4, steps, seed=2)
    observed = _count_observations(scores, monkeypatch)
    got = sample_observations(policy, games=4, steps=steps, seed=2)
    assert got.shape == want.shape and torch.equal(got, want)
    assert len(observed) == 1, f"{len(observed)} observations outside the steps of {steps}"


def test_play_discounts_a_tabular_games_return_as_ers_exact(tmp_path: Any) -> None:
    """On a tabular game with gamma < 1 (two-lever at 0.5, as a .dpomdp file), ``play``'s mean return is the
    discounted J of ers-exact (``expected_return`` of the same policy) within 4 standard errors, and lies many
    standard errors from the undiscounted J (which ``play`` reported before, 2026-12-07)."""
    from ers_deep.train.config import paper_config
    from ers_deep.train.exact import tabular_policies
    from ers_exact.games import get_game
    from ers_exact.io.dpomdp import save_dpomdp
    from ers_exact.model.histories import enumerate_histories
    from ers_exact.model.values import expected_return

    path = tmp_path / "two-lever-half.dpomdp"
    save_dpomdp(get_game("two-lever").with_discount(0.5), path)
    cfg = paper_config(f"tabular:{path}", seeds=(0,))
    env = make_env(cfg, 1, seed=0)
    assert env.game.discount == 0.5
    torch.manual_seed(0)
    net = build_net(cfg.net, (0,), env.obs_shape, env.num_actions)
    policy = tabular_policies(net, env)[0]
    discounted = float(expected_return(env.tree, policy))
    plain = float(expected_return(enumerate_histories(env.game.with_discount(1.0)), policy))
    got = play([Agent(net), Agent(net)], cfg, 4000, seed=0)
    assert abs(got["mean"] - discounted) < 4 * got["se"]
    assert abs(plain - discounted) > 10 * got["se"]
