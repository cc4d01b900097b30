"""How far issue 21's CPU targets (2x the learner before issue 21; Hanabi-Full, MLP 512, 256 envs x 128 steps;
Overcooked V2, CNN + GRU, 64 x 256) are from reach, measured on this machine, one torch thread, each learner in
a fresh process:

* ``ab``: the learner before issue 21 (a worktree of ``--before``, default 33613e1) against the learner now (as
  configured: ``bf16_gradients="auto"``, on where the CPU multiplies bfloat16 natively), interleaved pairs (this
  VM's speed drifts by up to 1.6x within an hour, so only neighbours are compared);
* ``bound`` (Hanabi): the learner now with float32 gradient products (side ``float32``, as every side but
  ``now`` and ``bf16-gradients``) against the same learner whose first layer (658 -> 512, 37 % of the update's
  products) reads 8 inputs instead of 658: what a free first layer would give, an upper bound for any exact
  reformulation of it (the binary observation as table lookups);
* ``lookup``: that reformulation with torch's own kernel (``F.embedding_bag`` over 46 groups of a structured
  encoding) against the dense product, forward and backward, at one minibatch (16,384 rows);
* ``delta``: the first layer's forward over one turn-stream minibatch of a real rollout as the product of each
  stream's step-to-step change (``F.embedding_bag`` with +-1 weights over its few nonzero inputs) summed along
  time, restarting where a game starts, against the dense product: its pieces, and its error against float64;
* ``blas``: the update's product shapes in torch (MKL on x86) against numpy's BLAS (OpenBLAS in the wheels) and
  torch on bfloat16 operands, and the learner with an eager update against the same learner with every
  ``SLinear`` product through numpy; from the product rates, an update's products with only the gradient
  products in bfloat16 (casts included), the forward in float32;
* ``products``: the learner with torch's products (``cpu_products="torch"``) against the learner as configured
  (``"auto"``: OpenBLAS's on AMD x86, ``ers_deep.nets.blas``), both with float32 gradient products;
* ``bf16``: the learner with float32 gradient products against the same learner with ``bf16_gradients=True`` (the update's gradient products on
  bfloat16 operands, its forward in float32: ``ers_deep.nets.blas.bf16_gradients_bmm``); ``before-bf16``: the
  learner before issue 21 against that one.

Several parts' pairs run interleaved (``PAIRS``): ``--parts ab,before-bf16 --pairs 3`` runs before, now, before,
bf16-gradients three times.

    python scripts/cpu_learner_bounds.py --out docs/measurements/hanabi-cpu-bounds.json --pairs 2
    python scripts/cpu_learner_bounds.py --env overcooked-v2 --parts ab --out overcooked.json  # its A/B only
    python scripts/cpu_learner_bounds.py --parts products --pairs 3 --out products.json  # torch's / OpenBLAS
    python scripts/cpu_learner_bounds.py --parts delta --out delta.json  # the first layer as step-to-step changes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS on one thread, as torch
HIDDEN_INPUTS = 8  # the bound's first layer reads this many of the observation's 658 inputs
ROWS = 16_384  # one PPO minibatch at 256 x 128: 32,768 env-steps x 2 agents / 4 minibatches


def learner_config(env: str) -> Any:
    """Issue 21's CPU setting of ``env``: Hanabi-Full 256 x 128 (4 x 4 minibatches, MLP 512) or Overcooked V2
    64 x 256 (16 minibatches, CNN + GRU 128)."""
    from ers_deep.train.config import paper_config

    if env == "hanabi":
        return paper_config("hanabi", num_envs=256, num_steps=128)
    return paper_config("overcooked-v2", num_envs=64, num_steps=256, minibatches=16)


def learner_side(side: str, updates: int, env: str = "hanabi") -> dict[str, Any]:
    """One learner's env-steps/s (``updates`` timed updates after one warm-up), in this process."""
    import torch

    torch.set_num_threads(1)
    import ers_deep
    from ers_deep.train.ippo import Learner

    cfg = learner_config(env)
    if side.startswith("eager"):
        cfg = cfg.replace(update_mode="eager")
    if side == "torch-products":
        cfg = cfg.replace(cpu_products="torch")
    if side not in (
        "before",
        "now",
    ):  # "now": as configured (bf16_gradients, int8_inputs "auto"); others pinned
        cfg = cfg.replace(bf16_gradients=side == "bf16-gradients", int8_inputs=False)
    net = free_first_layer_net(cfg) if side == "bound" else numpy_net(cfg) if side == "eager-numpy" else None
    learner = Learner(cfg, net=net) if net is not None else Learner(cfg)
    learner.train_step()
    secs = []
    c0 = time.process_time()
    for _ in range(updates):
        t0 = time.perf_counter()
        learner.train_step()
        secs.append(time.perf_counter() - t0)
    steps = cfg.num_envs * cfg.num_steps * len(secs)
    return {
        "side": side,
        "env": env,
        "ers_deep": str(Path(ers_deep.__file__).parents[3]),
        "seconds_per_update": secs,
        "env_steps_per_s": steps / sum(secs),
        "cpu_products": getattr(learner, "cpu_products", "torch"),
        "bf16_gradients": getattr(learner, "bf16_gradients", False),  # what the config resolved to
        "int8_inputs": getattr(learner, "int8_inputs", False),  # likewise
        "cores_used": (time.process_time() - c0) / sum(secs),
    }


