"""The CPU learner's dense products through the faster of two BLAS libraries (``TrainConfig.cpu_products``).

torch's x86 build multiplies float32 matrices with Intel's MKL, which on AMD CPUs runs its AVX2 kernels (it keeps
AVX-512 for Intel's). numpy's wheels carry OpenBLAS, which picks its kernels by the CPU's features at load time
(on an AMD Zen 4 core its AVX-512 ones). Measured at the Hanabi-Full update's shapes, one thread
(``scripts/cpu_learner_bounds.py``, part ``blas``): on Zen 4 (2026-12-02) OpenBLAS ran 74-82 GFLOP/s against
MKL's 49-75, on Zen 2 (2026-12-01) 1.2x MKL; on Intel MKL is at the core's peak.

``bmm(x, w)`` is ``torch.bmm`` (x [S, M, K] @ w [S, K, N]) where the products are torch's, and the custom op
``ers::openblas_bmm`` where they are OpenBLAS's: numpy's ``matmul`` writes into the output tensor's memory (no
copy; transposed operands are passed to BLAS as transposed, not copied), and its gradients are the same op
(dx = g w^T, dw = x^T g), so ``torch.compile`` keeps it as one opaque kernel, as it keeps ``aten.bmm``. Only
float32 and float64 CPU tensors take it, outside CPU autocast (``TrainConfig.bf16_update``); anything else (CUDA,
bfloat16, autocast's products) stays on ``torch.bmm``.

``use_cpu_products(kind, threads)`` sets the choice for the process, as ``torch.backends``' switches (a learner
enters its own around its collection and update and leaves the process's as it found them:
``nets.switches.ProductSwitches``): ``"torch"``, ``"openblas"`` or ``"auto"`` (``resolve_cpu_products``: OpenBLAS on
an AMD x86 CPU when torch's products are MKL's and numpy's are OpenBLAS's, torch elsewhere). It limits numpy's
BLAS to ``threads`` threads (torch's own count), through ``threadpoolctl``, for the process; a learner limits it
around its collection and update only (``blas_threads_at``), so the numpy code beside it (ers-exact's) keeps its
threads. The two libraries sum in different
orders, so a run's floats depend on the choice (as they depend on the CPU): the learner writes the resolved
choice into its run's config.

``use_bf16_gradients(True)`` (``TrainConfig.bf16_gradients``; its default ``"auto"`` is on where ``native_bf16()``,
``resolve_bf16_gradients``; only for the net kinds whose learning curve was studied with it, Hanabi's MLP)
sends the large float32 products that need a gradient through ``bf16_gradients_bmm``:
the forward is the float32 product above (so the loss, the PPO ratios and their clipping are float32's), and the
two gradient products dx = g W^T and dW = x^T g are ``bf16_bmm``'s: operands rounded to bfloat16, float32
accumulation, the result rounded to bfloat16 (torch's CPU product has no float32 output for bfloat16 operands).
On a core with AVX512-BF16 (Zen 4) oneDNN runs them at 1.3-1.8x OpenBLAS's float32 rate, casts included
(``scripts/cpu_learner_bounds.py --parts blas``); a core without bfloat16 units only emulates them (not
measured here), so ``"auto"`` leaves them off there. Products without a gradient (the collection) and small ones
stay as above. Unlike ``TrainConfig.bf16_update`` (autocast: the forward rounded too, which slowed Hanabi-Full's
learning), only the gradients' directions are rounded.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, cast, get_args

import numpy as np
import torch
from torch import Tensor
from torch.utils.flop_counter import bmm_flop, register_flop_formula

from ers_deep.nets.cache_tag import tag_compile_caches

__all__ = [
    "BF16_STUDIED_NETS",
    "CPU_PRODUCTS",
    "MIN_MACS",
    "NATIVE_BF16_FLAGS",
    "Bf16Gradients",
    "CpuProducts",
    "bf16_bmm",
    "bf16_gradients",
    "bf16_gradients_bmm",
    "bf16_weight_gradient",
    "blas_threads",
    "blas_threads_at",
    "bmm",
    "cpu_products",
    "native_bf16",
    "native_units",
    "numpy_blas",
    "openblas_bmm",
    "resolve_bf16_gradients",
    "resolve_cpu_products",
    "resolve_cpu_switch",
    "set_cpu_products",
    "use_bf16_gradients",
    "use_cpu_products",
]

CpuProducts = Literal["auto", "torch", "openblas"]
CPU_PRODUCTS: tuple[str, ...] = get_args(CpuProducts)
Bf16Gradients = bool | Literal["auto"]
#: the net kinds whose learning curve was compared with and without bfloat16 gradient products, where ``"auto"``
#: turns them on: Hanabi-Full's MLP (256 and 512 wide, 2026-12-06/07). Not Overcooked V2's CNN + GRU (not studied)
BF16_STUDIED_NETS = ("mlp",)
#: /proc/cpuinfo flags of a native bfloat16 dot product (``native_bf16``)
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: dtypes numpy's BLAS multiplies (sgemm, dgemm); others stay on torch.bmm
_BLAS_DTYPES = (torch.float32, torch.float64)

#: multiply-adds per seed from which a product goes to OpenBLAS: below, numpy's call costs more than MKL's
#: kernel loses (Zen 4, one thread: [128, 128] @ [128, 128] 86 against 58 us, [128, 1120] @ [1120, 128] 579 against
#: 469, [2048, 128] @ [128, 128] even; [2048, 1120] @ [1120, 128] 1.27x and [512, 512] @ [512, 512] 1.12x faster)
MIN_MACS = 1 << 25

_active = "torch"
#: the custom ops' backward and fake kernels below are traced into compiled graphs, but torch's cache keys do not
#: see their source: this file's hash goes into the keys (``nets.cache_tag``)
tag_compile_caches(__file__)
_bf16_gradients = False
_controller: Any = None  # threadpoolctl.ThreadpoolController, made on first use (blas_threads_at)


@torch.library.custom_op("ers::openblas_bmm", mutates_args=())
def openblas_bmm(x: Tensor, w: Tensor) -> Tensor:
    """x [S, M, K] @ w [S, K, N] -> [S, M, N] by numpy's BLAS, written into a new tensor's memory."""
    out = torch.empty(x.shape[0], x.shape[1], w.shape[2], dtype=x.dtype)
    np.matmul(x.detach().numpy(), w.detach().numpy(), out=out.numpy())
    return out


@openblas_bmm.register_fake
def _(x: Tensor, w: Tensor) -> Tensor:
    return x.new_empty(x.shape[0], x.shape[1], w.shape[2])


def _setup_context(
    ctx: torch.autograd.function.FunctionCtx, inputs: tuple[Tensor, Tensor], output: Tensor
) -> None:
    ctx.save_for_backward(*inputs)


def _gradient_products(
    ctx: torch.autograd.function.FunctionCtx,
    g: Tensor,
    product: Callable[[Tensor, Tensor], Tensor],
    weight_gradient: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> tuple[Tensor | None, Tensor | None]:
    """dx = g w^T and dw = x^T g of a product x @ w, each by ``product`` (dw by ``weight_gradient(x, g)`` where
    given), where the input needs it."""
    x, w = ctx.saved_tensors  # type: ignore[attr-defined]
    needs = ctx.needs_input_grad  # type: ignore[attr-defined]
    g = g.contiguous()
    dx = product(g, w.transpose(1, 2)) if needs[0] else None
    if not needs[1]:
        return dx, None
    return dx, weight_gradient(x, g) if weight_gradient is not None else product(x.transpose(1, 2), g)


def _backward(ctx: torch.autograd.function.FunctionCtx, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
    return _gradient_products(ctx, g, bmm)  # dispatched as a forward product is


openblas_bmm.register_autograd(_backward, setup_context=_setup_context)


@register_flop_formula(torch.ops.ers.openblas_bmm)
def _flops(x_shape: torch.Size, w_shape: torch.Size, *args: object, **kwargs: object) -> int:
    """torch's ``FlopCounterMode`` counts the op as ``aten.bmm`` (``bench.train.product_flops``)."""
    return int(bmm_flop(x_shape, w_shape))


