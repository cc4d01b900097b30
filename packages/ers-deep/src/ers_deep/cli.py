"""Command line of ers-deep (console script ``ers-deep``).

    ers-deep env-bench hanabi --batch 1024 --steps 200 [--device cuda] [--against hle,jaxmarl] [--json]
    ers-deep env-bench overcooked-v2 --batch 1024 --steps 200 [--layout L] [--against jaxmarl] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import torch

from ers_deep.bench import ENV_BENCHES
from ers_deep.bench import hanabi as bench_hanabi
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.envs.hanabi.config import HanabiConfig


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ers-deep", description="ers-deep: batched torch environments")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("env-bench", help="env-steps/s with random legal moves (auto-reset on), vs references")
    b.add_argument("env", choices=sorted(ENV_BENCHES))
    b.add_argument("--batch", type=int, default=1024, help="games stepped together (B)")
    b.add_argument("--steps", type=int, default=100, help="batched steps to time")
    b.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    b.add_argument("--preset", default="Hanabi-Full", help="HLE preset (Hanabi-Full, Hanabi-Small, ...)")
    b.add_argument("--players", type=int, default=2, help="Hanabi players")
    b.add_argument("--layout", default="grounded_coord_simple", help="Overcooked V2 layout")
    b.add_argument("--obs-dtype", default="uint8", choices=sorted(bench_overcooked.DTYPES),
                   help="Overcooked V2 observation dtype")
    b.add_argument("--no-obs", action="store_true",
                   help="Overcooked V2: time the transition and resets only (JaxMARL: observation unused)")
    b.add_argument("--against", default="",
                   help=f"comma-separated references from {','.join(bench_hanabi.REFERENCES)}")
    b.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    b.add_argument("--no-check", action="store_true",
                   help="Hanabi: skip the per-step legality check (no device sync)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="also profile STEPS batched steps with torch.profiler (top ops by self time)")
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def run_env_bench(args: argparse.Namespace) -> dict[str, Any]:
    if args.threads:
        torch.set_num_threads(args.threads)
    against = tuple(x.strip() for x in args.against.split(",") if x.strip())
    if args.env == "overcooked-v2":
        return bench_overcooked.env_bench(args.layout, batch=args.batch, steps=args.steps, device=args.device,
                                          against=against, seed=args.seed, obs_dtype=args.obs_dtype,
                                          observations=not args.no_obs, profile_steps=args.profile)
    cfg = HanabiConfig.preset(args.preset, players=args.players)
    return bench_hanabi.env_bench(cfg, batch=args.batch, steps=args.steps, device=args.device,
                                  against=against, seed=args.seed, check_legal=not args.no_check,
                                  profile_steps=args.profile)


def _print_text(res: dict[str, Any]) -> None:
    print(f"ers {res['env']}  batch {res['batch']:>6}  device {res['device']:<6}  {res['env_steps_per_s']:>14,.0f} "
          f"env-steps/s")
    for name, r in res["references"].items():
        if "error" in r:
            print(f"{name:<10} skipped: {r['error']}")
        else:
            print(f"{name:<10} batch {r['batch']:>6}  {r['env_steps_per_s']:>29,.0f} env-steps/s  "
                  f"ratio ers/{name} = {r['ratio']:.1f}x")
    for row in res.get("profile", []):
        print(f"  {row['op']:<40} {row['calls_per_step']:6.1f} calls/step  {row['self_us_per_step']:10.1f} us/step")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "env-bench":
        res = run_env_bench(args)
        if args.json:
            print(json.dumps(res, indent=2))
        else:
            _print_text(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
