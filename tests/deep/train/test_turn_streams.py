"""Turn streams (``ppo.turn_streams``): the actor streams the update draws its Hanabi minibatches from. Checked
on games of random lengths written out step by step (P = 2-4 seats, each game starting with seat 0) and on a
learner's Hanabi rollout: stream r acts at exactly the steps t = r (mod P), the P streams of a game slot read
its P seats at every step, and a stream changes seat only where a game starts. ``update.select`` with a
per-step index equals the entry-by-entry gather."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.train import Learner
from ers_deep.train.ppo import turn_streams
from ers_deep.train.update import select
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config


def _games(
    P: int, T: int, B: int, lengths: list[int], offsets: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(acting [1, T, B P], first [1, T, B]): slot b's first game is ``offsets[b]`` steps old at t = 0, later
    games last ``lengths`` (cycled) steps; seat 0 moves first in every game, then the seats in turn."""
    acting = torch.zeros(1, T, B, P, dtype=torch.bool)
    first = torch.zeros(1, T, B, dtype=torch.bool)
    k = 0
    for b in range(B):
        turn, left = offsets[b], lengths[k % len(lengths)] + offsets[b]
        for t in range(T):
            if left == 0:  # a new game starts at t
                turn, left, k = 0, lengths[k % len(lengths)], k + 1
                first[0, t, b] = True
            acting[0, t, b, turn % P] = True
            turn, left = turn + 1, left - 1
    return acting.view(1, T, B * P), first


def _assert_turn_streams(streams: torch.Tensor, acting: torch.Tensor, first: torch.Tensor, P: int) -> None:
    S, T, N = acting.shape
    B = N // P
    t = torch.arange(T).view(1, T, 1)
    r = torch.arange(N).view(1, 1, N) % P
    assert torch.equal(acting.gather(2, streams), (t % P == r).expand(S, T, N))  # acts at t = r (mod P)
    slots = streams.view(S, T, B, P)
    assert torch.equal(slots // P, torch.arange(B).view(1, 1, B, 1).expand(S, T, B, P))  # its own game slot
    assert torch.equal(slots.sort(-1).values % P, torch.arange(P).expand(S, T, B, P))  # all P seats
    same = streams[:, 1:] == streams[:, :-1]  # a seat change only where a game starts
    starts = first[:, 1:].repeat_interleave(P, dim=2) if first.shape[2] == B else first[:, 1:]
    assert bool((same | starts).all())


@settings(max_examples=60, deadline=None)
@given(
    P=st.integers(2, 4),
    periods=st.integers(1, 6),
    B=st.integers(1, 4),
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    offsets=st.lists(st.integers(0, 5), min_size=4, max_size=4),
)
def test_streams_act_in_turn_and_follow_one_seat_per_game(
    P: int, periods: int, B: int, lengths: list[int], offsets: list[int]
) -> None:
    T = P * periods
    acting, first = _games(P, T, B, lengths, offsets[:B])
    _assert_turn_streams(turn_streams(acting, P), acting, first, P)


def test_streams_of_a_hanabi_rollout() -> None:
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    learner.collect()
    ro, _ = learner.collect()
    assert bool(ro.first[:, 1:].any()), "the rollout should hold a game start"
    _assert_turn_streams(turn_streams(ro.acting, 2), ro.acting, ro.first, 2)


def test_select_by_turn_streams_reads_entry_by_entry() -> None:
    g = torch.Generator().manual_seed(3)
    S, T, N, M = 2, 6, 8, 3
    data = {
        "acting": torch.rand(S, T, N, generator=g) < 0.5,
        "obs": torch.randn(S, T, N, 4, generator=g),
        "adv": torch.randn(S, T, N, generator=g),
        "hidden0/gru": torch.randn(S, N, 5, generator=g),
    }
    idx = torch.randint(0, N, (S, T, M), generator=g)
    mb = select(data, idx)
    for s in range(S):
        for m in range(M):
            assert torch.equal(mb["hidden0/gru"][s, m], data["hidden0/gru"][s, idx[s, 0, m]])
            for t in range(T):
                for k in ("acting", "obs", "adv"):
                    assert torch.equal(mb[k][s, t, m], data[k][s, t, idx[s, t, m]])
    assert mb["obs"].shape == (S, T, M, 4)