def free_first_layer_net(cfg: Any) -> Any:
    """The default net with its first layer reading ``HIDDEN_INPUTS`` inputs: every other layer, the heads on
    the acting rows, the loss and the update are the learner's own."""
    from ers_deep.nets.actor_critic import FeedForward
    from ers_deep.nets.layers import SLinear
    from ers_deep.train.config import make_env

    class FreeFirstLayer(FeedForward):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self.embed = SLinear(HIDDEN_INPUTS, self.embed.weight.shape[-1], self.generators())

        def forward_rows(self, obs: Any, first: Any, state: Any, rows: Any) -> Any:
            return super().forward_rows(obs[..., :HIDDEN_INPUTS], first, state, rows)

    env = make_env(cfg, 1, 0)
    return FreeFirstLayer(cfg.seeds, env.obs_shape, env.num_actions, hidden=cfg.net.hidden)


def numpy_net(cfg: Any) -> Any:
    """The default net with every ``SLinear`` product (forward and both gradients) through numpy's BLAS."""
    import numpy as np
    import torch

    from ers_deep.nets.actor_critic import FeedForward
    from ers_deep.nets.layers import SLinear
    from ers_deep.train.config import make_env

    def bmm(a: Any, b: Any) -> Any:
        out = torch.empty(a.shape[0], a.shape[1], b.shape[2])
        an, bn, on = a.detach().numpy(), b.detach().numpy(), out.numpy()
        for s in range(a.shape[0]):
            np.matmul(an[s], bn[s], out=on[s])
        return out

    class NumpyProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, w: Any) -> Any:
            ctx.save_for_backward(x, w)
            return bmm(x, w)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            x, w = ctx.saved_tensors
            g = g.contiguous()
            gx = bmm(g, w.transpose(1, 2)) if ctx.needs_input_grad[0] else None
            return gx, bmm(x.transpose(1, 2), g) if ctx.needs_input_grad[1] else None

    class NumpyLinear(SLinear):
        def forward(self, x: Any) -> Any:
            y = NumpyProduct.apply(x.contiguous(), self.weight)
            return y + self.bias if self.bias is not None else y

    env = make_env(cfg, 1, 0)
    net = FeedForward(cfg.seeds, env.obs_shape, env.num_actions, hidden=cfg.net.hidden)
    for layer in net.modules():
        if type(layer) is SLinear:
            layer.__class__ = NumpyLinear  # the same parameters, the products through numpy
    return net


def timed(f: Any, n: int = 4) -> float:
    f()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


