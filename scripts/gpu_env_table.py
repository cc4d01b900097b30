"""Side-by-side env throughput on one GPU: ers (every fast-path mode) against JaxMARL, both envs, one command.

    python scripts/gpu_env_table.py --out DIR [--batches 256,1024,8192,65536] [--modes eager,graph,compile-graph]
        [--unroll 1] [--envs hanabi,overcooked-v2] [--steps 256] [--no-jaxmarl] [--no-rollouts] [--budget-s 420]
    python scripts/gpu_env_table.py --markdown DIR/gpu-env-table.json     # the README table from a result

Rows: Hanabi (2-player Full), Overcooked V2 ``grounded_coord_simple`` with observations, and Overcooked V2 state
only (the step without its observation on both sides); then, unless ``--no-rollouts``, what a collector runs
(``bench.rollout``: 128 steps of env + the official network at the paper's settings) in every mode. Each ers row is the best of 3 timings; JaxMARL runs
in its own process (``bench.runner.reference_in_subprocess``), compile excluded. Every finished row is appended to
``DIR/gpu-env-table.json`` at once, so a run cut short keeps what it measured; rows left when ``--budget-s``
seconds have passed are recorded as skipped. ``--markdown`` prints the README's GPU table: per env and batch,
JaxMARL, ers eager, the best ers fast mode and its ratio to JaxMARL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ers_deep.bench.compare import bench_env, jaxmarl_env
from ers_deep.bench.rollout import PAPER, bench_policy_rollout
from ers_deep.bench.timing import jaxmarl_installed
from ers_exact.util.cli import script_parser

VARIANTS = {"hanabi": ["obs"], "overcooked-v2": ["obs", "state"]}


def ers_row(
    env: str, variant: str, batch: int, mode: str, unroll: int, steps: int, device: str = "cuda"
) -> dict[str, Any]:
    """One ers measurement (best of 3) as a table row."""
    r = bench_env(env, batch, steps, device, mode, unroll, repeats=3, observations=variant == "obs")
    return {"side": "ers", **r}


def jaxmarl_row(env: str, variant: str, batch: int, steps: int) -> dict[str, Any]:
    """One JaxMARL measurement, in its own process."""
    return {
        "side": "jaxmarl",
        "batch": batch,
        **jaxmarl_env(env, batch, steps, observations=variant == "obs"),
    }


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every row to measure, most needed first (a budget cut drops the tail): the observation rows of
    JaxMARL, ers eager and the first fast mode at one step per call; then the other fast modes; then the
    state-only rows; then longer unrolls."""
    rows = []
    for env in args.envs:
        for variant in VARIANTS[env]:
            for batch in args.batches:
                base = {"env": env, "variant": variant, "batch": batch}
                state = variant == "state"
                if args.jaxmarl:
                    rows.append({**base, "side": "jaxmarl", "tier": 2 if state else 0})
                for i, mode in enumerate(args.modes):
                    for unroll in [1] if mode == "eager" else args.unroll:
                        tier = 3 if unroll > 1 else 2 if state else 0 if i <= 1 else 1
                        rows.append({**base, "side": "ers", "mode": mode, "unroll": unroll, "tier": tier})
        if args.rollouts:
            batch = PAPER[env][0]
            for mode in args.modes:
                rows.append(
                    {"env": env, "variant": "rollout", "batch": batch, "side": "ers", "mode": mode, "tier": 3}
                )
    return sorted(rows, key=lambda r: r["tier"])


