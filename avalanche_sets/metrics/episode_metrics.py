"""Episode-level evaluation metrics for SETS streams, as Avalanche :class:`PluginMetric` objects.

Avalanche's own metrics (accuracy, loss, forgetting, BWT, ...) work unchanged on an
:class:`~avalanche_sets.training.template.EpisodicTemplate` because ``mb_output`` are the query
logits and ``mb_y`` the query labels. They pool all queries of an experience, though, and
report no uncertainty. The metrics here follow the SETS protocol (design §2, §6):

* :class:`EpisodeAccuracy`: the accuracy of every evaluation *episode*, per domain the mean
  and the half-width of its 95% confidence interval, and their mean over domains;
* :class:`AccuracyMatrix`: the domain × domain accuracy matrix of a sequential run (row ``i``:
  evaluated after training on domain ``i``), with average accuracy, forgetting (Chaudhry et al.
  2018) and backward transfer (Lopez-Paz & Ranzato 2017), plus :func:`plot_accuracy_matrix`;
* :class:`OODDetection`: precision and recall of the unlabeled images a learner kept as
  in-distribution, and the AUROC of its OOD score, scored against the episodes' oracle.

Every metric only reads the evaluation phase. Names follow Avalanche's template
``{metric}/{phase}_phase/{stream}_stream[/Exp{id:03}]`` without a task label (SETS is
task-free), e.g. ``EpisodeAcc/eval_phase/test_stream/Exp002``. Each metric keeps a
programmatic record of its results and a ``state_dict()`` / ``load_state_dict()`` pair made of
plain Python values (JSON-serialisable), so that a resumed run can restore it.

Use them with :func:`episode_metrics`::

    evaluator = EvaluationPlugin(accuracy_metrics(stream=True), *episode_metrics(), loggers=...)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricResult, MetricValue
from avalanche.evaluation.metric_utils import (
    EVAL,
    TRAIN,
    default_metric_name_template,
    generic_get_metric_name,
)
from torch import Tensor

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

#: Two-sided 95% normal quantile used for every confidence interval.
Z_95 = 1.96

STREAM_CI_METHODS = ("pooled", "stratified")


# ---------------------------------------------------------------------------- pure functions
def ci95(values: Sequence[float] | np.ndarray) -> float:
    """Half-width of the 95% confidence interval of a mean: ``1.96 · s / √n``.

    ``s`` is the sample standard deviation (``ddof = 1``). Returns NaN for fewer than two
    values (the spread of one value is unknown).
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size < 2:
        return float("nan")
    return float(Z_95 * x.std(ddof=1) / math.sqrt(x.size))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``; tied values share the mean of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts_mask = np.empty(xs.size, dtype=bool)
    starts_mask[:1] = True
    starts_mask[1:] = xs[1:] != xs[:-1]
    group = np.cumsum(starts_mask) - 1
    starts = np.flatnonzero(starts_mask)
    ends = np.append(starts[1:], xs.size)  # exclusive
    mean_rank = (starts + 1 + ends) / 2.0  # ranks starts+1 .. ends
    ranks = np.empty(xs.size, dtype=np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def auroc(
    scores: Sequence[float] | np.ndarray | Tensor, labels: Sequence | np.ndarray | Tensor
) -> float:
    """Area under the ROC curve of ``scores`` for the positives ``labels == True``.

    Rank (Mann–Whitney) formula ``(Σ ranks of positives − P(P+1)/2) / (P·N)`` with average
    ranks for ties, so a tie between a positive and a negative counts one half: identical to
    ``sklearn.metrics.roc_auc_score``. Returns NaN when there are no positives or no negatives
    (the AUROC is undefined).

    Raises:
        ValueError: on mismatched lengths or non-finite scores.
    """
    s = torch.as_tensor(scores).detach().cpu().numpy() if isinstance(scores, Tensor) else scores
    y = torch.as_tensor(labels).detach().cpu().numpy() if isinstance(labels, Tensor) else labels
    s = np.asarray(s, dtype=np.float64).ravel()
    y = np.asarray(y).astype(bool).ravel()
    if s.shape != y.shape:
        raise ValueError(f"auroc: {s.size} scores but {y.size} labels")
    if not np.isfinite(s).all():
        raise ValueError("auroc: scores must be finite")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


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


def _nan_to_none(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _none_to_nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


# ---------------------------------------------------------------------------- EpisodeAccuracy
class DomainAccuracy(NamedTuple):
    """Mean episode accuracy of one domain: ``(mean, ci95, n_episodes, domain_name)``."""

    mean: float
    ci95: float
    n_episodes: int
    domain_name: str | None


class StreamAccuracy(NamedTuple):
    """Result of evaluating (part of) one stream: the mean over domains and its 95% CI."""

    stream: str | None
    mean: float
    ci95: float
    n_domains: int
    n_episodes: int
    domains: dict[int, DomainAccuracy]


class EpisodeAccuracy(PluginMetric[dict]):
    """Accuracy of every evaluation episode, per domain and over domains, with 95% CIs.

    At every evaluation iteration the accuracy of each episode of the meta-batch is computed
    from ``strategy.mb_output.argmax(-1)`` and ``strategy.mb_y`` reshaped to ``[B, N*Q]``
    (``B = len(strategy.mb_x)``). At ``after_eval_exp`` the metric emits the domain's mean
    episode accuracy ``EpisodeAcc/eval_phase/<stream>_stream/ExpXXX`` and the half-width of its
    95% CI ``EpisodeAcc_CI95/...`` (``1.96 · s / √n`` over the ``n`` episodes, sample std). At
    ``after_eval`` it emits, per evaluated stream, the **mean of the per-domain means**
    (``EpisodeAcc/eval_phase/<stream>_stream``) and its CI (``EpisodeAcc_CI95/...``).

    The over-domain CI is chosen by ``stream_ci``:

    * ``"pooled"`` (default): the episode accuracies of all evaluated domains are pooled into
      one sample and ``1.96 · s / √n_total`` is reported. This is what few-shot papers
      (and the paper's protocol: "mean over domains with a 95% CI") usually report. ``s``
      includes the spread *between* domains, so the interval is conservative; with equal
      episode counts per domain the pooled mean equals the mean of the domain means.
    * ``"stratified"``: the standard error of the mean of domain means with the domains fixed,
      ``1.96 · sqrt(Σ_d s_d² / n_d) / D``; narrower, it only reflects episode sampling.

    Records (reset at ``before_eval``, so they describe the last ``eval`` call):
        last_results: domain (experience) index → :class:`DomainAccuracy`
            ``(mean, ci95, n_episodes, domain_name)``.
        last_episode_accuracies: domain index → float array of the episode accuracies.
        last_stream_results: stream name → :class:`StreamAccuracy`.
    And over the whole run: ``history``, the list of every :class:`StreamAccuracy` emitted.

    Args:
        stream_ci: ``"pooled"`` or ``"stratified"`` (see above).
    """

    def __init__(self, *, stream_ci: str = "pooled") -> None:
        super().__init__()
        if stream_ci not in STREAM_CI_METHODS:
            raise ValueError(f"stream_ci must be one of {STREAM_CI_METHODS}, got {stream_ci!r}")
        self.stream_ci = stream_ci
        self.reset()

    def __str__(self) -> str:
        return "EpisodeAcc"

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget every record (current accumulators, last results and history)."""
        self._current: list[np.ndarray] = []
        self._call: dict[str | None, dict[int, np.ndarray]] = {}
        self.last_results: dict[int, DomainAccuracy] = {}
        self.last_episode_accuracies: dict[int, np.ndarray] = {}
        self.last_stream_results: dict[str | None, StreamAccuracy] = {}
        self.history: list[StreamAccuracy] = []

    def result(self) -> dict[int, DomainAccuracy]:
        """The per-domain results of the last evaluation (a copy of ``last_results``)."""
        return dict(self.last_results)

    def state_dict(self) -> dict[str, Any]:
        """Records as plain Python values (JSON-friendly; NaN becomes ``None``)."""
        return {
            "stream_ci": self.stream_ci,
            "last_results": {str(k): _domain_acc_to_dict(v) for k, v in self.last_results.items()},
            "last_episode_accuracies": {
                str(k): [float(a) for a in v] for k, v in self.last_episode_accuracies.items()
            },
            "last_stream_results": [
                _stream_acc_to_dict(v) for v in self.last_stream_results.values()
            ],
            "history": [_stream_acc_to_dict(v) for v in self.history],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the records saved by :meth:`state_dict`."""
        self.reset()
        self.stream_ci = state.get("stream_ci", self.stream_ci)
        self.last_results = {
            int(k): _domain_acc_from_dict(v) for k, v in state.get("last_results", {}).items()
        }
        self.last_episode_accuracies = {
            int(k): np.asarray(v, dtype=np.float64)
            for k, v in state.get("last_episode_accuracies", {}).items()
        }
        streams = [_stream_acc_from_dict(v) for v in state.get("last_stream_results", [])]
        self.last_stream_results = {s.stream: s for s in streams}
        self.history = [_stream_acc_from_dict(v) for v in state.get("history", [])]

    # ------------------------------------------------------------------ aggregation
    def _aggregate(self, stream: str | None, per_domain: dict[int, np.ndarray]) -> StreamAccuracy:
        domains = {j: self.last_results[j] for j in per_domain}
        means = np.array([d.mean for d in domains.values()], dtype=np.float64)
        n_total = int(sum(a.size for a in per_domain.values()))
        if self.stream_ci == "pooled":
            ci = ci95(np.concatenate(list(per_domain.values())))
        else:
            if any(a.size < 2 for a in per_domain.values()):
                ci = float("nan")
            else:
                var = sum(a.var(ddof=1) / a.size for a in per_domain.values())
                ci = float(Z_95 * math.sqrt(var) / len(per_domain))
        return StreamAccuracy(
            stream=stream,
            mean=float(means.mean()),
            ci95=ci,
            n_domains=len(per_domain),
            n_episodes=n_total,
            domains=domains,
        )

    # ------------------------------------------------------------------ callbacks
    def before_eval(self, strategy) -> MetricResult:
        self._call = {}
        self.last_results = {}
        self.last_episode_accuracies = {}
        self.last_stream_results = {}
        return None

    def before_eval_exp(self, strategy) -> MetricResult:
        self._current = []
        return None

    def after_eval_iteration(self, strategy) -> MetricResult:
        super().after_eval_iteration(strategy)
        self._current.append(
            episode_accuracies(strategy.mb_output, strategy.mb_y, _n_episodes(strategy))
        )
        return None

    def after_eval_exp(self, strategy) -> MetricResult:
        if not self._current:
            return None
        accs = np.concatenate(self._current)
        self._current = []
        exp = strategy.experience
        j = int(exp.current_experience)
        stream = _stream_name(strategy)
        res = DomainAccuracy(
            mean=float(accs.mean()),
            ci95=ci95(accs),
            n_episodes=int(accs.size),
            domain_name=getattr(exp, "domain_name", None),
        )
        self.last_results[j] = res
        self.last_episode_accuracies[j] = accs
        self._call.setdefault(stream, {})[j] = accs
        phase, x = _phase(strategy), _x_plot(strategy)
        out = [MetricValue(self, _value_name("EpisodeAcc", phase, stream, j), res.mean, x)]
        if math.isfinite(res.ci95):
            out.append(
                MetricValue(self, _value_name("EpisodeAcc_CI95", phase, stream, j), res.ci95, x)
            )
        return out

    def after_eval(self, strategy) -> MetricResult:
        out: list[MetricValue] = []
        phase, x = _phase(strategy), _x_plot(strategy)
        for stream, per_domain in self._call.items():
            agg = self._aggregate(stream, per_domain)
            self.last_stream_results[stream] = agg
            self.history.append(agg)
            out.append(MetricValue(self, _value_name("EpisodeAcc", phase, stream), agg.mean, x))
            if math.isfinite(agg.ci95):
                out.append(
                    MetricValue(self, _value_name("EpisodeAcc_CI95", phase, stream), agg.ci95, x)
                )
        self._call = {}
        return out or None


def _domain_acc_to_dict(d: DomainAccuracy) -> dict[str, Any]:
    return {
        "mean": _nan_to_none(d.mean),
        "ci95": _nan_to_none(d.ci95),
        "n_episodes": int(d.n_episodes),
        "domain_name": d.domain_name,
    }


def _domain_acc_from_dict(d: dict[str, Any]) -> DomainAccuracy:
    return DomainAccuracy(
        mean=_none_to_nan(d["mean"]),
        ci95=_none_to_nan(d["ci95"]),
        n_episodes=int(d["n_episodes"]),
        domain_name=d.get("domain_name"),
    )


def _stream_acc_to_dict(s: StreamAccuracy) -> dict[str, Any]:
    return {
        "stream": s.stream,
        "mean": _nan_to_none(s.mean),
        "ci95": _nan_to_none(s.ci95),
        "n_domains": int(s.n_domains),
        "n_episodes": int(s.n_episodes),
        "domains": {str(k): _domain_acc_to_dict(v) for k, v in s.domains.items()},
    }


def _stream_acc_from_dict(d: dict[str, Any]) -> StreamAccuracy:
    return StreamAccuracy(
        stream=d.get("stream"),
        mean=_none_to_nan(d["mean"]),
        ci95=_none_to_nan(d["ci95"]),
        n_domains=int(d["n_domains"]),
        n_episodes=int(d["n_episodes"]),
        domains={int(k): _domain_acc_from_dict(v) for k, v in d.get("domains", {}).items()},
    )


# ---------------------------------------------------------------------------- accuracy matrix
def _as_matrix(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"an accuracy matrix must be 2-D [n_trained, n_domains], got {m.shape}")
    return m


def matrix_average_accuracy(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Average accuracy ``ACC``: mean of the last row over the evaluated (non-NaN) domains.

    With a square matrix this is the mean accuracy over all domains after training on the
    whole stream (the paper's headline number). NaN for an empty matrix.
    """
    m = _as_matrix(matrix)
    if m.shape[0] == 0:
        return float("nan")
    last = m[-1][np.isfinite(m[-1])]
    return float(last.mean()) if last.size else float("nan")


def matrix_forgetting(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Forgetting of every domain (Chaudhry et al. 2018), ``[n_domains]``.

    With ``a[l, j]`` the accuracy on domain ``j`` after training on experience ``l`` and ``T``
    rows, ``f_j = max_{l < T-1} a[l, j] − a[T-1, j]`` for the domains ``j < T - 1`` (domain ``j``
    is the one trained at experience ``j``); NaN for the other domains and where no earlier or
    final value exists. Positive = forgotten. ``np.nanmean`` of it is the average forgetting.
    """
    m = _as_matrix(matrix)
    n_rows, n_cols = m.shape
    out = np.full(n_cols, np.nan)
    if n_rows < 2:
        return out
    final = m[-1]
    for j in range(min(n_cols, n_rows - 1)):
        earlier = m[:-1, j]
        earlier = earlier[np.isfinite(earlier)]
        if earlier.size and np.isfinite(final[j]):
            out[j] = earlier.max() - final[j]
    return out


def matrix_backward_transfer(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Backward transfer (Lopez-Paz & Ranzato 2017): ``mean_{i < T-1} (a[T-1, i] − a[i, i])``.

    Negative = forgetting. Domains whose diagonal or final entry is missing are left out; NaN
    when fewer than two rows (or no usable domain).
    """
    m = _as_matrix(matrix)
    n_rows, n_cols = m.shape
    diffs = [
        m[-1, i] - m[i, i]
        for i in range(min(n_rows - 1, n_cols))
        if np.isfinite(m[-1, i]) and np.isfinite(m[i, i])
    ]
    return float(np.mean(diffs)) if diffs else float("nan")


class AccuracyMatrix(PluginMetric[np.ndarray]):
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
    ``AccMatrix_Forgetting/...`` (mean forgetting) and ``AccMatrix_BWT/...``, computed on the
    rows so far.

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

    def before_eval_exp(self, strategy) -> MetricResult:
        self._current = []
        return None

    def after_eval_iteration(self, strategy) -> MetricResult:
        super().after_eval_iteration(strategy)
        if _stream_name(strategy) == self.stream:
            self._current.append(
                episode_accuracies(strategy.mb_output, strategy.mb_y, _n_episodes(strategy))
            )
        return None

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
        row = so_far[i][np.isfinite(so_far[i])]
        if row.size:
            out.append(
                MetricValue(
                    self, _value_name("AccMatrix_AvgAcc", phase, self.stream), float(row.mean()), i
                )
            )
        forgetting = matrix_forgetting(so_far)
        if np.isfinite(forgetting).any():
            out.append(
                MetricValue(
                    self,
                    _value_name("AccMatrix_Forgetting", phase, self.stream),
                    float(np.nanmean(forgetting)),
                    i,
                )
            )
        bwt = matrix_backward_transfer(so_far)
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
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    m = _as_matrix(matrix)
    n_rows, n_cols = m.shape
    names = [
        (
            str(domain_names[j])
            if j < len(domain_names) and domain_names[j] is not None
            else f"domain {j}"
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


# ---------------------------------------------------------------------------- OOD detection
class OODResult(NamedTuple):
    """OOD detection quality over a pool of episodes.

    ``precision``/``recall`` of the predicted in-distribution set w.r.t. the true one,
    ``auroc`` of the score ``−distance`` (ID positive); NaN where undefined.
    """

    precision: float
    recall: float
    auroc: float
    n_unlabeled: int
    n_episodes: int


class _OODPool:
    """Accumulates predictions, truth and scores of unlabeled images."""

    def __init__(self) -> None:
        self.tp = 0
        self.pred_id = 0
        self.true_id = 0
        self.n_episodes = 0
        self.scores: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []

    def add(self, is_id: np.ndarray, true_id: np.ndarray, scores: np.ndarray) -> None:
        self.tp += int((is_id & true_id).sum())
        self.pred_id += int(is_id.sum())
        self.true_id += int(true_id.sum())
        self.n_episodes += int(is_id.shape[0])
        self.scores.append(scores.ravel())
        self.labels.append(true_id.ravel())

    def merge(self, other: _OODPool) -> None:
        self.tp += other.tp
        self.pred_id += other.pred_id
        self.true_id += other.true_id
        self.n_episodes += other.n_episodes
        self.scores += other.scores
        self.labels += other.labels

    def result(self) -> OODResult:
        nan = float("nan")
        scores = np.concatenate(self.scores) if self.scores else np.zeros(0)
        labels = np.concatenate(self.labels) if self.labels else np.zeros(0, dtype=bool)
        return OODResult(
            precision=self.tp / self.pred_id if self.pred_id else nan,
            recall=self.tp / self.true_id if self.true_id else nan,
            auroc=auroc(scores, labels) if scores.size else nan,
            n_unlabeled=int(scores.size),
            n_episodes=self.n_episodes,
        )


class OODDetection(PluginMetric[dict]):
    """Quality of the in-distribution / OOD split of the unlabeled images, on eval episodes.

    Reads the **prediction** from ``strategy.episode_state.extras["ood_split"]`` (an object with
    ``is_id`` bool ``[B, U]``, ``distances`` float ``[B, U]``, larger = more OOD) and the
    **ground truth** only from ``strategy.mb_x.oracle.unlabeled_is_ood`` (bool ``[B, U]``). When
    either is missing (a learner without an OOD split, a batch without oracle) the metric does
    nothing: no error, no values.

    For every evaluated experience (domain) it pools all unlabeled images of all its episodes
    and emits ``OOD_Precision``, ``OOD_Recall`` (of the predicted ID set w.r.t. the true ID set,
    i.e. micro-averaged over the pooled images) and ``OOD_AUROC`` (area under the ROC curve of
    the score ``−distance`` with the ID images as positives, see :func:`auroc`)
    ``/eval_phase/<stream>_stream/ExpXXX``; at ``after_eval`` the same over all experiences of
    each evaluated stream (``.../<stream>_stream``).

    The AUROC is always computed on the pooled images, never per episode: an episode whose
    unlabeled set is all ID or all OOD has no AUROC of its own, yet its images still count in
    the pool. Distances of different episodes are comparable because the OOD split measures
    them between L2-normalised embeddings. A value that is undefined for the whole pool
    (no predicted ID image for the precision, no true ID image for the recall, one class only
    for the AUROC) is not emitted and is NaN in the records.

    Records: ``last_results`` (experience index → :class:`OODResult`, last ``eval`` call),
    ``last_stream_results`` (stream name → :class:`OODResult`) and ``history`` (every
    ``(stream, OODResult)`` emitted at ``after_eval``).

    Args:
        key: the ``extras`` entry holding the split.
    """

    def __init__(self, *, key: str = "ood_split") -> None:
        super().__init__()
        self.key = key
        self.reset()

    def __str__(self) -> str:
        return "OOD"

    def reset(self) -> None:
        """Forget every record."""
        self._exp_pool = _OODPool()
        self._stream_pools: dict[str | None, _OODPool] = {}
        self.last_results: dict[int, OODResult] = {}
        self.last_stream_results: dict[str | None, OODResult] = {}
        self.history: list[tuple[str | None, OODResult]] = []
        self._warned_no_oracle = False

    def result(self) -> dict[int, OODResult]:
        """Per-experience results of the last evaluation (a copy of ``last_results``)."""
        return dict(self.last_results)

    def state_dict(self) -> dict[str, Any]:
        """Records as plain Python values (JSON-friendly; NaN becomes ``None``)."""
        return {
            "key": self.key,
            "last_results": {str(k): _ood_to_dict(v) for k, v in self.last_results.items()},
            "last_stream_results": [
                [s, _ood_to_dict(v)] for s, v in self.last_stream_results.items()
            ],
            "history": [[s, _ood_to_dict(v)] for s, v in self.history],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.reset()
        self.key = state.get("key", self.key)
        self.last_results = {
            int(k): _ood_from_dict(v) for k, v in state.get("last_results", {}).items()
        }
        self.last_stream_results = {
            s: _ood_from_dict(v) for s, v in state.get("last_stream_results", [])
        }
        self.history = [(s, _ood_from_dict(v)) for s, v in state.get("history", [])]

    # ------------------------------------------------------------------ reading a batch
    def _read(self, strategy) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        state = getattr(strategy, "episode_state", None)
        extras = getattr(state, "extras", None)
        split = extras.get(self.key) if isinstance(extras, dict) else None
        if split is None:
            return None
        oracle = getattr(getattr(strategy, "mb_x", None), "oracle", None)
        if oracle is None:
            if not self._warned_no_oracle:
                warnings.warn(
                    "OODDetection: the evaluation batch carries no oracle; OOD metrics skipped",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._warned_no_oracle = True
            return None
        is_id = torch.as_tensor(split.is_id).detach().bool().cpu().numpy()
        dist = torch.as_tensor(split.distances).detach().float().cpu().numpy()
        true_id = ~torch.as_tensor(oracle.unlabeled_is_ood).detach().bool().cpu().numpy()
        if is_id.ndim == 1:  # a single episode
            is_id, dist = is_id[None], dist[None]
        if true_id.ndim == 1:
            true_id = true_id[None]
        if not (is_id.shape == dist.shape == true_id.shape):
            raise ValueError(
                f"OODDetection: prediction {is_id.shape}, distances {dist.shape} and oracle "
                f"{true_id.shape} shapes differ; expected [B, U] for all three"
            )
        if is_id.size == 0:
            return None
        return is_id, true_id, -dist.astype(np.float64)

    # ------------------------------------------------------------------ callbacks
    def before_eval(self, strategy) -> MetricResult:
        self._stream_pools = {}
        self.last_results = {}
        self.last_stream_results = {}
        return None

    def before_eval_exp(self, strategy) -> MetricResult:
        self._exp_pool = _OODPool()
        return None

    def after_eval_iteration(self, strategy) -> MetricResult:
        super().after_eval_iteration(strategy)
        read = self._read(strategy)
        if read is not None:
            self._exp_pool.add(*read)
        return None

    def _emit(self, res: OODResult, phase: str, stream, exp_id, x: int) -> list[MetricValue]:
        out = []
        for name, v in (
            ("OOD_Precision", res.precision),
            ("OOD_Recall", res.recall),
            ("OOD_AUROC", res.auroc),
        ):
            if math.isfinite(v):
                out.append(MetricValue(self, _value_name(name, phase, stream, exp_id), v, x))
        return out

    def after_eval_exp(self, strategy) -> MetricResult:
        pool, self._exp_pool = self._exp_pool, _OODPool()
        if pool.n_episodes == 0:
            return None
        j = int(strategy.experience.current_experience)
        stream = _stream_name(strategy)
        self._stream_pools.setdefault(stream, _OODPool()).merge(pool)
        res = pool.result()
        self.last_results[j] = res
        return self._emit(res, _phase(strategy), stream, j, _x_plot(strategy)) or None

    def after_eval(self, strategy) -> MetricResult:
        out: list[MetricValue] = []
        phase, x = _phase(strategy), _x_plot(strategy)
        for stream, pool in self._stream_pools.items():
            res = pool.result()
            self.last_stream_results[stream] = res
            self.history.append((stream, res))
            out += self._emit(res, phase, stream, None, x)
        self._stream_pools = {}
        return out or None


def _ood_to_dict(r: OODResult) -> dict[str, Any]:
    return {
        "precision": _nan_to_none(r.precision),
        "recall": _nan_to_none(r.recall),
        "auroc": _nan_to_none(r.auroc),
        "n_unlabeled": int(r.n_unlabeled),
        "n_episodes": int(r.n_episodes),
    }


def _ood_from_dict(d: dict[str, Any]) -> OODResult:
    return OODResult(
        precision=_none_to_nan(d["precision"]),
        recall=_none_to_nan(d["recall"]),
        auroc=_none_to_nan(d["auroc"]),
        n_unlabeled=int(d["n_unlabeled"]),
        n_episodes=int(d["n_episodes"]),
    )


# ---------------------------------------------------------------------------- factory
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
