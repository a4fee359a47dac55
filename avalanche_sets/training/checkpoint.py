"""Checkpoint and resume of a whole SETS run, written atomically.

Avalanche 0.6's ``save_checkpoint`` pickles the whole strategy with ``dill``, which fails on
torch optimisers here (design §7), and it cannot resume in the middle of an experience. This
module saves what a run needs to continue bit-for-bit instead: the model, the optimiser, every
plugin and metric that exposes ``state_dict()``/``load_state_dict()`` (ORDER's memory,
variational networks and generators; episode metrics), the global RNG states, and the stream
position (experience, iteration) plus any results so far.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from avalanche.core import SupervisedPlugin

__all__ = ["save_checkpoint", "load_checkpoint", "CheckpointPlugin"]

FORMAT_VERSION = 1


def _stateful(strategy) -> dict[str, Any]:
    """Plugins and metrics with a state_dict, keyed by position and class name (stable)."""
    out = {}
    for i, p in enumerate(strategy.plugins):
        if hasattr(p, "state_dict") and hasattr(p, "load_state_dict"):
            out[f"plugin{i}:{type(p).__name__}"] = p
    evaluator = getattr(strategy, "evaluator", None)
    for i, m in enumerate(getattr(evaluator, "metrics", []) or []):
        if hasattr(m, "state_dict") and hasattr(m, "load_state_dict"):
            out[f"metric{i}:{type(m).__name__}"] = m
    return out


def save_checkpoint(
    path: str | Path, strategy, *, position: dict, extra: dict | None = None
) -> Path:
    """Atomically write a checkpoint of ``strategy`` at stream ``position``.

    Args:
        path: destination file (its folder is created). Written to ``path.tmp`` then renamed,
            so a crash never leaves a half-written checkpoint.
        strategy: an :class:`~avalanche_sets.training.EpisodicTemplate` (or subclass).
        position: where the run stands, e.g. ``{"experience": 2, "iteration": 150}``.
        extra: anything else to restore (results so far, settings).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT_VERSION,
        "model": strategy.model.state_dict(),
        "optimizer": strategy.optimizer.state_dict(),
        "components": {k: v.state_dict() for k, v in _stateful(strategy).items()},
        "rng": {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        },
        "position": dict(position),
        "extra": extra or {},
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path, strategy) -> dict:
    """Restore ``strategy`` from a checkpoint; returns ``{"position": ..., "extra": ...}``.

    The strategy must be built the same way as the one that was saved (same model, optimiser,
    plugins and metrics, in the same order); mismatches raise a ``ValueError`` naming them.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported checkpoint format {state.get('format')!r}")
    components = _stateful(strategy)
    missing = sorted(set(state["components"]) ^ set(components))
    if missing:
        raise ValueError(
            f"{path}: the strategy's plugins/metrics differ from the checkpoint's: {missing}; "
            "build the strategy with the same plugins and metrics to resume"
        )
    strategy.model.load_state_dict(state["model"])
    strategy.optimizer.load_state_dict(state["optimizer"])
    for key, comp in components.items():
        comp.load_state_dict(state["components"][key])
    torch.set_rng_state(state["rng"]["torch"])
    np.random.set_state(state["rng"]["numpy"])
    random.setstate(state["rng"]["python"])
    return {"position": state["position"], "extra": state["extra"]}


class CheckpointPlugin(SupervisedPlugin):
    """Save a checkpoint every ``every`` training iterations (put it last in the plugin list).

    Args:
        path: checkpoint file.
        every: iterations between checkpoints.
        extra_fn: returns the ``extra`` dict to store (e.g. the results so far).
    """

    def __init__(self, path: str | Path, *, every: int, extra_fn=None) -> None:
        super().__init__()
        if every < 1:
            raise ValueError(f"every must be a positive number of iterations, got {every}")
        self.path = Path(path)
        self.every = int(every)
        self.extra_fn = extra_fn or (lambda: {})

    def after_training_iteration(self, strategy, **kwargs) -> None:
        done = strategy.exp_iteration + 1  # the template counts this iteration after plugins
        if done % self.every == 0:
            position = {
                "experience": strategy.experience.current_experience,
                "iteration": done,
            }
            save_checkpoint(self.path, strategy, position=position, extra=self.extra_fn())
