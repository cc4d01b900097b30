"""Checks and parsers shared by the ers-deep commands (devices, envs, seed lists, Hanabi presets), what ers writes
into a pool and a discovery run (their :data:`Layout`: ``--force`` removes only that, and no write there follows a
link), and the learning-curve figure the commands that train draw in each pool."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TypeAlias

import torch

from ers_deep.envs.hanabi.config import PRESET_ALIASES, PRESETS
from ers_deep.train.config import env_problem
from ers_deep.train.games_memory import bytes_per_game, check_games_memory
from ers_exact.util.options import MAX_SEED, UsageError, option
from ers_exact.util.output import MARKER, refuse_linked_folder

__all__ = [
    "DISCOVERY_LAYOUT",
    "POOL_ENTRIES",
    "POOL_LAYOUT",
    "PRESET_NAMES",
    "Layout",
    "Switch",
    "bytes_per_game",
    "check_games_memory",
    "device_check",
    "draw_pool_curve",
    "env_check",
    "folder_kind",
    "foreign_entries",
    "parse_seeds",
    "refuse_foreign_entries",
    "refuse_foreign_run",
    "refuse_links",
    "refuse_non_pool",
    "refuse_unread",
    "require_two_seat_env",
    "require_two_seats",
    "seeds_check",
    "shown_entries",
    "switch",
]

PRESET_NAMES = sorted(PRESETS) + sorted(PRESET_ALIASES)
#: an auto / on / off option (a TrainConfig field's "auto", True or False; None: not given)
Switch = Literal["auto", "on", "off"] | None


def switch(help: str) -> Any:
    """An auto / on / off option with ``help``, shown with its default "auto"."""
    return option(None, help=help, default_value="auto")


#: what only ers-deep discover writes into its --out (discovery-config.json before its training starts; sp-max-reg
#: without --earlier first runs sp-max into OUT/earlier)
_DISCOVERY_FILES = (
    "discovery-config.json",
    "discovery.json",
    "symmetries.safetensors",
    "earlier/discovery-config.json",
)
#: what only ers-deep train-sp / train-op write into theirs (other_play.json: an OP pool, from its start)
_POOL_FILES = ("pool.json", "policies", "runs", "run/other_play.json")

#: what a pool folder holds from its start (a Ray pool: ray-run.json, then runs/): a folder holding one is a pool
POOL_ENTRIES = ("pool.json", "run", "runs", "policies", "ray-run.json")

#: what ers writes into a folder of its own: an entry's name (a glob) -> None for a regular file (its write_atomic
#: temporaries, .NAME.tmp-PID, included) or the layout of a subfolder
Layout: TypeAlias = Mapping[str, "Layout | None"]
#: a training run's folder (ers_deep.train: run/ of a pool or a discovery run; other_play.json: train-op's)
_RUN: Layout = {
    "config.json": None,
    "metrics.csv": None,
    "other_play.json": None,
    "checkpoints": {"update-*.safetensors": None},
    "tensorboard": {"events.out.tfevents.*": None},
}
_DISCOVERY: Layout = dict.fromkeys(
    ("discovery-config.json", "discovery-policies.json", "discovery.json", "symmetries.safetensors")
)
#: an ers-deep discover --out (sp-max-reg without --earlier first runs sp-max into earlier/)
DISCOVERY_LAYOUT: Layout = {**_DISCOVERY, "run": _RUN, "earlier": {**_DISCOVERY, "run": _RUN}}
#: a pool trained in one process (train_pool: also a Ray pool's runs/seed-N and table1's sub-pools)
_ONE_POOL: Layout = {
    "pool.json": None,
    "policies": {"seed-*.safetensors": None},
    "run": _RUN,
    "learning-curve.png": None,
}
#: what train-sp / train-op write into a pool folder (a Ray pool: ray-run.json, runs/seed-N)
_POOL_OWN: Layout = {**_ONE_POOL, "ray-run.json": None, "runs": {"seed-*": _ONE_POOL}}
#: (as cli/analyse.py's) the analyses, whose files share POOL/analysis
_ANALYSES = ("action-matrix", "op-preservation", "xp-distribution")
#: a pool folder: the pool, and the results other commands write into it by default, which describe that pool
#: and go with it on --force: the analyses' POOL/analysis, crossplay's POOL/crossplay, discover's
#: POOL/discovery-ALGORITHM
POOL_LAYOUT: Layout = {
    **_POOL_OWN,
    "analysis": {f"{a}{end}": None for a in _ANALYSES for end in (".json", "-config.json", ".png")},
    "crossplay": dict.fromkeys((MARKER, "xp.json", "xp.png", "report.json")),
    **dict.fromkeys((f"discovery-{a}" for a in ("sp-max", "sp-max-reg", "xp-max")), DISCOVERY_LAYOUT),
}

#: each folder kind: what it is, the command that wrote it, the command that continues it
_KINDS = {
    "pool": ("a pool", "ers-deep train-sp / train-op --out", "ers-deep train-sp / train-op --resume"),
    "discovery": ("a discovery run", "ers-deep discover --out", "ers-deep discover --resume"),
}


def device_check(value: object) -> str | None:
    """A torch device string that exists on this machine (``cpu``, ``cuda``, ``cuda:N``). Apple's ``mps`` is
    refused by name: the games' returns and the tabular envs are float64, which MPS lacks (a run would fail at
    its first evaluation)."""
    try:
        dev = torch.device(str(value))
    except (RuntimeError, ValueError):
        return "is not a torch device (try cpu, cuda, cuda:0)"
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return "needs CUDA, which this machine does not have (use --device cpu)"
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            return f"does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)"
    elif dev.type == "mps":
        return "is not supported: ers-deep's returns and tabular envs are float64, which MPS lacks (use --device cpu)"
    elif dev.type not in ("cpu", "cuda"):
        return "is not supported (use cpu or cuda)"
    return None


def env_check(value: object) -> str | None:
    """``hanabi``, ``overcooked-v2``, ``tabular:NAME`` (a registered ers-exact game) or a .dpomdp file
    (``ers_deep.train.config.env_problem``, which ``paper_config`` checks too)."""
    return env_problem(value)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0-4`` -> (0, 1, 2, 3, 4); ``1,3,7`` -> (1, 3, 7); ``2`` -> (2,)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        a = int(lo)
        b = int(hi) if hi else a
        if a < 0 or b < a or b > MAX_SEED:
            raise ValueError(part)
        out += range(a, b + 1)
    if len(set(out)) != len(out) or not out:
        raise ValueError(text)
    return tuple(out)


def seeds_check(value: object) -> str | None:
    """The options' check of a seed list (``0-4``, ``0,2,5``): None if valid, else what is wrong."""
    try:
        parse_seeds(str(value))
    except ValueError:
        return f"is not a seed list (e.g. 0-4 or 0,2,5: distinct integers in 0 .. {MAX_SEED})"
    return None


