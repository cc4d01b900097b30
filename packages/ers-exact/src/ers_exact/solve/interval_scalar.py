"""The scalar interval enclosure of M over a box (or with :class:`~ers_exact.solve.interval.IDual` inputs, of M
and its Jacobian): a plain, slow, rigorous re-evaluation of the Q-gaps over
:class:`~ers_exact.solve.interval.Interval` numbers, including the chance weights b_0 T U. The reference of
:mod:`ers_exact.solve.interval_map` (its vectorised twin on Interval boxes, equal bit for bit) and the
evaluator of the Krawczyk test's Jacobian enclosure (:mod:`ers_exact.solve.certify`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.interval import IDual, Interval

__all__ = ["interval_logit_map", "structure"]


def _exp(x: Any) -> Any:
    return x.exp() if isinstance(x, (Interval, IDual)) else Interval(x).exp()


def structure(coords: LogitCoordinates) -> dict[str, Any]:
    """Interval chance weights, interval rewards and index lists, built once per tree."""
    return coords.tree.derived("certify.interval", lambda: _build_structure(coords.tree))


def _build_structure(tree: HistoryTree) -> dict[str, Any]:
    game = tree.game
    S, A = game.n_states, game.n_joint_actions
    T, U, R = game.transition, game.observation, game.reward
    er = [
        [
            sum(
                (Interval(T[s, a, s2]) * Interval(R[s, a, s2]) for s2 in range(S) if T[s, a, s2] != 0),
                Interval(0.0),
            )
            for a in range(A)
        ]
        for s in range(S)
    ]
    weights = [[[Interval(float(b)) for b in game.initial_belief]]]
    for t in range(1, len(tree.layers)):
        layer, prev = tree.layers[t], weights[-1]
        weights.append(
            [
                [
                    sum(
                        (
                            prev[p][s] * Interval(T[s, a, s2]) * Interval(U[a, s2, o])
                            for s in range(S)
                            if T[s, a, s2] != 0
                        ),
                        Interval(0.0),
                    )
                    for s2 in range(S)
                ]
                for p, a, o in zip(layer.parent, layer.action, layer.observation)
            ]
        )
    children: list[dict[tuple[int, int], list[int]]] = []
    for t in range(len(tree.layers)):
        kids: dict[tuple[int, int], list[int]] = {}
        if t + 1 < len(tree.layers):
            nxt = tree.layers[t + 1]
            for c, (p, a) in enumerate(zip(nxt.parent, nxt.action)):
                kids.setdefault((int(p), int(a)), []).append(c)
        children.append(kids)
    rewards = [
        [[sum((w[s] * er[s][a] for s in range(S)), Interval(0.0)) for a in range(A)] for w in layer_w]
        for layer_w in weights
    ]
    prob = [[sum(w, Interval(0.0)) for w in layer_w] for layer_w in weights]
    return {"rewards": rewards, "prob": prob, "children": children}


def interval_logit_map(coords: LogitCoordinates, ys: list[Any], alpha: float) -> list[Any]:
    """M(y) evaluated on interval-like numbers ``ys`` (Interval or IDual), one per coordinate."""
    tree, game = coords.tree, coords.tree.game
    st = structure(coords)
    n, ja_table = game.n_agents, game.joint_actions
    # pi^i(a | tau) = 1 / sum_b exp(z_b - z_a), z = logits with the reference action at 0
    logits: list[dict[int, dict[int, Any]]] = []
    for hist in tree.local:
        z = {int(k): {int(a): 0.0 for a in np.flatnonzero(hist.legal[k])} for k in range(len(hist))}
        logits.append(z)
    for idx, (i, k, a) in enumerate(coords.labels):
        logits[i][k][a] = ys[idx]
    pol: list[dict[int, dict[int, Any]]] = []
    for z_i in logits:
        pol.append(
            {
                k: {
                    a: 1.0 / sum((_exp(zb - za) if b != a else 1.0) for b, zb in zk.items())
                    for a, za in zk.items()
                }
                for k, zk in z_i.items()
            }
        )
    path = [[[1.0] * n]]
    for t in range(1, len(tree.layers)):
        layer, prev = tree.layers[t], tree.layers[t - 1]
        path.append(
            [
                [path[-1][p][i] * pol[i][int(prev.local[p, i])][int(ja_table[a, i])] for i in range(n)]
                for p, a in zip(layer.parent, layer.action)
            ]
        )
    gain: list[list[dict[int, Any]]] = [None] * len(tree.layers)  # type: ignore[list-item]
    value_next: list[Any] = []
    for t in reversed(range(len(tree.layers))):
        layer, kids = tree.layers[t], st["children"][t]
        g_t, v_t = [], []
        for node in range(len(layer)):
            g_n, v_n = {}, 0.0
            for a in map(int, np.flatnonzero(layer.legal[node])):
                g = st["rewards"][t][node][a] + game.discount * sum(
                    (value_next[c] for c in kids.get((node, a), [])), 0.0
                )
                g_n[int(a)] = g
                p = 1.0
                for i in range(n):
                    p = p * pol[i][int(layer.local[node, i])][int(ja_table[a, i])]
                v_n = v_n + p * g
            g_t.append(g_n)
            v_t.append(v_n)
        gain[t], value_next = g_t, v_t
    return [_gap(tree, pol, path, gain, st, i, k, a, alpha) for i, k, a in coords.labels]


def _gap(
    tree: HistoryTree, pol: Any, path: Any, gain: Any, st: Any, i: int, k: int, a: int, alpha: float
) -> Any:
    """(Q^i(tau, a) - Q^i(tau, ref)) / alpha, as num / den over the joint nodes projecting on tau."""
    game, hist = tree.game, tree.local[i]
    t = int(hist.time[k])
    layer = tree.layers[t]
    ref = int(np.argmax(hist.legal[k]))
    stride = int(np.prod(game.n_actions[i + 1 :]))
    num, den, hull = 0.0, 0.0, None
    for node in np.flatnonzero(layer.local[:, i] == k):
        others = 1.0
        for j in range(game.n_agents):
            if j != i:
                others = others * path[t][node][j]
        inner = 0.0
        for ja, g in gain[t][node].items():
            if int(game.joint_actions[ja, i]) != a:
                continue
            ja_ref = ja + (ref - a) * stride
            if ja_ref not in gain[t][node]:
                continue
            w = 1.0
            for j in range(game.n_agents):
                if j != i:
                    w = w * pol[j][int(layer.local[node, j])][int(game.joint_actions[ja, j])]
            inner = inner + w * (g - gain[t][node][ja_ref])
        num = num + others * inner
        den = den + others * st["prob"][t][node]
        if not isinstance(inner, IDual):  # the gap is a convex combination of inner / prob over nodes
            ratio = inner / st["prob"][t][node] if isinstance(inner, Interval) else Interval(inner)
            hull = ratio if hull is None else Interval(min(hull.lo, ratio.lo), max(hull.hi, ratio.hi))
    scale = Interval(1.0) / Interval(alpha)
    gap = num / den
    if hull is not None and isinstance(gap, Interval):  # the hull avoids the num/den dependency blow-up
        gap = gap.intersect(hull) or hull
    return gap * scale
