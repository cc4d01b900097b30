"""Two learners' curves on the same game, several runs (seeds) a side: ers's IPPO (the learning logs of
``scripts/gpu_train_table.py``, ``learn-ers-*.jsonl``: one line per update and seed) against the JAX anchor's
(``ippo_hanabi_jax.py --out``, one file per seed: one line per chunk of updates, a final line with its seed);
either side may also come from a measurement file of ``docs/measurements`` (``.json``: its stored curves, the
H200 runs' ``learn-hanabi-h200-*`` or the CPU parity's ``learn-parity-cpu-*``, whose 11-27 points carry no
seconds).

Per side and mark (env-steps per seed, or seconds on each side's own clock): each run's training return
averaged over its points in the mark's bin (``window`` either side: by default half the gap between marks, so
the bins tile the axis and each point counts once -- a point on the edge two bins share counts half in each,
``analysis.curves.bin_means`` --, or half a coarser log's mean spacing), the mean over runs
and its standard error (``n``: the runs that reach the mark), and per mark the difference of the means with Welch's t (unequal variances). Written
to ``OUT/learn-pair.json`` with a figure (``learn-pair.png``: every run thin, the binned means +- se).

    python -m ers_deep.bench.learn_pair --ers learn-ers-0.jsonl --anchor learn-anchor-seed*.jsonl --out DIR
    python -m ers_deep.bench.learn_pair --ers learn-ers-0.jsonl \\
        --anchor docs/measurements/learn-hanabi-h200-2026-11-2[78].json --out DIR   # the stored anchor runs
    python -m ers_deep.bench.learn_pair --ers docs/measurements/learn-parity-cpu-2026-11-2[89].json \\
        --anchor docs/measurements/learn-parity-cpu-2026-11-2[789].json --out DIR      # the CPU parity runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ers_deep.analysis.curves import Curve, bin_means, trailing_mean
from ers_exact.util.cli import script_parser
from ers_exact.util.errors import InputError
from ers_exact.util.output import save_figure, write_json

__all__ = ["LogError", "anchor_curves", "compare_sides", "ers_curves", "main", "mean_se", "welch_t"]

Axis = Literal["env_steps", "seconds"]
Side = dict[str, Curve]  # per run: 'seed S', or 'seed S (file)' for reruns of a seed


class LogError(ValueError, InputError):
    """A learning log that cannot be read as one; the message names the file."""


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a log; a cut last line (a killed run) is left out, any other bad line is an error."""
    try:
        parsed = [_json(x) for x in path.read_text().splitlines()]
    except OSError as e:
        raise LogError(f"{path}: cannot read the learning log ({e.strerror})") from e
    bad = [i for i, x in enumerate(parsed[:-1]) if not isinstance(x, dict)]
    if bad:
        raise LogError(f"{path}: line {bad[0] + 1} is not a JSON object")
    return [x for x in parsed if isinstance(x, dict)]


def _labelled(runs: list[tuple[int, Path, Curve]]) -> Side:
    """Runs keyed ``seed S``, or ``seed S (file)`` where two files of a side hold the same seed (reruns of a
    seed on a GPU differ); a file given twice is an error."""
    seen: set[tuple[int, Path]] = set()
    for s, p, _ in runs:
        if (s, p.resolve()) in seen:
            raise LogError(f"{p}: given twice")
        seen.add((s, p.resolve()))
    count = {s: sum(1 for t, _, _ in runs if t == s) for s, _, _ in runs}
    return {(f"seed {s}" if count[s] == 1 else f"seed {s} ({p.name})"): c for s, p, c in runs}