def require_two_seats(pool: Any, command: str) -> None:
    """Refuse a pool whose env does not have exactly two seats, for ``command``s that pair two policies
    (cross-play): one line naming the pool, its env and its number of agents."""
    require_two_seat_env(pool.policies[0].config, command, f"{pool.path}: the pool's env")


def require_two_seat_env(config: Any, command: str, where: str) -> None:
    """Refuse, before any work, a ``TrainConfig`` whose env does not have exactly two seats, for ``command``s
    that pair two policies; ``where`` starts the line (e.g. "--env one.dpomdp")."""
    from ers_deep.pools import PoolError
    from ers_deep.train.config import make_env

    seats = make_env(config, 1, seed=0).num_agents
    if seats != 2:
        raise PoolError(
            f"{where} {config.env} has {seats} agent(s), but {command} pairs policies in two seats "
            "(cross-play); use a two-player env"
        )


def refuse_unread(where: str, stray: list[str]) -> None:
    """Refuse the options ``stray`` (their flags, maybe with a note) that ``where`` (the env, e.g. "--env
    hanabi") does not read: ignored, they were recorded or reported as if they had applied."""
    if stray:
        verb = "does not apply to it; drop it" if len(stray) == 1 else "do not apply to it; drop them"
        raise UsageError(f"{where}: {', '.join(stray)} {verb}")


def folder_kind(folder: Path) -> str | None:
    """What an ers-deep run left in ``folder``: "discovery" (an ``ers-deep discover --out``, finished or not),
    "pool" (a ``train-sp`` / ``train-op --out``: pool.json, policies/, runs/, an other-play run, or a run whose
    config.json keeps the pool's ``eval_games``, as a self-play pool killed before its freeze), "run" (only a
    training run's ``run/config.json`` without it: a pool killed before it finished by code older than
    2026-12-06's, or a discovery run killed before it finished by code that did not yet write
    discovery-config.json: either command's own) or None."""
    if any((folder / name).exists() for name in _DISCOVERY_FILES):
        return "discovery"
    if any((folder / name).exists() for name in _POOL_FILES):
        return "pool"
    config = folder / "run" / "config.json"
    if not config.exists():
        return None
    return "pool" if _records_eval_games(config) else "run"


