"""Lock-step comparison of the batched torch Hanabi env with HLE (the reference adapter) on identical deals.

B game slots are stepped together; at every step, for every running game, every player's canonical observation,
the legal-move mask, the current player, the reward, the end of the game and the score must be equal. Moves are
random legal moves: half of the slots draw uniformly, the other half favour playable cards (so that games also
end by deck exhaustion and, in small variants, by perfect scores)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from ers_deep.envs.hanabi.config import HanabiConfig
from ers_deep.envs.hanabi.env import HanabiEnv, HanabiStep
from ers_deep.envs.hanabi.hle import HLEGame


@dataclass
class DiffStats:
    games: int = 0
    steps: int = 0
    endings: Counter = field(default_factory=Counter)  # out_of_lives / perfect / deck_out
    scores: list[int] = field(default_factory=list)


def current_step(env: HanabiEnv, reward: torch.Tensor, done: torch.Tensor, score: torch.Tensor) -> HanabiStep:
    """The ``HanabiStep`` of ``env.state`` as it stands (after ``reset_games``, which returns nothing): every
    player's observation, the legal moves (``legal_mask()`` also refreshes ``current_legal``) and the player to
    move, with the given ``reward``, ``done`` and ``score``; public API only."""
    return HanabiStep(env.observe(), env.legal_mask(), env.state.cur.clone(), reward, done, score)


def biased_moves(env: HanabiEnv, gen: torch.Generator) -> torch.Tensor:
    """[B] random legal moves; odd slots weight plays of playable cards x20 and other plays x0.05."""
    cfg, s = env.config, env.state
    legal = env.current_legal.float()
    H, R = cfg.hand, cfg.ranks
    own = s.hand[torch.arange(env.batch_size), s.cur]  # [B, H]
    colour, rank = (own // R).clamp(max=cfg.colors - 1), own % R
    playable = (s.fireworks.gather(1, colour) == rank) & (own < cfg.num_cards)
    weights = torch.ones_like(legal)
    weights[:, H : 2 * H] = torch.where(playable, 20.0, 0.05)
    weights[0::2] = 1.0
    keys = torch.rand(legal.shape, generator=gen) ** (1.0 / weights)  # weighted sampling without replacement
    return (keys * legal).argmax(1)


def _compare(out: HanabiStep, obs: np.ndarray, b: int, game: HLEGame, where: str) -> None:
    h_obs = game.observations()
    if not np.array_equal(obs[b], h_obs):
        bad = np.argwhere(obs[b] != h_obs)[:8].tolist()
        raise AssertionError(f"{where}: observation differs at [player, index] {bad}\n{game.state_string()}")
    legal = out.legal[b].numpy()
    if not np.array_equal(legal, game.legal_mask()):
        raise AssertionError(
            f"{where}: legal moves differ: ers {np.argwhere(legal).tolist()} "
            f"hle {np.argwhere(game.legal_mask()).tolist()}\n{game.state_string()}"
        )
    if int(out.cur_player[b]) != game.cur_player:
        raise AssertionError(f"{where}: current player ers {int(out.cur_player[b])} hle {game.cur_player}")


def run_differential(cfg: HanabiConfig, n_games: int, batch: int = 64, seed: int = 0) -> DiffStats:
    """Play ``n_games`` games in ers and HLE in lock step; raise AssertionError at the first difference."""
    env = HanabiEnv(cfg, batch_size=batch, seed=seed, auto_reset=False)
    gen = torch.Generator().manual_seed(seed + 1)
    out = env.reset()
    games = [HLEGame(cfg) for _ in range(batch)]
    stats, started = DiffStats(), batch
    active = np.ones(batch, dtype=bool)
    for b, g in enumerate(games):
        g.new_game(env.state.deck[b].numpy())
        _compare(out, out.obs.numpy().astype(np.uint8), b, g, f"game slot {b} initial")
    while active.any():
        moves = biased_moves(env, gen)
        out = env.step(torch.where(torch.as_tensor(active), moves, env.current_legal.float().argmax(1)))
        obs = out.obs.numpy().astype(np.uint8)
        for b in np.flatnonzero(active):
            reward, done = games[b].step(int(moves[b]))
            stats.steps += 1
            where = f"game slot {b}, move {int(env.state.moves[b])} ({cfg.describe_move(int(moves[b]))})"
            _compare(out, obs, b, games[b], where)
            ours = (float(out.reward[b]), bool(out.done[b]), int(out.score[b]))
            if ours != (reward, done, games[b].score):
                raise AssertionError(
                    f"{where}: (reward, done, score) ers {ours} hle {(reward, done, games[b].score)}"
                )
        ended = out.done.numpy().copy()
        finished = ended & active
        if not ended.any():
            continue
        for b in np.flatnonzero(finished):
            stats.games += 1
            stats.scores.append(int(out.score[b]))
            stats.endings[
                "out_of_lives"
                if int(env.state.life[b]) == 0
                else "perfect"
                if int(env.state.fireworks[b].sum()) == cfg.max_score
                else "deck_out"
            ] += 1
        env.reset_games(torch.as_tensor(ended))  # idle slots keep playing unchecked
        out = current_step(env, torch.zeros(batch), torch.zeros(batch, dtype=torch.bool), env.state.score)
        obs = out.obs.numpy().astype(np.uint8)
        for b in np.flatnonzero(finished):
            if started < n_games:
                started += 1
                games[b].new_game(env.state.deck[b].numpy())
                _compare(out, obs, b, games[b], f"game slot {b} initial")
            else:
                active[b] = False
    for g in games:
        g.close()
    return stats
