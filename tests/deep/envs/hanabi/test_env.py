"""Behaviour of the batched env beyond HLE equality: errors, seeding, auto-reset, resets, dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ers_deep.envs import HanabiConfig, HanabiEnv, IllegalMoveError
from ers_deep.envs.hanabi.hle import HLEGame
from tests.deep.envs.hanabi.differential import biased_moves


def _random_legal(env: HanabiEnv, gen: torch.Generator) -> torch.Tensor:
    return (torch.rand(env.batch_size, env.num_moves, generator=gen) * env.current_legal).argmax(1)


def test_illegal_move_names_game_and_move() -> None:
    env = HanabiEnv(batch_size=4, seed=0)
    actions = env.current_legal.float().argmax(1)
    actions[2] = 0  # discarding with all 8 information tokens is illegal
    with pytest.raises(IllegalMoveError, match=r"illegal move 0 \(Discard 0\) in game 2 for player 0"):
        env.step(actions)
    actions[2] = 99
    with pytest.raises(IllegalMoveError, match=r"illegal move 99 .*game 2"):
        env.step(actions)
    env.step(env.current_legal.float().argmax(1))  # the env is still usable


def test_finished_game_without_auto_reset_refuses_moves() -> None:
    cfg = HanabiConfig.preset("very-small")
    env = HanabiEnv(cfg, batch_size=2, seed=0, auto_reset=False)
    gen = torch.Generator().manual_seed(0)
    while not env.state.done.any():
        env.step(_random_legal(env, gen))
    with pytest.raises(IllegalMoveError, match="is over"):
        env.step(_random_legal(env, gen))


def test_hle_adapter_refuses_illegal_moves_without_aborting() -> None:
    game = HLEGame()
    game.new_game(HanabiConfig().full_deck())
    with pytest.raises(IllegalMoveError, match="Discard 0"):
        game.step(0)
    with pytest.raises(ValueError, match="no copy left"):
        game.new_game(np.zeros(50, dtype=np.int64))
    game.close()


def test_seeded_deals_are_reproducible() -> None:
    gen_a, gen_b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a, b = HanabiEnv(batch_size=16, seed=7), HanabiEnv(batch_size=16, seed=7)
    assert torch.equal(a.state.deck, b.state.deck)
    for _ in range(60):
        oa, ob = a.step(_random_legal(a, gen_a)), b.step(_random_legal(b, gen_b))
        assert torch.equal(oa.obs, ob.obs) and torch.equal(oa.reward, ob.reward)
    assert not torch.equal(
        HanabiEnv(batch_size=16, seed=8).state.deck, HanabiEnv(batch_size=16, seed=7).state.deck
    )
    assert torch.equal(a.reset(seed=3).obs, b.reset(seed=3).obs)


def test_decks_are_permutations_of_the_full_deck() -> None:
    cfg = HanabiConfig(players=3)
    env = HanabiEnv(cfg, batch_size=64, seed=0)
    full = torch.as_tensor(cfg.full_deck())
    assert torch.equal(env.state.deck.sort(1).values, full.expand(64, -1))
    assert torch.equal(env.state.hand.reshape(64, -1), env.state.deck[:, :15])


def test_auto_reset_reports_the_finished_game_and_deals_a_new_one() -> None:
    env = HanabiEnv(batch_size=32, seed=0)
    gen = torch.Generator().manual_seed(0)
    fresh = HanabiEnv(batch_size=1, seed=0).reset().obs[0]
    seen = 0
    for _ in range(80):
        score_before = env.state.score.clone()
        out = env.step(_random_legal(env, gen))
        for b in out.done.nonzero().flatten().tolist():
            seen += 1
            assert float(out.reward[b]) == int(out.score[b]) - int(score_before[b])
            assert int(env.state.moves[b]) == 0 and int(out.cur_player[b]) == 0
            # a new deal: hands differ, but the board part of the vector is the initial one
            assert torch.equal(out.obs[b, :, 127:308], fresh[:, 127:308])
    assert seen > 10


def test_losing_the_last_life_loses_all_points() -> None:
    cfg = HanabiConfig.preset("very-small")  # one colour, 5 ranks, hand 2, 1 life
    deck = torch.tensor([[0, 1, 0, 2, 0, 1, 2, 3, 3, 4]])  # P0: R1 R2, P1: R1 R3, then the draw pile
    env = HanabiEnv(cfg, batch_size=1, auto_reset=False)
    env.reset(decks=deck)
    out = env.step(torch.tensor([2]))  # P0 plays R1: +1
    assert (float(out.reward[0]), bool(out.done[0]), int(out.score[0])) == (1.0, False, 1)
    out = env.step(torch.tensor([2]))  # P1 plays R1 again: bomb on the last life
    assert (float(out.reward[0]), bool(out.done[0]), int(out.score[0])) == (-1.0, True, 0)
    game = HLEGame(cfg)
    game.new_game(deck[0].numpy())
    assert game.step(2) == (1.0, False) and game.step(2) == (-1.0, True)
    game.close()


def test_bad_decks_are_rejected() -> None:
    env = HanabiEnv(batch_size=2)
    with pytest.raises(ValueError, match="shape"):
        env.reset(decks=torch.zeros(2, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="permutation"):
        env.reset(decks=torch.zeros(2, 50, dtype=torch.long))


@pytest.mark.parametrize("branch_free", [False, True])
def test_given_decks_are_copied(branch_free: bool) -> None:
    """``reset(decks=...)`` keeps a copy: a later ``reset_games`` writes neither the caller's tensor nor, for
    an expanded one (every row one memory), the decks of the games it does not reset."""
    cfg = HanabiConfig()
    env = HanabiEnv(cfg, batch_size=2, seed=0, auto_reset=False, branch_free=branch_free)
    deck = torch.as_tensor(cfg.full_deck())
    decks = torch.stack([deck, deck.flip(0)])
    env.reset(decks=decks)
    env.reset_games(torch.tensor([True, False]))
    assert torch.equal(decks, torch.stack([deck, deck.flip(0)]))
    shared = deck.clone().expand(2, -1)
    env.reset(decks=shared)
    env.reset_games(torch.tensor([True, False]))
    assert torch.equal(shared[0], deck) and torch.equal(env.state.deck[1], deck)
    assert not torch.equal(env.state.deck[0], deck)  # game 0 has a new deal


@pytest.mark.parametrize("branch_free", [False, True])
def test_reset_games_only_touches_masked_games(branch_free: bool) -> None:
    # branch_free exercises the sync-free torch.where path used on GPUs
    env = HanabiEnv(batch_size=8, seed=0, branch_free=branch_free)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        env.step(_random_legal(env, gen))
    before = env.state.clone()
    mask = torch.tensor([True, False] * 4)
    env.reset_games(mask)
    s = env.state
    assert (s.moves[mask] == 0).all() and (s.moves[~mask] == 3).all()
    assert torch.equal(s.hand[~mask], before.hand[~mask]) and torch.equal(
        s.knowledge[~mask], before.knowledge[~mask]
    )
    assert (s.info[mask] == 8).all() and (s.deck_pos[mask] == 10).all()
    assert torch.equal(s.hand[mask].reshape(4, -1), s.deck[mask][:, :10])


@pytest.mark.parametrize("branch_free", [False, True])
def test_step_after_reset_games_checks_the_new_deals_moves(branch_free: bool) -> None:
    """``reset_games`` then ``step``: the moves are checked against the new deal, as HLE would (a discard with
    all information tokens is illegal in a fresh game, even where the old game had spent one)."""
    cfg = HanabiConfig()
    env = HanabiEnv(cfg, batch_size=2, seed=0, auto_reset=False, branch_free=branch_free)
    deck = torch.as_tensor(cfg.full_deck())
    env.reset(decks=deck.repeat(2, 1))
    env.step(torch.tensor([10, 10]))  # P0 reveals a colour: 7 tokens left, discards become legal
    env.step(torch.tensor([0, 0]))  # P1 discards slot 0: back to 8 tokens
    env.step(torch.tensor([10, 10]))  # P0 reveals again: 7 tokens
    env.reset_games(torch.tensor([True, False]))  # game 0: a fresh deal with 8 tokens, P0 to move
    game = HLEGame(cfg)
    game.new_game(env.state.deck[0].numpy())
    assert not game.legal_mask()[0, 0]  # HLE: no discard with 8 tokens
    with pytest.raises(IllegalMoveError, match=r"illegal move 0 \(Discard 0\) in game 0"):
        env.step(torch.tensor([0, 5]))  # game 0's discard is illegal (game 1's P1 plays)
    hint = int(game.legal_moves()[-1])  # a move HLE allows in the new deal
    out = env.step(torch.tensor([hint, 5]))
    reward, done = game.step(hint)
    assert np.array_equal(out.obs[0].numpy().astype(np.uint8), game.observations())
    assert (float(out.reward[0]), bool(out.done[0])) == (reward, done)
    game.close()


@pytest.mark.parametrize("branch_free", [False, True])
def test_auto_reset_stays_equal_to_hle(branch_free: bool) -> None:
    """Auto-reset (both reset paths) keeps every game equal to HLE, final scores included."""
    cfg = HanabiConfig()
    env = HanabiEnv(cfg, batch_size=16, seed=3, auto_reset=True, branch_free=branch_free)
    gen = torch.Generator().manual_seed(3)
    games = [HLEGame(cfg) for _ in range(16)]
    for b, g in enumerate(games):
        g.new_game(env.state.deck[b].numpy())
    positive_final = 0
    for _ in range(250):
        moves = biased_moves(env, gen)
        out = env.step(moves)
        for b, g in enumerate(games):
            reward, done = g.step(int(moves[b]))
            assert (float(out.reward[b]), bool(out.done[b]), int(out.score[b])) == (reward, done, g.score)
            if done:
                positive_final += g.score > 0
                g.new_game(env.state.deck[b].numpy())
            assert np.array_equal(out.obs[b].numpy().astype(np.uint8), g.observations())
    assert positive_final > 0


def test_observation_dtype_option() -> None:
    a = HanabiEnv(batch_size=4, seed=0)
    b = HanabiEnv(batch_size=4, seed=0, obs_dtype=torch.uint8)
    ob = b.reset(seed=5).obs
    assert ob.dtype == torch.uint8
    assert torch.equal(a.reset(seed=5).obs.to(torch.uint8), ob)
