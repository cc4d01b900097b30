"""``evaluate.play`` feeds each step's own observation and legal moves to the next step (no re-observation):
it observes the env once, before the first step, and plays the games of a loop that re-observes at every step
(written out here as the reference), move for move, on a tabular game, Hanabi and Overcooked V2."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor

from ers_deep.nets import build_net, masked_logits, sample
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


@pytest.mark.parametrize("greedy", [False, True], ids=["sampled", "greedy"])
@pytest.mark.parametrize("env", ENVS)
def test_play_observes_once_and_equals_a_reobserving_loop(
    env: str, greedy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tiny_config(env)
    games = 3 if env == "overcooked-v2" else 16
    agents = _agents(cfg)
    want, moves = _reobserving_play(agents, cfg, games, greedy, seed=5)
    import ers_deep.train.evaluate as evaluate

    observed: list[int] = []  # observe() calls outside the env's own step and reset
    real_make_env, inside = evaluate.make_env, [0]

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

    monkeypatch.setattr(evaluate, "make_env", counting_env)
    seen: list[Tensor] = []
    got = play(agents, cfg, games, greedy=greedy, seed=5, record=lambda a, *_: seen.append(a.clone()))
    assert len(seen) == len(moves) and all(torch.equal(a, b) for a, b in zip(seen, moves, strict=True))
    assert math.isclose(got["mean"], want, rel_tol=0, abs_tol=1e-12)
    assert len(observed) == 1, f"{len(observed)} observations outside the steps of {len(moves)}"
