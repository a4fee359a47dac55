"""The episodic strategy template, checkpointing and the run loop."""

from .allocator import keep_freed_memory
from .checkpoint import (
    CheckpointError,
    CheckpointPlugin,
    CheckpointWarning,
    CorruptCheckpointError,
    load_checkpoint,
    load_latest_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from .iteration import Iteration, Replayed, check_partners
from .loggers import ResumableCSVLogger, ResumableTensorboardLogger, RunTextLogger, WandBLogger
from .loss_terms import LossTerms, RunEvaluator
from .progress import DomainProgressLogger
from .runner import RunResult, episode_accuracies, run_sets, set_up_process
from .template import EpisodicTemplate, NonFiniteLossError, quiet_evaluator, silent_evaluator

__all__ = [
    "EpisodicTemplate",
    "Iteration",
    "Replayed",
    "check_partners",
    "CheckpointPlugin",
    "save_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "read_checkpoint",
    "CheckpointError",
    "CorruptCheckpointError",
    "CheckpointWarning",
    "NonFiniteLossError",
    "RunResult",
    "run_sets",
    "keep_freed_memory",
    "set_up_process",
    "episode_accuracies",
    "quiet_evaluator",
    "silent_evaluator",
    "DomainProgressLogger",
    "ResumableCSVLogger",
    "ResumableTensorboardLogger",
    "WandBLogger",
    "RunTextLogger",
    "LossTerms",
    "RunEvaluator",
]
