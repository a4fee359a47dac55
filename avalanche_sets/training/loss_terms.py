"""The loss terms of training, averaged over intervals of iterations, for every logger.

The template keeps each training iteration's named loss terms in ``strategy.loss_terms``
(``"meta"``, ``"mi"``, ``"ot"``, a plugin's ``TERM``: :mod:`avalanche_sets.training.template`).
:class:`LossTerms` is an Avalanche ``PluginMetric`` that turns them into metric values, so every
logger of the evaluator (``log.txt``, CSV, TensorBoard, W&B, the progress bar) receives the same
numbers: the mean of each term over the last ``every`` iterations, emitted after the iteration
that closes the interval and after the last iteration of a domain (a shorter interval).

Recording adds no host synchronisation per iteration: the detached terms are summed on their
device and read back once per interval (one transfer for all terms). A term is averaged over the
iterations that had it (``ot`` exists only when tasks are replayed); an interval without a term
logs nothing for it. The partial sums are part of the run's checkpoint, so a resumed run logs the
means an uninterrupted run logs.
"""

from __future__ import annotations

from typing import Any

import torch
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricValue
from avalanche.training.plugins import EvaluationPlugin

from ..defaults import LOG_EVERY

__all__ = [
    "LossTerms",
    "RunEvaluator",
    "LOSS_TERM_PREFIX",
    "DEFAULT_LOG_EVERY",
    "loss_term_name",
    "check_log_every",
]

#: The metric name of term ``t`` is ``LOSS_TERM_PREFIX + t`` (``LossTerm/train_phase/train_stream/mi``).
LOSS_TERM_PREFIX = "LossTerm/train_phase/train_stream/"

#: Iterations per logged mean of the loss terms, unless a run says otherwise (``--log-every``).
DEFAULT_LOG_EVERY = LOG_EVERY


def loss_term_name(term: str) -> str:
    """The metric name under which the loss term ``term`` is logged."""
    return LOSS_TERM_PREFIX + term


def check_log_every(every: int) -> int:
    """``every`` if it is a valid interval (a positive integer number of iterations).

    Raises:
        ValueError: anything else, with the fix.
    """
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ValueError(
            f"log_every (training iterations per logged mean of the loss terms) must be a "
            f"positive integer, got {every!r}; fix: e.g. --log-every {DEFAULT_LOG_EVERY}"
        )
    return every


class LossTerms(PluginMetric[dict]):
    """Means of ``strategy.loss_terms`` over intervals of ``every`` training iterations.

    A value named :func:`loss_term_name` per term, at ``x_plot`` = the number of training
    iterations done when the interval closes (Avalanche's ``clock.train_iterations`` after the
    interval; the domain's last interval ends at its last iteration, the step of the epoch
    metrics). Evaluation is not read.

    Args:
        every: iterations per interval (≥ 1).
    """

    def __init__(self, *, every: int = DEFAULT_LOG_EVERY) -> None:
        super().__init__()
        self.every = check_log_every(every)
        self.reset()

    def __str__(self) -> str:
        return "LossTerms"

    def reset(self) -> None:
        """Forget the current interval's sums."""
        self._sums: dict[str, Any] = {}  # term -> running sum (a tensor on the term's device)
        self._counts: dict[str, int] = {}

    def result(self) -> dict[str, float]:
        """The current interval's means so far (reads the device: not for the hot path)."""
        return self._means()

    def _means(self) -> dict[str, float]:
        if not self._sums:
            return {}
        names = list(self._sums)
        sums = [torch.as_tensor(self._sums[k], dtype=torch.float32) for k in names]
        # one transfer for all terms (they live on one device in practice)
        devices = {s.device for s in sums}
        values = torch.stack(sums).tolist() if len(devices) == 1 else [float(s) for s in sums]
        return {k: v / self._counts[k] for k, v in zip(names, values)}

    def after_training_iteration(self, strategy) -> list[MetricValue] | None:
        for name, value in getattr(strategy, "loss_terms", {}).items():
            term = value.detach().float().sum()
            previous = self._sums.get(name)
            self._sums[name] = term if previous is None else previous + term
            self._counts[name] = self._counts.get(name, 0) + 1
        # the clock counts this iteration after the evaluator's callback
        done = int(strategy.clock.train_iterations) + 1
        if done % self.every == 0:
            return self._emit(strategy, done)
        return None

    def after_training_epoch(self, strategy) -> list[MetricValue] | None:
        # the domain's last, possibly shorter, interval (the clock has counted its iterations)
        return self._emit(strategy, int(strategy.clock.train_iterations))

    def _emit(self, strategy, step: int) -> list[MetricValue] | None:
        means = self._means()
        self.reset()
        if not means:
            return None
        return [MetricValue(self, loss_term_name(k), v, step) for k, v in means.items()]

    def state_dict(self) -> dict:
        """The current interval's sums and counts, as plain numbers (read at a checkpoint)."""
        sums = {k: float(torch.as_tensor(v)) for k, v in self._sums.items()}
        return {"sums": sums, "counts": dict(self._counts)}

    def load_state_dict(self, state: dict) -> None:
        """Continue the interval a checkpoint was written in."""
        self._sums = {k: float(v) for k, v in state["sums"].items()}
        self._counts = {k: int(v) for k, v in state["counts"].items()}


class RunEvaluator(EvaluationPlugin):
    """An ``EvaluationPlugin`` whose history (``all_metric_results``) keeps every metric but
    the loss terms, which go to the loggers (and ``last_metric_results``) only.

    The loss terms are one value per logged interval of training: kept in the history, they
    would grow with a stream's iterations, where every other value grows with its evaluations.
    """

    def publish_metric_value(self, mval: MetricValue) -> None:
        if not mval.name.startswith(LOSS_TERM_PREFIX):
            super().publish_metric_value(mval)
            return
        self._metric_values.append(mval)
        self.last_metric_results[mval.name] = mval.value
