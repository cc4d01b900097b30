"""``ers-deep train-op``: a pool of IPPO other-play policies (every train-sp option, plus ``--symmetries``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ers_deep.cli.resume import check_resume_updates, resume_folder, resume_ray_pool
from ers_deep.cli.train import (
    TrainSPOptions,
    replace_pool,
    show_figure,
    show_pool,
    with_learning_curve,
)
from ers_exact.util.options import UsageError, option

__all__ = ["TrainOPOptions", "run_train_op", "show_train_op", "symmetries_check"]


def symmetries_check(value: object) -> str | None:
    """``none``, ``mdp`` or an existing discovery output (its folder or its discovery.json)."""
    text = str(value)
    if text in ("none", "mdp") or Path(text).is_dir() or (text.endswith(".json") and Path(text).is_file()):
        return None
    return "is not none, mdp or a discovery output folder (ers-deep discover --out)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainOPOptions(TrainSPOptions):
    """``ers-deep train-op``: other-play (the paper's eq. other-play) over a symmetry set Phi; the train-sp
    options, plus ``--symmetries``."""

    symmetries: str | None = option(
        None,
        help="Phi, the identity included: none (self-play), mdp (the env's Dec-POMDP symmetries) or a "
        "discovery output folder (learned ER symmetries; on a tabular game also an ers-exact discover --json "
        "result saved as DIR/discovery.json); required unless --resume",
        check=symmetries_check,
        metavar="none|mdp|DIR",
    )

    def check(self) -> None:
        super().check()
        if self.resume is None and self.symmetries is None:
            raise UsageError("--symmetries is required (none, mdp or a discovery folder), or --resume POOL")
        if self.advantage == "exact" and self.symmetries not in (None, "none"):
            raise UsageError(
                f"--advantage exact is self-play's update; other-play with --symmetries {self.symmetries} "
                "needs --advantage gae"
            )


def run_train_op(opts: TrainOPOptions) -> dict[str, Any]:
    """Train (or continue) an other-play pool; the pool summary (pool.json) and its learning-curve figure."""
    from ers_exact.util.output import output_root

    folder = resume_folder(opts.resume) if opts.resume is not None else Path(str(opts.out))
    with output_root(folder):  # no write through a link in the pool, as train-sp's
        result = _train_op(opts)
    return with_learning_curve(result, folder)


def _train_op(opts: TrainOPOptions) -> dict[str, Any]:
    from ers_deep.other_play import train_op_pool, train_op_pool_ray

    runs: dict[str, Any] = {
        "eval_games": opts.eval_games,
        "threads": opts.threads,
        "max_updates": opts.max_updates,
    }
    if opts.resume is not None:
        check_resume_updates(resume_folder(opts.resume), opts.max_updates, opts.ray)
        if opts.ray is not None:
            return resume_ray_pool(resume_folder(opts.resume), opts.ray, opts.threads, other_play=True)
        return train_op_pool(None, opts.symmetries, resume_folder(opts.resume), resume_run=True, **runs)
    assert opts.symmetries is not None
    learned = opts.symmetries not in ("none", "mdp")
    if (
        opts.force
        and learned
        and Path(opts.symmetries).resolve().is_relative_to(Path(str(opts.out)).resolve())
    ):
        raise UsageError(f"--force would remove --symmetries {opts.symmetries}, inside --out {opts.out}")
    replace_pool(opts)
    if opts.ray is not None:
        return train_op_pool_ray(opts.config(), opts.symmetries, str(opts.out), opts.ray, **runs)
    return train_op_pool(opts.config(), opts.symmetries, str(opts.out), **runs)


def show_train_op(res: dict[str, Any]) -> None:
    show_pool(res)
    op = res["other_play"]
    print(
        f"other-play over {len(op['symmetries'])} {'symmetry' if len(op['symmetries']) == 1 else 'symmetries'} "
        f"({op['source']}): {', '.join(op['symmetries'])}"
    )
    for p in res["policies"]:
        e = p["other_play"]
        print(f"  seed {p['seed']:>3}  other-play E J(phi_1(pi), phi_2(pi)) {e['mean']:8.3f} ± {e['se']:.3f}")
    show_figure(res)