@torch.library.custom_op("ers::bf16_bmm", mutates_args=())
def bf16_bmm(x: Tensor, w: Tensor) -> Tensor:
    """x [S, M, K] @ w [S, K, N] on bfloat16 operands (float32 rounded to nearest even), the result widened
    back to float32: torch's bfloat16 product (oneDNN on x86: AVX512-BF16 where the CPU has it) accumulates in
    float32 and rounds its result to bfloat16, as autocast's."""
    return torch.bmm(x.bfloat16(), w.bfloat16()).float()


@bf16_bmm.register_fake
def _(x: Tensor, w: Tensor) -> Tensor:
    return x.new_empty(x.shape[0], x.shape[1], w.shape[2], dtype=torch.float32)


@torch.library.custom_op("ers::bf16_gradients_bmm", mutates_args=())
def bf16_gradients_bmm(x: Tensor, w: Tensor) -> Tensor:
    """x [S, M, K] @ w [S, K, N] in float32 (OpenBLAS's or torch's, as the process's products), whose two
    gradient products dx = g w^T and dw = x^T g are ``bf16_bmm``'s (``use_bf16_gradients``)."""
    if _active == "openblas":
        return openblas_bmm(x, w)
    return torch.bmm(x, w)


@bf16_gradients_bmm.register_fake
def _(x: Tensor, w: Tensor) -> Tensor:
    return x.new_empty(x.shape[0], x.shape[1], w.shape[2])


