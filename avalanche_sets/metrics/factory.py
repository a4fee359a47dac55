"""``episode_metrics()``: the SETS episode metrics in one call, for ``EvaluationPlugin``."""

from __future__ import annotations

from avalanche.evaluation import PluginMetric

from .accuracy_matrix import AccuracyMatrix
from .episode_accuracy import EpisodeAccuracy
from .ood_detection import OODDetection

__all__ = ["episode_metrics"]


def episode_metrics(
    *,
    accuracy: bool = True,
    matrix: bool = True,
    ood: bool = True,
    stream_ci: str = "pooled",
    matrix_stream: str = "test",
) -> list[PluginMetric]:
    """The SETS episode metrics, for ``EvaluationPlugin(*episode_metrics(), loggers=...)``.

    Args:
        accuracy: include :class:`EpisodeAccuracy` (``stream_ci`` picks its over-domain CI).
        matrix: include :class:`AccuracyMatrix` (filled by evaluations of ``matrix_stream``).
        ood: include :class:`OODDetection` (silent for learners without an OOD split).
    """
    metrics: list[PluginMetric] = []
    if accuracy:
        metrics.append(EpisodeAccuracy(stream_ci=stream_ci))
    if matrix:
        metrics.append(AccuracyMatrix(stream=matrix_stream))
    if ood:
        metrics.append(OODDetection())
    return metrics
