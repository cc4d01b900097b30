"""Every deep test runs torch on one CPU thread on a machine without CUDA, set here when the folder is collected
(for the whole pytest process, whichever files run): results do not depend on the machine's thread count, and a
busy shared 2-core machine does not make a single op take seconds (two threads under load ran the Hanabi env 50x
slower). Tests of other thread counts set theirs and restore it (``tests/deep/threads.py``). A device machine (16
cores, CUDA: ``scripts/train-gpu.sh`` runs its gpu-marked tests) keeps torch's count, so the CPU sides of its
CUDA-against-CPU tests do not spend its few minutes on one core."""

from __future__ import annotations

import torch

if not torch.cuda.is_available():
    torch.set_num_threads(1)
