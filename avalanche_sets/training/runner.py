"""Run a strategy over a SETS benchmark: train domain by domain, evaluate, checkpoint, resume.

``run_sets`` is the loop every entry point shares (the main job, the command line, the
benchmark scripts): after each training domain it evaluates the test stream (the accuracy
matrix row), and it can checkpoint every ``checkpoint_every`` iterations and at every domain
end, so an interrupted run continues where it stopped with the same final numbers.

It prints nothing: what a run shows is its strategy's evaluator's loggers (none by default:
:func:`~avalanche_sets.training.template.quiet_evaluator` computes Avalanche's default metrics
and prints nothing), and the caller prints the
:class:`RunResult`, as the command line prints its table. A strategy built from a preset
(:func:`~avalanche_sets.methods.build_strategy`, which keeps it as ``strategy.run_config``)
runs with that preset's torch threads and interim test episodes, so a script computes what
``avalanche-sets run`` computes for the same method, preset and seed.

A run makes the process-wide settings a training process wants, not a strategy's constructor:
:func:`set_up_process` (freed memory kept for the next step, cuDNN's autotuner on CUDA), and
torch's threads for the run's duration.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from avalanche.benchmarks.scenarios.generic_scenario import EagerCLStream
from avalanche.core import SupervisedPlugin

from ..data.benchmark import SETSExperience
from ..metrics import episode_accuracies as _per_episode
from ..metrics import stats
from ..metrics.ood_detection import OODSplitCollector
from .allocator import keep_freed_memory
from .checkpoint import (
    CheckpointPlugin,
    load_latest_checkpoint,
    restore_running_metrics,
    save_checkpoint,
)
from .cuda_settings import use_cudnn_autotuner

__all__ = ["RunResult", "run_sets", "set_up_process", "episode_accuracies"]


@dataclass
class RunResult:
    """Results of a run.

    Every derived number comes from :mod:`avalanche_sets.metrics.stats`.

    Attributes:
        domains: domain names in stream order.
        matrix: ``matrix[i][j]`` = mean test episode accuracy on domain j after training on
            domains 0..i (the accuracy matrix).
        ci95: half-widths of the 95% confidence intervals of ``matrix`` (over episodes;
            NaN for a domain evaluated on one episode).
        episode_acc: every final test episode's accuracy, domain after domain.
        final: final per-domain accuracy (last row); ``final_ci95`` its CI half-widths.
        mean_accuracy: mean of the final row (the paper's reported accuracy).
        mean_ci95: 95% CI half-width of the mean (pooled over all test episodes).
        ood_split: the OOD split's quality at the final evaluation, per domain and pooled
            (:func:`~avalanche_sets.metrics.ood_split_record`); ``None`` for a learner that
            splits no unlabeled images. The record keeps it beside ``result``
            (:attr:`~avalanche_sets.runs.record.RunRecord.ood_split`), not in
            :meth:`to_dict`.
    """

    domains: list[str]
    matrix: list[list[float]] = field(default_factory=list)
    ci95: list[list[float]] = field(default_factory=list)
    episode_acc: list[list[float]] = field(default_factory=list)
    ood_split: dict | None = None

    @property
    def final(self) -> list[float]:
        return self.matrix[-1] if self.matrix else []

    @property
    def final_ci95(self) -> list[float]:
        return self.ci95[-1] if self.ci95 else []

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean(self.final)) if self.final else float("nan")

    @property
    def mean_ci95(self) -> float:
        # Pooled over every final test episode of every domain (equal episodes per domain, so
        # the pooled mean equals the mean of the per-domain means).
        return stats.ci95(self.episode_acc)

    def forgetting(self) -> list[float]:
        """Per-domain forgetting (:func:`~avalanche_sets.metrics.stats.forgetting`).

        ``f_j = max_{j ≤ i < T−1} a[i, j] − a[T−1, j]``; NaN for the last trained domain (it
        has no later row) and for domains not trained yet.
        """
        return [float(v) for v in stats.forgetting(self._matrix())]

    @property
    def average_forgetting(self) -> float:
        """Mean forgetting over the domains before the last one (NaN with one domain)."""
        return stats.average_forgetting(self._matrix())

    @property
    def bwt(self) -> float:
        """Backward transfer ``mean_{j < T−1} (a[T−1, j] − a[j, j])`` (NaN with one domain)."""
        return stats.backward_transfer(self._matrix())

    def _matrix(self) -> np.ndarray:
        return stats.as_matrix(self.matrix)

    def to_dict(self) -> dict:
        """The ``"result"`` of ``result.json`` (format 3): the raw fields and what they give.

        Undefined numbers (the last domain's forgetting, forgetting and BWT of a one-domain
        run) are ``null``.
        """
        d = asdict(self)
        del d["ood_split"]  # a record field of its own
        d.update(
            final=self.final,
            final_ci95=self.final_ci95,
            mean_accuracy=self.mean_accuracy,
            mean_ci95=self.mean_ci95,
            **stats.forgetting_record(self._matrix()),
        )
        return d

    def table(self) -> str:
        """Per-domain accuracy table (markdown) with 95% confidence intervals, forgetting, BWT."""

        def pts(v: float, fmt: str = ".2f") -> str:
            return "n/a" if not math.isfinite(v) else f"{100 * v:{fmt}}"

        lines = ["| domain | accuracy (%) | forgetting (pts) |", "|---|---:|---:|"]
        for name, acc, ci, fg in zip(self.domains, self.final, self.final_ci95, self.forgetting()):
            lines.append(f"| {name} | {100 * acc:.2f} ± {pts(ci)} | {pts(fg)} |")
        lines.append(
            f"| **mean** | **{100 * self.mean_accuracy:.2f} ± {pts(self.mean_ci95)}** | "
            f"{pts(self.average_forgetting)} |"
        )
        lines.append(
            f"\nBackward transfer (BWT, pts): {pts(self.bwt, '+.2f')}. Forgetting and BWT are "
            "over the domains before the last (it has no later row); n/a: undefined."
        )
        return "\n".join(lines)


def episode_accuracies(strategy, stream) -> list[np.ndarray]:
    """Evaluate ``stream`` with ``strategy`` and return every domain's per-episode accuracies.

    Uses Avalanche's ``strategy.eval`` (so the evaluator's metrics and loggers see the
    evaluation) and reads each episode's accuracy off the query logits as they pass.
    """
    per_exp: dict[int, list[float]] = {}

    class _Collect(SupervisedPlugin):
        def after_eval_iteration(self, s, **kw):
            acc = _per_episode(s.mb_output, s.mb_y, len(s.mb_x))
            per_exp.setdefault(s.experience.current_experience, []).extend(acc.tolist())

    collector = _Collect()
    strategy.plugins.append(collector)
    try:
        strategy.eval(stream)
    finally:
        strategy.plugins.remove(collector)
    return [np.asarray(per_exp[e.current_experience]) for e in stream]


def set_up_process(device: str | torch.device | None) -> None:
    """The process-wide settings a training run makes, once, as it starts (never a strategy's
    constructor): freed memory kept for the next step
    (:func:`~.allocator.keep_freed_memory`: numbers unchanged, peak memory kept until the
    process exits; ``AVALANCHE_SETS_MALLOC=system`` opts out) and, when ``device`` is CUDA,
    cuDNN's autotuner (:func:`~.cuda_settings.use_cudnn_autotuner`; off under deterministic
    algorithms). A script that trains without :func:`run_sets` calls it itself."""
    keep_freed_memory()
    use_cudnn_autotuner(device)


def run_sets(
    strategy,
    benchmark,
    *,
    checkpoint_path: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = True,
    eval_stream: str = "test",
    interim_episodes: int | None = None,
    stop_after: int | None = None,
    checkpoint_extra=None,
    on_resume=None,
    threads: int | None = None,
) -> RunResult:
    """Train ``strategy`` on ``benchmark.train_stream``, evaluating after every domain.

    Args:
        strategy: an :class:`~avalanche_sets.training.EpisodicTemplate` (or subclass).
        benchmark: a :class:`~avalanche_sets.data.SETSBenchmark`.
        checkpoint_path: where to checkpoint (atomically); ``None`` for no checkpoints.
        checkpoint_every: also checkpoint every this many iterations inside a domain.
        resume: continue from ``checkpoint_path`` when it exists.
        eval_stream: ``"test"`` (default) or ``"valid"`` (validation classes, for tuning).
        interim_episodes: evaluate only the first this-many episodes of every domain after the
            intermediate domains (the accuracy-matrix rows before the last), and all of them
            after the last domain — a cheaper matrix, the same final numbers. ``None``: the
            ``interim_test_episodes`` of the preset the strategy was built from
            (``strategy.run_config``), else every episode.
        stop_after: stop after this many training iterations in total (to test resuming).
        checkpoint_extra: ``() -> dict`` of more state to store in every checkpoint (e.g. the
            elapsed time); it comes back through ``on_resume``.
        on_resume: called with ``{"position", "extra", "path", "skipped"}`` when the run
            resumes from a checkpoint (``path`` is the file used; ``skipped`` lists damaged
            newer files passed over, which are also reported as warnings).
        threads: torch's intra-op threads during the run (the previous count is restored
            after it); ``None``: the ``threads`` of the preset the strategy was built from
            (``strategy.run_config``, as the command line's run), else torch's current
            setting. The thread count changes the float summation order, hence the last
            digits of the numbers, and the speed: ``benchmarks/python_threads.py`` measures it.

    The process is set up as every run sets it up (:func:`set_up_process`): freed memory kept
    from here on, cuDNN's autotuner on CUDA.

    Returns:
        the :class:`RunResult` with the accuracy matrix and, for a learner that splits its
        unlabeled images, the final evaluation's OOD split (``ood_split``).
    """
    threads, interim_episodes = _preset_settings(strategy, threads, interim_episodes)
    set_up_process(strategy.device)
    stream = getattr(benchmark, f"{eval_stream}_stream")
    interim = stream if interim_episodes is None else _truncated(stream, interim_episodes)
    result = RunResult(domains=benchmark.domain_names)
    restored = None
    if checkpoint_path is not None and resume:
        # the newest good checkpoint; a damaged one is reported and skipped, never used
        restored = load_latest_checkpoint(checkpoint_path, strategy)
    start_exp, start_it, result = _resume_point(restored, result)
    if restored is not None and on_resume is not None:
        on_resume(restored)

    def extra() -> dict:
        return {"result": asdict(result), **(checkpoint_extra() if checkpoint_extra else {})}

    running_metrics = restored and restored["running_metrics"]
    clock = _ResumedEpochClock(start_it, running_metrics)
    plugins = _run_plugins(checkpoint_path, checkpoint_every, extra, stop_after, clock)
    with _run_settings(strategy, plugins, threads):
        for e in range(start_exp, len(benchmark.train_stream)):
            last = e == len(benchmark.train_stream) - 1
            _train_domain(strategy, benchmark.train_stream[e], start_it if e == start_exp else 0)
            if last:  # the final evaluation: the record's accuracies and OOD split
                _add_row(result, _final_evaluation(strategy, stream, result))
            else:
                _add_row(result, episode_accuracies(strategy, interim))
            if checkpoint_path is not None:
                position = {"experience": e + 1, "iteration": 0}
                save_checkpoint(checkpoint_path, strategy, position=position, extra=extra())
    return result


def _final_evaluation(strategy, stream, result: RunResult) -> list[np.ndarray]:
    """:func:`episode_accuracies` of the final evaluation, which also sets
    ``result.ood_split`` (``None`` for a learner without an OOD split): the split's quality
    against the oracle, measured as :class:`~avalanche_sets.metrics.OODDetection` measures it
    (the learner never sees the oracle)."""
    collector = OODSplitCollector()
    strategy.plugins.append(collector)
    try:
        accs = episode_accuracies(strategy, stream)
    finally:
        strategy.plugins.remove(collector)
    result.ood_split = collector.record(result.domains)
    return accs


def _resume_point(restored: dict | None, result: RunResult) -> tuple[int, int, RunResult]:
    """Where a run starts (experience, iteration) and its result so far, from its checkpoint."""
    if restored is None:
        return 0, 0, result
    start_exp = restored["position"]["experience"]
    start_it = restored["position"]["iteration"]
    saved = restored["extra"].get("result")
    return start_exp, start_it, RunResult(**saved) if saved else result


def _run_plugins(checkpoint_path, checkpoint_every, extra, stop_after, clock) -> list:
    """A run's plugins, in order: in-domain checkpoints (if asked), stop-after, epoch clock."""
    plugins = []
    if checkpoint_path is not None and checkpoint_every:
        # checkpointed after the evaluation instead of at the experience's end (run_sets)
        plugins.append(
            CheckpointPlugin(
                checkpoint_path, every=checkpoint_every, extra_fn=extra, at_experience_end=False
            )
        )
    return [*plugins, _StopAfter(stop_after), clock]


def _preset_settings(strategy, threads: int | None, interim_episodes: int | None):
    """``threads`` and ``interim_episodes`` with the strategy's preset filling what is ``None``."""
    config = getattr(strategy, "run_config", None)
    if config is not None:
        threads = config.threads if threads is None else threads
        if interim_episodes is None:
            interim_episodes = config.interim_test_episodes
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive number of torch threads, got {threads!r}")
    return threads, interim_episodes


class _Stop(Exception):
    """Ends a run early (raised by :class:`_StopAfter`, caught by :func:`_run_settings`)."""


class _StopAfter(SupervisedPlugin):
    """Raises :class:`_Stop` after ``left`` training iterations (``None``: never)."""

    def __init__(self, left: int | None) -> None:
        super().__init__()
        self.left = left

    def after_training_iteration(self, s, **kw):
        if self.left is not None:
            self.left -= 1
            if self.left <= 0:
                raise _Stop


@contextmanager
def _run_settings(strategy, plugins: list, threads: int | None):
    """Add ``plugins`` and set torch's threads for the run, ended early by :class:`_Stop`."""
    strategy.plugins.extend(plugins)
    threads_before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    except _Stop:
        pass
    finally:
        torch.set_num_threads(threads_before)
        for plugin in plugins:
            strategy.plugins.remove(plugin)


def _train_domain(strategy, exp, start_iteration: int) -> None:
    """Train on one domain from ``start_iteration`` (nothing when it is already trained)."""
    n_iter = math.ceil(len(exp.dataset) / strategy.train_mb_size)
    if start_iteration < n_iter:
        strategy.train(exp, eval_streams=[], start_iteration=start_iteration)


def _add_row(result: RunResult, accs: list[np.ndarray]) -> None:
    """Append one accuracy-matrix row (and its CIs); keep the latest row's episode accuracies."""
    result.matrix.append([float(a.mean()) for a in accs])
    result.ci95.append([stats.ci95(a) for a in accs])
    result.episode_acc = [float(x) for a in accs for x in a]


class _ResumedEpochClock(SupervisedPlugin):
    """Sets Avalanche's per-experience clock counters and the training metrics' running state
    to the resumed iteration's once.

    ``strategy.train`` zeroes ``train_exp_iterations`` and ``train_epoch_iterations`` when the
    experience starts, also when it resumes in its middle, and the evaluator resets its epoch
    metrics (``Top1_Acc_Epoch``, ``Loss_Epoch``) when the epoch starts; the checkpoint held
    them. This plugin comes after the clock (the template's) and the evaluator, so it runs
    after the zeroing and puts them back where an uninterrupted run has them. A run resumed at
    a domain's start (iteration 0) has nothing of that domain's epoch to put back (only the
    state of metrics that are never reset).
    """

    def __init__(self, iteration: int, running_metrics: dict | None = None) -> None:
        super().__init__()
        self.iteration = iteration
        self.running_metrics = running_metrics

    def before_training_epoch(self, strategy, **kwargs) -> None:
        if self.running_metrics is not None:  # at a domain's start, those never reset only
            restore_running_metrics(strategy, self.running_metrics, domain_start=not self.iteration)
            self.running_metrics = None
        if self.iteration:
            strategy.clock.train_exp_iterations = self.iteration
            strategy.clock.train_epoch_iterations = self.iteration
            self.iteration = 0


def _truncated(stream, n: int):
    """The first ``n`` episodes of every experience of a stream, as a stream of the same name."""
    if n < 1:
        raise ValueError(f"interim_episodes must be positive, got {n}")
    exps = [
        SETSExperience(
            dataset=exp.dataset.subset(range(min(n, len(exp.dataset)))),
            current_experience=exp.current_experience,
            sampler=exp.sampler,
        )
        for exp in stream
    ]
    return EagerCLStream(stream.name, exps)