def _measurement(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise LogError(f"{p}: not a readable measurement file ({e})") from e
    if not isinstance(data, dict):
        raise LogError(f"{p}: a measurement file is a JSON object")
    return data


def _point(x: Any, p: Path) -> tuple[int, float, float]:
    """(env-steps, return, seconds) of a stored point [env_steps, return(, seconds)]; NaN seconds if none."""
    if not isinstance(x, list) or len(x) not in (2, 3):
        raise LogError(f"{p}: a stored curve point is [env_steps, return] or [env_steps, return, seconds]")
    return int(x[0]), float(x[1]), float(x[2]) if len(x) == 3 else math.nan


def _stored_side(p: Path, data: dict[str, Any], side: str) -> list[tuple[int, Curve]]:
    """The runs of a CPU learning-parity file (``docs/measurements/learn-parity-cpu-*.json``): under ``side``,
    ``curve_per_seed`` / ``curve_every_10th_update_per_seed`` ({seed: points}), or one ``curve`` /
    ``curve_every_10th_update`` of the seed ``seed`` (or ``final.seed``, else 0); points as ``_point``."""
    obj = data.get(side)
    if not isinstance(obj, dict):
        return []
    for key in ("curve_per_seed", "curve_every_10th_update_per_seed"):
        if isinstance(obj.get(key), dict):
            return [(int(s), [_point(x, p) for x in c]) for s, c in obj[key].items()]
    for key in ("curve", "curve_every_10th_update"):
        if isinstance(obj.get(key), list):
            final: dict[str, Any] = obj["final"] if isinstance(obj.get("final"), dict) else {}
            seed = int(obj.get("seed", final.get("seed", 0)))
            return [(seed, [_point(x, p) for x in obj[key]])]
    return []


def _stored(p: Path, side: str, key: str) -> list[tuple[int, Curve]]:
    """The runs of ``side`` ("ers" / "anchor") stored in a measurement file: the GPU runs' top-level ``key``
    (log lines, ``learn-hanabi-h200-*.json``) or a CPU parity file's curves (``_stored_side``)."""
    data = _measurement(p)
    runs = _stored_side(p, data, side)
    if runs:
        return [(s, [pt for pt in c if not math.isnan(pt[1])]) for s, c in runs]
    if not isinstance(data.get(key), list):
        raise LogError(f"{p}: a measurement file without a {key!r} list or {side!r} curves")
    if side == "ers":
        return sorted(_ers_points(data[key], p).items())
    lines = data[key] + [{"event": "final", **data.get("anchor_final", {})}]
    return [_anchor_run(lines, p)]


def _ers_points(lines: list[dict[str, Any]], p: Path) -> dict[int, Curve]:
    per: dict[int, Curve] = {}
    for x in lines:
        if "env_steps" not in x or "return" not in x:
            raise LogError(f"{p}: not an ers learning log (a line without env_steps and return)")
        r = float(x["return"] if x["return"] is not None else math.nan)
        if not math.isnan(r):
            per.setdefault(int(x.get("seed", 0)), []).append((int(x["env_steps"]), r, float(x["elapsed_s"])))
    return per


def ers_curves(paths: Sequence[str | os.PathLike[str]]) -> Side:
    """Per run (``_labelled``), (env-steps per seed, training return, seconds) of each update in ers's learning
    logs (a line without ``seed`` is seed 0's: the single-seed logs before 2026-11-29), or of the curves of a
    ``.json`` measurement file (``_stored``); updates that ended no game are left out."""
    runs: list[tuple[int, Path, Curve]] = []
    for p in map(Path, paths):
        if p.suffix == ".json":
            got = _stored(p, "ers", "ers_curve_every_10th_update")
        else:
            got = sorted(_ers_points(_lines(p), p).items())
        runs += [(s, p, c) for s, c in got]
    return _labelled(runs)


def _anchor_run(lines: list[dict[str, Any]], p: Path) -> tuple[int, Curve]:
    """(seed, curve) of one anchor log: the seed of its final line, or for a run killed before it the number
    after ``seed`` in the file name; the curve of the chunks that ended a game."""
    final = next((x for x in lines if x.get("event") == "final" and "seed" in x), None)
    named = re.search(r"seed-?(\d+)", p.name)
    if final is None and named is None:
        raise LogError(f"{p}: no final line and no seed in the file name (e.g. learn-anchor-seed3.jsonl)")
    seed = int(final["seed"]) if final is not None else int(named.group(1))  # type: ignore[union-attr]
    chunks = [x for x in lines if "return_chunk" in x and x.get("episodes_chunk", 1) > 0]
    return seed, [(int(x["env_steps"]), float(x["return_chunk"]), float(x["elapsed_s"])) for x in chunks]


def anchor_curves(paths: Sequence[str | os.PathLike[str]]) -> Side:
    """Per run (``_labelled``), (env-steps, the chunk's mean return, seconds) of each chunk in the anchor's logs
    (one per seed, ``_anchor_run``), or of the curves of a ``.json`` measurement file (``_stored``: the GPU
    runs' ``anchor_curve`` with the seed of ``anchor_final``, or a CPU parity file's)."""
    runs: list[tuple[int, Path, Curve]] = []
    for p in map(Path, paths):
        got = _stored(p, "anchor", "anchor_curve") if p.suffix == ".json" else [_anchor_run(_lines(p), p)]
        runs += [(s, p, c) for s, c in got]
    return _labelled(runs)


def welch_t(a: Sequence[float], b: Sequence[float]) -> float:
    """Welch's t of mean(a) - mean(b) (sample variances, unequal); NaN with fewer than two values a side or
    no spread at all."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se = math.sqrt(va / len(a) + vb / len(b))
    return (ma - mb) / se if se > 0 else math.nan


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the non-NaN values (NaN for none; the error NaN for fewer than two)."""
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return math.nan, math.nan
    m = sum(v) / len(v)
    se = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)) if len(v) > 1 else math.nan
    return m, se


