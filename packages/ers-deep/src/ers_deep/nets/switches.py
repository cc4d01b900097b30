"""ers-deep's process-wide CPU product switches as one value (``ProductSwitches``): what a learner resolves at
construction and enters around its collection and update (``train.ippo.Learner.switches``), so that what runs
outside a learner runs the process's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ers_deep.nets import blas, int8

__all__ = ["ProductSwitches"]


@dataclass(frozen=True)
class ProductSwitches:
    """ers-deep's process-wide CPU product switches (``nets.blas``: ``cpu_products``, ``bf16_gradients``;
    ``nets.int8``: ``int8_inputs``), as one value. A learner resolves its own at construction, and enters them
    around its collection and update only (``applied``), so what runs outside a learner (a pool's evaluation, a
    loaded policy, a later benchmark) runs the process's switches, not the last learner's: a policy evaluated
    in the process that trained it multiplies as one loaded from disk does."""

    cpu_products: str = "torch"
    bf16_gradients: bool = False
    int8_inputs: bool = False

    @classmethod
    def now(cls) -> ProductSwitches:
        """The process's switches at this moment."""
        return cls(blas.cpu_products(), blas.bf16_gradients(), int8.int8_inputs())

    def set(self) -> None:
        """Sets the process's switches to these (numpy's BLAS threads untouched: ``applied`` sets those)."""
        blas.set_cpu_products(self.cpu_products)
        blas.use_bf16_gradients(self.bf16_gradients)
        int8.use_int8_inputs(self.int8_inputs)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """These switches inside the block, the process's as found after it (also on an exception). With OpenBLAS's
        products, numpy's BLAS runs torch's thread count inside the block and its own count after it."""
        before = ProductSwitches.now()
        self.set()
        try:
            if self.cpu_products == "openblas":
                with blas.blas_threads_at(torch.get_num_threads()):
                    yield
            else:
                yield
        finally:
            before.set()
