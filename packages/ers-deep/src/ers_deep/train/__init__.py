"""Training (torch): ``config`` (``TrainConfig``, the paper's defaults), ``ippo`` (the IPPO learner for S seeds
at once), ``checkpoint`` (safetensors + JSON, atomic, verified), ``run`` (run directory, metrics, resume),
``exact`` (tabular policies checked by ers-exact)."""

from ers_deep.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ers_deep.train.config import TrainConfig, make_env, paper_config
from ers_deep.train.ippo import Learner
from ers_deep.train.run import latest_checkpoint, read_metrics, resume, train

__all__ = [
    "CheckpointError",
    "Learner",
    "TrainConfig",
    "latest_checkpoint",
    "load_checkpoint",
    "make_env",
    "paper_config",
    "read_metrics",
    "resume",
    "save_checkpoint",
    "train",
]
