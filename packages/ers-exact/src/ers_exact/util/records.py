"""Reading a result type back from its JSON form (``from_json``): a record that is not a JSON object, lacks a
key or holds a value of the wrong type is refused with a :class:`RecordError` naming the type, the key and
the keys it expects, not a bare ``KeyError`` / ``TypeError`` from inside the constructor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ers_exact.util.errors import InputError

__all__ = ["RecordError", "read_record"]

T = TypeVar("T")


class RecordError(InputError, ValueError):
    """A JSON record that is not what its type's ``from_json`` reads; the message names the type."""


def _expects(required: Iterable[str], optional: Iterable[str]) -> str:
    keys = ", ".join(map(repr, required))
    extra = ", ".join(map(repr, optional))
    return f"expects keys {keys}" + (f" (optional: {extra})" if extra else "")


def read_record(
    what: str,
    data: Any,
    build: Callable[[Mapping[str, Any]], T],
    required: Iterable[str],
    optional: Iterable[str] = (),
    where: str = "",
) -> T:
    """``build(data)`` once ``data`` is a JSON object holding every ``required`` key; ``what`` names the type
    (e.g. ``"DiscoveryResult"``). A record that is not an object, lacks a key, or whose values ``build`` cannot
    read (``KeyError`` / ``TypeError`` / ``ValueError``) is a :class:`RecordError` naming ``what`` and the keys
    it expects (``where``, e.g. ``"column 'sp'"``, says which record of a larger one); a :class:`RecordError`
    of a nested record passes through unchanged."""
    required, optional = tuple(required), tuple(optional)
    name = f"{what}.from_json" + (f" ({where})" if where else "")
    if not isinstance(data, Mapping):
        raise RecordError(
            f"{name}: a JSON object is needed, not a {type(data).__name__}; "
            f"{what} {_expects(required, optional)}"
        )
    missing = [k for k in required if k not in data]
    if missing:
        raise RecordError(
            f"{name}: missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"{what} {_expects(required, optional)}"
        )
    try:
        return build(data)
    except RecordError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise RecordError(
            f"{name}: a value of the wrong type or form ({type(e).__name__}: {e}); "
            f"{what} {_expects(required, optional)}"
        ) from e
