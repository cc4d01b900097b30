"""Old names kept working after a rename, each with one warning naming the new one (both packages).

The packages share one vocabulary (root README, "Names across the packages"); a name that changed stays
usable as a deprecated alias:

- a field of a frozen config or options dataclass: :func:`renamed_fields` (``Config(old=...)`` and
  ``config.old`` warn with :class:`DeprecationWarning` and mean the new field), and :func:`upgrade_keys`, which
  reads a JSON object written before the rename (``config.json``) under the new names, silently: a file on
  disk is not the caller's code, so reading it never floods the caller with warnings;
- a module-level name (a class): :func:`deprecated_names`, a PEP 562 ``__getattr__``;
- a command-line flag: :func:`add_renamed_flag`, the new flag and a hidden alias that prints one line on stderr
  naming the new flag and stores into the new option; giving both spellings is a usage error.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["add_renamed_flag", "deprecated_names", "renamed_fields", "upgrade_keys", "warn_renamed"]

T = TypeVar("T", bound=type)

#: the class attribute where :func:`renamed_fields` records old name -> new name
RENAMED_ATTRIBUTE = "__renamed_fields__"


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (:class:`DeprecationWarning`) that ``old`` is a deprecated name of ``new``."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)


def renamed_fields(**renames: str) -> Callable[[T], T]:
    """Class decorator for a dataclass whose fields were renamed (``old="new"``), applied above
    ``@dataclass``: the constructor accepts the old keyword and a read-only property gives the old attribute,
    both warning; giving both names is a :class:`TypeError`. ``dataclasses.replace(config, old=...)``, which
    passes every field (so the new name too, at its current value), means ``new=...`` and warns.
    :func:`upgrade_keys` reads old JSON."""

    def wrap(cls: T) -> T:
        init = cls.__init__  # type: ignore[misc]

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            replacing = _dataclasses_frames()
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if replacing:  # the new name holds the copied value; the old keyword is the caller's change
                    kwargs.pop(new, None)
                    warn_renamed(
                        f"dataclasses.replace({cls.__name__}, {old}=...)", f"{new}=", stacklevel=3 + replacing
                    )
                elif new in kwargs:
                    raise TypeError(f"{cls.__name__}: give {new}= only ({old}= is its deprecated name)")
                else:
                    warn_renamed(f"{cls.__name__}({old}=...)", f"{new}=", stacklevel=3)
                kwargs[new] = kwargs.pop(old)
            init(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[misc]
        for old, new in renames.items():
            setattr(cls, old, _old_attribute(cls.__name__, old, new))
        setattr(cls, RENAMED_ATTRIBUTE, {**getattr(cls, RENAMED_ATTRIBUTE, {}), **renames})
        return cls

    return wrap


def _dataclasses_frames() -> int:
    """How many frames of the ``dataclasses`` module called the constructor that calls this (0: the caller's own
    code called it; ``dataclasses.replace`` is one frame on Python 3.10-3.12, two from 3.13)."""
    frame = inspect.currentframe()
    frame = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    count = 0
    while frame is not None and frame.f_globals.get("__name__") == "dataclasses":
        count, frame = count + 1, frame.f_back
    return count


def _old_attribute(owner: str, old: str, new: str) -> property:
    def get(self: Any) -> Any:
        warn_renamed(f"{owner}.{old}", f"{owner}.{new}")
        return getattr(self, new)

    return property(get, doc=f"Deprecated name of ``{new}``.")


def upgrade_keys(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a JSON object of ``cls``, perhaps written before a rename) with every old key under its new
    name, without a warning; where a file holds both, the new key's value is kept. A ``data`` that is not a
    JSON object is a :class:`TypeError`, as ``cls(**data)`` would raise."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__} needs a JSON object, not {type(data).__name__}")
    renames: Mapping[str, str] = getattr(cls, RENAMED_ATTRIBUTE, {})
    out = {renames.get(k, k): v for k, v in data.items() if k not in renames}
    for old, new in renames.items():
        if old in data and new not in data:
            out[new] = data[old]
    return out


def deprecated_names(
    module: str,
    names: Mapping[str, tuple[str, Callable[[], Any]]],
    fallback: Callable[[str], Any] | None = None,
) -> Callable[[str], Any]:
    """A PEP 562 ``__getattr__`` for ``module``: ``names[old] = (new, get)``; every ``module.old`` (and
    ``from module import old``) warns, attributed to the caller's line, and returns ``get()`` (the object under
    its new name), never cached in the module. Any other name goes to ``fallback`` (a package's
    :func:`~ers_exact.util.lazy.lazy_exports` ``__getattr__``), or is an :class:`AttributeError`."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, get = names[name]
        warn_renamed(f"{module}.{name}", f"{module}.{new}")  # stacklevel 3: the line that named it
        return get()

    return __getattr__


#: the parsed namespace's record of the spelling each renamed option was given under (dest -> flag)
FLAGS_GIVEN = "renamed_flags_given"


def _record_flag(
    parser: argparse.ArgumentParser, namespace: argparse.Namespace, dest: str, flag: str, new: str
) -> None:
    """Note that ``flag`` (``new`` or a deprecated name of it) set ``dest``; a usage error (exit 2, one line)
    when another spelling of the same option was given too, which would otherwise silently lose to the last."""
    given: dict[str, str] = getattr(namespace, FLAGS_GIVEN, {})
    other = given.get(dest, flag)
    if other != flag:
        old = flag if flag != new else other
        parser.error(
            f"{other} and {flag} are the same option ({old} is the deprecated name of {new}); give {new} only"
        )
    setattr(namespace, FLAGS_GIVEN, {**given, dest: flag})


class _RenamedFlag(argparse.Action):
    """One spelling of a renamed option (the canonical flag, or a hidden deprecated alias, which prints one line
    naming the new flag): stores into the option's dest, refusing a second spelling of the same option."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new_flag: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.new_flag = new_flag

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        flag = option_string or self.new_flag
        _record_flag(parser, namespace, self.dest, flag, self.new_flag)
        if flag != self.new_flag:
            print(
                f"{parser.prog}: DeprecationWarning: {flag} is deprecated; use {self.new_flag}",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed_flag(
    parser: argparse.ArgumentParser, new_flag: str, old_flags: Sequence[str], dest: str, kw: Mapping[str, Any]
) -> None:
    """Add the option ``new_flag`` (argparse keywords ``kw``, stored in ``dest``) and each of ``old_flags`` as
    its hidden deprecated alias (its type, choices and metavar are kept; a switch takes no value). Giving two
    spellings of the option in one command line is a usage error, as ``Config(old=..., new=...)`` is."""
    action = kw.get("action")
    if action not in (None, "store_true"):
        raise TypeError(
            f"{new_flag}: a renamed option takes a value or is a store_true switch, not {action!r}"
        )
    value: dict[str, Any] = {"nargs": 0, "const": True} if action == "store_true" else {}
    new_kw = {k: v for k, v in kw.items() if k not in ("action", "dest")}
    parser.add_argument(new_flag, dest=dest, action=_RenamedFlag, new_flag=new_flag, **value, **new_kw)
    keep = {k: kw[k] for k in ("type", "choices", "metavar") if k in kw}
    for old_flag in old_flags:
        parser.add_argument(
            old_flag,
            dest=dest,
            action=_RenamedFlag,
            new_flag=new_flag,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
            **(value or keep),
        )