def bf16_weight_gradient(x: Tensor, g: Tensor) -> Tensor:
    """dW = x^T g [S, K, N] of a product x [S, M, K] @ W by ``bf16_bmm``, as (g^T x)^T where x is the wider
    (K > N): oneDNN runs a weight gradient faster with its larger side as the product's columns (AMD Zen 4, one
    thread, 16,384 rows: 658 x 512 in 58 against 66 ms; 8,192 rows: 512 x 20 1.1 against 1.9, 512 x 1 0.4
    against 1.2; square ones even). The same products summed in the kernel's order: within one bfloat16 step of
    x^T g's."""
    if x.shape[2] > g.shape[2]:
        return bf16_bmm(g.transpose(1, 2), x).transpose(1, 2)
    return bf16_bmm(x.transpose(1, 2), g)


def _bf16_backward(
    ctx: torch.autograd.function.FunctionCtx, g: Tensor
) -> tuple[Tensor | None, Tensor | None]:
    # g rounded once for both products (``bf16_bmm`` takes a bfloat16 operand as it is)
    return _gradient_products(ctx, g.bfloat16(), bf16_bmm, bf16_weight_gradient)


bf16_gradients_bmm.register_autograd(_bf16_backward, setup_context=_setup_context)


@register_flop_formula([torch.ops.ers.bf16_bmm, torch.ops.ers.bf16_gradients_bmm])
def _bf16_flops(x_shape: torch.Size, w_shape: torch.Size, *args: object, **kwargs: object) -> int:
    return int(bmm_flop(x_shape, w_shape))


