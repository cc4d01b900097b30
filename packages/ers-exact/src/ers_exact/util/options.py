"""Command options as frozen dataclasses: one place for defaults, help text and validation.

A command's options are a ``@dataclass(frozen=True, kw_only=True)`` subclass of :class:`Options` whose fields
are declared with :func:`option`. The same class

- builds the command's argparse flags (:func:`add_options`): ``--max-nodes`` for ``max_nodes``, the default
  and the help text shown by ``--help``, ``Literal[...]`` annotations as choices, ``bool`` fields as
  ``--flag`` / ``--no-flag``;
- validates every value when it is constructed, from the command line or from Python alike, raising
  :class:`UsageError` with a message that names the offending value and what would be valid;
- documents itself (:func:`options_markdown`) for the README's tables.

Checks are plain functions ``value -> str | None`` (``None``: valid; otherwise the reason), e.g.
``check=positive`` or ``check=between(1, 50)``; they live in :mod:`ers_exact.util.checks` and are
re-exported here.
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Union

from ers_exact.util.checks import (
    MAX_SEED,
    Check,
    at_least,
    between,
    finite,
    is_number,
    non_negative,
    one_of,
    output_file,
    output_folder,
    positive,
    probability,
    seed_range,
    thread_count,
)
from ers_exact.util.deprecation import add_renamed_flag
from ers_exact.util.errors import InputError

__all__ = [
    "MAX_SEED",
    "Check",
    "Options",
    "UsageError",
    "add_options",
    "at_least",
    "between",
    "check_fields",
    "check_types",
    "default_text",
    "finite",
    "flag_name",
    "force_option",
    "from_namespace",
    "non_negative",
    "one_of",
    "option",
    "options_markdown",
    "output_file",
    "output_folder",
    "positive",
    "probability",
    "seed_range",
    "thread_count",
]

O = TypeVar("O", bound="Options")


class UsageError(InputError, ValueError):
    """An invalid option value or combination; the message names the value and what would be valid."""


def check_fields(obj: object, **checks: Check) -> None:
    """Validate fields of a library config (``__post_init__``): raise :class:`UsageError` naming the first
    field that fails its check, e.g. ``check_fields(self, k=at_least(1), alpha=positive)``."""
    for name, check in checks.items():
        value = getattr(obj, name)
        reason = check(value)
        if reason is not None:
            raise UsageError(f"{type(obj).__name__}.{name} = {value!r}: {reason}")


def check_types(obj: object) -> None:
    """Validate a library config's fields against their annotations (``__post_init__``, before
    :func:`check_fields`): a ``Literal[...]`` field must hold one of its choices, an ``int`` field an integer,
    a ``float`` field a number, a ``bool`` field a bool, a ``str`` field a string (``X | None``: or ``None``);
    other annotations are not checked. Raises :class:`UsageError` naming the first field that fails, so a
    misspelt choice or ``num_envs=2.5`` (from Python or a hand-written ``config.json``) stops at construction
    instead of running with another setting or failing later."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        base, optional = _unwrap(hints[f.name])
        value = getattr(obj, f.name)
        if value is None and optional:
            continue
        reason = _type_reason(base, value)
        if reason is not None:
            raise UsageError(f"{type(obj).__name__}.{f.name} = {value!r}: {reason}")


def force_option() -> Any:
    """``--force``: the option of every command that writes a results folder (see
    :func:`ers_exact.util.output.claim_folder`)."""
    return option(
        False,
        help="replace the results of an earlier run in the output folder (without it such a folder is refused)",
    )


# ----- declaring options -----
def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    positional: bool = False,
    check: Check | None = None,
    metavar: str | None = None,
    default_text: str | None = None,
    default_value: Any = None,
    renamed_from: Sequence[str] = (),
) -> Any:
    """A documented, validated field of an :class:`Options` class (no default: the option is required).

    ``default_text`` is what ``--help`` and the README show as the default when the value itself says little
    (``None`` meaning "the game's own", a folder resolved at run time). ``default_value``: the value an unset
    option (default ``None``) stands for, shown as its default (a command that must know whether the option
    was given, e.g. to refuse it beside ``--resume``, keeps ``None`` as the field's default). ``renamed_from``:
    the field's earlier names, still accepted as hidden, deprecated flags (``--l`` for ``--top``)."""
    meta = {
        "help": help,
        "positional": positional,
        "check": check,
        "metavar": metavar,
        "default_text": default_text,
        "default_value": default_value,
        "renamed_from": tuple(renamed_from),
    }
    return dataclasses.field(default=default, metadata=meta)


def default_text(f: dataclasses.Field[Any]) -> str | None:
    """The default of a field as documented (``None`` when the option is required)."""
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return None
    shown = f.metadata.get("default_text")
    if shown is None and f.metadata.get("default_value") is not None:
        shown = str(f.metadata["default_value"])
    return shown if shown is not None else str(f.default)


