"""``OODDetection``: quality of the in-distribution / OOD split of the unlabeled images."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricResult, MetricValue
from torch import Tensor

from ._common import _nan_to_none, _none_to_nan, _phase, _stream_name, _value_name, _x_plot

__all__ = ["OODResult", "OODDetection", "OODSplitCollector", "auroc", "ood_split_record"]


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

    Reads the **prediction** from ``strategy.iteration.ood_split`` (an
    :class:`~avalanche_sets.functional.ood.OODSplit`: ``is_id`` bool ``[B, U]``, ``distances``
    float ``[B, U]``, larger = more OOD) and the
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
    ``(stream, OODResult)`` emitted at ``after_eval``). A run's ``result.json`` keeps the final
    evaluation's values as ``ood_split`` (:class:`OODSplitCollector`, :func:`ood_split_record`).
    """

    def __init__(self) -> None:
        super().__init__()
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
            "last_results": {str(k): _ood_to_dict(v) for k, v in self.last_results.items()},
            "last_stream_results": [
                [s, _ood_to_dict(v)] for s, v in self.last_stream_results.items()
            ],
            "history": [[s, _ood_to_dict(v)] for s, v in self.history],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.reset()
        self.last_results = {
            int(k): _ood_from_dict(v) for k, v in state.get("last_results", {}).items()
        }
        self.last_stream_results = {
            s: _ood_from_dict(v) for s, v in state.get("last_stream_results", [])
        }
        self.history = [(s, _ood_from_dict(v)) for s, v in state.get("history", [])]

    # ------------------------------------------------------------------ reading a batch
    def _read(self, strategy) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        iteration = getattr(strategy, "iteration", None)
        split = getattr(iteration, "ood_split", None)
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


# ---------------------------------------------------------------------------- the run's record
def ood_split_record(
    per_domain: Sequence[OODResult | None], pooled: OODResult, domains: Sequence[str]
) -> dict[str, Any]:
    """The ``ood_split`` of a run's ``result.json``: the split's quality on every evaluated
    domain (``per_domain[j]``: domain ``j``'s :class:`OODResult`, ``None`` where it had no
    unlabeled image to judge) and over the whole stream (``pooled``).

    ``{"domains": [...], "auroc": [...], "precision": [...], "recall": [...],
    "n_unlabeled": [...], "pooled": {"auroc", "precision", "recall", "n_unlabeled"}}``: one
    entry per domain in stream order, an undefined value ``null``
    (:class:`OODDetection` says when a value is undefined).

    Raises:
        ValueError: ``per_domain`` and ``domains`` of different lengths.
    """
    if len(per_domain) != len(domains):
        raise ValueError(
            f"ood_split_record: {len(per_domain)} results for {len(domains)} domains; pass "
            "one result (or None) per domain of the evaluated stream"
        )

    def value(r: OODResult | None, name: str) -> float | None:
        return None if r is None else _nan_to_none(getattr(r, name))

    record: dict[str, Any] = {"domains": list(domains)}
    for name in ("auroc", "precision", "recall"):
        record[name] = [value(r, name) for r in per_domain]
    record["n_unlabeled"] = [0 if r is None else int(r.n_unlabeled) for r in per_domain]
    record["pooled"] = {
        **{name: value(pooled, name) for name in ("auroc", "precision", "recall")},
        "n_unlabeled": int(pooled.n_unlabeled),
    }
    return record


class OODSplitCollector(SupervisedPlugin):
    """Measures the OOD split of the evaluations it sees, for the run's record, with the
    computation of :class:`OODDetection` (one inside it, driven by the strategy's callbacks):
    the record and the logged ``OOD_*`` values are one computation, whatever metrics the
    strategy's evaluator holds.

    Add it to a strategy's plugins around one ``eval`` call (the runner does, for the final
    evaluation), then read :meth:`record`. Like the metric, it reads the prediction from
    ``strategy.iteration.ood_split`` and the ground truth from the batch's oracle only; a
    learner without a split leaves it empty.
    """

    def __init__(self) -> None:
        super().__init__()
        self.metric = OODDetection()

    def before_eval(self, strategy, *args, **kwargs) -> None:
        self.metric.before_eval(strategy)

    def before_eval_exp(self, strategy, *args, **kwargs) -> None:
        self.metric.before_eval_exp(strategy)

    def after_eval_iteration(self, strategy, *args, **kwargs) -> None:
        self.metric.after_eval_iteration(strategy)

    def after_eval_exp(self, strategy, *args, **kwargs) -> None:
        self.metric.after_eval_exp(strategy)

    def after_eval(self, strategy, *args, **kwargs) -> None:
        self.metric.after_eval(strategy)

    def record(self, domains: Sequence[str]) -> dict[str, Any] | None:
        """:func:`ood_split_record` of the last evaluation, experience ``j`` as ``domains[j]``;
        ``None`` when it judged no unlabeled image (no split, or no oracle)."""
        per_exp = self.metric.last_results
        if not per_exp:
            return None
        (pooled,) = self.metric.last_stream_results.values()  # one stream per eval call
        return ood_split_record([per_exp.get(j) for j in range(len(domains))], pooled, domains)
