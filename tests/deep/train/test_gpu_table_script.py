"""``scripts/gpu_train_table.py``'s row variants and learning rows (the device script is run by hand on a GPU; its
parsing here, and its imports and tiny learners in a process without what the device image lacks), and its table's
markdown (``ers_deep.bench.train_table``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from ers_deep.bench.train_table import markdown, setup_split
from ers_deep.train import TrainConfig

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "gpu_train_table.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_train_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_row_variants_apply_unscoped_to_every_row_and_scoped_to_their_env() -> None:
    rows = _script().row_variants
    text = "bf16_update=true; overcooked-v2:cudnn_benchmark=true,vf_coef=1.0;hanabi:acting_rows=false"
    assert rows(text, "hanabi") == [{}, {"bf16_update": True}, {"acting_rows": False}]
    assert rows(text, "overcooked-v2") == [
        {},
        {"bf16_update": True},
        {"cudnn_benchmark": True, "vf_coef": 1.0},
    ]
    assert rows("", "hanabi") == [{}]


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_every_variant_of_the_planned_device_run_is_a_config_field(env: str) -> None:
    """The variants named in scripts/train-gpu.sh's plan build a TrainConfig (a typo would cost device time)."""
    plan = "bf16_update=true;overcooked-v2:cudnn_benchmark=true;overcooked-v2:net.spatial=matmul"
    assert plan in (SCRIPT.parent / "train-gpu.sh").read_text()
    script = _script()
    configs = [script.ers_config(env, 8, 4, 2, "cpu", True, **o) for o in script.row_variants(plan, env)]
    assert all(isinstance(c, TrainConfig) and c.env == env for c in configs)
    if env == "overcooked-v2":
        assert [(c.cudnn_benchmark, c.net.spatial) for c in configs] == [
            (False, "conv"),
            (False, "conv"),
            (True, "conv"),
            (False, "matmul"),
        ]
        assert configs[1].bf16_update and not configs[0].bf16_update


def test_every_table_args_of_the_device_plan_reaches_the_script_as_its_own_arguments() -> None:
    """Each TABLE_ARGS="..." written in train-gpu.sh, split the way the script splits it (its own ``eval`` line,
    run by bash), parses with gpu_train_table.py's command line, no argument keeps a quote, and every row
    and learning variant builds a TrainConfig. (A plain ${TABLE_ARGS} kept the quotes of --row-variants '...':
    the variant key became "'bf16_update" and the row failed; the CPU try found it, a device run would have lost
    its time.)"""
    import re
    import subprocess

    text = (SCRIPT.parent / "train-gpu.sh").read_text()
    split = next(line for line in text.splitlines() if line.startswith('eval "TABLE_ARGV='))
    plans = re.findall(r'TABLE_ARGS="([^"]*)"', text)
    assert len(plans) >= 4 and any("--row-variants '" in p for p in plans)
    script = _script()
    for plan in plans:
        shell = f'{split}\nprintf "%s\\0" "${{TABLE_ARGV[@]}}"'
        out = subprocess.run(["bash", "-c", shell], env={"TABLE_ARGS": plan}, capture_output=True, check=True)
        argv = [a.decode() for a in out.stdout.split(b"\0")[:-1]]
        assert not any("'" in a or '"' in a for a in argv), (plan, argv)
        args = script.parser().parse_args(argv)
        for env in ("hanabi", "overcooked-v2"):
            for over in script.row_variants(args.row_variants, env):
                cfg = script.ers_config(env, 8, 4, 2, "cpu", True, **over)
                assert isinstance(cfg, TrainConfig)
                if "phi" in over:  # other-play's net (--row-variants phi=...)
                    assert script.ers_net(cfg, over) is not None
        for over in [script.parse_over(x) for x in args.learn_variants.split(";") if x]:  # learning variants
            assert isinstance(script.ers_config("hanabi", 8, 4, 2, "cpu", True, **over), TrainConfig)


def test_rows_and_sizes_select_rows_in_order() -> None:
    """``--rows`` and ``--sizes`` together: the device plan's Overcooked call keeps only 1,024 x 128, its Hanabi
    call both Hanabi rows (1,024 before 8,192), and no filter keeps every row."""
    script = _script()
    rows = lambda *argv: script.selected_rows(script.parser().parse_args(list(argv)))  # noqa: E731
    assert rows("--rows", "overcooked-v2", "--sizes", "1024") == [("overcooked-v2", 1024, 128, 16)]
    assert [r[1] for r in rows("--rows", "hanabi")] == [1024, 8192]
    assert rows() == script.ROWS
    assert rows("--tiny", "--sizes", "4") == [r for r in script.TINY if r[1] == 4]
    args = script.parser().parse_args(["--no-default", "--min-variant-s", "90"])
    assert args.no_default and args.min_variant_s == 90.0


