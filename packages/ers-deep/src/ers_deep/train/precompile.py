"""The PPO update compiled in a helper process while the learner compiles its collection step.

A learner whose collection *and* update compile (on CUDA by default: Hanabi's compile-graph step and
compile-graph update) compiles them one after the other in its first ``train_step``: the env step at the first
collection, then the update's loss (forward and, through AOTAutograd, backward) and gradient clipping at the
first update. ``UpdatePrecompile`` starts a helper process at the learner's construction. The helper builds a
learner of the same config, collects one rollout eagerly (no compilation) and runs one update, which writes the
update's compiled graphs into inductor's on-disk caches (the FX graph cache and AOTAutograd's). The learner waits
for the helper before its own first update, whose compilation then loads those graphs instead of compiling them
(same graphs and settings, so cache hits: ``tests/deep/train/test_precompile.py``). The two compilations
overlap, so the setup shrinks by about the shorter of the two.

``TrainConfig.parallel_compile``: ``"auto"`` (on CUDA), ``"on"`` (also on CPU, where both compile only in
forced compile modes) or ``"off"``. Nothing changes in what the learner computes: the helper only fills caches.
No helper starts where inductor's caches are off; a helper that fails leaves the learner to compile as before
(with a warning).

    python -m ers_deep.train.precompile_helper < payload.json   # the helper (train/precompile_helper.py)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import IO, Any

from ers_deep.train.config import TrainConfig

__all__ = ["UpdatePrecompile", "caches_on", "wanted"]

COMPILED = ("compile", "compile-graph")
#: the environment variable that tells the helper which process started it
PARENT = "ERS_PRECOMPILE_PARENT"


def caches_on() -> bool:
    """Whether inductor's FX graph cache is on and not forced off (``TORCHINDUCTOR_FORCE_DISABLE_CACHES``): what the
    helper fills (AOTAutograd's cache, where on, saves the learner the joint graph's tracing too)."""
    import torch._inductor.config as inductor

    return bool(inductor.fx_graph_cache) and not bool(getattr(inductor, "force_disable_caches", False))


def wanted(cfg: TrainConfig, collect_mode: str, update_mode: str, device: str, own_net: bool) -> bool:
    """Whether a learner of ``cfg`` starts the helper: ``parallel_compile`` on (``"auto"``: on CUDA), the fast
    collection and the update both compiled, the net built from the config (a composite net passed in, as
    other-play's and discovery's, is not one the helper can rebuild) and the caches on."""
    if cfg.parallel_compile == "off" or (cfg.parallel_compile == "auto" and device != "cuda"):
        return False
    compiled = collect_mode in COMPILED and update_mode in COMPILED
    return compiled and own_net and cfg.collector == "fast" and caches_on()


def helper_config(cfg: TrainConfig) -> TrainConfig:
    """The helper's config: ``cfg`` with an eager collection (the rollout's tensors are the same in every mode)
    and no helper of its own."""
    return cfg.replace(collect_mode="eager", parallel_compile="off")


def _source_paths() -> str:
    """PYTHONPATH for the helper: the source folders of ers_deep and ers_exact, then the caller's."""
    import ers_deep
    import ers_exact

    roots = [str(Path(str(m.__file__)).resolve().parent.parent) for m in (ers_deep, ers_exact)]
    return os.pathsep.join([*roots, *filter(None, [os.environ.get("PYTHONPATH")])])


class UpdatePrecompile:
    """The helper process for ``config`` (started at construction); ``wait()`` before the first update."""

    def __init__(self, config: TrainConfig, timeout: float = 900.0) -> None:
        self.timeout, self.started = timeout, time.perf_counter()
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115  (the helper's; closed after wait)
        env = {**os.environ, "PYTHONPATH": _source_paths(), PARENT: str(os.getpid())}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ers_deep.train.precompile_helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )
        assert self.proc.stdin is not None
        import torch

        payload = {"config": helper_config(config).to_json(), "threads": torch.get_num_threads()}
        self.proc.stdin.write(json.dumps(payload).encode())
        self.proc.stdin.close()
        self.proc.stdin = None  # sent: communicate() must not flush it again
        self.report: dict[str, Any] | None = None

    def wait(self) -> dict[str, Any]:
        """Wait for the helper (at most ``timeout`` seconds from its start; then it is killed) and return its
        report: its seconds (``build_s``, ``update_s``), ``waited_s`` and, if it failed, ``error``."""
        if self.report is not None:
            return self.report
        t0 = time.perf_counter()
        left = max(1.0, self.timeout - (t0 - self.started))
        try:
            out, _ = self.proc.communicate(timeout=left)
            report = self._read(out)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            report = {"error": f"the helper ran past {self.timeout:.0f} s and was stopped"}
        self.stderr.close()
        report["waited_s"] = time.perf_counter() - t0
        if "error" in report:
            warnings.warn(f"parallel compile: {report['error']}; the update compiles here", stacklevel=3)
        self.report = report
        return report

    def _read(self, out: bytes) -> dict[str, Any]:
        if self.proc.returncode == 0:
            try:
                return dict(json.loads(out.decode().strip().splitlines()[-1]))
            except (json.JSONDecodeError, IndexError):
                pass
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        return {"error": f"the helper exited with {self.proc.returncode}: {' | '.join(tail)[:400]}"}