def flag_name(name: str) -> str:
    """The command-line spelling of a field: ``max_nodes`` -> ``--max-nodes``."""
    return "--" + name.replace("_", "-")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Options:
    """Base of every command's options: validates each field's check, then :meth:`check` (cross-field)."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            base, optional = _unwrap(hints[f.name])
            if value is None and optional:
                continue
            reason = _type_reason(base, value)
            check = f.metadata.get("check")
            if reason is None and check is not None:
                reason = check(value)
            if reason is not None:
                raise UsageError(f"{_label(f)} {value!r}: {reason}")
        self.check()

    def check(self) -> None:
        """Cross-field validation (override; raise :class:`UsageError`)."""

    def to_json(self) -> dict[str, Any]:
        """The resolved options, as written beside results."""
        return dataclasses.asdict(self)


def _label(f: dataclasses.Field[Any]) -> str:
    if f.metadata.get("positional"):
        return str(f.metadata.get("metavar") or f.name.upper())
    return flag_name(f.name)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(base type, whether None is allowed) of an annotation such as ``int | None``."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), len(args) < len(typing.get_args(tp))
    return tp, False


def _type_reason(tp: Any, value: Any) -> str | None:
    if typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
        return None if value in choices else f"must be one of {', '.join(map(str, choices))}"
    if tp is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if tp is int:
        return (
            None
            if isinstance(value, numbers.Integral) and not isinstance(value, bool)
            else "must be an integer"
        )
    if tp is float:
        return None if is_number(value) else "must be a number"
    if tp is str:
        return None if isinstance(value, str) else "must be a string"
    return None


def _cli_type(tp: Any) -> Callable[[str], Any]:
    if tp is int:
        return int
    if tp is float:
        return float
    return str


def _unset(f: dataclasses.Field[Any]) -> bool:
    """An optional option whose default is "not given" (``None`` or ``""`` standing for nothing, or a flag that
    is off): its help shows no default, the README's table ``unset``, ``none`` or ``off``."""
    if f.metadata.get("default_text") is not None or f.metadata.get("default_value") is not None:
        return False
    return f.default is None or f.default is False or f.default == ""


def add_options(parser: argparse.ArgumentParser, cls: type[Options]) -> None:
    """Add one argparse argument per field of ``cls`` (help shows the default)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        base, _ = _unwrap(hints[f.name])
        shown = default_text(f)
        required = shown is None
        help_ = f.metadata.get("help", "").replace("%", "%%")
        if shown is not None and not _unset(f):
            help_ += f" (default: {shown.replace('%', '%%')})"
        kw: dict[str, Any] = {"help": help_}
        if f.metadata.get("metavar"):
            kw["metavar"] = f.metadata["metavar"]
        choices = getattr(f.metadata.get("check"), "choices", None)
        if typing.get_origin(base) is Literal:
            kw["choices"] = list(typing.get_args(base))
            kw["type"] = type(kw["choices"][0])
        elif choices is not None:
            kw["choices"] = list(choices)
            kw["type"] = _cli_type(base)
        elif base is bool:
            kw["action"] = argparse.BooleanOptionalAction if f.default else "store_true"
        else:
            kw["type"] = _cli_type(base)
        if f.metadata.get("positional"):
            kw["metavar"] = kw.get("metavar", f.name.upper())
            if not required:
                kw["nargs"] = "?"
                kw["default"] = f.default
            parser.add_argument(f.name, **kw)
        else:
            kw["dest"] = f.name
            if required:
                kw["required"] = True
            else:
                kw["default"] = f.default
            olds = [flag_name(old) for old in f.metadata.get("renamed_from", ())]
            if olds:
                add_renamed_flag(parser, flag_name(f.name), olds, f.name, kw)
            else:
                parser.add_argument(flag_name(f.name), **kw)


def from_namespace(cls: type[O], ns: argparse.Namespace) -> O:
    """Build (and so validate) ``cls`` from parsed arguments."""
    return cls(**{f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)})


def options_markdown(cls: type[Options]) -> str:
    """A markdown table of ``cls``'s options (flag, default, meaning) for the README."""
    rows = ["| option | default | meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        shown = default_text(f)
        name = _label(f) if f.metadata.get("positional") else f"`{flag_name(f.name)}`"
        if shown is None:
            default = "required"
        elif _unset(f):
            default = {False: "off", "": "none"}.get(f.default, "unset")
        else:  # a value in code style; a description (``default_text``) as prose
            default = shown if f.metadata.get("default_text") is not None else f"`{shown}`"
        help_ = f.metadata.get("help", "").replace("|", "\\|")
        rows.append(f"| {name} | {default} | {help_} |")
    return "\n".join(rows)
