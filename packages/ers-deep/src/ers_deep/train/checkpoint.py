"""Checkpoints that are safe to load from strangers and never half-written.

A checkpoint is ONE safetensors file: the tensors, plus JSON metadata in the safetensors header
(``__metadata__["ers"]``) that also records a SHA-256 digest of every tensor's name, dtype, shape and bytes and
of the metadata itself (format ``ers-checkpoint/2``: an edited counter or config is refused like a flipped tensor
byte). Files of the first format (``ers-checkpoint/1``) still load: their digest covers the
tensors only, so their metadata is read unverified, as it was written. The digest detects damage and edits, it
is no signature (anyone can recompute it). Nothing is ever unpickled (no ``torch.load``), so a malicious file
cannot run code.

* ``save_checkpoint(path, tensors, metadata)`` writes ``checkpoint_bytes(tensors, metadata)`` atomically: a temporary file in the same folder, flush,
  ``fsync``, ``os.replace`` onto the final name, ``fsync`` of the folder. A crash at any moment leaves either the
  old file or the new one, never a torn one; the previous checkpoint stays readable.
* ``load_checkpoint(path)`` raises :class:`CheckpointError` naming the file when it is missing, truncated, not
  a safetensors file, lacks ers metadata, or its tensors or metadata do not match the recorded digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor

from ers_exact.util.errors import InputError
from ers_exact.util.output import write_atomic as atomic_write_bytes  # the one writer of both packages

__all__ = [
    "CheckpointError",
    "atomic_write_bytes",
    "checkpoint_bytes",
    "digest",
    "load_checkpoint",
    "parse_checkpoint",
    "read_metadata",
    "save_checkpoint",
]

FORMAT = "ers-checkpoint/2"
#: the first format, still read: its digest covers the tensors only
FORMAT_1 = "ers-checkpoint/1"


class CheckpointError(ValueError, InputError):
    """A checkpoint file cannot be trusted or read; the message names the file."""


def digest(tensors: dict[str, Tensor], metadata: dict[str, Any] | None = None) -> str:
    """SHA-256 over the tensors in name order (name, dtype, shape, raw bytes), then, when given, over
    ``metadata`` as JSON with sorted keys (format 2: everything in the file but the digest)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    if metadata is not None:
        h.update(b"metadata|" + json.dumps(metadata, sort_keys=True).encode())
    return h.hexdigest()


def checkpoint_bytes(tensors: dict[str, Tensor], metadata: dict[str, Any]) -> bytes:
    """The bytes of the checkpoint file of ``tensors`` and JSON-able ``metadata``, as ``save_checkpoint`` writes
    them (for a writer that also records their SHA-256: hashed as written, not read back)."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    # as the file will hold it (tuples are lists, keys strings), so the reader hashes the same JSON
    meta = json.loads(json.dumps({**metadata, "format": FORMAT}))
    meta.pop("sha256", None)
    meta["sha256"] = digest(tensors, meta)
    return st_save(tensors, metadata={"ers": json.dumps(meta, sort_keys=True)})


def save_checkpoint(
    path: str | os.PathLike[str], tensors: dict[str, Tensor], metadata: dict[str, Any]
) -> Path:
    """Write ``tensors`` and JSON-able ``metadata`` to ``path`` atomically (``checkpoint_bytes``); returns the
    path. The digest covers both (``format`` and ``sha256`` are the file's own keys: ``metadata``'s are
    replaced)."""
    atomic_write_bytes(path, checkpoint_bytes(tensors, metadata))
    return Path(path)


def _header(path: Path, data: bytes) -> dict[str, Any]:
    if len(data) < 8:
        raise CheckpointError(f"{path}: truncated checkpoint ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise CheckpointError(
            f"{path}: truncated or not a safetensors checkpoint (header of {n} bytes, file of {len(data)})"
        )
    try:
        header = json.loads(data[8 : 8 + n])
        meta = json.loads(header["__metadata__"]["ers"])
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested too deep
        raise CheckpointError(
            f"{path}: not an ers checkpoint (no readable ers metadata in the header)"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") not in (FORMAT, FORMAT_1):
        found = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"{path}: unknown checkpoint format {found!r}, expected {FORMAT!r}")
    return meta


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON metadata of a checkpoint (not verified: the digest needs the tensors, ``load_checkpoint``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e.strerror}") from None
    return _header(path, data)


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """(tensors, metadata) of a checkpoint, verified against its digest; :class:`CheckpointError` otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e.strerror}") from None
    return parse_checkpoint(path, data)


def parse_checkpoint(path: str | os.PathLike[str], data: bytes) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """``load_checkpoint`` of a file's bytes read by the caller (``path`` names it in messages): what a reader
    that checks the file before reading it (``policies.read_regular_file``) parses, once."""
    path = Path(path)
    meta = _header(path, data)
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: truncated or corrupted checkpoint ({e})") from None
    body = None if meta["format"] == FORMAT_1 else {k: v for k, v in meta.items() if k != "sha256"}
    if digest(tensors, body) != meta.get("sha256"):
        what = "tensors" if body is None else "tensors or metadata"
        raise CheckpointError(
            f"{path}: checkpoint {what} do not match their recorded SHA-256 (edited, tampered or corrupted)"
        )
    return tensors, meta