def measure(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gpu-env-table.json"
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "jaxmarl": args.jaxmarl,
        "steps": args.steps,
        "rows": [],
    }
    t0 = time.perf_counter()
    for spec in plan(args):
        key = {k: spec[k] for k in ("env", "variant", "batch")}
        if time.perf_counter() - t0 > args.budget_s:
            row: dict[str, Any] = {**spec, "skipped": f"budget of {args.budget_s:.0f} s spent"}
        else:
            try:
                if spec["variant"] == "rollout":
                    row = {
                        **key,
                        "side": "ers",
                        **bench_policy_rollout(spec["env"], args.device, spec["mode"]),
                    }
                elif spec["side"] == "jaxmarl":
                    row = {**key, **jaxmarl_row(spec["env"], spec["variant"], spec["batch"], args.steps)}
                else:
                    measured = ers_row(
                        spec["env"],
                        spec["variant"],
                        spec["batch"],
                        spec["mode"],
                        spec["unroll"],
                        args.steps,
                        args.device,
                    )
                    row = {**key, **measured}
            except Exception as e:  # a failing mode is a result to report, not a reason to lose the others
                row = {**spec, "error": f"{type(e).__name__}: {e}"[:800]}
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
        result["rows"].append(row)
        path.write_text(json.dumps(result, indent=1))
        rate = row.get("env_steps_per_s")
        print(
            f"{spec['env']:<14} {spec['variant']:<5} {spec['batch']:>7} {spec['side']:<8} "
            f"{spec.get('mode', ''):<14} {spec.get('unroll', '')!s:>3} "
            + (f"{rate / 1e6:9.3f}M" if rate else row.get("error", row.get("skipped", ""))[:200]),
            flush=True,
        )
    (out / "gpu-env-table.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict[str, Any]) -> str:
    """The README's GPU table: per env, variant and batch, JaxMARL, ers eager, the best fast mode, ratios."""
    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    rollouts = [r for r in result["rows"] if r.get("variant") == "rollout" and "env_steps_per_s" in r]
    for r in result["rows"]:
        if "env_steps_per_s" not in r or r.get("variant") == "rollout":
            continue
        g = groups.setdefault((r["env"], r["variant"], r["batch"]), {})
        if r["side"] == "jaxmarl":
            g["jaxmarl"] = r["env_steps_per_s"]
        elif r["mode"] == "eager":
            g["eager"] = r["env_steps_per_s"]
        elif r["env_steps_per_s"] > g.get("fast", (0.0, ""))[0]:
            g["fast"] = (r["env_steps_per_s"], f"{r['mode']}, unroll {r['unroll']}")
    lines = [
        f"Measured on {result['device']} (torch {result['torch']}), env-steps/s, random legal moves, auto-reset:",
        "",
        "| env | batch | JaxMARL | ers eager | ers fast (mode) | fast / JaxMARL | eager / JaxMARL |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]

    def m(x: float | None) -> str:
        return "—" if x is None else f"{x / 1e6:.2f}M"

    def ratio(a: float | None, b: float | None) -> str:
        return "—" if a is None or b is None else f"{a / b:.2f}"

    for (env, variant, batch), g in sorted(groups.items()):
        name = env if env == "hanabi" else f"{env} ({'observations' if variant == 'obs' else 'state only'})"
        fast, how = g.get("fast", (None, ""))
        lines.append(
            f"| {name} | {batch:,} | {m(g.get('jaxmarl'))} | {m(g.get('eager'))} | "
            f"{m(fast)}{f' ({how})' if how else ''} | {ratio(fast, g.get('jaxmarl'))} | "
            f"{ratio(g.get('eager'), g.get('jaxmarl'))} |"
        )
    if rollouts:
        lines += [
            "",
            "Collection at the paper's settings (128 steps of env + the official network, sampling, recording):",
            "",
            "| env | games | mode | env-steps/s | setup s |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r['env']} | {r['batch']:,} | {r['mode']} | {m(r['env_steps_per_s'])} | {r['setup_seconds']:.0f} |"
            for r in rollouts
        ]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    ap = script_parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="folder of gpu-env-table.json and .md")
    ap.add_argument("--markdown", metavar="JSON", help="print the README table of a result file and exit")
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    names = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--batches", type=ints, default=[256, 1024, 8192, 65536])
    ap.add_argument("--modes", type=names, default=["eager", "graph", "compile-graph"])
    ap.add_argument(
        "--unroll", type=ints, default=[1], help="steps per replay (e.g. 1,16: also 16-step graphs)"
    )
    ap.add_argument("--envs", type=names, default=["hanabi", "overcooked-v2"])
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--no-jaxmarl", dest="jaxmarl", action="store_false")
    ap.add_argument(
        "--no-rollouts",
        dest="rollouts",
        action="store_false",
        help="skip the policy-rollout rows (bench.rollout)",
    )
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument(
        "--device", default="cuda", help="cuda; cpu only to try the script (modes eager, compile)"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if not args.out:
        ap.error("--out is required to measure")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("no CUDA device: this script measures on a GPU (--device cpu only tries it)")
    unknown = [e for e in args.envs if e not in VARIANTS] + [m for m in args.modes if m not in bench_modes()]
    if unknown:
        ap.error(f"unknown env or mode {unknown[0]!r}")
    if args.jaxmarl and not jaxmarl_installed():
        print(
            "jaxmarl is not installed: measuring ers only (install the wheels, see gpu-anchors)",
            file=sys.stderr,
        )
        args.jaxmarl = False
    measure(args)
    return 0


def bench_modes() -> tuple[str, ...]:
    from ers_deep.accel import MODES

    return MODES


if __name__ == "__main__":
    sys.exit(main())
