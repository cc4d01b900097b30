"""The learning curve under emulated reduced-precision products (``ers_deep.nets.precision``) beside float32's,
on a CPU: issue 21 asks for TF32/bf16 products only where the learning curve is unchanged, and shown so.

Each format is one training run (``ers_deep.train.run``: config, metrics, checkpoints, resume) in
``OUT/<fmt>/``, its net's products emulated from the learner's construction on (``emulated_learner``), or, for
a format of ``SWITCHES`` (``"bf16-gradients"``), the learner's own switch on in its config; the
format is written beside the config (``matmul.json``) and checked on resume. ``compare(OUT)`` reads the runs
back (with ``more`` / ``--also``: further folders of the same config and other seeds): per format the seeds'
mean training return around each mark and each seed's, a JSON summary and a figure.

    python -m ers_deep.bench.precision --out results/tf32 --fmt float32 --env-steps 4e6
    python -m ers_deep.bench.precision --out results/tf32 --fmt tf32 --env-steps 4e6      # (beside it)
    python -m ers_deep.bench.precision --out results/tf32 --compare [--also results/tf32-more-seeds]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ers_deep.analysis.curves import Curve, bin_means, column_curves, trailing_mean
from ers_deep.nets import NetConfig
from ers_deep.nets.precision import MANTISSA_BITS, emulate_matmuls
from ers_deep.train import Learner, TrainConfig, paper_config
from ers_deep.train.run import RunError, resume, train
from ers_exact.util.cli import script_parser
from ers_exact.util.output import read_json, save_figure

#: formats that are a config switch of the learner, run for real (not emulated): ``"bf16-gradients"`` is
#: ``TrainConfig.bf16_gradients`` (the update's gradient products on bfloat16 operands, the forward in float32;
#: ``ers_deep.nets.blas``), at the CPU's own bfloat16 speed; ``"int8-inputs"`` adds ``TrainConfig.int8_inputs``
#: (the MLP's embedding of 0/1 observations as int8 products, ``ers_deep.nets.int8``; ``--knowledge plausible``)
SWITCHES: dict[str, dict[str, Any]] = {
    "bf16-gradients": {"bf16_gradients": True},
    "int8-inputs": {"bf16_gradients": True, "int8_inputs": True},
}
FORMATS = ("float32", *MANTISSA_BITS, *SWITCHES)


def format_config(config: TrainConfig, fmt: str) -> TrainConfig:
    """``config`` as the format ``fmt`` trains it: with its switch (``SWITCHES``) on and every other switch off
    (float32 is float32 on every CPU, whatever ``bf16_gradients="auto"`` resolves to there)."""
    off = {k: False for switch in SWITCHES.values() for k in switch}
    return config.replace(**{**off, **SWITCHES.get(fmt, {})})


def emulated_learner(fmt: str) -> Callable[[TrainConfig], Learner]:
    """A ``make_learner`` for ``train`` / ``resume``: the learner, its net's products emulated as ``fmt`` (a
    switched format's learner as its config says)."""

    def make(config: TrainConfig) -> Learner:
        learner = Learner(config)
        if fmt not in SWITCHES:
            emulate_matmuls(learner.net, fmt)
        return learner

    return make


