"""Policy files: the JSON written by ``optimal --save-policy`` and read by ``value --policy``; the JSON of
``optimal --json`` (where it lists ``policy``), of ``op --json`` and of an ``optimal-set --with-policy`` point
is such a file too.

Format: ``{"game": name, "horizon": H, "policy": [pi^1, ..., pi^n]}`` where pi^i is agent i's
[histories x actions] array of rows on the simplex, indexed like
:class:`~ers_exact.model.histories.LocalHistories`. A bare list ``[pi^1, ..., pi^n]`` is read too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import PolicyError, check_policy
from ers_exact.util.output import FileFormatError, load_json, write_json

__all__ = ["POLICY_FORMAT", "read_policy_file", "write_policy_file"]

POLICY_FORMAT = '{"policy": [one [histories x actions] array per agent]}'
_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def write_policy_file(
    path: str | Path, tree: HistoryTree, policy: tuple[np.ndarray, ...], reads: Sequence[str | Path] = ()
) -> None:
    """Write one joint policy of ``tree``'s game as JSON (see the module docstring), atomically and never
    over a file the command reads (``reads``)."""
    data = {"game": tree.game.name, "horizon": tree.game.horizon, "policy": [p.tolist() for p in policy]}
    write_json(path, data, reads=reads, indent=None)


def read_policy_file(path: str | Path, tree: HistoryTree) -> tuple[np.ndarray, ...]:
    """The joint policy in a JSON file, validated against ``tree`` (shapes, simplex rows, legal actions).

    Raises ``FileNotFoundError`` or :class:`~ers_exact.model.values.PolicyError`, each naming the file."""
    p = Path(path)
    if not p.is_file():
        what = "is a folder" if p.is_dir() else ("is not a regular file" if p.exists() else "no such file")
        where = f"{path}: {what}" if str(path) else "an empty path"
        raise FileNotFoundError(f"{where}; a policy is 'uniform' or a JSON file {POLICY_FORMAT}")
    try:
        data = load_json(p, f"JSON {POLICY_FORMAT}")
    except FileFormatError as err:
        raise PolicyError(str(err)) from None
    if isinstance(data, dict) and "policy" not in data:
        trees = (
            " (an `optimal` result whose search ran without the history tree, its policy as "
            "`policy_trees`: `optimal --save-policy FILE` writes it as a policy file)"
            if "policy_trees" in data
            else ""
        )
        raise PolicyError(f'{path}: the JSON object has no "policy" key{trees}; expected {POLICY_FORMAT}')
    agents = data["policy"] if isinstance(data, dict) else data
    if not isinstance(agents, list):
        raise PolicyError(f"{path}: expected {POLICY_FORMAT}, got {_JSON_TYPES.get(type(agents), 'a value')}")
    leaf = _not_a_number(agents)
    if leaf:  # numpy would read "1" as 1.0 and true as 1.0
        raise PolicyError(
            f"{path}: a policy entry is {json.dumps(leaf[0])}, not a number; expected {POLICY_FORMAT}"
        )
    try:
        arrays, batched = check_policy(tree, agents)
    except PolicyError as err:
        raise PolicyError(f"{path}: {err}{_written_for(data, tree)}") from None
    if batched:
        raise PolicyError(f"{path}: holds a batch of {arrays[0].shape[0]} policies per agent; give one")
    other = _written_for(data, tree)
    if other:  # its tables fit another game's: refuse rather than evaluate it here
        raise PolicyError(
            f"{path}: a policy of another game{other}; to evaluate its tables on this game "
            'anyway, remove its "game" and "horizon" keys'
        )
    # rows are accepted within 1e-6 of a distribution (decimal files); evaluate the distributions they round,
    # not a mass of 1 + 1e-7 (which put J above J*): clipped at 0 and divided by their sums
    rows = [np.clip(a[0], 0.0, None) for a in arrays]
    return tuple(r / r.sum(axis=1, keepdims=True) for r in rows)


def _not_a_number(value: Any) -> tuple[Any, ...]:
    """``(entry,)``: an entry of nested JSON lists that is not a number (a string, a boolean, null); else ()."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            return (v,)
    return ()


def _written_for(data: Any, tree: HistoryTree) -> str:
    """A hint when the file says it was written for another game or horizon (each compared where recorded)."""
    if not isinstance(data, dict) or "game" not in data:
        return ""
    game, horizon = data.get("game"), data.get("horizon", tree.game.horizon)
    if (game, horizon) == (tree.game.name, tree.game.horizon):
        return ""
    return f" (the file was written for {game} H={horizon}; this is {tree.game.name} H={tree.game.horizon})"