def lookup_vs_dense() -> dict[str, float]:
    """Milliseconds at one minibatch: the first layer as ``F.embedding_bag`` (forward; forward + backward into
    the tables) and as the dense product (forward; the weight gradient)."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    # hands 5 x 26, missing cards 4, deck 41, fireworks 5 x 6, info 9, life 4, discards 5 x 216 (a colour's
    # copies), last action 7 x 256 (bytes), plausible cards 10 x 1024 (colour x rank masks), hints 10 x 36
    sizes = [26] * 5 + [4, 41] + [6] * 5 + [9, 4] + [216] * 5 + [256] * 7 + [1024] * 10 + [36] * 10
    width = torch.tensor(sizes)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), width.cumsum(0)[:-1]])
    index = ((torch.rand(ROWS, len(sizes), generator=g) * width).long() + offsets).reshape(-1)
    bags = torch.arange(0, ROWS * len(sizes), len(sizes))
    table = torch.randn(int(width.sum()), 512, generator=g, requires_grad=True)
    grad = torch.randn(ROWS, 512, generator=g)

    def bag_backward() -> None:
        table.grad = None
        F.embedding_bag(index, table, bags, mode="sum").backward(grad)

    x, w = torch.randn(ROWS, 658, generator=g), torch.randn(658, 512, generator=g)
    return {
        "groups": len(sizes),
        "table_rows": int(width.sum()),
        "embedding_bag_forward_ms": 1e3 * timed(lambda: F.embedding_bag(index, table, bags, mode="sum")),
        "embedding_bag_forward_backward_ms": 1e3 * timed(bag_backward),
        "dense_forward_ms": 1e3 * timed(lambda: x @ w),
        "dense_weight_gradient_ms": 1e3 * timed(lambda: x.t() @ grad),
    }


def delta_vs_dense() -> dict[str, Any]:
    """Milliseconds and errors of the first layer's forward over one minibatch of turn streams (M = N / 4
    streams x T steps, rows [T, M]): dense X W (torch; numpy's BLAS) against the delta form, X_t W = X_{t-1} W +
    (X_t - X_{t-1}) W within a game (D_t = X_t where one starts): D's nonzero inputs once per update for all
    streams (``prep_all``), per minibatch its streams' D and their nonzeros (``select``), the lookup-sum
    (``bag``), and the scan along time (``scan``: T - 1 in-place steps; ``torch.cumsum`` beside it)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from ers_deep.train.ippo import Learner
    from ers_deep.train.ppo import turn_streams

    torch.set_num_threads(1)
    learner = Learner(learner_config("hanabi").replace(update_mode="eager"))
    ro, _ = learner.collect()
    obs, first = ro.obs[0], ro.first[0].bool()  # [T, N, O], [T, N]
    streams = turn_streams(ro.acting, learner.P)[0]  # [T, N]: the actor each stream reads at t
    T, N, O = obs.shape
    g = torch.Generator().manual_seed(0)
    w = torch.randn(O, 512, generator=g) * O**-0.5
    pick = torch.randperm(N, generator=g)[: N // 4]

    def prep_all() -> tuple[Any, Any]:
        x = obs.gather(1, streams[..., None].expand(T, N, O)).to(torch.int8)
        start = first.gather(1, streams)
        d = x.clone()
        d[1:] -= x[:-1] * ~start[1:, :, None]
        return d, ~start

    d_all, keep_all = prep_all()
    keep = keep_all[:, pick].float()

    def select() -> tuple[Any, Any, Any]:
        d = d_all[:, pick].reshape(-1, O)
        rows, cols = d.nonzero().unbind(1)
        return cols, torch.searchsorted(rows, torch.arange(d.shape[0])), d[rows, cols].float()

    cols, offsets, vals = select()
    bag = F.embedding_bag(cols, w, offsets, mode="sum", per_sample_weights=vals).view(T, -1, 512)

    def scan() -> Any:
        z = bag.clone()
        for t in range(1, T):
            z[t].addcmul_(z[t - 1], keep[t, :, None])
        return z

    x = obs.gather(1, streams[:, pick, None].expand(T, len(pick), O))
    xn, wn = x.reshape(-1, O).numpy(), w.numpy()
    exact = x.double() @ w.double()
    return {
        "rows": int(x.shape[0] * x.shape[1]),
        "ones_per_row": float(x.sum(-1).mean()),
        "delta_nonzeros_per_row": len(cols) / (x.shape[0] * x.shape[1]),
        "dense_torch_ms": 1e3 * timed(lambda: x @ w),
        "dense_numpy_ms": 1e3 * timed(lambda: xn @ wn),
        "prep_all_ms": 1e3 * timed(prep_all),
        "select_ms": 1e3 * timed(select),
        "bag_ms": 1e3 * timed(lambda: F.embedding_bag(cols, w, offsets, mode="sum", per_sample_weights=vals)),
        "scan_ms": 1e3 * timed(scan),
        "torch_cumsum_ms": 1e3 * timed(lambda: bag.cumsum(0)),
        "max_abs_error_delta": float((scan().double() - exact).abs().max()),
        "max_abs_error_dense": float(((x @ w).double() - exact).abs().max()),
        "max_abs_value": float(exact.abs().max()),
        "ones_and_signs_ok": bool(np.isin(vals.numpy(), (-1.0, 1.0)).all()),
    }


def product_ops(kind: str, k: int) -> dict[str, Any]:
    """One of the update's products at one minibatch (``fwd``: X W; ``dw``: X^T G; ``dx``: G W^T, X [rows, k],
    W [k, 512], G [rows, 512]) as calls on the same values: torch's, numpy's, torch's on bfloat16 operands cast
    beforehand, and the same with the casts in (float32 operands in, a float32 result out)."""
    import torch

    x, g, w = torch.randn(ROWS, k), torch.randn(ROWS, 512), torch.randn(k, 512)
    xn, gn, wn = x.numpy(), g.numpy(), w.numpy()
    xb, gb, wb = x.bfloat16(), g.bfloat16(), w.bfloat16()

    def cast(a: Any, b: Any) -> Any:
        return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).float()

    if kind == "fwd":
        ops = [lambda: x @ w, lambda: xn @ wn, lambda: xb @ wb, lambda: cast(x, w)]
    elif kind == "dw":
        ops = [lambda: x.t() @ g, lambda: xn.T @ gn, lambda: xb.t() @ gb, lambda: cast(x.t(), g)]
    else:
        ops = [lambda: g @ w.t(), lambda: gn @ wn.T, lambda: gb @ wb.t(), lambda: cast(g, w.t())]
    return dict(zip(PRODUCT_LIBS, ops))


PRODUCT_LIBS = ("torch", "numpy", "bfloat16", "bfloat16 with casts")


def blas() -> list[dict[str, Any]]:
    """GFLOP/s of the update's products (one minibatch) in torch, numpy's BLAS and torch on bfloat16 operands
    (oneDNN's AVX512-BF16 kernels where the CPU has them; without and with the casts), three rounds each."""
    import torch

    torch.set_num_threads(1)
    shapes = [("first layer, forward", 658, "fwd"), ("first layer, weight gradient", 658, "dw")]
    shapes += [("hidden layer, forward", 512, "fwd"), ("hidden layer, weight gradient", 512, "dw")]
    shapes += [("hidden layer, input gradient", 512, "dx")]
    rows = []
    for name, k, kind in shapes:
        flop = 2 * ROWS * k * 512 / 1e9
        rates = {lib: [flop / timed(op) for _ in range(3)] for lib, op in product_ops(kind, k).items()}
        rows.append({"product": name, "kind": kind, "k": k, "gflop": flop, "gflop_s": rates})
    return rows


def bf16_gradients(rows: list[dict[str, Any]], minibatches: int = 16) -> dict[str, float]:
    """Seconds of one update's products (``minibatches`` minibatches) at the rates of ``blas()``: all in float32
    on numpy's BLAS, and with only the gradient products (``dw``, ``dx``) in bfloat16, casts included. The
    second is what a forward in float32 with bfloat16 backward products would leave; both take the best of three
    rounds, and the actor's hidden layer (acting rows only: half the rows) at half the critic's time."""
    best = {(r["k"], r["kind"]): {lib: max(v) for lib, v in r["gflop_s"].items()} for r in rows}
    hidden = 1.5  # the critic's hidden layer on every row and the actor's on the acting half
    uses = [((658, "fwd"), 1.0), ((512, "fwd"), hidden), ((658, "dw"), 1.0), ((512, "dw"), hidden)]
    uses.append(((512, "dx"), hidden))
    flop = {(r["k"], r["kind"]): r["gflop"] for r in rows}

    def seconds(lib_of: Any) -> float:
        return minibatches * sum(n * flop[key] / best[key][lib_of(key[1])] for key, n in uses)

    float32 = seconds(lambda kind: "numpy")
    mixed = seconds(lambda kind: "numpy" if kind == "fwd" else "bfloat16 with casts")
    return {"float32_s": float32, "bf16_gradients_s": mixed, "saved_s": float32 - mixed}


def cpu_name() -> str:
    """The CPU's model name, family and model (Linux), and the core count."""
    info: dict[str, str] = {}
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    name = info.get("model name", platform.machine())
    return f"{name} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}), {os.cpu_count()} cores"


def run_side(side: str, updates: int, before: Path, env_name: str = "hanabi") -> dict[str, Any]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if side == "before":
        src = [before / "packages" / p / "src" for p in ("ers-deep", "ers-exact")]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in src)
    cmd = [sys.executable, __file__, "--side", side, "--updates", str(updates), "--env", env_name]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def worktree(commit: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"ers-worktree-{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", str(path), commit], check=True)
    return path


