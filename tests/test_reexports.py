"""Modules split by concept keep every public name importable from where it was: the old module re-exports
the very object the new module defines (callers and pickles that name the old path keep working)."""

from __future__ import annotations

import importlib

import pytest

# (old module, new module, names the old one re-exports); an old module may appear with several new ones
MOVED = [
    ("ers_deep.train.run", "ers_deep.train.run_files",
     ["EXECUTION_FIELDS", "METRIC_COLUMNS", "RunError", "checkpoints", "latest_checkpoint", "read_checkpoint",
      "read_metrics", "read_run_config"]),
    ("ers_deep.train.ippo", "ers_deep.train.schedule", ["lr_at", "shaped_coef"]),
    ("ers_deep.envs.tabular.env", "ers_deep.envs.tabular.sampling", ["cumulative_table", "draw_from_cdf"]),
    ("ers_deep.train.ippo", "ers_deep.train.learner_setup",
     ["CPU_COMPILE_MIN_STEPS", "acting_share", "check_exact_discount", "collect_mode", "compile_settings",
      "learner_env", "max_resets_per_rollout", "minibatch_unit"]),
    ("ers_exact.solve.fixed_points", "ers_exact.solve.fixed_point_budget",
     ["DENSE_BUILD_PEAK", "START_BYTES_PER_COORDINATE"]),
    ("ers_exact.symmetry.er_group", "ers_exact.symmetry.policy_points", ["label_orbits"]),
    ("ers_exact.interface", "ers_exact.zsc_report", ["Estimate", "PopulationRow", "ZSCReport"]),
    ("ers_deep.cli.discover", "ers_deep.cli.discover_show", ["show_discover"]),
    ("ers_deep.discovery.run", "ers_deep.discovery.scores",
     ["COMPOSITIONS", "exact_value", "sample_observations"]),
    ("ers_exact.cli.options", "ers_exact.cli.zsc_options", ["DiscoverOptions", "OPOptions", "ZSCOptions"]),
    ("ers_exact.cli.commands", "ers_exact.cli.zsc_commands", ["run_discover", "run_op", "run_zsc"]),
    ("ers_exact.util.options", "ers_exact.util.checks",
     ["MAX_SEED", "Check", "at_least", "between", "finite", "non_negative", "one_of", "output_file",
      "output_folder", "positive", "probability", "seed_range", "thread_count"]),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[f"{old}->{new}" for old, new, _ in MOVED])
def test_old_module_re_exports_the_moved_names(old: str, new: str, names: list[str]) -> None:
    before, after = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert name in before.__all__, f"{old}.__all__ lacks {name}"
        assert getattr(before, name) is getattr(after, name), f"{old}.{name} is not {new}.{name}"


def test_split_classes_keep_their_bases() -> None:
    """The parser and the evaluator still are what they were: a DpomdpLexer and a LogitStructure."""
    from ers_exact.io.dpomdp_lexer import DpomdpLexer
    from ers_exact.io.dpomdp_preamble import DpomdpPreamble
    from ers_exact.solve.derivatives import LogitDerivatives
    from ers_exact.solve.logit_jacobian import LogitJacobian
    from ers_exact.solve.logit_structure import LogitStructure

    assert issubclass(DpomdpPreamble, DpomdpLexer)
    assert issubclass(LogitDerivatives, LogitJacobian) and issubclass(LogitJacobian, LogitStructure)
