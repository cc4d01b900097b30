"""Every deep test runs torch on one CPU thread, set here when the folder is collected (for the whole pytest
process, whichever files run): results do not depend on the machine's thread count, and a busy shared 2-core
machine does not make a single op take seconds (two threads under load ran the Hanabi env 50x slower). Tests
of other thread counts set theirs and restore it (``tests/deep/threads.py``)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
