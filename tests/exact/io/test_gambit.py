"""ers against Gambit (pygambit 17.x, a test-only dependency) on the .efg export of
:mod:`ers_exact.io.gambit`.

Checked, on every built-in game with H <= 2 (toy-coordination, three-lever, two-lever, handshake,
Dec-Tiger H = 2), Dec-Tiger with gamma = 0.9, and random small games (1-3 agents, legal-action masks,
sparse T / U / b_0, gamma in {1, 0.9}):

* the export: Gambit reads it, has perfect recall, its information sets are in one-to-one correspondence
  with the possible local histories (decoded from every member node's path), each offering exactly the
  legal actions A^i(tau^i);
* values: for random full-support profiles, Gambit's conditional action values divided by gamma^t equal
  ers's reward-to-go Q^i (``local_q_values``) to 1e-9, and every player's Gambit payoff equals J;
* agent logit QRE: Gambit's point at lambda = 1 / alpha (alpha in {0.25, 0.5, 1}) is a Boltzmann fixed
  point pi^i = softmax(Q^i_pi / alpha) of ers's Q^i to 1e-6 -- on gamma = 1 games only; for gamma < 1
  it is the stage-scaled map softmax(gamma^t Q^i / alpha) instead (checked separately).

Tests that only read the exported text run without pygambit; the rest skip when it is not installed.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ers_exact.games import GAMES, get_game
from ers_exact.io.gambit import export_efg, save_efg, to_efg
from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.values import expected_return, local_q_values

from ..gambit_oracle import boltzmann_residual, gambit_qre, load_gambit
from ..strategies import random_game, random_policy

Q_TOL = 1e-9
QRE_TOL = 1e-6
ALPHAS = (0.25, 0.5, 1.0)

# (n_agents, n_states, n_actions, n_observations, horizon, discount, sparsity, reward_kind, legal, seed)
RANDOM_SPECS = {
    "rand-2a-H2": (2, 2, 2, 2, 2, 1.0, 0.3, "float", False, 1),
    "rand-2a-H2-legal": (2, 3, 3, 2, 2, 1.0, 0.3, "grid", True, 2),
    "rand-2a-H3-sparse": (2, 2, 2, 2, 3, 1.0, 0.6, "float", True, 3),
    "rand-3a-H2": (3, 2, 2, 2, 2, 1.0, 0.3, "float", True, 4),
    "rand-1a-H3": (1, 3, 3, 2, 3, 1.0, 0.3, "float", False, 5),
    "rand-2a-H3-disc": (2, 2, 2, 2, 3, 0.9, 0.3, "float", True, 6),
    "rand-2a-H3-onehot": (2, 3, 2, 2, 3, 1.0, 1.0, "grid", True, 7),
}


def _builtin(name: str) -> Game:
    return get_game(name)


def _random(name: str) -> Game:
    n, states, acts, obs, horizon, gamma, sparsity, kind, legal, seed = RANDOM_SPECS[name]
    return random_game(
        np.random.default_rng(seed),
        n_agents=n,
        n_states=states,
        n_actions=acts,
        n_observations=obs,
        horizon=horizon,
        discount=gamma,
        sparsity=sparsity,
        reward_kind=kind,
        legal=legal,
        name=name,
    )


BUILTINS = sorted(k for k in GAMES if get_game(k).horizon <= 2)


def _odd_names() -> Game:
    """Names that need escaping (quote) or the exporter's fallback labels (backslash, non-ASCII)."""
    return replace(
        get_game("two-lever"), name='odd "game" \\ name', action_names=(('L"1', "L2"), ("L\\1", "\u00e9"))
    )


GAME_FACTORIES = {
    **{k: (lambda k=k: _builtin(k)) for k in BUILTINS},
    "dectiger-gamma0.9": lambda: get_game("dectiger").with_discount(0.9),
    "two-lever-odd-names": _odd_names,
    **{k: (lambda k=k: _random(k)) for k in RANDOM_SPECS},
}
UNDISCOUNTED = [k for k in GAME_FACTORIES if GAME_FACTORIES[k]().discount == 1.0]


@pytest.fixture(scope="module")
def gbt():
    return pytest.importorskip(
        "pygambit",
        reason="pygambit (test-only oracle) is not installed; "
        "`pip install -c constraints.txt pygambit==17.0.0b2`",
    )


