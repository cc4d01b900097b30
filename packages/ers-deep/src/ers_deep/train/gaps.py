"""The updates a resumed run's metrics.csv lacks (rows lost or deleted before the checkpoint it resumes from).

``resume`` re-runs only the updates after its checkpoint: a row of an update at or below it that is missing
(metrics.csv deleted, edited, or restored from an older copy) stays missing, and the learning curve has a gap
there. ``resume`` warns on stderr naming them (``gap_warning``) and continues: the learner's state is the
checkpoint's, whole, and no run could write those rows again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["gap_warning", "missing_updates"]


def missing_updates(rows: Iterable[Sequence[str]], update: int, seeds: Sequence[int]) -> list[int]:
    """The updates 1..``update`` of which metrics.csv's ``rows`` (its columns update, env_steps, seed, ...,
    header left out) lack a row of some seed in ``seeds``, ascending."""
    have = {(r[0], r[2]) for r in rows if len(r) > 2}
    return [u for u in range(1, update + 1) if any((str(u), str(s)) not in have for s in seeds)]


def _spans(updates: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    spans: list[list[int]] = []
    for u in updates:
        if spans and u == spans[-1][1] + 1:
            spans[-1][1] = u
        else:
            spans.append([u, u])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def gap_warning(path: object, updates: list[int], update: int) -> str | None:
    """The warning ``resume`` prints for the ``updates`` missing from metrics.csv ``path`` (None: no gap)."""
    if not updates:
        return None
    n = len(updates)
    return (
        f"resume: warning: {path} lacks the rows of update{'s' if n > 1 else ''} {_spans(updates)} (of the "
        f"{update} up to the checkpoint resumed from): the learning curve has a gap there; training continues "
        "from the checkpoint"
    )
