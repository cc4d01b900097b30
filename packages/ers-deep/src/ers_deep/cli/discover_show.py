"""The readable text of ``ers-deep discover``'s result (``show_discover``): one line per kept phi (its
score on Pi', action map, distance, nearest transformation or permutation, the exact verdict on tabular games or the
known Dec-POMDP symmetry matched on Hanabi and Overcooked V2) and Table 2's metrics."""

from __future__ import annotations

import math
import os
from typing import Any

__all__ = ["show_discover"]


def _perm(values: list[int]) -> str:
    return " ".join(str(v) for v in values)


def _nearest_text(t: dict[str, Any]) -> str:
    """The exact transformation (tabular) or the nearest observation permutation, compactly."""
    exact = t.get("nearest")
    if exact is not None:
        acts, obs = exact["actions"], exact["observations"]
        if all(a == acts[0] for a in acts) and all(o == obs[0] for o in obs):
            return f"A({_perm(acts[0])}) O({_perm(obs[0])})"
        return "; ".join(f"A{i}({_perm(a)}) O{i}({_perm(o)})" for i, (a, o) in enumerate(zip(acts, obs)))
    perm = t.get("obs_permutation")
    if perm is None:
        return "-"
    moved = sum(1 for k, p in enumerate(perm) if k != p)
    return "identity" if moved == 0 else f"permutation moving {moved} of {len(perm)} entries"


def _known_text(known: dict[str, Any] | None) -> str:
    """The known Dec-POMDP symmetry the rounding equals, or the nearest and on what it differs."""
    if known is None:
        return "-"
    agreement = known.get("agreement")
    share = "-" if agreement is None else f"{agreement:.3f}"
    if known.get("match") is not None:
        return f"{known['match']} ({share} of {known['varying']} varying)"
    actions = "" if known.get("same_actions") else ", other actions"
    return f"none (nearest {known['name']}: {share} of {known['varying']} varying{actions})"


def _yes(v: object) -> str:
    return "-" if v is None else ("yes" if v else "no")


def show_discover(res: dict[str, Any]) -> None:
    cfg = res["config"]
    disc = cfg.get("discovery", {})
    print(
        f"deep discovery on {res['game']} ({res['algorithm']}): {disc.get('candidates', '?')} candidates "
        f"trained, {len(res['transformations'])} kept, {res.get('seconds', math.nan):.1f} s, "
        f"entropy {cfg.get('entropy', math.nan):g}, scores {cfg.get('scoring', '?')}"
    )
    print(
        f"  trained on {', '.join(cfg.get('trained_on', []))}; held out {', '.join(cfg.get('held_out', []))}"
    )
    exact = cfg.get("exact") or [None] * len(res["transformations"])
    on_train = "on Pi'"  # the score that ranked the candidates (on the policies phi trained on)
    header = f"  {'#':>2}  {'name':<8} {on_train:>9}  {'action map':<14} {'distance':>9}  {'nearest':<28}"
    if cfg.get("exact") is not None:
        header += f"  {'admissible':>10} {'Dec-POMDP':>9} {'ER':>4} {'exact mean J':>12}"
    known = any(t.get("known") is not None for t in res["transformations"])
    if known:
        header += "  known Dec-POMDP symmetry (features agreeing)"
    print(header)
    for r, (t, score, e) in enumerate(zip(res["transformations"], res["scores"], exact)):
        dist = t.get("distance")
        line = (
            f"  {r:>2}  {t['name']:<8} {score:>9.3f}  {'(' + _perm(t['action_map']) + ')':<14} "
            f"{'-' if dist is None else format(dist, '9.2e'):>9}  {_nearest_text(t):<28}"
        )
        if e is not None:
            mean = e.get("mean_return")
            line += (
                f"  {_yes(e['admissible']):>10} {_yes(e['decpomdp_symmetry']):>9} {_yes(e['er_symmetry']):>4} "
                f"{'-' if mean is None else format(mean, '12.6f'):>12}"
            )
        if known:
            line += f"  {_known_text(t.get('known'))}"
        print(line)
    print(
        f"pool return {res['pool_return']:.3f}; Table 2 on the held-out policies (their return "
        f"{res['config'].get('held_out_return', float('nan')):.3f}): J_1 {res['J_1']:.3f}, "
        f"J_2 {res['J_2']:.3f}, J_3 {res['J_3']:.3f}, reconstruction loss {res['reconstruction_loss']:.4f}"
    )
    if "files" in res:
        print("files: " + ", ".join(os.fspath(f) for f in res["files"].values()))
