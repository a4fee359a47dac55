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

from . import stats
from ._common import episode_accuracies
from .accuracy_matrix import (
    AccuracyMatrix,
    accuracy_matrix_figure,
    matrix_average_accuracy,
    matrix_backward_transfer,
    matrix_forgetting,
    plot_accuracy_matrix,
)
from .episode_accuracy import DomainAccuracy, EpisodeAccuracy, StreamAccuracy
from .factory import episode_metrics
from .ood_detection import OODDetection, OODResult, auroc
from .stats import (
    Z_95,
    average_forgetting,
    backward_transfer,
    ci95,
    forgetting,
    paired_difference,
    seed_ci95,
)

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
    "matrix_average_accuracy",
    "matrix_forgetting",
    "matrix_backward_transfer",
    "plot_accuracy_matrix",
    "accuracy_matrix_figure",
    "episode_metrics",
]

# The legacy alias module derives its names from ``__all__`` above, so it loads last. Importing a
# submodule binds its name on the package, and ``episode_metrics`` must stay the factory function,
# as it always was: rebind it afterwards.
from .episode_metrics import __all__ as _legacy_names  # noqa: E402, F401
from .factory import episode_metrics  # noqa: E402, F811
