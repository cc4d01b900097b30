"""Conditional action matrices (the paper's appendix "Interpretability of Hanabi OP Agents"):

    M[b, a] = P(a_t^i = a | a_{t-1}^j = b),    i the acting player at step t, j != i a player who acted at t-1,

estimated over self-play games of one policy (every seat the same frozen pi, sampled actions). In Hanabi
(turn-based, two players) j is the player who moved just before i; in simultaneous-move envs (Overcooked V2,
tabular games) every player acts at every step, so each ordered pair (i, j) of seats counts. Row b is the
distribution of the next move given the partner's move b; ``counts`` keeps the raw numbers, and a row whose
conditioning move never occurred has no distribution (NaN in memory, ``null`` in JSON). Steps t = 0 of an
episode have no previous move and are not counted; only each game's first episode is played.

Labels: Hanabi moves as short hints (``discard 0``, ``play 1``, ``hint R``, ``hint 3``, from
``HanabiConfig.describe_move``), Overcooked V2's six actions, a tabular game's own action names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ers_deep.pools import Policy
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.evaluate import Agent, play
from ers_exact.util.output import save_figure

__all__ = ["OVERCOOKED_ACTIONS", "action_labels", "action_matrix", "matrix_figure", "record_actions"]

#: Overcooked V2's actions in their index order (``ers_deep.envs.overcooked_v2.env``)
OVERCOOKED_ACTIONS = ("right", "down", "left", "up", "stay", "interact")


def _hanabi_label(text: str) -> str:
    """``(Reveal player +1 rank 3)`` -> ``hint 3``; ``(Play 1)`` -> ``play 1``; ``(Discard 0)`` -> ``discard 0``."""
    hint = re.match(r"\(Reveal player \+(\d+) (?:color|rank) (\w+)\)", text)
    if hint:
        return f"hint {hint.group(2)}" + ("" if hint.group(1) == "1" else f" (+{hint.group(1)})")
    return text.strip("()").lower()


def action_labels(config: TrainConfig) -> list[str]:
    """A short name per action id of the env of ``config`` (module docstring)."""
    if config.env == "hanabi":
        from ers_deep.envs.hanabi import HanabiConfig

        cfg = HanabiConfig.preset(config.hanabi_preset, players=2)
        return [_hanabi_label(cfg.describe_move(m)) for m in range(cfg.num_moves)]
    if config.env == "overcooked-v2":
        return list(OVERCOOKED_ACTIONS)
    from ers_exact.games import load_game

    names = load_game(config.game_spec).action_names
    A = max(len(n) for n in names)
    return [
        "/".join(dict.fromkeys(n[a] for n in names if a < len(n))) for a in range(A)
    ]  # one name when the agents agree


@torch.no_grad()
def record_actions(
    policy: Policy, games: int, *, seed: int = 0, greedy: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Self-play of ``policy`` in every seat for the first episode of ``games`` games: (actions [T, B, P],
    acting [T, B, P] bool: the player moved, counted [T, B] bool: the step belongs to the first episode)."""
    actions: list[torch.Tensor] = []
    acting: list[torch.Tensor] = []
    counted: list[torch.Tensor] = []

    def keep(joint: torch.Tensor, moves: torch.Tensor, running: torch.Tensor) -> None:
        actions.append(joint.cpu())
        acting.append(moves.cpu())
        counted.append(running.cpu())

    seats = make_env(policy.config, 1, seed=0).num_agents
    play([Agent(policy.net)] * seats, policy.config, games, greedy=greedy, seed=seed, record=keep)
    return torch.stack(actions).numpy(), torch.stack(acting).numpy(), torch.stack(counted).numpy()


def _rows(counts: np.ndarray) -> np.ndarray:
    """Row-normalised counts; NaN rows where the conditioning move never occurred."""
    total = counts.sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / np.maximum(total, 1), np.nan)


def _null(m: np.ndarray) -> list[list[float | None]]:
    return [[None if math.isnan(v) else float(v) for v in row] for row in m]


def action_matrix(policy: Policy, games: int, *, seed: int = 0, greedy: bool = False) -> dict[str, Any]:
    """P(a_t^i | a_{t-1}^j) of ``policy`` over ``games`` self-play games (module docstring): ``probabilities``
    [A, A] (rows: the partner's previous move b, columns: the move a), ``counts``, ``row_counts``,
    ``labels``, ``by_seat`` (the counts of each ordered seat pair ``"j->i"``), ``transitions`` (their total)
    and ``moves`` (every move played in the counted steps)."""
    actions, acting, counted = record_actions(policy, games, seed=seed, greedy=greedy)
    T, _, P = actions.shape
    A = make_env(policy.config, 1, seed=0).num_actions
    counts = np.zeros((A, A), dtype=np.int64)
    by_seat: dict[str, list[list[int]]] = {}
    # step t counts when it and t-1 are in the game's first episode (t = 0 of an episode: no previous move)
    valid = counted[1:] & counted[:-1]
    for i in range(P):
        for j in range(P):
            if i == j:
                continue
            mask = valid & acting[1:, :, i] & acting[:-1, :, j]
            prev, now = actions[:-1, :, j][mask], actions[1:, :, i][mask]
            pair = np.bincount(prev * A + now, minlength=A * A).reshape(A, A)
            by_seat[f"{j}->{i}"] = pair.tolist()
            counts += pair
    return {
        "policy": policy.name,
        "labels": action_labels(policy.config),
        "probabilities": _null(_rows(counts)),
        "counts": counts.tolist(),
        "row_counts": counts.sum(1).tolist(),
        "by_seat": by_seat,
        "transitions": int(counts.sum()),
        "moves": int((acting & counted[..., None]).sum()),
        "games": games,
        "steps": T,
        "greedy": greedy,
        "seed": seed,
        "env": policy.config.env,
    }


def matrix_figure(matrices: Sequence[dict[str, Any]], path: str | Path, titles: Sequence[str] = ()) -> Path:
    """One heatmap per matrix side by side: rows the partner's previous move a_{t-1}^j, columns the move
    a_t^i, each row a distribution (grey: the previous move never occurred)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    A = len(matrices[0]["labels"])
    size = 1.6 + 0.32 * A
    fig, axes = plt.subplots(1, len(matrices), figsize=(size * len(matrices), size), dpi=100, squeeze=False)
    for k, (ax, m) in enumerate(zip(axes[0], matrices)):
        probs = np.array([[np.nan if v is None else v for v in row] for row in m["probabilities"]], float)
        ax.set_facecolor("0.85")
        im = ax.imshow(np.ma.masked_invalid(probs), cmap="magma", vmin=0, vmax=1)
        if A <= 12:
            for (r, c), v in np.ndenumerate(probs):
                if not math.isnan(v) and v >= 0.005:
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6,
                            color="k" if v > 0.5 else "w")  # fmt: skip
        ax.set_xticks(range(A), m["labels"], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(A), m["labels"], fontsize=7)
        ax.set_xlabel(r"$a_t^i$ (acting player)", fontsize=8)
        ax.set_ylabel(r"$a_{t-1}^j$ (partner's previous move)", fontsize=8)
        ax.set_title(titles[k] if k < len(titles) else m["policy"], fontsize=8)
        fig.colorbar(im, ax=ax, shrink=0.7)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)
