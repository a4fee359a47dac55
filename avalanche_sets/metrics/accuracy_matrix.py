"""``AccuracyMatrix``: the domain × domain accuracy matrix of a sequential run, and its heatmap.

Average accuracy, forgetting and backward transfer are those of
:mod:`avalanche_sets.metrics.stats` (the ``matrix_*`` functions here are their names in the
metrics API).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from avalanche.evaluation.metric_results import MetricResult, MetricValue

from . import stats
from ._common import _EpisodeCollector, _phase, _stream_name, _value_name

__all__ = [
    "AccuracyMatrix",
    "matrix_average_accuracy",
    "matrix_forgetting",
    "matrix_backward_transfer",
    "plot_accuracy_matrix",
    "accuracy_matrix_figure",
]


def matrix_average_accuracy(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Average accuracy: :func:`avalanche_sets.metrics.stats.average_accuracy`."""
    return stats.average_accuracy(matrix)


def matrix_forgetting(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Per-domain forgetting ``[n_domains]``: :func:`avalanche_sets.metrics.stats.forgetting`.

    ``f_j = max_{j ≤ i < T−1} a[i, j] − a[T−1, j]`` for ``j < T − 1``, NaN for the others.
    """
    return stats.forgetting(matrix)


def matrix_backward_transfer(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Backward transfer: :func:`avalanche_sets.metrics.stats.backward_transfer`.

    ``BWT = mean_{j < T−1} (a[T−1, j] − a[j, j])``.
    """
    return stats.backward_transfer(matrix)


class AccuracyMatrix(_EpisodeCollector[np.ndarray]):
    """Accuracy matrix of a sequential run: row ``i`` = accuracies after training on domain ``i``.

    Every evaluation of the ``stream`` stream (``"test"`` by default; others are ignored) fills
    row ``i``, where ``i`` is the training experience in progress or last finished
    (``strategy.experience.current_experience`` at ``before_training_exp`` and
    ``after_training_exp``), with the mean episode accuracy of every evaluated domain (column
    = the evaluated experience's index). A later evaluation in the same row overwrites the
    earlier values, so periodic evaluations during an experience are superseded by the one
    after it, whatever the order of plugins. Evaluations before any training go to
    ``initial`` (domain → accuracy), not to the matrix.

    At ``after_eval`` it emits, with ``x_plot = i`` (so a TensorBoard curve is a column of
    the matrix): ``AccMatrix/eval_phase/test_stream/ExpXXX`` for each evaluated domain,
    ``AccMatrix_AvgAcc/eval_phase/test_stream`` (mean of the row), and once two rows exist
    ``AccMatrix_Forgetting/...`` (average forgetting) and ``AccMatrix_BWT/...``, computed on
    the rows so far by :mod:`avalanche_sets.metrics.stats` (the last row's domain is left out of
    both: it has no later row).

    Attributes:
        matrix: ``numpy`` ``[n_trained, n_domains]``, NaN where not evaluated.
        domain_names: names of the domains (columns), ``None`` where unknown.
        initial: accuracies evaluated before any training.

    Args:
        stream: name of the evaluation stream that fills the matrix.
    """

    def __init__(self, *, stream: str = "test") -> None:
        super().__init__()
        self.stream = stream
        self.reset()

    def __str__(self) -> str:
        return "AccMatrix"

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget the matrix, the names and the current training experience."""
        self._rows: dict[int, dict[int, float]] = {}
        self._names: dict[int, str | None] = {}
        self.initial: dict[int, float] = {}
        self._train_exp: int | None = None
        self._current: list[np.ndarray] = []
        self._pending: dict[int, float] = {}

    def result(self) -> np.ndarray:
        """The matrix (see :attr:`matrix`)."""
        return self.matrix

    @property
    def matrix(self) -> np.ndarray:
        """``[n_trained, n_domains]`` mean episode accuracies, NaN where not evaluated."""
        if not self._rows:
            return np.full((0, len(self.domain_names)), np.nan)
        n_rows = max(self._rows) + 1
        n_cols = len(self.domain_names)
        m = np.full((n_rows, n_cols), np.nan)
        for i, row in self._rows.items():
            for j, v in row.items():
                m[i, j] = v
        return m

    @property
    def domain_names(self) -> list[str | None]:
        """Column names (the evaluated experiences' ``domain_name``)."""
        cols = set(self._names) | set(self.initial)
        for row in self._rows.values():
            cols |= set(row)
        n = max(cols) + 1 if cols else 0
        return [self._names.get(j) for j in range(n)]

    def average_accuracy(self) -> float:
        """Mean accuracy of the last row (see :func:`matrix_average_accuracy`)."""
        return matrix_average_accuracy(self.matrix)

    def forgetting(self) -> np.ndarray:
        """Per-domain forgetting (see :func:`matrix_forgetting`)."""
        return matrix_forgetting(self.matrix)

    def average_forgetting(self) -> float:
        """Average forgetting over the domains before the last row (see :mod:`.stats`)."""
        return stats.average_forgetting(self.matrix)

    def backward_transfer(self) -> float:
        """Backward transfer (see :func:`matrix_backward_transfer`)."""
        return matrix_backward_transfer(self.matrix)

    def state_dict(self) -> dict[str, Any]:
        """Matrix, names and training position as plain Python values (JSON-friendly)."""
        return {
            "stream": self.stream,
            "rows": {str(i): {str(j): v for j, v in r.items()} for i, r in self._rows.items()},
            "names": {str(j): n for j, n in self._names.items()},
            "initial": {str(j): v for j, v in self.initial.items()},
            "train_exp": self._train_exp,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.reset()
        self.stream = state.get("stream", self.stream)
        self._rows = {
            int(i): {int(j): float(v) for j, v in r.items()} for i, r in state["rows"].items()
        }
        self._names = {int(j): n for j, n in state.get("names", {}).items()}
        self.initial = {int(j): float(v) for j, v in state.get("initial", {}).items()}
        t = state.get("train_exp")
        self._train_exp = None if t is None else int(t)

    # ------------------------------------------------------------------ callbacks
    def before_training_exp(self, strategy) -> MetricResult:
        self._train_exp = int(strategy.experience.current_experience)
        return None

    def after_training_exp(self, strategy) -> MetricResult:
        self._train_exp = int(strategy.experience.current_experience)
        return None

    def before_eval(self, strategy) -> MetricResult:
        self._pending = {}
        return None

    def _collects(self, strategy) -> bool:
        return _stream_name(strategy) == self.stream

    def after_eval_exp(self, strategy) -> MetricResult:
        if _stream_name(strategy) != self.stream or not self._current:
            return None
        j = int(strategy.experience.current_experience)
        self._pending[j] = float(np.concatenate(self._current).mean())
        self._names[j] = getattr(strategy.experience, "domain_name", None)
        self._current = []
        return None

    def after_eval(self, strategy) -> MetricResult:
        pending, self._pending = self._pending, {}
        if not pending:
            return None
        if self._train_exp is None:
            self.initial.update(pending)
            return None
        i = self._train_exp
        self._rows.setdefault(i, {}).update(pending)
        phase = _phase(strategy)
        out = [
            MetricValue(self, _value_name("AccMatrix", phase, self.stream, j), v, i)
            for j, v in sorted(pending.items())
        ]
        so_far = self.matrix[: i + 1]
        avg_acc = stats.average_accuracy(so_far)
        if math.isfinite(avg_acc):
            out.append(
                MetricValue(self, _value_name("AccMatrix_AvgAcc", phase, self.stream), avg_acc, i)
            )
        avg_forgetting = stats.average_forgetting(so_far)
        if math.isfinite(avg_forgetting):
            out.append(
                MetricValue(
                    self,
                    _value_name("AccMatrix_Forgetting", phase, self.stream),
                    avg_forgetting,
                    i,
                )
            )
        bwt = stats.backward_transfer(so_far)
        if math.isfinite(bwt):
            out.append(MetricValue(self, _value_name("AccMatrix_BWT", phase, self.stream), bwt, i))
        return out


def plot_accuracy_matrix(
    matrix: np.ndarray | Sequence[Sequence[float]],
    domain_names: Sequence[str | None],
    path: str | Path,
    *,
    title: str | None = None,
) -> Path:
    """Save the accuracy matrix as a heatmap PNG with the value in every cell.

    Args:
        matrix: ``[n_trained, n_domains]`` accuracies in ``[0, 1]`` (or in percent: a matrix
            whose largest value exceeds 1 is taken as percentages). NaN cells are grey.
        domain_names: column names; row ``i`` is labelled "after <domain i>".
        path: output file (parent folders are created).
        title: figure title (default: says what the cells are).

    Returns:
        The path written. Cells, colours and colour bar are all in percent (0–100) whichever
        scale the matrix uses. Uses matplotlib's Agg canvas directly: no global backend
        change, no pyplot state.
    """
    fig = accuracy_matrix_figure(matrix, domain_names, title=title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def accuracy_matrix_figure(
    matrix: np.ndarray | Sequence[Sequence[float]],
    domain_names: Sequence[str | None],
    *,
    title: str | None = None,
):
    """The matplotlib ``Figure`` :func:`plot_accuracy_matrix` saves (percent cells, a 0–100
    colour bar and a title)."""
    # matplotlib is heavy to import and only the pictures need it
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    m = stats.as_matrix(matrix)
    n_rows, n_cols = m.shape
    names = [
        (
            str(domain_names[j])
            if j < len(domain_names) and domain_names[j] is not None
            else f"domain {j + 1}"
        )
        for j in range(max(n_cols, n_rows))
    ]
    finite = m[np.isfinite(m)]
    if not (finite.size and finite.max() > 1.0):  # fractions: shown as percentages
        m = 100.0 * m

    fig = Figure(figsize=(max(4.0, 1.1 * n_cols + 2.5), max(3.0, 0.6 * n_rows + 2.0)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgrey")
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0.0, vmax=100.0, aspect="auto")
    for i in range(n_rows):
        for j in range(n_cols):
            v = m[i, j]
            if np.isfinite(v):
                ax.text(
                    j, i, f"{v:.1f}", ha="center", va="center", fontsize=8,
                    color="black" if v > 60.0 else "white",
                )  # fmt: skip
    ax.set_xticks(range(n_cols))
    ax.set_xticklabels(names[:n_cols], rotation=40, ha="right")
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels([f"after {names[i]}" for i in range(n_rows)])
    ax.set_xlabel("evaluated domain")
    ax.set_ylabel("trained up to")
    fig.colorbar(im, ax=ax, label="mean episode accuracy (%)")
    ax.set_title(title or "test accuracy (%) on every domain after each training domain")
    fig.tight_layout()
    return fig
