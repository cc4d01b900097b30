"""Reading a file that may come from a stranger (a pool, a discovery output downloaded, shared or edited).

:func:`read_confined` is the one reader of such files in both packages: the file a record names inside a folder
(a relative path without "..", no link on it leading out of the folder), checked on the opened file to be a
regular file (a device such as /dev/zero, or a FIFO, which is opened without blocking, is refused) of at most
``MAX_FILE_BYTES``, and, where a SHA-256 is recorded for it, of that digest. The digest is taken of the bytes
read, which it returns, so a file is read and hashed once and what is checked is what the caller parses.
:func:`file_sha256` hashes a file of one's own (one just written).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePath

from ers_exact.util.errors import InputError

__all__ = ["MAX_FILE_BYTES", "FileRefusedError", "file_sha256", "read_confined"]

#: the largest file read (bytes): far above any network or symmetries file here (the Overcooked CNN + GRU is a
#: few MB), far below a reader's patience with /dev/zero
MAX_FILE_BYTES = 4 << 30


class FileRefusedError(ValueError, InputError):
    """A file :func:`read_confined` refuses (the default of its ``error``); the message names the file."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_confined(
    name: str | os.PathLike[str],
    what: str,
    *,
    folder: str | os.PathLike[str] | None = None,
    sha256: str | None = None,
    record: str = "",
    error: type[Exception] = FileRefusedError,
    limit: int | None = None,
) -> tuple[Path, bytes]:
    """The path and bytes of the file ``name`` (``what`` it should be, for messages, e.g. "a policy file").

    ``folder``: ``name`` is a path inside it (relative, without "..", no link on it leading out), the file
    ``folder / name``; None: ``name`` is the file, anywhere. ``sha256``: the hex SHA-256 its bytes must have,
    as ``record`` (the file naming it, e.g. a pool.json) records it. ``error`` (called with the message) is
    raised, naming the file, when it is outside ``folder``, missing or unreadable, no regular file, larger than
    ``limit`` bytes (None: ``MAX_FILE_BYTES``), written to while read, or of another digest."""
    limit = MAX_FILE_BYTES if limit is None else limit
    path = Path(name) if folder is None else Path(folder) / name
    if folder is not None:
        _check_inside(Path(folder), name, path, what, record, error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as e:
        why = "not found" if isinstance(e, FileNotFoundError) else e.strerror or str(e)
        raise error(f"{path}: cannot read {what}: {why}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
            raise error(f"{path}: not a regular file ({kind}), so not {what}")
        if info.st_size > limit:
            raise error(f"{path}: larger than {limit} bytes (MAX_FILE_BYTES), so not {what}")
        with open(fd, "rb", closefd=False) as f:
            data, more = f.read(info.st_size), f.read(1)  # the size it had when opened, no more
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if more:
        raise error(f"{path}: grew while it was read (written to?), so not read as {what}")
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        recorded = f"in {record}" if record else f"for {what}"
        raise error(
            f"{path}: SHA-256 differs from the one recorded {recorded} (a replaced, edited or damaged file)"
        )
    return path, data


def _check_inside(
    folder: Path, name: str | os.PathLike[str], path: Path, what: str, record: str, error: type[Exception]
) -> None:
    """Refuse a ``name`` that is no path inside ``folder``: empty, absolute, with "..", or through a link (of
    ``folder / name``, resolved) leading out of it (a link loop counts as leading out)."""
    rel = PurePath(name)
    where = f"{record}: {what} {str(name)!r}" if record else f"{path}: {what}"
    if not str(name) or not rel.parts or rel.is_absolute() or ".." in rel.parts:
        raise error(f"{where} is no file inside {folder} (a relative path without '..'): edited or foreign")
    try:
        inside = path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop
        inside = False
    if not inside:
        raise error(f"{where} leads out of {folder} through a link: edited or foreign")
