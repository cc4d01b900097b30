"""One process-wide product switch's share of a CPU learner's update, measured in one process: issue 21's CPU
Hanabi learner (Hanabi-Full, MLP 512, 256 envs x 128 steps, one seed, one torch thread; ``--num-envs`` and
``--seeds`` change the batch) with the switch off and on,
alternated, each timed update after one update that settles the switch's compiled graphs. Neighbours in one
process are compared because this VM's speed drifts by up to 1.6x within an hour (``cpu_learner_bounds.py``
compares fresh processes instead).

* ``--switch int8-inputs``: ``nets.int8.use_int8_inputs`` (``TrainConfig.int8_inputs``: the MLP's embedding of
  0/1 observations as two int8 products);
* ``--switch bf16-gradients``: ``nets.blas.use_bf16_gradients`` (``TrainConfig.bf16_gradients``).

The learner is built with the config's ``"auto"`` for both switches and ``--update-mode`` /
``--keep-cpu-memory`` as given; only the named switch is toggled. Writes the seconds per update and the ratio
of the medians (off / on: above 1, the switch gains) as JSON.

    python scripts/switch_ab.py --switch int8-inputs --update-mode eager --out int8-eager.json
    python scripts/switch_ab.py --switch int8-inputs --keep-cpu-memory off --rounds 4
    python scripts/switch_ab.py --switch int8-inputs --num-envs 64 --seeds 3  # the curve studies' batch
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any


def alternate(
    switch: str, update_mode: str, keep_cpu_memory: bool, rounds: int, num_envs: int = 256, seeds: int = 1
) -> dict[str, Any]:
    """``rounds`` pairs of (off, on) timed updates of one learner, each after a settling update."""
    import torch

    torch.set_num_threads(1)
    from ers_deep.train.config import paper_config
    from ers_deep.train.ippo import Learner

    cfg = paper_config("hanabi", num_envs=num_envs, num_steps=128)
    cfg = cfg.replace(update_mode=update_mode, keep_cpu_memory=keep_cpu_memory, seeds=tuple(range(seeds)))
    learner = Learner(cfg)
    resolved = {"int8_inputs": learner.int8_inputs, "bf16_gradients": learner.bf16_gradients}
    field = switch.replace("-", "_")  # a field of the learner's ProductSwitches, which its work enters
    learner.train_step()
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(rounds):
        for side in ("off", "on"):
            learner.switches = dataclasses.replace(learner.switches, **{field: side == "on"})
            learner.train_step()  # settles the switch's graphs (compiled updates recompile on a switch)
            t0 = time.perf_counter()
            learner.train_step()
            seconds[side].append(time.perf_counter() - t0)
            print(f"round {r} {switch} {side}: {seconds[side][-1]:.2f} s", flush=True)
    medians = {side: statistics.median(s) for side, s in seconds.items()}
    return {
        "switch": switch,
        "update_mode": update_mode,
        "keep_cpu_memory": keep_cpu_memory,
        "num_envs": num_envs,
        "seeds": seeds,
        "resolved_at_start": resolved,
        "seconds_per_update": seconds,
        "median_seconds": medians,
        "ratio_off_over_on": medians["off"] / medians["on"],
        "wins_of_on": sum(a > b for a, b in zip(seconds["off"], seconds["on"], strict=True)),
    }


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    from ers_exact.util.cli import script_parser

    ap = script_parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--switch", choices=("int8-inputs", "bf16-gradients"), default="int8-inputs")
    ap.add_argument("--update-mode", choices=("compile", "eager"), default="compile")
    ap.add_argument("--keep-cpu-memory", choices=("on", "off"), default="on")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--num-envs", type=int, default=256, help="envs per seed (issue 21's setting: 256)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds stacked in the learner (0 .. seeds - 1)")
    ap.add_argument("--out", type=Path)
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    for name in ("rounds", "num_envs", "seeds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    keep = args.keep_cpu_memory == "on"
    result = alternate(args.switch, args.update_mode, keep, args.rounds, args.num_envs, args.seeds)
    result.update({"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine()})
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