def _on_axis(side: Side, axis: Axis) -> Side:
    """The curves with the chosen axis first (``seconds``: each point's clock in place of its env-steps)."""
    if axis == "env_steps":
        return side
    blind = [k for k, c in side.items() if any(math.isnan(t) for _, _, t in c)]
    if blind:
        raise LogError(f"no seconds stored for {', '.join(blind)}: compare them on env-steps")
    return {s: [(t, r, t) for _, r, t in c] for s, c in side.items()}  # type: ignore[misc]


def compare_sides(
    sides: dict[str, Side],
    marks: Sequence[float] | None = None,
    window: float | None = None,
    axis: Axis = "env_steps",
) -> dict[str, Any]:
    """Both sides at the marks (default: 8, evenly up to where every run of every side has got to), as the
    module says; with two sides, ``difference`` is the first's mean minus the second's, with Welch's t."""
    if not sides or any(not s for s in sides.values()):
        raise LogError("every side needs at least one run with a logged return")
    on = {name: _on_axis(side, axis) for name, side in sides.items()}
    reach = min(c[-1][0] for side in on.values() for c in side.values())
    marks = sorted(marks) if marks else [reach * k / 8 for k in range(1, 9)]
    gap = min(b - a for a, b in zip([0.0, *marks], marks)) if marks else 0.0
    spacing = max((c[-1][0] - c[0][0]) / max(1, len(c) - 1) for side in on.values() for c in side.values())
    window = max(gap, spacing) / 2 if window is None else window
    out: dict[str, Any] = {"axis": axis, "marks": marks, "window": window, "reach": reach, "sides": {}}
    for name, side in on.items():
        per_run = {k: bin_means([c], marks, window) for k, c in side.items()}
        stats = [mean_se([v[i] for v in per_run.values()]) for i in range(len(marks))]
        out["sides"][name] = {
            "runs": list(side),
            "mean": [m for m, _ in stats],
            "se": [se for _, se in stats],
            "n": [sum(not math.isnan(v[i]) for v in per_run.values()) for i in range(len(marks))],
            "per_run": per_run,
            "last": {k: c[-1][0] for k, c in side.items()},
        }
    if len(sides) == 2:
        a, b = (out["sides"][n]["per_run"] for n in sides)
        col = lambda d, i: [v[i] for v in d.values() if not math.isnan(v[i])]  # noqa: E731
        out["difference"] = {
            "of": list(sides),
            "mean": [x - y for x, y in zip(*(out["sides"][n]["mean"] for n in sides))],
            "welch_t": [welch_t(col(a, i), col(b, i)) for i in range(len(marks))],
        }
    return out


