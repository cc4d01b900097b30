"""The one way both packages write a file: atomically, never over an input, strict JSON only.

* :func:`write_atomic` writes bytes or text to a temporary file in the target's folder, flushes, ``fsync``s,
  ``os.replace``s it onto the target and ``fsync``s the folder: a crash or a full disk at any moment leaves the
  earlier file byte for byte, never a truncated one. A writer killed mid-write (SIGKILL) leaves its temporary
  file, ``.NAME.tmp-PID``; :func:`remove_stale_temporaries` removes those of writers no longer running.
  It refuses (:class:`OutputError`, exit 2) a target that is one of the files the command reads
  (``reads``), e.g. ``optimal GAME.dpomdp --save-policy GAME.dpomdp``.
* :func:`write_json` / :func:`dumps` write strict JSON (RFC 8259: non-finite floats become ``null``, numpy values
  numbers and lists); :func:`save_figure` renders a matplotlib figure in memory and writes it likewise.
* :func:`claim_folder` prepares a results folder: an existing folder that holds an earlier run is refused
  unless ``--force``, which first removes that run's files (the folder is marked by :data:`MARKER`), so two
  runs' files never mix; a folder holding files not written by ers is never emptied.
* :func:`claim_files` does the same for one command's named files in a shared folder (``POOL/analysis``).
* No write follows a symbolic link found inside an output folder (:func:`output_root`,
  :func:`refuse_linked_folder`); the folder, or a file, that the user names may itself be a link.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ers_exact.util.errors import InputError

__all__ = [
    "MARKER",
    "FileFormatError",
    "OutputError",
    "claim_files",
    "claim_folder",
    "dumps",
    "jsonable",
    "load_json",
    "output_root",
    "read_json",
    "recorded_command",
    "refuse_linked_folder",
    "remove_stale_temporaries",
    "replace_run_folder",
    "same_file",
    "save_figure",
    "write_atomic",
    "write_json",
]

#: the file that marks a results folder as written by an ers command (JSON: the command that wrote it)
MARKER = ".ers-results.json"

PathLike = str | os.PathLike[str]

#: entries that mark a folder as written by ers: a results folder's marker, a pool's or a discovery run's files
_ERS_ENTRIES = (MARKER, "pool.json", "ray-run.json", "discovery.json", "discovery-config.json")
#: the open :func:`output_root` folders (absolute, as named: the folder itself may be a link)
_ROOTS: list[Path] = []


class OutputError(InputError, OSError):
    """An output that cannot or must not be written; the message names the path (exit status 2)."""


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether two paths name the same file (or folder), following links; False when either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _refuse_inputs(path: Path, reads: Iterable[PathLike]) -> None:
    for r in reads:
        if r is not None and same_file(path, r):
            raise OutputError(
                f"{path}: is a file this command reads; refusing to overwrite it (write elsewhere)"
            )


def _write_target(path: Path) -> Path:
    """The file an output at ``path`` replaces: a symbolic link's target (the link stays a link); an existing
    device, pipe or socket is refused (replacing it would remove it, and nothing would reach it)."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return target
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise OutputError(f"{path}: is not a regular file (a device, pipe or socket); refusing to replace it")
    return target


#: the name of :func:`write_atomic`'s temporary file: ``.NAME.tmp-PID`` beside the target ``NAME``
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>[1-9][0-9]*)$")


