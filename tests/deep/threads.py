"""One torch CPU thread inside a block or a test: deep tests that train pin it, so results do not depend on
the machine's thread count and a busy shared CPU does not make a single op take seconds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch


@contextmanager
def single_thread() -> Iterator[None]:
    """Torch with one CPU thread inside the block (the previous count is restored)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Autouse fixture form of :func:`single_thread`: import it into a conftest or test module to apply it."""
    with single_thread():
        yield
