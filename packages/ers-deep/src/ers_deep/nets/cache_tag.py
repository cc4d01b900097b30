"""The source of ers's custom ops in torch's compile cache keys.

torch's on-disk compile caches (inductor's FX graph cache, AOTAutograd's cache) key a graph by its ops and inputs.
A custom op (``torch.library.custom_op``) is one op in that graph: its registered backward and fake kernel are
traced into the compiled graphs, but their source is not in the key. So after an edit of such a backward, a
process still loads the graphs compiled from the old one, silently (seen 2026-12-07: ``nets.blas``'s bfloat16
backward, changed to round g once, kept running the old backward's casts until the caches were cleared).

``tag_compile_caches(path)`` appends the SHA-256 of ``path``'s bytes to ``torch.compiler.config.cache_key_tag``,
which torch puts into every compile cache key: a module that defines custom ops calls it with its own file at
import, so any change of its source compiles afresh, and unchanged sources keep their cache hits (the
precompile helper's included: it imports the same modules). A tag set by the user (``TORCH_COMPILE_CACHE_KEY_TAG``)
is kept in front.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

__all__ = ["source_tag", "tag_compile_caches"]


def source_tag(path: str | Path) -> str:
    """``ers-<name>-<first 16 hex digits of the SHA-256 of the file's bytes>``; where the file cannot be read
    (e.g. an install without sources), ``ers-<name>-v<ers_deep's version>``: then only a new version breaks the
    caches."""
    p = Path(path)
    try:
        return f"ers-{p.stem}-{hashlib.sha256(p.read_bytes()).hexdigest()[:16]}"
    except OSError:
        from ers_deep import __version__

        return f"ers-{p.stem}-v{__version__}"


def tag_compile_caches(path: str | Path) -> str:
    """Appends ``source_tag(path)`` to torch's compile cache key tag (once: calling again changes nothing) and
    returns the whole tag."""
    tag = source_tag(path)
    config = torch.compiler.config
    parts = [p for p in str(config.cache_key_tag).split("+") if p]
    if tag not in parts:
        config.cache_key_tag = "+".join([*parts, tag])
    return str(config.cache_key_tag)
