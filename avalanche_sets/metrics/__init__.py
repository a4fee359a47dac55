"""Episode-level evaluation metrics (Avalanche plugin metrics) for SETS streams."""

from .episode_metrics import (
    Z_95,
    AccuracyMatrix,
    DomainAccuracy,
    EpisodeAccuracy,
    OODDetection,
    OODResult,
    StreamAccuracy,
    accuracy_matrix_figure,
    auroc,
    ci95,
    episode_accuracies,
    episode_metrics,
    matrix_average_accuracy,
    matrix_backward_transfer,
    matrix_forgetting,
    plot_accuracy_matrix,
)

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
]