def figure(sides: dict[str, Side], result: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Every run's curve (trailing mean of 10 points, thin) and the binned means +- se (markers) per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for (name, side), colour in zip(sides.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        for c in _on_axis(side, result["axis"]).values():
            ax.plot(
                [x for x, _, _ in c], trailing_mean([r for _, r, _ in c], 10), color=colour, lw=0.7, alpha=0.5
            )
        s = result["sides"][name]
        ax.errorbar(
            result["marks"], s["mean"], yerr=s["se"], color=colour, fmt="o-", ms=3, capsize=2, label=name
        )
    ax.set_xlabel("env-steps per seed" if result["axis"] == "env_steps" else "seconds on each side's clock")
    ax.set_ylabel("training return")
    ax.grid(alpha=0.3)
    ax.legend(title="mean +- se over runs (thin: each run)")
    fig.tight_layout()
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def _defined(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _pm(mean: float, se: float) -> str:
    """``mean +- se``; the mean alone where the se is undefined (one run), ``-`` where the mean is (no run)."""
    if not _defined(mean):
        return "-"
    return f"{mean:.2f}" + (f" +- {se:.2f}" if _defined(se) else "")


def _diff(mean: float, t: float) -> str:
    """The difference and its Welch t in parentheses; the difference alone where t is undefined."""
    if not _defined(mean):
        return "-"
    return f"{mean:+.2f}" + (f" ({t:.1f})" if _defined(t) else "")


def _table(result: dict[str, Any]) -> str:
    """The markdown table main prints: no ``nan`` (``_pm``, ``_diff``: as ``xp-distribution``'s text)."""
    names = list(result["sides"])
    head = f"| {result['axis']} | " + " | ".join(f"{n} (n={len(result['sides'][n]['runs'])})" for n in names)
    lines = [head + (" | difference (Welch t) |" if "difference" in result else " |")]
    lines.append("|" + " --- |" * (len(names) + 1 + ("difference" in result)))
    for i, m in enumerate(result["marks"]):
        cells = [
            _pm(x["mean"][i], x["se"][i]) + (f" (n={x['n'][i]})" if x["n"][i] != len(x["runs"]) else "")
            for x in (result["sides"][n] for n in names)
        ]
        d = result.get("difference")
        extra = f" {_diff(d['mean'][i], d['welch_t'][i])} |" if d else ""
        lines.append(f"| {m:,.0f} | " + " | ".join(cells) + " |" + extra)
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    p = script_parser("python -m ers_deep.bench.learn_pair", __doc__.split("\n\n")[0])
    p.add_argument(
        "--ers", nargs="+", required=True, help="ers's learning logs (learn-ers-*.jsonl) or measurement files"
    )
    p.add_argument(
        "--anchor", nargs="+", required=True, help="the anchor's logs (one per seed) or measurement files"
    )
    p.add_argument("--out", required=True, help="folder for learn-pair.json and learn-pair.png")
    p.add_argument("--marks", default="", help="comma-separated marks (default: 8 up to the common reach)")
    p.add_argument("--window", type=float, default=None, help="half-width of a mark's bin")
    p.add_argument("--axis", choices=("env_steps", "seconds"), default="env_steps")
    p.add_argument("--no-figure", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    a = parser().parse_args(argv)
    sides = {"ers": ers_curves(a.ers), "anchor": anchor_curves(a.anchor)}
    marks = [float(x) for x in a.marks.split(",") if x.strip()] or None
    result = compare_sides(sides, marks, a.window, a.axis)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "learn-pair.json", result, indent=1)  # strict (NaN as null), atomic
    if not a.no_figure:
        figure(sides, result, out / "learn-pair.png")
    print(_table(result))
    return result


if __name__ == "__main__":
    main()
