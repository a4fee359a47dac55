"""What the episode metrics share: per-episode accuracy and Avalanche metric naming.

Names follow Avalanche's template ``{metric}/{phase}_phase/{stream}_stream[/Exp{id:03}]``
without a task label (SETS is task-free), e.g. ``EpisodeAcc/eval_phase/test_stream/Exp002``.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricResult
from avalanche.evaluation.metric_utils import (
    EVAL,
    TRAIN,
    default_metric_name_template,
    generic_get_metric_name,
)
from torch import Tensor

TResult = TypeVar("TResult")

__all__ = ["episode_accuracies"]


def episode_accuracies(logits: Tensor, labels: Tensor, n_episodes: int) -> np.ndarray:
    """Accuracy of each of ``n_episodes`` episodes from flattened query logits and labels.

    Args:
        logits: ``[B*N*Q, N]`` query logits, episode-major (as the template's ``mb_output``).
        labels: ``[B*N*Q]`` query labels (``mb_y``).
        n_episodes: ``B``.

    Returns:
        float64 array ``[B]``.

    Raises:
        ValueError: when the number of queries is not a multiple of ``B``.
    """
    pred = logits.detach().argmax(dim=-1).reshape(-1)
    y = labels.detach().reshape(-1)
    if n_episodes < 1 or pred.numel() != y.numel() or pred.numel() % n_episodes:
        raise ValueError(
            f"cannot split {pred.numel()} predictions and {y.numel()} labels into "
            f"{n_episodes} episodes of equal size"
        )
    correct = (pred == y.to(pred.device)).reshape(n_episodes, -1)
    return correct.double().mean(dim=1).cpu().numpy()


# ---------------------------------------------------------------------------- naming helpers
def _value_name(
    metric_name: str, phase: str, stream: str | None, experience_id: int | None = None
) -> str:
    return generic_get_metric_name(
        default_metric_name_template,
        {
            "metric_name": metric_name,
            "phase_name": phase,
            "stream_name": stream,
            "experience_id": experience_id,
            "task_label": None,
        },
    )


def _phase(strategy) -> str:
    return TRAIN if getattr(strategy, "is_training", False) else EVAL


def _stream_name(strategy) -> str | None:
    exp = getattr(strategy, "experience", None)
    stream = getattr(exp, "origin_stream", None)
    return getattr(stream, "name", None)


def _x_plot(strategy) -> int:
    clock = getattr(strategy, "clock", None)
    return int(getattr(clock, "train_iterations", 0) or 0)


def _n_episodes(strategy) -> int:
    return len(strategy.mb_x)


class _EpisodeCollector(PluginMetric[TResult]):
    """Base of the metrics that gather per-episode accuracies of each evaluated experience.

    :class:`EpisodeAccuracy` and :class:`AccuracyMatrix` read a mini-batch the same way (same
    logits, labels and episode count); sharing the collector means the two can never disagree
    about which episodes an experience holds. Subclasses set ``self._current = []`` in ``reset``,
    consume ``self._current`` in ``after_eval_exp`` and may narrow :meth:`_collects`.
    """

    _current: list[np.ndarray]

    def _collects(self, strategy) -> bool:
        """Whether the current eval mini-batch belongs to this metric (default: always)."""
        return True

    def before_eval_exp(self, strategy) -> MetricResult:
        self._current = []
        return None

    def after_eval_iteration(self, strategy) -> MetricResult:
        super().after_eval_iteration(strategy)
        if self._collects(strategy):
            self._current.append(
                episode_accuracies(strategy.mb_output, strategy.mb_y, _n_episodes(strategy))
            )
        return None


def _nan_to_none(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _none_to_nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)