def test_the_ers_learning_run_trains_the_seed_it_is_given() -> None:
    """``--learn-seed`` reaches ers's learner as it reaches the anchor (``--seed``): ers ran seed 0 whatever the
    flag said, so a rerun over seeds would have paired every anchor seed with ers's seed 0."""
    script = _script()
    runs = [script.learning_run("hanabi", 8, 4, 0.0, "cpu", True, seed=s) for s in (3, 3, 4)]
    assert [r["seed"] for r in runs] == [3, 3, 4]
    assert runs[0]["returns"] == [] and runs[0]["updates"] == 1


def test_the_learning_row_splits_its_setup_and_the_markdown_shows_it() -> None:
    """A learning row carries its setup apart (the build, then the first update's collect / GAE / update), and
    the markdown prints it beside the score, so a device run says where ers's setup went."""
    script = _script()
    r = script.learning_run("hanabi", 8, 4, 0.0, "cpu", True)
    split = r["setup_phase_s"]
    assert list(split) == ["build", "collect", "gae", "update"] and sum(split.values()) <= r["setup_s"]
    row = {"kind": "learn-ers", "env": "hanabi", "num_envs": 8, **r}
    row["setup_phase_s"] = {"build": 3.2, "collect": 50.4, "gae": 0.1, "update": 20.0}
    assert "(build 3 / collect 50 / GAE 0 / update 20)" in markdown([row])
    assert r["precompile"] is None  # on CPU by default no helper compiles the update
    row["setup_phase_s"] = {"build": 3.2, "collect": 50.4, "gae": 0.1, "precompile_wait": 4.6, "update": 2.0}
    row["precompile"] = {"build_s": 2.0, "update_s": 31.4, "waited_s": 4.6}
    text = markdown([row])
    assert (
        "(build 3 / collect 50 / GAE 0 / helper wait 5 / update 2), the helper compiled the update in 31 s"
        in text
    )
    row["precompile"] = {"error": "the helper exited with 1: boom", "waited_s": 0.5}
    assert "the helper failed: the helper exited with 1: boom" in markdown([row])
    assert setup_split({}) == ""


def test_the_learning_rows_carry_each_side_s_own_evaluation() -> None:
    """After its clock, ers's learning run plays new games with its final policy (16 with ``tiny``, as the
    anchor's ``--eval-games``); the markdown prints both sides' evaluations beside the training scores."""
    script = _script()
    ev = script.learning_run("hanabi", 8, 4, 0.0, "cpu", True)["eval"]
    assert ev["games"] == 16 and 0.0 <= ev["mean"] <= 10.0 and ev["se"] >= 0.0  # Very-Small: 2 colours x 5
    ers = {"kind": "learn-ers", "env": "hanabi", "num_envs": 8, "return_last": 1.0, "eval": ev}
    final = {"event": "final", "eval_sampled_mean": 20.871, "eval_se": 0.148}
    anchor = {
        "kind": "learn-anchor",
        "env": "hanabi",
        "num_envs": 8,
        "lines": [{"return_chunk": 20.6, "env_steps": 9}, final],
    }
    text = markdown([ers, anchor])
    assert f"own evaluation {ev['mean']:.2f} +- {ev['se']:.2f}" in text
    assert "training score at the end 20.6, own evaluation 20.87 +- 0.15" in text


