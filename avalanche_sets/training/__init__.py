"""The episodic strategy template, checkpointing and the run loop."""

from .checkpoint import CheckpointPlugin, load_checkpoint, save_checkpoint
from .runner import RunResult, episode_accuracies, run_sets
from .template import EpisodicTemplate

__all__ = [
    "EpisodicTemplate",
    "CheckpointPlugin",
    "save_checkpoint",
    "load_checkpoint",
    "RunResult",
    "run_sets",
    "episode_accuracies",
]
