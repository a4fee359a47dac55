"""Episode-level evaluation metrics (Avalanche plugin metrics) for SETS streams.

Avalanche's own metrics (accuracy, loss, forgetting, BWT, ...) work unchanged on an
:class:`~avalanche_sets.training.template.EpisodicTemplate` because ``mb_output`` are the query
logits and ``mb_y`` the query labels. They pool all queries of an experience, though, and
report no uncertainty. The metrics here follow the SETS protocol (design §2, §6):

* :class:`EpisodeAccuracy` (:mod:`.episode_accuracy`): the accuracy of every evaluation
  *episode*, per domain the mean and the half-width of its 95% confidence interval, and their
  mean over domains;
* :class:`AccuracyMatrix` (:mod:`.accuracy_matrix`): the domain × domain accuracy matrix of a
  sequential run, with average accuracy, forgetting and backward transfer, plus
  :func:`plot_accuracy_matrix`;
* :class:`OODDetection` (:mod:`.ood_detection`): precision and recall of the unlabeled images a
  learner kept as in-distribution, and the AUROC of its OOD score, scored against the oracle.

Every reported statistic (CIs over episodes and over seeds, forgetting, BWT, paired
differences) is defined once, in :mod:`avalanche_sets.metrics.stats`, which the runner, the
reporting tables and the benchmark scripts call too.

Every metric only reads the evaluation phase and keeps a ``state_dict()`` /
``load_state_dict()`` pair of plain Python values, so that a resumed run can restore it. Use
them with :func:`episode_metrics`::

    evaluator = EvaluationPlugin(accuracy_metrics(stream=True), *episode_metrics(), loggers=...)
"""

# The names load on first use (PEP 562), as the package's own: :mod:`.stats` needs numpy
# alone, and reading it (``avalanche-sets table``) must not pay for torch and Avalanche, which
# the metric classes import.
from .. import _lazy_names
from . import stats

_LAZY = {
    "episode_accuracies": "._common",
    "AccuracyMatrix": ".accuracy_matrix",
    "accuracy_matrix_figure": ".accuracy_matrix",
    "matrix_average_accuracy": ".accuracy_matrix",
    "matrix_backward_transfer": ".accuracy_matrix",
    "matrix_forgetting": ".accuracy_matrix",
    "plot_accuracy_matrix": ".accuracy_matrix",
    "DomainAccuracy": ".episode_accuracy",
    "EpisodeAccuracy": ".episode_accuracy",
    "StreamAccuracy": ".episode_accuracy",
    "episode_metrics": ".factory",
    "OODDetection": ".ood_detection",
    "OODResult": ".ood_detection",
    "OODSplitCollector": ".ood_detection",
    "ood_split_record": ".ood_detection",
    "auroc": ".ood_detection",
    **{name: ".stats" for name in ("Z_95", "average_forgetting", "backward_transfer", "ci95",
                                   "forgetting", "paired_difference", "seed_ci95")},
}  # fmt: skip

__all__ = [
    "stats",
    "Z_95",
    "ci95",
    "seed_ci95",
    "forgetting",
    "average_forgetting",
    "backward_transfer",
    "paired_difference",
    "auroc",
    "episode_accuracies",
    "DomainAccuracy",
    "StreamAccuracy",
    "OODResult",
    "EpisodeAccuracy",
    "AccuracyMatrix",
    "OODDetection",
    "OODSplitCollector",
    "ood_split_record",
    "matrix_average_accuracy",
    "matrix_forgetting",
    "matrix_backward_transfer",
    "plot_accuracy_matrix",
    "accuracy_matrix_figure",
    "episode_metrics",
]

__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