@pytest.mark.parametrize("no_default", [False, True])
def test_no_default_leaves_only_the_learning_variants(
    no_default: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--no-default`` drops ers's default learning run as it drops a row's default config; the variants run
    in order (the next device plan runs one variant alone)."""
    script = _script()
    ran: list[dict[str, object]] = []

    def fake_run(*args: object, **over: object) -> dict[str, object]:
        ran.append(over)
        return {"return_last": 0.0}

    monkeypatch.setattr(script, "learning_run", fake_run)
    argv = ["--tiny", "--learn-sides", "ers", "--learn-variants", "autotune_pointwise=false;vf_coef=1.0"]
    a = script.parser().parse_args(argv + (["--no-default"] if no_default else []))
    script.learn(a, tmp_path, 8, 4, lambda: 1e9, tmp_path, {}, 0.0)
    variants = [{"autotune_pointwise": False}, {"vf_coef": 1.0}]
    assert ran == (variants if no_default else [{}, *variants])


def test_a_failed_evaluation_keeps_the_learning_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluation runs after the device time was spent: its failure is recorded in the row, which keeps the
    run's score and env-steps."""
    from ers_deep.train import evaluate

    def broken(*args: object, **kw: object) -> dict[str, float]:
        raise RuntimeError("no memory left")

    monkeypatch.setattr(evaluate, "play", broken)
    r = _script().learning_run("hanabi", 8, 4, 0.0, "cpu", True)
    assert r["eval"] == {"error": "RuntimeError: no memory left"} and r["env_steps"] > 0
    assert "own evaluation" not in markdown([{"kind": "learn-ers", "env": "hanabi", **r}])


def test_every_gpu_test_the_device_script_names_exists() -> None:
    """The test ids in scripts/train-gpu.sh (its default list and the plans' GPU_TESTS) name a test function of
    an existing file (a typo would cost device time: pytest would report no tests and the budget would be spent)."""
    import re

    root = SCRIPT.parent.parent
    ids = set(re.findall(r"(tests/[\w/]+\.py)::(\w+)", (SCRIPT.parent / "train-gpu.sh").read_text()))
    assert len(ids) >= 8, ids
    for path, name in sorted(ids):
        assert (root / path).exists(), path
        assert re.search(rf"^def {name}\(", (root / path).read_text(), re.M), f"{path}::{name}"


def test_several_learning_seeds_stack_in_ers_and_run_the_anchors_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--learn-seeds 3,5``: one ers learner with both seeds stacked, and one anchor process per seed started
    together, each with its ``--seed`` and its own log; a row per anchor seed. A repeated seed is refused."""
    import json

    from ers_deep.bench import train as bench_train

    script = _script()
    ers_calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(
        script, "learning_run", lambda *args, **over: ers_calls.append(args) or {"return_last": 1.0}
    )
    batches: list[list[list[str]]] = []

    def fake_anchors(path: Path, arg_sets: list[list[str]], **kw: object) -> dict[str, object]:
        batches.append(arg_sets)
        return {
            "runs": [{"wall_s": 1.0, "seen": args[-1]} for args in arg_sets],
            "wall_s": 1.0,
            "cores_used": 2.0,
        }

    monkeypatch.setattr(bench_train, "bench_anchors", fake_anchors)
    a = script.parser().parse_args(["--tiny", "--learn-seeds", "3,5"])
    script.learn(a, tmp_path, 8, 4, lambda: 1e9, tmp_path, {}, 0.0)
    assert len(ers_calls) == 1 and ers_calls[0][-1] == (3, 5)
    (arg_sets,) = batches
    for seed, args in zip((3, 5), arg_sets):
        assert args[args.index("--seed") + 1] == str(seed)
        assert args[args.index("--out") + 1] == str(tmp_path / f"learn-anchor-seed{seed}.jsonl")
    rows = json.loads((tmp_path / "gpu-train-table.json").read_text())
    anchors = [r for r in rows if r["kind"] == "learn-anchor"]
    assert [(r["seed"], r["seen"], r["concurrent"]) for r in anchors] == [(3, "3", 2), (5, "5", 2)]
    assert [r["seeds"] for r in rows if r["kind"] == "learn-ers"] == [[3, 5]]
    with pytest.raises(SystemExit, match="repeats"):
        script.learn_seeds(script.parser().parse_args(["--learn-seeds", "1,1"]))
    assert script.learn_seeds(script.parser().parse_args(["--learn-seed", "4"])) == (4,)


#: a fresh process as on the device's bare image (torch and jax; no torchrl, tensordict, HLE or Ray): the device
#: script's modules import and tiny learners of both env families train a step and play their evaluation
BARE_IMAGE = """
import importlib.abc, importlib.util, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torchrl", "tensordict", "hanabi_learning_environment", "ray"):
            raise ImportError(f"not on the bare image: {name}")
        return None

sys.meta_path.insert(0, Absent())
import torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("gpu_train_table", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
from ers_deep.bench import selfplay, train, train_table  # noqa: F401  (what the script imports lazily)
for env in ("hanabi", "overcooked-v2"):
    cfg = script.ers_config(env, 4, 8, 2, "cpu", True, collect_mode="eager", update_mode="eager")
    row = selfplay.timed_selfplay(cfg, 0.0, eval_games=2)
    assert row["updates"] >= 1 and row["eval"]["games"] == 2, row
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torchrl", "tensordict", "ray")))
"""


def test_the_device_script_runs_without_torchrl_hle_or_ray() -> None:
    """The device image has torch and jax only (scripts/train-gpu.sh's header): the table script and the learner
    path it runs (setup, a step, the evaluation) must not import torchrl, tensordict, HLE or Ray."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", BARE_IMAGE, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