def _records_eval_games(config: Path) -> bool:
    """Whether the run's ``config`` (run/config.json) keeps ``eval_games``, which only a pool's run writes
    (``ers_deep.pools``); an unreadable file keeps nothing."""
    try:
        info = json.loads(config.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and "eval_games" in info


def refuse_foreign_run(folder: Path, own: str, flag: str) -> None:
    """Refuse ``folder`` (given as ``flag``) when it holds the other command's run (``own``: "pool" for train-sp
    and train-op, "discovery" for discover): each command took the other's folder for its own, so ``--force``
    removed it and ``--resume`` read it with the wrong learner."""
    other = "discovery" if own == "pool" else "pool"
    if folder_kind(folder) != other:
        return
    what, writer, resume = _KINDS[other]
    hint = f"continue it with {resume}" if flag == "--resume" else "choose another --out"
    raise UsageError(f"{flag} {str(folder)!r}: holds {what} ({writer}), not {_KINDS[own][0]}; {hint}")


def shown_entries(folder: Path) -> str:
    """What ``folder`` holds, for a refusal: the command its marker names, else its first three entries."""
    from ers_exact.util.output import MARKER, recorded_command

    entries = sorted(p.name for p in folder.iterdir())
    if MARKER in entries:
        return f"holds the results of {recorded_command(folder) or 'another ers command'} ({MARKER})"
    return "is not empty (" + ", ".join(entries[:3]) + (", ...)" if len(entries) > 3 else ")")


def refuse_non_pool(folder: Path) -> None:
    """Refuse a new pool's ``--out`` that is neither missing, empty nor a pool (:data:`POOL_ENTRIES`): another
    command's results folder (census, crossplay, table1, ...: its marker names the command) or files not written
    by ers, which train-sp / train-op wrote the pool beside, and a pool beside entries ers did not write there
    (:func:`refuse_foreign_entries`: ``--force`` removed the whole folder). A pool is left to the training
    (which refuses it unless ``--force``); a discovery run to :func:`refuse_foreign_run`."""
    if not folder.is_dir():
        return
    names = {p.name for p in folder.iterdir()}
    if not names:
        return
    if MARKER not in names and names & set(POOL_ENTRIES):
        refuse_foreign_entries(folder, POOL_LAYOUT, "a pool", "--out")
        return
    raise UsageError(
        f"--out {str(folder)!r}: {shown_entries(folder)}, not a pool; choose a new or empty folder for the pool"
    )


def _scan(folder: Path, layout: Layout, prefix: str, foreign: list[str], links: list[Path]) -> None:
    """Sort the entries under ``folder`` by ``layout``: ``foreign`` gets each one ers does not write there (its
    path relative to the top folder; a link is one, ``NAME (a link)``), ``links`` each link where ers writes."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        foreign.append(f"{prefix or './'} (unreadable: {e.strerror or e})")
        return
    for p in entries:
        temporary = re.fullmatch(r"\.(.+)\.tmp-[1-9][0-9]*", p.name)
        name = temporary[1] if temporary else p.name
        sub = next((sub for glob, sub in layout.items() if fnmatchcase(name, glob)), ...)
        if p.is_symlink():
            foreign.append(f"{prefix}{p.name} (a link)")
            links += [p] if sub is not ... else []
        elif isinstance(sub, Mapping) and temporary is None and p.is_dir():
            _scan(p, sub, f"{prefix}{p.name}/", foreign, links)
        elif not (sub is None and p.is_file()):
            foreign.append(prefix + p.name)


def foreign_entries(folder: Path, layout: Layout) -> list[str]:
    """The entries under ``folder`` that ers does not write into it (``layout``), as paths relative to it in name
    order: a user's files, links (ers writes none), special files; a subfolder ers writes is checked entry by
    entry. Empty: everything there is ers's own, which ``--force`` may remove."""
    foreign: list[str] = []
    _scan(folder, layout, "", foreign, [])
    return foreign


def refuse_foreign_entries(folder: Path, layout: Layout, what: str, flag: str) -> None:
    """Refuse ``flag`` FOLDER, ``what`` (e.g. "a pool") for ``--force`` to replace, when it holds entries ers did
    not write there (:func:`foreign_entries`): ``--force`` removed the whole folder, a thesis beside a ``run/``
    included. One line naming up to three of them; nothing is removed."""
    if folder.is_dir() and (foreign := foreign_entries(folder, layout)):
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise UsageError(
            f"{flag} {str(folder)!r}: holds entries that are not {what}'s ({shown}); --force removes only what "
            "ers wrote: move those or choose another folder"
        )


def refuse_links(folder: Path, layout: Layout, flag: str, reads: Iterable[str | None] = ()) -> None:
    """Refuse ``flag`` FOLDER when writing into it would follow a symbolic link: one where ers writes there
    (``layout``: a received pool's ``pool.json`` pointing at another file was overwritten by ``--resume``, a
    linked ``run/`` written into), or FOLDER itself a link inside a folder of ers or one of ``reads``
    (``refuse_linked_folder``: discover's POOL/discovery-ALGORITHM). A link elsewhere, which the user names as
    the folder (a results folder on another disk), is kept: links are refused only below it."""
    refuse_linked_folder(folder, reads)
    links: list[Path] = []
    if folder.is_dir():
        _scan(folder, layout, "", [], links)
    if links:
        raise UsageError(
            f"{flag} {str(folder)!r}: {links[0]} is a symbolic link; ers writes through no link inside its "
            "folders (remove it)"
        )


def draw_pool_curve(pool: Path, title: str) -> Path | None:
    """``learning-curve.png`` in the pool folder ``pool`` (``analysis.pool_curve``); None without matplotlib (the
    ``plot`` extra), without metrics, or when drawing fails: a figure must not fail the run that trained the
    pool, so a failure is one line on stderr."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return None
    from ers_deep.analysis.curves import pool_curve

    try:
        return pool_curve(pool, title=title)
    except Exception as e:
        print(f"learning curves not drawn: {type(e).__name__}: {e}", file=sys.stderr)
        return None
