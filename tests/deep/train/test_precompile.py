"""The update compiled in a helper process (``ers_deep.train.precompile``, ``TrainConfig.parallel_compile``):
the learner's own first update then loads every graph it compiles from the caches the helper filled (no
cache miss), and trains exactly as a learner without the helper; when the helper is not wanted, fails or runs
too long, the learner compiles by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from ers_deep.nets import NetConfig
from ers_deep.train import Learner, TrainConfig
from ers_deep.train.precompile import UpdatePrecompile, wanted
from ers_exact.util.options import UsageError
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config

ROOT = Path(__file__).resolve().parents[3]


def compiled_config(**kw: object) -> TrainConfig:
    """Hanabi with both the collection step and the update compiled (a hidden width no other test compiles, so
    nothing of it sits in this process's in-memory caches)."""
    return tiny_config(
        "hanabi",
        collect_mode="compile",
        update_mode="compile",
        net=NetConfig(kind="mlp", hidden=24),
        **kw,
    )


def cache_counts() -> tuple[int, int]:
    c = counters["inductor"]
    return int(c["fxgraph_cache_hit"]), int(c["fxgraph_cache_miss"])


def first_update(learner: Learner) -> None:
    ro, _ = learner.collect()
    adv, target = learner.advantages(ro)
    learner.ppo_update(ro, adv, target)


def check_loads_the_helper_s_update(
    cfg: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A learner of ``cfg`` (the helper wanted) compiles its step itself and loads its whole first update from
    the caches the helper filled (cold, in ``tmp_path``); a learner without the helper trains the same (on CPU
    bit for bit; on CUDA within 1e-5, as a captured graph may pick other cuBLAS kernels)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # cold, and the helper's too
    learner = Learner(cfg)
    assert learner.precompile is not None
    ro, _ = learner.collect()  # compiles the step here, while the helper compiles the update
    hits, misses = cache_counts()
    adv, target = learner.advantages(ro)
    learner.ppo_update(ro, adv, target)
    report = learner.await_precompile()
    assert report is not None and "error" not in report, report
    assert report["update_s"] > 0
    new_hits, new_misses = cache_counts()
    assert new_misses == misses, "the first update compiled a graph the helper had not cached"
    assert new_hits >= hits + 2, "the loss's forward and backward must come from the cache"

    alone = Learner(cfg.replace(parallel_compile="off"))
    assert alone.precompile is None
    first_update(alone)
    for (name, p), q in zip(learner.net.named_parameters(), alone.net.parameters(), strict=True):
        tol = 1e-5 if p.is_cuda else 0.0
        assert torch.allclose(p, q, rtol=0.0, atol=tol), f"{name} differs from the learner without a helper"


def test_the_learner_loads_the_update_the_helper_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_loads_the_helper_s_update(compiled_config(parallel_compile="on"), tmp_path, monkeypatch)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_learner_loads_the_captured_update_the_helper_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA's defaults: the step and the update compiled and captured, the helper on by ``"auto"``."""
    cfg = compiled_config(device="cuda", collect_mode="auto", update_mode="auto", num_envs=64, num_steps=64)
    check_loads_the_helper_s_update(cfg, tmp_path, monkeypatch)


@pytest.mark.parametrize(
    "setting, collect, update, device, own_net, expected",
    [
        ("auto", "compile-graph", "compile-graph", "cuda", True, True),
        ("auto", "compile", "compile", "cpu", True, False),  # auto: CUDA only
        ("on", "compile", "compile", "cpu", True, True),
        ("off", "compile-graph", "compile-graph", "cuda", True, False),
        ("on", "eager", "compile", "cpu", True, False),  # nothing to overlap with
        ("on", "compile", "eager", "cpu", True, False),
        ("on", "compile-graph", "graph", "cuda", True, False),
        ("on", "compile", "compile", "cpu", False, False),  # a composite net the helper cannot rebuild
    ],
)
def test_the_helper_runs_only_where_two_compilations_can_overlap(
    setting: str, collect: str, update: str, device: str, own_net: bool, expected: bool
) -> None:
    cfg = tiny_config("hanabi", parallel_compile=setting)
    assert wanted(cfg, collect, update, device, own_net) is expected


def test_no_helper_without_the_caches_it_fills() -> None:
    import torch._inductor.config as inductor

    # the config module's own patch: monkeypatch's undo deleted the entry (later compilations then failed)
    cfg = tiny_config("hanabi", parallel_compile="on")
    with inductor.patch(fx_graph_cache=False):
        assert not wanted(cfg, "compile", "compile", "cpu", True)
    with inductor.patch(force_disable_caches=True):
        assert not wanted(cfg, "compile", "compile", "cpu", True)
    assert wanted(cfg, "compile", "compile", "cpu", True)  # restored


def test_no_helper_for_the_reference_collections() -> None:
    cfg = tiny_config("hanabi", parallel_compile="on", collector="native")
    assert not wanted(cfg, "compile", "compile", "cpu", True)


def test_a_failed_helper_is_reported_and_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    import ers_deep.train.precompile as precompile

    # a config the helper cannot build a learner of (TrainConfig refuses an unknown game name itself; a .dpomdp
    # path is taken by its form and looked for where the env is built)
    missing = "tabular:/no/such/folder/no-such-game.dpomdp"
    monkeypatch.setattr(precompile, "helper_config", lambda cfg: cfg.replace(env=missing))
    helper = UpdatePrecompile(tiny_config("hanabi"))
    with pytest.warns(UserWarning, match="the update compiles here"):
        report = helper.wait()
    assert "exited with 1" in report["error"], report
    assert "no-such-game" in report["error"], report
    assert helper.wait() is report  # once


def test_a_helper_past_its_time_is_stopped() -> None:
    helper = UpdatePrecompile(tiny_config("hanabi"), timeout=0.2)
    with pytest.warns(UserWarning, match="ran past"):
        report = helper.wait()
    assert helper.proc.poll() is not None, "the helper still runs"
    assert "ran past" in report["error"]


def test_the_setting_is_checked() -> None:
    with pytest.raises(UsageError, match="parallel_compile"):
        tiny_config("hanabi", parallel_compile="sometimes")


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_the_helper_ends_when_its_learner_s_process_is_killed(tmp_path: Path) -> None:
    """A learner killed before its first update must not leave its helper compiling (and, on a GPU, holding
    memory): the helper notices within a second or so, even when the kill came before it began to look."""
    code = (
        "import sys, time\n"
        "from ers_deep.train.precompile import UpdatePrecompile\n"
        "from tests.deep.train.twins import tiny_config\n"
        "h = UpdatePrecompile(tiny_config('overcooked-v2', update_mode='compile'))\n"
        "print(h.proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    # cold caches: compiling Overcooked's update takes the helper ~50 s on the 2-core machine
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, cwd=ROOT)
    assert parent.stdout is not None
    helper = int(parent.stdout.readline())
    parent.kill()  # before the helper has even imported torch
    parent.wait()
    deadline = time.monotonic() + 45  # ~5 s when it works; without the watch ~55 s idle, longer loaded
    while running(helper) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(helper), "the helper outlived its learner's process"
