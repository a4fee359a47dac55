"""Former home of the episode metrics, kept so that existing imports keep working.

The code now lives in one module per concern: :mod:`.stats` (confidence intervals,
forgetting, backward transfer, paired differences), :mod:`.episode_accuracy`,
:mod:`.accuracy_matrix`, :mod:`.ood_detection` and :mod:`.factory`. Import from
``avalanche_sets.metrics`` in new code.
"""

from ._common import episode_accuracies
from .accuracy_matrix import (
    AccuracyMatrix,
    accuracy_matrix_figure,
    matrix_average_accuracy,
    matrix_backward_transfer,
    matrix_forgetting,
    plot_accuracy_matrix,
)
from .episode_accuracy import STREAM_CI_METHODS, DomainAccuracy, EpisodeAccuracy, StreamAccuracy
from .factory import episode_metrics
from .ood_detection import OODDetection, OODResult, auroc
from .stats import Z_95, ci95

__all__ = [
    "Z_95",
    "ci95",
    "auroc",
    "episode_accuracies",
    "DomainAccuracy",
    "StreamAccuracy",
    "OODResult",
    "EpisodeAccuracy",
    "AccuracyMatrix",
    "OODDetection",
    "matrix_average_accuracy",
    "matrix_forgetting",
    "matrix_backward_transfer",
    "plot_accuracy_matrix",
    "accuracy_matrix_figure",
    "episode_metrics",
    "STREAM_CI_METHODS",
]
