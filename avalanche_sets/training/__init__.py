"""The episodic strategy template, checkpointing and the run loop, and what a plugin of one's
own needs: :class:`EpisodicPlugin` (the template's ``after_encode`` event), :class:`Iteration`
and :class:`Replayed` (the values plugins hand each other), :class:`MetaBatchReplay` (the trait
of a plugin that replays its own memory in the meta-batch), and the copies of episodes a
replay memory keeps (:func:`copy_episodes`, :func:`learner_batch`).

The names load on first use (PEP 562), as the package's own: the command line imports
:mod:`.loggers` (standard library only) to check ``--loggers`` before it needs torch.
"""

from .. import _lazy_names

_LAZY = {
    "EpisodicTemplate": ".template",
    "EpisodicPlugin": ".template",
    "Iteration": ".iteration",
    "Replayed": ".iteration",
    "MetaBatchReplay": ".iteration",
    "check_partners": ".iteration",
    "copy_episodes": ".episode_memory",
    "learner_batch": ".episode_memory",
    "episode_to_dict": ".episode_memory",
    "episode_from_dict": ".episode_memory",
    "CheckpointPlugin": ".checkpoint",
    "save_checkpoint": ".checkpoint",
    "load_checkpoint": ".checkpoint",
    "load_latest_checkpoint": ".checkpoint",
    "read_checkpoint": ".checkpoint",
    "CheckpointError": ".checkpoint",
    "CorruptCheckpointError": ".checkpoint",
    "CheckpointWarning": ".checkpoint",
    "NonFiniteLossError": ".template",
    "RunResult": ".runner",
    "run_sets": ".runner",
    "keep_freed_memory": ".allocator",
    "set_up_process": ".runner",
    "episode_accuracies": ".runner",
    "quiet_evaluator": ".template",
    "silent_evaluator": ".template",
    "MemoryFilling": ".memory_fill",
    "MemoryFill": ".memory_fill",
    "DomainProgressLogger": ".progress",
    "ResumableCSVLogger": ".run_loggers",
    "ResumableTensorboardLogger": ".run_loggers",
    "WandBLogger": ".run_loggers",
    "RunTextLogger": ".run_loggers",
    "LossTerms": ".loss_terms",
    "RunEvaluator": ".loss_terms",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
