"""Issue 21's device table: end-to-end IPPO env-steps/s of ers (fast collection + update) against the JAX anchors
(``../shared/anchors``, carried as ``.anchors/``) on the same GPU, in the same run, then a time-budgeted
Hanabi-Full self-play run of each side. Rows run most-needed first (``--rows``, ``--sizes`` choose them); in
each row the anchor runs first, then ers's configs (the default, then each ``--row-variants``); every result is
appended to ``OUT/gpu-train-table.json`` at once; a row or an ers config that would start after ``--budget-s``
(an ers config: with less than ``--min-variant-s`` left) is skipped and listed.

    python scripts/gpu_train_table.py --out results/train-gpu --budget-s 540
    python scripts/gpu_train_table.py --markdown results/train-gpu/gpu-train-table.json
    python scripts/gpu_train_table.py --device cpu --tiny --out /tmp/t   # the CPU try of the whole script
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

ROWS = [  # (env, num_envs, num_steps, minibatches); "learn": the self-play runs
    ("hanabi", 1024, 128, 4),
    ("overcooked-v2", 256, 256, 64),
    ("learn", 1024, 128, 4),
    ("overcooked-v2", 1024, 128, 16),
    ("hanabi", 8192, 128, 4),
]
TINY = [("hanabi", 8, 4, 2), ("overcooked-v2", 4, 8, 2), ("learn", 8, 4, 2)]
#: ers's Hanabi plausible-card features in every Hanabi row (``--hanabi-knowledge``): JaxMARL's V0 belief by
#: default, the observation of the anchor's env (the rows before 2026-11-27 ran HLE's bits, "plausible")
SETTINGS = {"hanabi_knowledge": "v0-belief"}


def anchor_args(env: str, n: int, t: int, mb: int, tiny: bool) -> tuple[str, list[str]]:
    if env == "hanabi":
        chunks = 4
        return "ippo_hanabi_jax.py", [
            "--preset",
            "very-small" if tiny else "full",
            "--num-envs",
            str(n),
            "--num-steps",
            str(t),
            "--total-steps",
            str(chunks * 5 * n * t),
            "--eval-games",
            "16" if tiny else "200",
            *(["--hidden", "16"] if tiny else []),
        ]
    return "ippo_overcooked_jax.py", [str(n), str(t), str(mb), "1" if tiny else "2"]


def ers_config(env: str, n: int, t: int, mb: int, device: str, tiny: bool, **kw: Any) -> Any:
    """The ers config of a row with the variant's overrides ``kw`` (``phi`` aside: the net, ``ers_net``)."""
    from ers_deep.nets import NetConfig
    from ers_deep.train import paper_config

    kw.pop("phi", None)
    over: dict[str, Any] = {"num_envs": n, "num_steps": t, "minibatches": mb, "device": device}
    if tiny:
        over["net"] = (
            NetConfig(kind="mlp", hidden=16)
            if env == "hanabi"
            else NetConfig(kind="cnn-gru", hidden=8, conv=8)
        )
        if env == "hanabi":
            over["hanabi_preset"] = "Hanabi-Very-Small"
    if env == "hanabi":  # the anchor's observation (JaxMARL's V0 belief), unless a variant says otherwise
        over["hanabi_knowledge"] = SETTINGS["hanabi_knowledge"]
    net_over = {k.removeprefix("net."): kw.pop(k) for k in [k for k in kw if k.startswith("net.")]}
    cfg = paper_config(env, total_env_steps=10**10, **{**over, **kw})
    return cfg.replace(net=dataclasses.replace(cfg.net, **net_over)) if net_over else cfg


def ers_net(cfg: Any, over: dict[str, Any]) -> Any:
    """The net of a variant: other-play's where it sets ``phi`` (``none``, ``mdp`` or ``learned:K``:
    ``ers_deep.bench.other_play.bench_op_net``), else None (self-play's, the learner's own)."""
    from ers_deep.bench.other_play import bench_op_net

    return bench_op_net(cfg, str(over["phi"])) if "phi" in over else None