#: each part's pair of sides (left, right: the ratio is right / left)
PAIRS = {
    "ab": ("before", "now"),
    "bound": ("float32", "bound"),
    "blas": ("eager", "eager-numpy"),
    "products": ("torch-products", "float32"),
    "bf16": ("float32", "bf16-gradients"),
    "before-bf16": ("before", "bf16-gradients"),
}


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    from ers_exact.util.cli import script_parser  # imported where used, as this script's other ers imports

    ap = script_parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--before", default="33613e1")
    ap.add_argument("--parts", default="ab,bound,lookup,blas")
    ap.add_argument(
        "--env",
        default="hanabi",
        choices=["hanabi", "overcooked-v2"],
        help="the learner pairs' env (not bound, blas)",
    )
    return ap


def main() -> None:
    # a child of run_side: --side SIDE --updates N --env ENV as it writes them, read without ``parser`` (the
    # child of side "before" imports the old commit's ers packages)
    if sys.argv[1:2] == ["--side"]:
        flags = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=True))
        print(json.dumps(learner_side(flags["--side"], int(flags["--updates"]), flags["--env"])))
        return
    ap = parser()
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    result: dict[str, Any] = {
        "what": __doc__.split("\n\n")[0],
        "date": time.strftime("%Y-%m-%d"),
        "machine": cpu_name(),
        "command": " ".join(sys.argv),
    }
    # the parts' pairs interleaved (part 1's first pair, part 2's first pair, ..., part 1's second pair, ...), so
    # that pairs of different parts measured in turn are neighbours too
    pairs = [pair for _ in range(a.pairs) for part, pair in PAIRS.items() if part in parts]
    before = worktree(a.before) if parts & {"ab", "before-bf16"} else Path()
    if a.env != "hanabi" and parts - {"ab", "products", "bf16", "before-bf16"}:
        ap.error("--env overcooked-v2 runs the ab, products and bf16 parts only (e.g. --parts ab,products)")
    for left, right in pairs:
        x, y = run_side(left, a.updates, before, a.env), run_side(right, a.updates, before, a.env)
        ratio = y["env_steps_per_s"] / x["env_steps_per_s"]
        result.setdefault("pairs", []).append({"left": x, "right": y, "ratio": ratio})
        print(
            f"{left} {x['env_steps_per_s']:.0f}  {right} {y['env_steps_per_s']:.0f}  ratio {ratio:.2f}",
            flush=True,
        )
    if "lookup" in parts:
        result["lookup"] = lookup_vs_dense()
        print(result["lookup"], flush=True)
    if "delta" in parts:
        result["delta"] = delta_vs_dense()
        print(result["delta"], flush=True)
    if "blas" in parts:
        result["blas"] = blas()
        result["bf16_gradients"] = bf16_gradients(result["blas"])
        print(json.dumps(result["blas"]), json.dumps(result["bf16_gradients"]), sep="\n", flush=True)
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