def _temporary(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.tmp-{pid}")


def _running(pid: int) -> bool:
    """Whether process ``pid`` may be running (only a definite "no such process" is False)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # PermissionError: running as another user
        return True
    return True


def remove_stale_temporaries(folder: PathLike) -> list[Path]:
    """Remove the temporary files that :func:`write_atomic` left in ``folder`` (not its subfolders) when its
    process was killed mid-write: regular files named ``.NAME.tmp-PID`` whose process PID no longer runs on
    this machine; nothing else (a live or unknown writer's file, a link, a folder) is touched. The removed
    paths, in name order. POSIX only (elsewhere nothing is removed); a folder shared with another machine's
    writer would see its live PIDs as dead: resume a run on one machine at a time."""
    folder = Path(folder)
    _refuse_links_below(folder)
    if os.name != "posix" or not folder.is_dir():
        return []
    removed = []
    for path in sorted(folder.iterdir()):
        m = _TEMPORARY.match(path.name)
        if m is None or not path.is_file() or path.is_symlink() or _running(int(m["pid"])):
            continue
        try:
            path.unlink()
        except FileNotFoundError:  # removed meanwhile
            continue
        removed.append(path)
    return removed


def write_atomic(path: PathLike, data: bytes | str, *, reads: Iterable[PathLike] = ()) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` atomically (module docstring); returns the path.

    Raises :class:`OutputError` naming the path when ``path`` is one of ``reads`` or cannot be written (a full
    disk, a missing folder, no permission); the earlier file, if any, is then unchanged."""
    path = Path(path)
    _refuse_inputs(path, reads)
    _refuse_links_below(path)
    target = _write_target(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = _temporary(target, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        what = e.strerror or str(e)
        raise OutputError(f"{path}: cannot write it ({what}); an earlier file there is unchanged") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    try:
        fd = os.open(target.parent, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened for fsync (some file systems): the data is written
        return path
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def jsonable(x: Any) -> Any:
    """``x`` with numpy values as Python ones and non-finite floats as ``None`` (strict JSON), recursively."""
    if isinstance(x, dict):
        return {str(k) if not isinstance(k, str) else k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if hasattr(x, "tolist"):  # numpy scalars and arrays, torch tensors
        return jsonable(x.tolist())
    if hasattr(x, "to_json"):
        return jsonable(x.to_json())
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    try:
        return jsonable(float(x))
    except (TypeError, ValueError):
        return str(x)


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict JSON text of ``obj`` (see :func:`jsonable`); keyword arguments go to ``json.dumps``."""
    return json.dumps(jsonable(obj), allow_nan=False, **kwargs)


def write_json(path: PathLike, obj: Any, *, reads: Iterable[PathLike] = (), **kwargs: Any) -> Path:
    """``obj`` as strict JSON (indent 2 unless given) written atomically to ``path``."""
    kwargs.setdefault("indent", 2)
    return write_atomic(path, dumps(obj, **kwargs) + "\n", reads=reads)


def save_figure(fig: Any, path: PathLike, *, reads: Iterable[PathLike] = (), **kwargs: Any) -> Path:
    """A matplotlib figure rendered in memory (format from the suffix) and written with :func:`write_atomic`."""
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".").lower() or "png", **kwargs)
    return write_atomic(path, buf.getvalue(), reads=reads)


class FileFormatError(InputError, ValueError):
    """A file the command reads is missing, unreadable or not what it should be; the message names it."""


def load_json(path: PathLike, what: str) -> Any:
    """The JSON value in ``path`` (``what`` it should be, for messages); :class:`FileFormatError` naming the
    file when it is missing, unreadable, not UTF-8 or not JSON."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise FileFormatError(f"{path}: no such file (expected {what})") from None
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read it ({e.strerror or e}; expected {what})") from None
    except UnicodeDecodeError:
        raise FileFormatError(f"{path}: not a UTF-8 text file (expected {what} as JSON)") from None
    except json.JSONDecodeError as e:
        raise FileFormatError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno}; expected {what})"
        ) from None
    except (RecursionError, ValueError) as e:  # nested too deep, or an integer of over 4,300 digits (crafted)
        raise FileFormatError(f"{path}: not JSON ers reads ({type(e).__name__}; expected {what})") from None
    return data


def read_json(path: PathLike, what: str, keys: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON object in ``path`` (``what`` it should be, for messages, e.g. "a pool summary"), with
    ``keys`` present; :class:`FileFormatError` naming the file and what is wrong otherwise."""
    data = load_json(path, what)
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: holds a JSON {type(data).__name__}, not an object (expected {what})")
    missing = [k for k in keys if k not in data]
    if missing:
        raise FileFormatError(f"{path}: has no {', '.join(map(repr, missing))} (expected {what})")
    return data


def _refuse_input_folder(path: Path, reads: Iterable[PathLike | None]) -> None:
    for r in reads:
        if r is None:
            continue
        rp, pp = Path(os.path.abspath(r)), Path(os.path.abspath(path))
        if same_file(path, r) or rp.is_relative_to(pp):  # --force would remove an input
            raise OutputError(
                f"{path}: holds or is an input of this command ({r}); write the results elsewhere"
            )


@contextmanager
def output_root(folder: PathLike) -> Iterator[None]:
    """While open, :func:`write_atomic` and :func:`remove_stale_temporaries` refuse a symbolic link below
    ``folder`` (the file, or a folder on its way: in a received pool it would send the write anywhere)."""
    _ROOTS.append(root := Path(os.path.abspath(folder)))
    try:
        yield
    finally:
        _ROOTS.remove(root)


def _refuse_links_below(path: Path) -> None:
    full = Path(os.path.abspath(path))
    for root in _ROOTS:
        below = [p for p in (*reversed(full.parents), full) if p != root and p.is_relative_to(root)]
        if link := next((p for p in below if p.is_symlink()), None):
            raise OutputError(f"{link}: a symbolic link in the output folder {root}; refusing to follow it")


def refuse_linked_folder(folder: PathLike, reads: Iterable[PathLike | None] = ()) -> None:
    """Refuse an output ``folder`` that is a symbolic link inside a folder ers wrote or one the command reads
    (``POOL/crossplay`` of a received pool); a link elsewhere (a folder on another disk) is kept."""
    path, parent = Path(folder), Path(os.path.abspath(Path(folder).parent))
    inputs = [Path(os.path.abspath(r)) for r in reads if r is not None]
    ers = any(os.path.lexists(parent / name) for name in _ERS_ENTRIES)
    if path.is_symlink() and (ers or any(map(parent.is_relative_to, inputs))):
        raise OutputError(
            f"{path}: a symbolic link inside {path.parent} (a folder of ers or an input); refusing to follow it"
        )


def _shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def replace_run_folder(
    folder: PathLike, *, is_run: bool, what: str, foreign: list[str], reads: Iterable[PathLike | None] = ()
) -> None:
    """``--force`` of a command whose folder holds a resumable run (a pool, a discovery run): remove the earlier
    run in ``folder`` (``is_run``: the caller recognised it as ``what``, e.g. "a pool"), entry by entry (the
    folder may be a link to another disk). A folder that is or holds an input, a non-empty folder that is not
    such a run, and one holding entries ers did not write (``foreign``: the caller's list) are refused."""
    path = Path(folder)
    if not path.exists():
        return
    _refuse_input_folder(path, reads)
    if not path.is_dir():
        raise OutputError(f"{path}: is a file, not a folder")
    entries = sorted(path.iterdir())
    if not entries:
        return
    if not is_run:
        shown = _shown([p.name for p in entries])
        raise OutputError(f"{path}: is not empty and not {what} ({shown}); --force replaces only {what}")
    if foreign:
        raise OutputError(
            f"{path}: holds entries ers did not write ({_shown(foreign)}); --force removes only the files of "
            f"{what}: move those or choose another folder"
        )
    for p in entries:
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def recorded_command(folder: PathLike) -> str | None:
    """The command that the marker (:data:`MARKER`) of ``folder`` names, e.g. "ers-exact census"; None where
    there is no marker or it names none (unreadable, or an empty marker of an earlier version)."""
    try:
        data = json.loads((Path(folder) / MARKER).read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    command = data.get("command") if isinstance(data, dict) else None
    return command if isinstance(command, str) and command else None


def claim_folder(
    folder: PathLike, *, force: bool, command: str, reads: Iterable[PathLike] = (), option: str = "--force"
) -> Path:
    """Prepare ``folder`` for one run's results (module docstring) and mark it; returns it.

    A missing or empty folder is created and marked. A folder with an earlier ers run (the marker) is refused
    naming ``option`` unless ``force``, which removes that run's files first. A folder holding other files is
    refused either way, and so is a folder that is or holds one of the paths the command reads."""
    path = Path(folder)
    _refuse_input_folder(path, reads)
    refuse_linked_folder(path, reads)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: is a file, not a folder")
    entries = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
    if entries:
        if MARKER not in entries:
            raise OutputError(
                f"{path}: is not empty and was not written by ers ({_shown(entries)}); choose a new or empty "
                "folder"
            )
        if not force:
            by = recorded_command(path)
            raise OutputError(
                f"{path}: holds the results of an earlier run{f' of {by}' if by else ''}; pass {option} to "
                "replace them or choose another folder"
            )
        for name in entries:
            p = path / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{path}: cannot create the folder ({e.strerror or e})") from None
    write_json(path / MARKER, {"command": command})
    return path


def claim_files(files: Iterable[PathLike], *, force: bool, command: str, option: str = "--force") -> None:
    """Refuse to write ``files`` (one run's outputs, in a folder other commands share) when any of them holds
    an earlier run, unless ``force``; with ``force`` the earlier files are removed, so the two runs never mix.
    Call it before the work starts (refusal) and again, with ``force``, just before writing (removal)."""
    paths = [Path(f) for f in files]
    for folder in {f.parent for f in paths}:
        refuse_linked_folder(folder)
    earlier = [f for f in paths if os.path.lexists(f)]
    if not earlier:
        return
    if not force:
        raise OutputError(
            f"{earlier[0].parent}: holds the results of an earlier {command} ({earlier[0].name}); pass {option} "
            "to replace them or choose another --out"
        )
    for f in earlier:
        if f.is_dir() and not f.is_symlink():
            raise OutputError(f"{f}: is a folder, not a file of {command}; choose another --out")
        f.unlink()