def record(out: Path, row: dict[str, Any]) -> None:
    path = out / "gpu-train-table.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    rows.append(row)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1))
    os.replace(tmp, path)
    print(json.dumps(row)[:400], flush=True)


def learning_run(
    env: str,
    n: int,
    t: int,
    seconds: float,
    device: str,
    tiny: bool,
    progress: Path | None = None,
    from_start: bool = False,
    seed: int | tuple[int, ...] = 0,
    **over: Any,
) -> dict[str, Any]:
    """ers self-play for ``seconds`` of wall time (``ers_deep.bench.selfplay.timed_selfplay``: after setup, or
    with ``from_start`` from before the learner is built); ``progress``: one JSON line per update and seed,
    written as it runs. ``seed``: the learner's seed (``--learn-seed``, as the anchor's ``--seed``), or several
    stacked in one learner (``--learn-seeds``). After the clock, each seed's own evaluation over 200 new games
    (16 with ``tiny``), as the anchor's. ``over``: config fields on top, e.g. ``vf_coef=1.0``."""
    from ers_deep.bench.selfplay import timed_selfplay

    seeds = (seed,) if isinstance(seed, int) else tuple(seed)
    cfg = ers_config(env, n, t, 4, device, tiny, **{"seeds": seeds, **over})
    return timed_selfplay(cfg, seconds, progress, from_start, eval_games=16 if tiny else 200)


def learn_seeds(a: argparse.Namespace) -> tuple[int, ...]:
    """The learning runs' seeds: ``--learn-seeds`` (comma-separated) where given, else ``--learn-seed``."""
    seeds = tuple(int(x) for x in a.learn_seeds.split(",") if x.strip())
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"--learn-seeds repeats a seed: {a.learn_seeds}")
    return seeds or (a.learn_seed,)


def learn(
    a: Any, out: Path, n: int, t: int, left: Any, anchors: Path, jax_env: dict[str, str], warm: float
) -> None:
    """Hanabi self-play of each side in ``a.learn_sides`` for ``a.learn_s`` seconds of training (the anchor gets
    its compile time ``warm`` on top, as its time limit counts from its start; with ``a.learn_from_start`` both
    clocks count setup and compilation, and the anchor gets no extra time). ers runs its default config (unless
    ``a.no_default``) and then each of ``a.learn_variants``. With several seeds (``--learn-seeds``) ers stacks
    them in one learner and the anchor runs one process per seed, all at once (``bench_anchors``), each
    logging to ``learn-anchor-seed<S>.jsonl``; ``python -m ers_deep.bench.learn_pair`` compares the logs."""
    from ers_deep.bench.train import bench_anchor, bench_anchors

    sides, seeds = a.learn_sides.split(","), learn_seeds(a)
    variants = [parse_over(x) for x in a.learn_variants.split(";") if x]
    ers_runs: list[dict[str, Any]] = ([] if a.no_default else [{}]) + variants if "ers" in sides else []
    warm = 0.0 if a.learn_from_start else warm
    runs = len(ers_runs) + ("anchor" in sides)
    if a.learn_s <= 0 or left() < runs * a.learn_s + warm + 60:
        record(out, {"kind": "skipped", "env": "learning runs", "why": "budget"})
        return
    for i, over in enumerate(ers_runs):
        progress = out / f"learn-ers-{i}.jsonl"
        try:
            r = learning_run(
                "hanabi", n, t, a.learn_s, a.device, a.tiny, progress, a.learn_from_start, seeds, **over
            )
        except Exception as e:
            r = {"error": f"{type(e).__name__}: {e}"[:500]}
        row = {"kind": "learn-ers", "env": "hanabi", "num_envs": n, "config": over, "seed": seeds[0]}
        record(out, {**row, "seeds": list(seeds), **r})
    if "anchor" not in sides:
        return
    script, args = anchor_args("hanabi", n, t, 4, a.tiny)
    cut = args.index("--total-steps")
    args = [*args[:cut], "--total-steps", "1e10", "--seconds", str(a.learn_s + warm), *args[cut + 2 :]]
    logs = [out / ("learn-anchor.jsonl" if len(seeds) == 1 else f"learn-anchor-seed{s}.jsonl") for s in seeds]
    arg_sets = [[*args, "--out", str(log), "--seed", str(s)] for s, log in zip(seeds, logs)]
    timeout = a.learn_s + warm + 120
    if len(seeds) == 1:
        results = [bench_anchor(anchors / script, arg_sets[0], env=jax_env, timeout=timeout)]
        shared: dict[str, Any] = {}
    else:
        batch = bench_anchors(anchors / script, arg_sets, env=jax_env, timeout=timeout)
        results = batch.pop("runs")
        shared = {"concurrent": len(seeds), "batch": batch}
    for s, r in zip(seeds, results):
        record(out, {"kind": "learn-anchor", "env": "hanabi", "num_envs": n, "seed": s, **shared, **r})


