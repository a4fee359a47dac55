"""The episodic strategy template, checkpointing and the run loop, and what a plugin of one's
own needs: :class:`EpisodicPlugin` (the template's ``after_encode`` event), :class:`Iteration`
and :class:`Replayed` (the values plugins hand each other), :class:`MetaBatchReplay` (the trait
of a plugin that replays its own memory in the meta-batch), and the copies of episodes a
replay memory keeps (:func:`copy_episodes`, :func:`learner_batch`)."""

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
from .episode_memory import copy_episodes, episode_from_dict, episode_to_dict, learner_batch
from .iteration import Iteration, MetaBatchReplay, Replayed, check_partners
from .loggers import ResumableCSVLogger, ResumableTensorboardLogger, RunTextLogger, WandBLogger
from .loss_terms import LossTerms, RunEvaluator
from .memory_fill import MemoryFill, MemoryFilling, memory_fill
from .progress import DomainProgressLogger
from .runner import RunResult, episode_accuracies, run_sets, set_up_process
from .template import (
    EpisodicPlugin,
    EpisodicTemplate,
    NonFiniteLossError,
    quiet_evaluator,
    silent_evaluator,
)

__all__ = [
    "EpisodicTemplate",
    "EpisodicPlugin",
    "Iteration",
    "Replayed",
    "MetaBatchReplay",
    "check_partners",
    "copy_episodes",
    "learner_batch",
    "episode_to_dict",
    "episode_from_dict",
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
    "MemoryFilling",
    "MemoryFill",
    "memory_fill",
    "DomainProgressLogger",
    "ResumableCSVLogger",
    "ResumableTensorboardLogger",
    "WandBLogger",
    "RunTextLogger",
    "LossTerms",
    "RunEvaluator",
]
