"""Set the number of BLAS threads at run time (the OpenBLAS builds that numpy and scipy wheels ship), the way
threadpoolctl does, without the dependency.

The solvers' linear algebra is many small dense systems; on a shared machine a multi-threaded OpenBLAS
spins on busy cores and one 172 x 172 LU can take 30 ms instead of 0.2 ms. :func:`blas_threads` limits
the threads inside a ``with`` block and restores them after. Where no OpenBLAS library is found (another
BLAS, another OS) it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

__all__ = ["blas_threads"]

_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_GETTERS = (
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads64_",
    "openblas_get_num_threads",
)


_SCANNED: list[tuple[int, tuple[tuple[object, object], ...]]] = []  # (len(sys.modules) at the scan, found)


def _libraries() -> tuple[tuple[object, object], ...]:
    """(setter, getter) of every OpenBLAS loaded in this process now (Linux: read from /proc/self/maps;
    numpy's is loaded here, scipy's only once something imported scipy: its import is not forced). A library
    is loaded by an import, so the scan (~0.2 ms) is kept until the number of imported modules changes."""
    if not sys.platform.startswith("linux"):
        return ()
    if _SCANNED and _SCANNED[0][0] == len(sys.modules):
        return _SCANNED[0][1]
    found = _scan()
    _SCANNED[:] = [(len(sys.modules), found)]
    return found


def _scan() -> tuple[tuple[object, object], ...]:
    try:
        import numpy  # noqa: F401  (loads numpy's BLAS)

        with open("/proc/self/maps") as fh:
            paths = tuple(
                sorted({line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line})
            )
    except (OSError, ImportError):
        return ()
    return _open(paths)


@lru_cache(maxsize=8)
def _open(paths: tuple[str, ...]) -> tuple[tuple[object, object], ...]:
    found = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            getter.restype = ctypes.c_int
            found.append((setter, getter))
    return tuple(found)


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` BLAS threads (``None``: leave them as they are)."""
    libs = _libraries() if n is not None else ()
    before = [getter() for _, getter in libs]  # type: ignore[operator]
    for setter, _ in libs:
        setter(int(n))  # type: ignore[arg-type, operator]
    try:
        yield
    finally:
        for (setter, _), k in zip(libs, before):
            setter(int(k))  # type: ignore[operator]