def selected_rows(a: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    """The rows of ``ROWS`` (``TINY`` with ``--tiny``) that ``--rows`` and ``--sizes`` keep, in order."""
    kinds = {x for x in a.rows.split(",") if x}
    sizes = {int(x) for x in a.sizes.split(",") if x}
    rows = TINY if a.tiny else ROWS
    return [r for r in rows if (not kinds or r[0] in kinds) and (not sizes or r[1] in sizes)]


def row_variants(text: str, env: str) -> list[dict[str, Any]]:
    """The ers measurements of a row of ``env``: the default config, then each ';'-separated variant of
    ``--row-variants`` (config overrides, :func:`parse_over`) that applies to it: an unprefixed variant to every
    row, ``"ENV:overrides"`` only to rows of ENV (e.g. ``overcooked-v2:cudnn_benchmark=true``)."""
    out: list[dict[str, Any]] = [{}]
    for item in (x.strip() for x in text.split(";") if x.strip()):
        scope, sep, rest = item.partition(":")
        if sep and "=" not in scope:
            if scope == env:
                out.append(parse_over(rest))
        else:
            out.append(parse_over(item))
    return out


def parse_over(text: str) -> dict[str, Any]:
    """``"vf_coef=1.0,normalize_advantage=false"`` -> config fields (values read as JSON, else strings)."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value.strip()
    return out


def parser() -> argparse.ArgumentParser:
    """The command line of this script (``main``; the tests parse train-gpu.sh's plans with it; abbreviated flags
    refused: ``script_parser``)."""
    from ers_exact.util.cli import script_parser

    p = script_parser()
    p.add_argument("--out", default="results/train-gpu")
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget-s", type=float, default=540)
    p.add_argument("--learn-s", type=float, default=60, help="seconds of each side's self-play run (0: none)")
    p.add_argument(
        "--update-modes", default="auto", help="ers update modes measured per row, e.g. auto,eager"
    )
    p.add_argument(
        "--learn-variants",
        default="",
        help="more ers learning runs, ';'-separated config overrides, e.g. 'vf_coef=1.0'",
    )
    p.add_argument(
        "--row-variants",
        default="",
        help="more ers measurements per row, ';'-separated config overrides, e.g. 'bf16_update=true'; "
        "'ENV:overrides' only in rows of ENV, e.g. 'overcooked-v2:cudnn_benchmark=true'; net.FIELD for the "
        "NetConfig, e.g. 'overcooked-v2:net.spatial=\"matmul\"'; phi=mdp or phi=learned:K for other-play's net "
        "(the env's symmetries, or K stand-ins for learned ones: ers_deep.bench.other_play)",
    )
    p.add_argument(
        "--learn-sides", default="ers,anchor", help="the learning runs' sides: ers, anchor or both"
    )
    p.add_argument(
        "--learn-from-start",
        action="store_true",
        help="each side's learning clock counts its setup and compilation (a --learn-s run from its start)",
    )
    p.add_argument(
        "--hanabi-knowledge",
        default=SETTINGS["hanabi_knowledge"],
        help="ers's Hanabi plausible-card features: v0-belief (the anchor's env) or plausible (HLE's bits)",
    )
    p.add_argument("--learn-seed", type=int, default=0, help="the learning runs' seed (both sides)")
    p.add_argument(
        "--learn-seeds",
        default="",
        help="several learning seeds, e.g. '0,1,2,3': ers stacks them in one learner, the anchor runs one process"
        " per seed at once (replaces --learn-seed)",
    )
    p.add_argument("--rows", default="", help="only these row kinds, e.g. 'learn' or 'hanabi,overcooked-v2'")
    p.add_argument(
        "--sizes", default="", help="only rows of these numbers of envs, e.g. '1024' or '1024,8192'"
    )
    p.add_argument(
        "--no-default",
        action="store_true",
        help="in each row only the --row-variants, and of the ers learning runs only the --learn-variants (not the"
        " default config: its figure from an earlier run)",
    )
    p.add_argument(
        "--min-variant-s",
        type=float,
        default=60,
        help="an ers measurement starts only with this many seconds of the budget left (else listed as skipped)",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        help="per ers row, the N most expensive kernels/operators of one more update (torch.profiler; 0: none)",
    )
    p.add_argument("--tiny", action="store_true", help="tiny sizes (a CPU try of the script)")
    p.add_argument("--markdown", default=None, help="print the markdown table of this JSON file and exit")
    return p


def main() -> None:
    from ers_deep.bench.train_table import markdown  # lazily, as every ers_deep import here (torch behind it)

    a = parser().parse_args()
    SETTINGS["hanabi_knowledge"] = a.hanabi_knowledge
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return
    import torch

    from ers_deep.bench.train import bench_anchor, bench_learner

    t0 = time.perf_counter()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    anchors = (
        Path(".anchors")
        if Path(".anchors").is_dir()
        else Path(__file__).resolve().parents[2] / "shared" / "anchors"
    )
    jax_env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    if a.device == "cpu":
        jax_env["JAX_PLATFORMS"] = "cpu"
    device_name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    record(out, {"kind": "device", "device": device_name, "torch": torch.__version__, **SETTINGS})
    left = lambda: a.budget_s - (time.perf_counter() - t0)  # noqa: E731
    compile_s: dict[str, float] = {}
    for env, n, t, mb in selected_rows(a):
        if env == "learn":
            learn(a, out, n, t, left, anchors, jax_env, compile_s.get("hanabi", 30.0))
            continue
        if left() < 60:
            record(out, {"kind": "skipped", "env": env, "num_envs": n, "why": "budget"})
            continue
        # the anchor first: a row's ratio exists even where the budget ends among ers's variants
        script, args = anchor_args(env, n, t, mb, a.tiny)
        r = bench_anchor(anchors / script, args, env=jax_env, timeout=max(120.0, left() - 10))
        last = (r.get("lines") or [{}])[-1]
        compile_s.setdefault(env, float(last.get("compile_and_warm_s", 30.0)))
        record(out, {"kind": "anchor", "env": env, "num_envs": n, "num_steps": t, "minibatches": mb, **r})
        variants = row_variants(a.row_variants, env)[1 if a.no_default else 0 :]
        for mode, over in [(m, o) for m in a.update_modes.split(",") for o in variants]:
            if left() < a.min_variant_s:  # a variant that cannot finish is listed, not started
                record(out, {"kind": "skipped", "env": env, "num_envs": n, "config": over, "why": "budget"})
                continue
            cfg = ers_config(env, n, t, mb, a.device, a.tiny, **{"update_mode": mode, **over})
            try:
                r = bench_learner(
                    cfg,
                    updates=2 if env == "hanabi" else 1,
                    warmup=1,
                    profile_top=a.profile,
                    count_flops=True,
                    net=ers_net(cfg, over),
                )
            except Exception as e:  # a row that fails is reported, the table goes on
                r = {"error": f"{type(e).__name__}: {e}"[:500]}
            record(
                out,
                {
                    "kind": "ers",
                    "env": env,
                    "num_envs": n,
                    "num_steps": t,
                    "minibatches": mb,
                    "config": over,
                    **r,
                },
            )
            torch.cuda.empty_cache() if a.device == "cuda" else None
    print(markdown(json.loads((out / "gpu-train-table.json").read_text())))


if __name__ == "__main__":
    main()