_TREES: dict[str, HistoryTree] = {}
_GAMBIT: dict[str, object] = {}


def _tree(name: str) -> HistoryTree:
    if name not in _TREES:
        _TREES[name] = enumerate_histories(GAME_FACTORIES[name]())
    return _TREES[name]


def _gambit(name: str):
    if name not in _GAMBIT:
        _GAMBIT[name] = load_gambit(_tree(name))
    return _GAMBIT[name]


# ----- the text alone (no pygambit) -----
@pytest.mark.parametrize("name", sorted(GAME_FACTORIES))
def test_export_text_structure(name: str, tmp_path: Path) -> None:
    tree = _tree(name)
    export = export_efg(tree)
    lines = export.text.splitlines()
    assert lines[0].startswith("EFG 2 R ")
    infosets = [set() for _ in range(tree.game.n_agents)]
    for line in lines[3:]:
        kind = line[0]
        assert kind in "cpt", line
        if kind == "p":
            _, _, player, number, _ = line.split(" ", 4)
            infosets[int(player) - 1].add(int(number) - 1)
        if kind == "c":  # chance probabilities sum to exactly one, all positive
            body = line[line.index("{") + 1 : line.index("}")].split()
            probs = [Fraction(tok) for tok in body[1::2]]
            assert sum(probs) == 1 and min(probs) > 0, line
    assert [sorted(s) for s in infosets] == [list(range(k)) for k in tree.n_histories]
    assert export.n_nodes == len(lines) - 3
    assert export.max_prob_adjustment < 1e-15
    assert to_efg(tree) == export.text == to_efg(tree.game)
    if name == "two-lever-odd-names":
        assert export.action_labels == (('L"1', "L2"), ("a0", "a1"))
        assert lines[0] == 'EFG 2 R "odd \\"game\\" / name" { "P1" "P2" }'
    path = tmp_path / f"{name}.efg"
    assert save_efg(tree, path).text == path.read_text()


# ----- values -----
@pytest.mark.parametrize("name", sorted(GAME_FACTORIES))
def test_infosets_are_possible_local_histories(gbt, name: str) -> None:
    gg = _gambit(name)  # load_gambit decodes every member node of every set
    tree = gg.tree
    assert gg.game.is_perfect_recall
    for i, sets in enumerate(gg.infosets):
        ks = [k for _, k, _ in sets]
        assert sorted(ks) == list(range(len(tree.local[i]))), f"agent {i}: infosets != local histories"
        for _, k, acts in sets:
            legal = [gg.export.action_labels[i][a] for a in np.flatnonzero(tree.local[i].legal[k])]
            assert list(acts) == legal


@pytest.mark.parametrize("name", sorted(GAME_FACTORIES))
def test_q_values_and_return_match_gambit(gbt, name: str) -> None:
    gg = _gambit(name)
    tree = gg.tree
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for kind in ("uniform", "full", "boltzmann"):
        policy = random_policy(rng, tree, kind)
        profile = gg.profile(policy)
        assert all(np.allclose(a, b, atol=1e-15) for a, b in zip(gg.policy(profile), policy))
        q_ers = local_q_values(tree, policy)
        q_gb = gg.action_values(profile)
        for i, (a, b) in enumerate(zip(q_ers, q_gb)):
            assert np.array_equal(np.isnan(a), np.isnan(b)), f"agent {i}: NaN patterns differ ({kind})"
            np.testing.assert_allclose(b, a, rtol=0, atol=Q_TOL, err_msg=f"{name}, agent {i}, {kind}")
        j = expected_return(tree, policy)
        for pay in gg.payoffs(profile):
            assert abs(pay - j) <= Q_TOL, (name, kind, pay, j)


def _own_reach(tree: HistoryTree, agent: int, policy: np.ndarray) -> np.ndarray:
    """prod_k pi^i(a^i_k | tau^i_k) along each local history of ``agent``.  # [K_i]"""
    hist = tree.local[agent]
    reach = np.ones(len(hist))
    for k in range(len(hist)):  # parents precede children
        if hist.parent[k] >= 0:
            reach[k] = reach[hist.parent[k]] * policy[hist.parent[k], hist.action[k]]
    return reach