def bmm(x: Tensor, w: Tensor) -> Tensor:
    """x [S, M, K] @ w [S, K, N]: ``torch.bmm``, or ``openblas_bmm`` for CPU float32/float64 operands while the
    process's products are OpenBLAS's (``use_cpu_products``), but for outer products (K = 1: torch's kernel ran
    [16384, 1] @ [1, 512] in 1.6 ms, OpenBLAS in 14 ms, Zen 4) and products under ``MIN_MACS`` multiply-adds.
    With ``use_bf16_gradients(True)``, such a float32 product that needs a gradient is ``bf16_gradients_bmm``
    (the forward as above, the gradient products on bfloat16 operands)."""
    large = x.device.type == "cpu" and x.dtype in _BLAS_DTYPES and w.dtype == x.dtype
    large = large and not torch.is_autocast_enabled("cpu")  # autocast's products are torch's (bfloat16)
    # an outer product (K = 1: a value head's input gradient) and a small product are torch's faster
    large = large and x.shape[2] > 1 and x.shape[1] * x.shape[2] * w.shape[2] >= MIN_MACS
    gradient = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
    if large and _bf16_gradients and x.dtype == torch.float32 and gradient:
        return bf16_gradients_bmm(x, w)
    if large and _active == "openblas":
        return openblas_bmm(x, w)
    return torch.bmm(x, w)


def _numpy_blas_info() -> dict[str, Any] | None:
    """threadpoolctl's record of numpy's BLAS (its ``internal_api``, ``num_threads``, ...), or None (also where
    threadpoolctl is missing)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None

    for lib in threadpool_info():
        if lib.get("user_api") == "blas" and "numpy" in str(lib.get("filepath", "")):
            return dict(lib)
    return None


def blas_threads() -> int | None:
    """How many threads numpy's BLAS runs now (threadpoolctl), or None where threadpoolctl cannot tell."""
    info = _numpy_blas_info()
    return None if info is None else int(info["num_threads"])


def blas_threads_at(threads: int) -> AbstractContextManager[object]:
    """The BLAS libraries loaded in the process (numpy's among them) on ``threads`` threads inside the block, on
    their counts as found after it (threadpoolctl's limiter on a controller made once: ~12 us a block). How a
    learner whose products are OpenBLAS's runs numpy's BLAS on torch's thread count (``ProductSwitches``)."""
    global _controller  # noqa: PLW0603  (made once: listing the loaded libraries costs ~2 ms)
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return cast(AbstractContextManager[object], _controller.limit(limits=threads, user_api="blas"))


def numpy_blas() -> str | None:
    """The internal API of numpy's BLAS (``"openblas"``, ``"mkl"``, ...) as threadpoolctl reads it, or None
    (also where threadpoolctl is missing, e.g. a bare GPU image: ``"auto"`` then keeps torch's products)."""
    info = _numpy_blas_info()
    return None if info is None else str(info.get("internal_api"))


def _cpuinfo(field: str) -> str:
    """The first core's ``field`` in /proc/cpuinfo ("" where there is none, e.g. off Linux)."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        key, _, value = line.partition(":")
        if key.strip() == field:
            return value.strip()
    return ""


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def native_units(flags: Sequence[str]) -> bool:
    """Whether this is an x86 CPU whose first core lists any of ``flags`` in /proc/cpuinfo (none off Linux) and
    torch has oneDNN, whose kernels use such units (``native_bf16``, ``nets.int8.native_int8``)."""
    listed = set(_cpuinfo("flags").split())
    return _x86() and bool(listed & set(flags)) and torch.backends.mkldnn.is_available()


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (an x86 core with ``NATIVE_BF16_FLAGS``: AVX512-BF16 on AMD
    Zen 4 and later and Intel Cooper Lake and later, AMX-BF16 on Sapphire Rapids) and torch has oneDNN, whose
    kernels use it. Elsewhere the bfloat16 product is only emulated."""
    return native_units(NATIVE_BF16_FLAGS)


def resolve_bf16_gradients(
    choice: Bf16Gradients, device: str = "cpu", bf16_update: bool = False, net: str = "mlp"
) -> bool:
    """What ``choice`` (``TrainConfig.bf16_gradients``) resolves to: True and False are themselves; ``"auto"``
    is on for a learner on the CPU (``device``) without ``bf16_update`` whose net kind (``NetConfig.kind``) is
    one whose learning curve was studied with it (``BF16_STUDIED_NETS``) where ``native_bf16()``, else off."""
    return resolve_cpu_switch(
        "bf16_gradients", choice, device, bf16_update, net, BF16_STUDIED_NETS, native_bf16
    )


