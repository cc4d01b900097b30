"""``nets.cache_tag``: a custom op's source is in torch's compile cache keys, so an edited backward compiles afresh."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ers_deep.nets.cache_tag import source_tag, tag_compile_caches

#: a custom op whose backward scales the gradient by SCALE, compiled with its file's tag; prints the gradient and
#: AOTAutograd's cache hits
MODULE = """
import json, sys
import torch
from torch._dynamo.utils import counters
from ers_deep.nets.cache_tag import tag_compile_caches

tag_compile_caches(__file__)


@torch.library.custom_op("ers_cache_tag_test::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double.register_fake
def _(x):
    return torch.empty_like(x)


double.register_autograd(lambda ctx, g: g * SCALE)

x = torch.ones(3, requires_grad=True)
torch.compile(lambda x: double(x).sin().sum(), backend="inductor")(x).backward()
print(json.dumps({"grad": x.grad.tolist(), "hits": counters["aot_autograd"]["autograd_cache_hit"]}))
"""


def run_module(folder: Path, scale: int, cache: Path) -> dict[str, object]:
    path = folder / "double_op.py"
    path.write_text(MODULE.replace("SCALE", str(scale)))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCH_COMPILE_CACHE_KEY_TAG": ""}
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    out = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_an_edited_backward_compiles_afresh_and_an_unchanged_one_hits_the_cache(tmp_path: Path) -> None:
    """Three processes on one cache: the backward scaling by 5, then edited to 7 (its new gradient, not the cached
    graph's), then 7 again (a cache hit: the caches are on, so the key is what told the two apart)."""
    cache = tmp_path / "cache"
    first = run_module(tmp_path, 5, cache)
    edited = run_module(tmp_path, 7, cache)
    again = run_module(tmp_path, 7, cache)
    cos2 = 2 * float(torch.cos(torch.tensor(2.0)))  # d/dx sin(2x) at x = 1, before the op's own scale
    assert first["grad"] == pytest.approx([5 * cos2 / 2] * 3)
    assert edited["grad"] == pytest.approx([7 * cos2 / 2] * 3)
    assert again["grad"] == edited["grad"]
    assert int(str(again["hits"])) >= 1


def test_the_tag_is_the_files_hash_and_is_added_once(tmp_path: Path) -> None:
    """A user's own tag stays in front; the same file adds nothing twice; an edited file adds its new hash."""
    path = tmp_path / "ops.py"
    path.write_text("x = 1\n")
    digest = hashlib.sha256(b"x = 1\n").hexdigest()[:16]
    assert source_tag(path) == f"ers-ops-{digest}"
    config = torch.compiler.config
    before = config.cache_key_tag
    try:  # (pytest's monkeypatch would delete the attribute on undo, which hides a torch config entry)
        config.cache_key_tag = "mine"
        assert tag_compile_caches(path) == f"mine+ers-ops-{digest}"
        assert tag_compile_caches(path) == f"mine+ers-ops-{digest}"
        path.write_text("x = 2\n")
        assert tag_compile_caches(path).startswith(f"mine+ers-ops-{digest}+ers-ops-")
    finally:
        config.cache_key_tag = before


def test_an_unreadable_source_tags_with_the_version(tmp_path: Path) -> None:
    """Without the file (an install without sources) the tag is the package's version, not an error."""
    from ers_deep import __version__

    assert source_tag(tmp_path / "gone.py") == f"ers-gone-v{__version__}"


def test_importing_the_custom_ops_tags_the_caches() -> None:
    """Every module of ers-deep that defines a custom op (``torch.library.custom_op``: today ``nets.blas`` and
    ``nets.int8``) puts its own source's hash into the tag when imported: the rule holds for a module added later."""
    import importlib

    import ers_deep

    root = Path(ers_deep.__file__).parent
    defining = [p for p in sorted(root.rglob("*.py")) if "torch.library.custom_op(" in p.read_text()]
    assert {p.name for p in defining} >= {"blas.py", "int8.py"}
    for path in defining:
        name = ".".join(("ers_deep", *path.relative_to(root).with_suffix("").parts))
        importlib.import_module(name)
        assert source_tag(str(path)) in str(torch.compiler.config.cache_key_tag).split("+"), name
