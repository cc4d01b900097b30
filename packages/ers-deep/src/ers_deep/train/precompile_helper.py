"""The helper process of ``ers_deep.train.precompile``: a learner of the config it reads, one update (whose
compilation fills inductor's caches for the learner that started it), its seconds as one JSON line on stdout.

    python -m ers_deep.train.precompile_helper < payload.json   # {"config": TrainConfig JSON, "threads": n}

Apart from ``precompile`` so that the learner (``train.ippo``), which starts the helper, and the helper, which
builds a learner, do not import each other.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import IO

import torch

from ers_deep.train.config import TrainConfig
from ers_deep.train.ippo import Learner
from ers_deep.train.precompile import PARENT

__all__ = ["main"]


def _exit_with_parent() -> None:
    """End this helper when the process that started it is gone (killed before it waited), also if that
    happened before this check began (the helper is then already another process's child)."""
    parent = int(os.environ.get(PARENT, os.getppid()))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main(stdin: IO[str] = sys.stdin) -> int:
    """The helper: a learner of the config read from ``stdin`` (JSON ``{"config": ..., "threads": n}``: the
    caller's torch threads, which CPU kernels are generated for), one update; its seconds on stdout."""
    _exit_with_parent()
    payload = json.loads(stdin.read())
    torch.set_num_threads(int(payload["threads"]))
    cfg = TrainConfig.from_json(payload["config"])
    t1 = time.perf_counter()
    learner = Learner(cfg)
    t2 = time.perf_counter()
    learner.train_step()
    t3 = time.perf_counter()
    print(json.dumps({"build_s": t2 - t1, "update_s": t3 - t2}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