def resolve_cpu_switch(
    name: str,
    choice: bool | str,
    device: str,
    bf16_update: bool,
    net: str,
    studied: Sequence[str],
    native: Callable[[], bool],
) -> bool:
    """What a CPU product switch ``name`` (a ``TrainConfig`` field: ``bf16_gradients``, ``int8_inputs``) set to
    ``choice`` resolves to: True and False are themselves; ``"auto"`` is on for a learner on the CPU (``device``)
    without ``bf16_update`` whose net kind is one whose learning curve was studied with it (``studied``) where
    ``native()`` (asked last), else off; anything else is a ``ValueError``."""
    if choice is True or choice is False:
        return choice
    if choice != "auto":
        raise ValueError(f"{name} = {choice!r}: choose True, False or 'auto'")
    cpu = device.split(":", maxsplit=1)[0] == "cpu"
    return cpu and not bf16_update and net in studied and native()


def resolve_cpu_products(kind: str) -> str:
    """What ``kind`` (``CpuProducts``) resolves to on this machine: ``"auto"`` is ``"openblas"`` on an AMD x86
    CPU (``vendor_id`` AuthenticAMD) when torch's products are MKL's and numpy's BLAS is OpenBLAS, else
    ``"torch"``. ``"openblas"`` without numpy's OpenBLAS is refused."""
    if kind not in CPU_PRODUCTS:
        raise ValueError(f"cpu_products = {kind!r}: choose {', '.join(CPU_PRODUCTS)}")
    if kind == "torch":
        return kind
    blas = numpy_blas()
    if kind == "openblas":
        if blas != "openblas":
            raise ValueError(f"cpu_products = 'openblas', but numpy's BLAS here is {blas or 'unknown'}")
        return kind
    amd = _x86() and _cpuinfo("vendor_id") == "AuthenticAMD"
    return "openblas" if amd and torch.backends.mkl.is_available() and blas == "openblas" else "torch"


def use_cpu_products(kind: str, threads: int | None = None) -> str:
    """Sets the process's CPU products to ``resolve_cpu_products(kind)`` and returns it; with OpenBLAS, numpy's
    BLAS runs ``threads`` threads (default: torch's ``get_num_threads()``)."""
    global _active  # noqa: PLW0603  (a process-wide switch, as torch.backends' own)
    resolved = resolve_cpu_products(kind)
    if resolved == "openblas":
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads or torch.get_num_threads(), user_api="blas")
    _active = resolved
    return resolved


def set_cpu_products(kind: str) -> None:
    """Sets the process's products to ``kind`` as ``use_cpu_products`` resolved it (``"torch"`` or
    ``"openblas"``), numpy's threads untouched: how a learner's switches are entered and left
    (``nets.switches.ProductSwitches``)."""
    global _active  # noqa: PLW0603  (a process-wide switch, as use_cpu_products)
    if kind not in ("torch", "openblas"):
        raise ValueError(f"set_cpu_products({kind!r}): give 'torch' or 'openblas' (a resolved choice)")
    _active = kind


def use_bf16_gradients(on: bool) -> None:
    """From now on (process-wide) the gradient products of the large CPU float32 products that ``bmm`` runs
    (``TrainConfig.bf16_gradients``) take bfloat16 operands; their forward stays float32."""
    global _bf16_gradients  # noqa: PLW0603  (a process-wide switch, as use_cpu_products)
    _bf16_gradients = bool(on)


def bf16_gradients() -> bool:
    """Whether ``use_bf16_gradients`` is on in this process."""
    return _bf16_gradients


def cpu_products() -> str:
    """The process's CPU products now: ``"torch"`` (the default) or ``"openblas"``."""
    return _active
