"""The markdown of issue 21's device table (``scripts/gpu_train_table.py``, ``scripts/train-gpu.sh``): its JSON
rows (``OUT/gpu-train-table.json``: the device, the anchors' and ers's throughput rows with their setup split and
profiles, the learning runs of each side) as the README's table and lines.

    python scripts/gpu_train_table.py --markdown results/train-gpu/gpu-train-table.json
"""

from __future__ import annotations

from typing import Any

__all__ = ["helper", "markdown", "setup_split"]


def setup_split(ph: dict[str, float]) -> str:
    """`` (build 3 / collect 50 / GAE 0 / update 20)``: a row's setup seconds apart (empty for none); with the
    update compiled in a helper process, ``helper wait`` before the update."""
    names = {
        "build": "build",
        "collect": "collect",
        "gae": "GAE",
        "precompile_wait": "helper wait",
        "update": "update",
    }
    parts = [f"{names[k]} {ph[k]:.0f}" for k in names if k in ph]
    return f" ({' / '.join(parts)})" if parts else ""


def helper(report: dict[str, Any] | None) -> str:
    """``, the helper compiled the update in 31 s``: a row's ``train.precompile`` report (empty for none)."""
    if not report:
        return ""
    if "error" in report:
        return f", the helper failed: {report['error'][:120]}"
    return f", the helper compiled the update in {report.get('update_s', float('nan')):.0f} s"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The README table: per setting, ers (each update mode) and the anchor, env-steps/s and the ratio, ers's
    phases and the rate of its matrix products in them (``bench.train.product_flops``)."""
    lines = [
        "| env, envs x steps (minibatches) | side | env-steps/s | setup s | ratio to anchor | s per update: collect / GAE / PPO"
        " | products TFLOP/s: collect / PPO |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    anchors = {(r["env"], r["num_envs"]): r for r in rows if r.get("kind") == "anchor"}
    for r in rows:
        if r.get("kind") not in ("ers", "anchor"):
            continue
        key = (r["env"], r["num_envs"])
        rate = r.get("env_steps_per_s")
        ref = anchors.get(key, {}).get("env_steps_per_s")
        side = (
            f"ers ({r.get('collect_mode')}, update {r.get('update_mode')}) {r.get('config') or ''}"
            if r["kind"] == "ers"
            else "anchor (JAX)"
        )
        ratio = f"{rate / ref:.2f}" if r["kind"] == "ers" and rate and ref else ""
        setup = f"{r.get('setup_s', r.get('wall_s', 0)):.0f}" + setup_split(r.get("setup_phase_s") or {})
        shown = f"{rate:,.0f}" if rate else r.get("error", "")[:60]
        ph = r.get("phase_s") or {}
        phases = " / ".join(f"{ph[k]:.3f}" for k in ("collect", "gae", "update") if k in ph)
        tf = r.get("product_tflop_s") or {}
        rate_of_products = " / ".join(f"{tf[k]:.1f}" for k in ("collect", "update") if k in tf)
        lines.append(
            f"| {r['env']}, {r['num_envs']} x {r.get('num_steps')} ({r.get('minibatches')}) | {side} | {shown} | {setup} | {ratio} | {phases} | {rate_of_products} |"
        )
    for r in rows:
        if r.get("kind") == "ers" and r.get("profile"):
            top = "; ".join(
                f"{x['name'][:60]} {x['self_device_ms'] or x['self_cpu_ms']:.1f} ms x{x['calls']}"
                for x in r["profile"][:8]
            )
            classes = r.get("profile_classes") or {}
            kinds = ", ".join(
                f"{k} {v:.1f} ms ({classes['share'][k]:.0%})"
                for k, v in classes.get("ms", {}).items()
                if v > 0
            )
            lines.append(
                f"\nprofile of one update (self ms on the device, on the CPU where none), {r['env']} {r['num_envs']}"
                f" {r.get('config') or ''}: {top}"
                + (f"\nby kind ({classes['basis']}): {kinds}" if kinds else "")
            )
    for r in rows:
        if r.get("kind", "").startswith("learn"):
            if r["kind"] == "learn-ers":
                end, steps = r.get("return_last"), r.get("env_steps")
                ev = r.get("eval") or {}
                own = (ev.get("mean"), ev.get("se"))
            else:
                chunks = [x for x in r.get("lines") or [] if "return_chunk" in x]
                end = chunks[-1]["return_chunk"] if chunks else None
                steps = chunks[-1]["env_steps"] if chunks else None
                final: dict[str, Any] = next(
                    (x for x in r.get("lines") or [] if x.get("event") == "final"), {}
                )
                own = (final.get("eval_sampled_mean"), final.get("eval_se"))
            evaluated = f", own evaluation {own[0]:.2f} +- {own[1]:.2f}" if None not in own else ""
            seeds = r.get("seeds") or [r.get("seed", 0)]
            lines.append(
                f"\n{r['kind']} {r.get('config') or ''} (seed {','.join(map(str, seeds))}): {steps} env-steps"
                f" per seed, training score at the end {end}"
                f"{evaluated}{setup_split(r.get('setup_phase_s') or {})}{helper(r.get('precompile'))}"
                f" {r.get('error', '')}"
            )
    return "\n".join(lines)