def run_format(
    config: TrainConfig, fmt: str, out: str | os.PathLike[str], progress: bool | None = None
) -> dict[str, Any]:
    """Train ``config`` in ``out/fmt`` with the products emulated as ``fmt``, or resume the run there (of the
    same config and format); the run's summary."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, not {fmt!r}")
    config = format_config(config, fmt)
    run_dir = Path(out) / fmt
    marker = run_dir / "matmul.json"
    if (run_dir / "config.json").exists():
        if read_json(marker, "the run's product format", ("fmt",)).get("fmt") != fmt:
            raise RunError(f"{run_dir} was trained with other products ({marker})")
        stored = read_json(run_dir / "config.json", "a training run's config", ("config",))["config"]
        if stored != json.loads(json.dumps(config.to_json())):
            raise RunError(
                f"{run_dir} holds a run of another config; resume it with the options it was started with"
            )
        _, summary = resume(run_dir, progress=progress, make_learner=emulated_learner(fmt))
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        bits = MANTISSA_BITS.get(fmt, 7 if fmt in SWITCHES else 23)
        marker.write_text(json.dumps({"fmt": fmt, "mantissa_bits": bits}))
        _, summary = train(config, run_dir, progress=progress, make_learner=emulated_learner(fmt))
    return summary


def compare(
    out: str | os.PathLike[str],
    marks: Sequence[float] | None = None,
    figure: bool = True,
    more: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """The formats trained in ``out`` (and in the folders ``more``: the same config with other seeds): per
    format its seeds' mean return around each mark and each seed's (``window``: half the gap between marks,
    at most 2 updates either side), written to ``out/compare.json`` (and ``out/compare.png``)."""
    out = Path(out)
    folders = [out, *(Path(m) for m in more)]
    runs: dict[str, dict[int, Curve]] = {}
    for f in FORMATS:
        dirs = [d / f for d in folders if (d / f / "metrics.csv").exists()]
        if dirs:
            runs[f] = column_curves(dirs, ("return",))["return"]
    if not runs:
        raise RunError(f"{out}: no run of any format ({', '.join(FORMATS)})")
    cfg = _same_config([d / f for d in folders for f in runs if (d / f / "config.json").exists()])
    last = min(max(step for pts in c.values() for step, _, _ in pts) for c in runs.values())
    marks = list(marks) if marks else [last * k / 8 for k in range(1, 9)]
    per_update = int(cfg["num_envs"]) * int(cfg["num_steps"])
    window = min(2 * per_update, min(b - a for a, b in zip([0, *marks], marks)) / 2)
    result = {
        "marks": marks,
        "window_env_steps": window,
        # bins of half the gap tile the axis: a point on a shared edge counts half in each (bin_means)
        "return_at": {f: bin_means(c.values(), marks, window) for f, c in runs.items()},
        "per_seed": {
            f: {s: bin_means([pts], marks, window) for s, pts in sorted(c.items())} for f, c in runs.items()
        },
        "config": cfg,
    }
    (out / "compare.json").write_text(json.dumps(result, indent=1))
    if figure:
        _figure(runs, out / "compare.png")
    return result


def _same_config(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """The config of the runs ``run_dirs`` (their seeds and the formats' switches aside); a ``RunError`` where two
    differ otherwise."""
    configs = [
        read_json(d / "config.json", "a training run's config", ("config",))["config"] for d in run_dirs
    ]
    aside = {"seeds", *(k for switch in SWITCHES.values() for k in switch)}
    first = {k: v for k, v in configs[0].items() if k not in aside}
    for d, c in zip(run_dirs, configs):
        if {k: v for k, v in c.items() if k not in aside} != first:
            raise RunError(f"{d} was trained with another config than {run_dirs[0]} (seeds aside)")
    return first


def _figure(runs: dict[str, dict[int, Curve]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=100)
    for (fmt, curves), colour in zip(runs.items(), ("tab:blue", "tab:orange", "tab:green")):
        for i, pts in enumerate(curves.values()):
            smooth = trailing_mean([r for _, r, _ in pts], 10)
            label = fmt if i == 0 else None
            ax.plot([s for s, _, _ in pts], smooth, color=colour, lw=1, alpha=0.8, label=label)
    ax.set_xlabel("env steps per seed")
    ax.set_ylabel("training return")
    ax.grid(alpha=0.3)
    ax.legend(title="products (one line per seed)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _config(a: argparse.Namespace) -> TrainConfig:
    return paper_config(
        "hanabi",
        num_envs=a.num_envs,
        num_steps=a.num_steps,
        seeds=tuple(int(s) for s in a.seeds.split(",")),
        hanabi_preset=a.preset,
        hanabi_knowledge=a.knowledge,
        net=NetConfig(kind="mlp", hidden=a.hidden),
        total_env_steps=int(float(a.env_steps)),
        update_mode=a.update_mode,
    )


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    p = script_parser("python -m ers_deep.bench.precision", __doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the folder of the runs (one per format)")
    p.add_argument("--fmt", choices=FORMATS, help="train (or resume) this format's run")
    p.add_argument("--compare", action="store_true", help="compare the runs in --out (compare.json, .png)")
    p.add_argument("--also", action="append", default=[], help="--compare: another folder (other seeds)")
    p.add_argument("--preset", default="Hanabi-Small")
    p.add_argument("--knowledge", default="v0-belief", choices=("plausible", "v0-belief"))
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--seeds", default="0,1,2", help="comma-separated, trained together in one process")
    p.add_argument("--env-steps", default="4e6", help="per seed")
    p.add_argument(
        "--update-mode", default="auto", help="TrainConfig.update_mode (the same for every format)"
    )
    p.add_argument("--threads", type=int, default=1)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    p = parser()
    a = p.parse_args(argv)
    if not a.fmt and not a.compare:
        p.error("give --fmt to train a run, or --compare")
    torch.set_num_threads(a.threads)
    if a.fmt:
        print(json.dumps(run_format(_config(a), a.fmt, a.out)))
    if a.compare:
        print(json.dumps(compare(a.out, more=a.also)["return_at"]))


if __name__ == "__main__":
    main()