@pytest.mark.parametrize("name", sorted(GAME_FACTORIES))
def test_q_values_match_gambit_on_sparse_policies(gbt, name: str) -> None:
    """Policies with zeros: ers's Q^i is defined wherever pi^{-i} reaches tau^i (own probabilities
    cancel); Gambit's action values only where the whole profile reaches the set (None elsewhere).
    Where both are defined they agree."""
    gg = _gambit(name)
    tree = gg.tree
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    for kind in ("sparse", "deterministic"):
        policy = random_policy(rng, tree, kind)
        profile = gg.profile(policy)
        for i, (a, b) in enumerate(zip(local_q_values(tree, policy), gg.action_values(profile))):
            own_zero = (_own_reach(tree, i, policy[i]) == 0)[:, None]
            assert np.array_equal(np.isnan(b), np.isnan(a) | (own_zero & tree.local[i].legal)), (name, i)
            both = ~np.isnan(b)
            np.testing.assert_allclose(b[both], a[both], rtol=0, atol=Q_TOL, err_msg=f"{name}, agent {i}")
        j = expected_return(tree, policy)
        assert all(abs(pay - j) <= Q_TOL for pay in gg.payoffs(profile))


def test_gambit_values_are_discounted_reward_to_go(gbt) -> None:
    """Unscaled Gambit values on a gamma < 1 game are gamma^t Q^i (not Q^i, not total return)."""
    gg = _gambit("dectiger-gamma0.9")
    tree = gg.tree
    policy = random_policy(np.random.default_rng(7), tree, "full")
    raw = gg.action_values(gg.profile(policy), rescale=False)
    q = local_q_values(tree, policy)
    for i, hist in enumerate(tree.local):
        later = hist.time == 1
        np.testing.assert_allclose(raw[i][later], 0.9 * q[i][later], atol=Q_TOL)
        assert np.nanmax(np.abs(raw[i][later] - q[i][later])) > 1e-3


# ----- agent logit QRE -----
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("name", sorted(UNDISCOUNTED))
def test_gambit_qre_is_boltzmann_fixed_point(gbt, name: str, alpha: float) -> None:
    gg = _gambit(name)
    tree = gg.tree
    qre = gambit_qre(tree, alpha, gg)
    assert abs(qre.lam - 1.0 / alpha) < 1e-8 * max(1.0, 1.0 / alpha)
    for pol, hist in zip(qre.policy, tree.local):
        np.testing.assert_allclose(pol.sum(axis=1), 1.0, atol=1e-12)
        assert np.all(pol[hist.legal] > 0) and np.all(pol[~hist.legal] == 0)
    assert boltzmann_residual(tree, qre.policy, alpha) < QRE_TOL


@pytest.mark.parametrize(("name", "alpha"), [("dectiger-gamma0.9", 2.0), ("rand-2a-H3-disc", 0.5)])
def test_gambit_qre_with_discount_is_stage_scaled(gbt, name: str, alpha: float) -> None:
    """For gamma < 1 Gambit's QRE solves pi = softmax(gamma^t Q^i / alpha), not the paper's map
    (alpha chosen so the policy is soft enough for the two maps to differ visibly)."""
    gg = _gambit(name)
    qre = gambit_qre(gg.tree, alpha, gg)
    assert boltzmann_residual(gg.tree, qre.policy, alpha, stage_scaled=True) < QRE_TOL
    assert boltzmann_residual(gg.tree, qre.policy, alpha) > 1e-3


@pytest.mark.slow
def test_dectiger_h3_matches_gambit(gbt) -> None:
    tree = enumerate_histories(get_game("dectiger", horizon=3))
    gg = load_gambit(tree, check_members=False)
    policy = random_policy(np.random.default_rng(3), tree, "full")
    profile = gg.profile(policy)
    for a, b in zip(local_q_values(tree, policy), gg.action_values(profile)):
        np.testing.assert_allclose(b, a, atol=Q_TOL)
    assert abs(gg.payoffs(profile)[0] - expected_return(tree, policy)) < Q_TOL
    qre = gambit_qre(tree, 1.0, gg)
    assert boltzmann_residual(tree, qre.policy, 1.0) < QRE_TOL
