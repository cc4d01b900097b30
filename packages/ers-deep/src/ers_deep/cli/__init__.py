"""Command line of ers-deep (console script ``ers-deep``).

    ers-deep env-bench hanabi --batch 1024 --steps 200 [--device cuda] [--against hle,jaxmarl] [--json]
    ers-deep env-bench overcooked-v2 --batch 1024 --steps 200 [--layout L] [--against jaxmarl] [--json]
    ers-deep train-sp --env ENV --seeds 0-4 --out POOL [--alpha A] [--total-steps N] [--ray ADDRESS] [--json]
    ers-deep train-sp --resume POOL [--json]
    ers-deep crossplay POOL_A [POOL_B] --games N [--greedy] [--json]
    ers-deep action-matrix POOL [--policy SEEDS] | --table1 DIR  --games N [--out DIR]
    ers-deep op-preservation --discovery DIR --pool OP_POOL --games N [--out DIR]
    ers-deep xp-distribution --populations NAME=POOL,NAME=TABLE1:TAG | --table1 DIR [--out DIR]

Options come from one frozen options class per command (defaults, help and validation in one place, shared
with ers-exact through :mod:`ers_exact.util.options`); every invalid input exits with status 2 and one line
``ers-deep CMD: error: ...`` naming the value.
"""

from __future__ import annotations

from collections.abc import Sequence

from ers_deep import __version__
from ers_deep.cli.analyse import (
    ActionMatrixOptions,
    OPPreservationOptions,
    XPDistributionOptions,
    run_action_matrix,
    run_op_preservation,
    run_xp_distribution,
    show_action_matrix,
    show_op_preservation,
    show_xp_distribution,
)
from ers_deep.cli.common import device_check, env_check, parse_seeds, seeds_check
from ers_deep.cli.crossplay import CrossplayOptions, run_crossplay, show_crossplay
from ers_deep.cli.discover import DiscoverOptions, run_discover, show_discover
from ers_deep.cli.env_bench import EnvBenchOptions, run_env_bench, show_env_bench
from ers_deep.cli.other_play import TrainOPOptions, run_train_op, show_train_op
from ers_deep.cli.train import TrainSPOptions, run_train_sp, show_train_sp
from ers_deep.cli.zsc import (
    Table1Options,
    Table2Options,
    run_table1_cmd,
    run_table2_cmd,
    show_table1,
    show_table2,
)
from ers_exact.util.cli import Command, run_cli

__all__ = [
    "COMMANDS",
    "CrossplayOptions",
    "EnvBenchOptions",
    "TrainSPOptions",
    "device_check",
    "env_check",
    "main",
    "parse_seeds",
    "run_crossplay",
    "run_env_bench",
    "run_train_sp",
    "seeds_check",
]

COMMANDS: tuple[Command, ...] = (
    Command(
        "env-bench",
        "env-steps/s with random legal moves (auto-reset on), against references",
        EnvBenchOptions,
        run_env_bench,
        show_env_bench,
    ),
    Command(
        "train-sp",
        "train a pool of IPPO self-play policies (seeds together; --resume continues one)",
        TrainSPOptions,
        run_train_sp,
        show_train_sp,
    ),
    Command(
        "train-op",
        "train a pool of IPPO other-play policies over a symmetry set: none, the env's (mdp) or learned ones",
        TrainOPOptions,
        run_train_op,
        show_train_op,
    ),
    Command(
        "crossplay",
        "exact-seat cross-play of one or two pools: XP matrix JSON, heatmap PNG, ZSC report",
        CrossplayOptions,
        run_crossplay,
        show_crossplay,
    ),
    Command(
        "discover",
        "learn ER symmetries of a pool (Algorithms 1-3): kept phi, their rounding and exact verdict, Table 2",
        DiscoverOptions,
        run_discover,
        show_discover,
    ),
    Command(
        "table1",
        "the population protocol: IPPO, IPPO + OP-MDP, IPPO + OP-ER; Table 1 (JSON, markdown, XP heatmaps)",
        Table1Options,
        run_table1_cmd,
        show_table1,
    ),
    Command(
        "table2",
        "deep discovery with each algorithm on the same pools: J_1, J_2, J_3, reconstruction loss (Table 2)",
        Table2Options,
        run_table2_cmd,
        show_table2,
    ),
    Command(
        "action-matrix",
        "conditional action matrices P(a_t^i | a_{t-1}^j) over self-play of chosen policies: JSON, heatmap",
        ActionMatrixOptions,
        run_action_matrix,
        show_action_matrix,
    ),
    Command(
        "op-preservation",
        "E[OP^Phi(pi)] against E_phi[OP^Phi(phi(pi))] for a learned set Phi (exact too on tabular games)",
        OPPreservationOptions,
        run_op_preservation,
        show_op_preservation,
    ),
    Command(
        "xp-distribution",
        "histograms of pairwise cross-play scores of populations on one figure, mean SP and XP per population",
        XPDistributionOptions,
        run_xp_distribution,
        show_xp_distribution,
    ),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ers-deep`` console script; returns the exit status."""
    return run_cli(
        "ers-deep",
        "ers-deep: batched torch environments and deep RL for ER symmetries",
        __version__,
        COMMANDS,
        argv,
    )
