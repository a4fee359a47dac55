"""``EpisodeAccuracy``: the accuracy of every evaluation episode, per domain and over domains.

The confidence intervals come from :mod:`avalanche_sets.metrics.stats`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from avalanche.evaluation.metric_results import MetricResult, MetricValue

from ._common import (
    _EpisodeCollector,
    _nan_to_none,
    _none_to_nan,
    _phase,
    _stream_name,
    _value_name,
    _x_plot,
)
from .stats import ci95, stratified_ci95

__all__ = ["DomainAccuracy", "StreamAccuracy", "EpisodeAccuracy", "STREAM_CI_METHODS"]

STREAM_CI_METHODS = ("pooled", "stratified")


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


class EpisodeAccuracy(_EpisodeCollector[dict]):
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
            ci = stratified_ci95(list(per_domain.values()))
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
