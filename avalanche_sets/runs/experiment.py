"""One run = one method on one benchmark with one preset and seed, written to a folder.

A run folder holds ``result.json`` (accuracy matrix, final per-domain accuracy with 95% CIs,
settings: identical for identical seeds), ``run.json`` (timing, machine, command, resumes),
``table.md``, ``accuracy_matrix.png``, ``log.txt`` and, while it runs, a checkpoint and a lock
(see :mod:`avalanche_sets.runs.folder`). A folder with a ``result.json`` is finished and is
not run again; a folder with a checkpoint resumes from it.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation.metrics import (
    accuracy_metrics,
    bwt_metrics,
    forgetting_metrics,
    loss_metrics,
    timing_metrics,
)
from avalanche.logging import InteractiveLogger
from avalanche.training.plugins import EvaluationPlugin

from .. import __version__, training
from ..data import SETSBenchmark, sets_benchmark
from ..data.content import PACKS_ENV, data_root
from ..data.packs import NO_PACKS_HINT
from ..methods import (
    build_checked_strategy,
    checked_method,
    run_config,
    training_benchmark,
    training_config,
    typed_options,
)
from ..metrics import episode_metrics
from ..presets import RunConfig
from ..training.checkpoint import previous_checkpoint_path, resume_note
from ..training.loggers import LOGGERS_FILE, check_finished_loggers, check_loggers, keep_history
from ..training.loss_terms import DEFAULT_LOG_EVERY, LossTerms, RunEvaluator, check_log_every
from ..training.memory_fill import MemoryFill, memory_fills
from ..training.progress import DomainProgressLogger
from ..training.run_loggers import (
    ResumableCSVLogger,
    ResumableTensorboardLogger,
    RunTextLogger,
    WandBLogger,
)
from .code import code_info, command_line, numerics_info, provenance, utc_now
from .folder import (
    CHECKPOINT_FILE,
    LOG_FILE,
    RunLock,
    check_checkpoint_code,
    check_finished,
    check_tag,
    is_finished,
)
from .record import Provenance, RunRecord, read_record, write_record
from .report import write_run_report
from .run import Run

__all__ = [
    "run_experiment",
    "build_benchmark",
    "method_benchmark",
    "method_preset",
    "evaluator",
    "run_settings",
    "note_memory",
    "check_run",
    "check_device",
]


def method_preset(method: str, config: RunConfig) -> RunConfig:
    """The config ``method``'s benchmark is built from: ``preset`` itself, except for a method
    that trains on more tasks (the compute-matched joint run needs ``(B + R) / B`` times the
    training tasks per domain: :func:`~avalanche_sets.methods.training_config`). The run
    folder and its identity keep ``config``: the method's name says the rest.

    Raises:
        ValueError: ``tasks_per_domain`` that the compute-matched run cannot scale.
    """
    return training_config(method, config)


def run_settings(
    method: str,
    config: RunConfig,
    *,
    eval_stream: str = "test",
    strategy_overrides: Mapping[str, Any] | None = None,
    plugins: Sequence[str] = (),
) -> dict[str, Any]:
    """What sets a run of ``method`` with ``config`` apart besides its config and seed
    (:attr:`.run.Run.apart`: its options typed, less explicit defaults; the settings it does
    not read), as :func:`~.folder.run_folder` and :func:`~.folder.run_identity` take it
    (``**``). ``plugins``: their :func:`~.run.plugin_description`.

    Raises:
        MethodOptionError: as :func:`~avalanche_sets.methods.typed_options`.
    """
    return Run(
        method=method, config=config, seed=0, eval_stream=eval_stream,
        strategy_options=dict(strategy_overrides or {}), plugins=tuple(plugins),
    ).apart  # fmt: skip


def check_device(config: RunConfig) -> None:
    """Refuse a config whose ``device`` this machine does not have, before a strategy is built on
    it (torch's own error would come from inside the strategy's constructor, without the fix).

    Raises:
        ValueError: a name that is no torch device; a CUDA device without CUDA, or with fewer
            GPUs than its index needs.
    """
    name = str(config.device)
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(
            f"device={name!r} is no torch device; fix: --set device=cpu or device=cuda"
        ) from None
    if device.type != "cuda":
        return
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have <= (device.index or 0):
        raise ValueError(
            f"device={str(device)!r} needs a CUDA GPU{'' if device.index is None else ' of that index'}"
            f", and this torch build or machine has {have}; fix: --set device=cpu (or run on a "
            "machine with the GPU)"
        )


def data_device(config: RunConfig) -> str | None:
    """Where a config's episodes are gathered: on its GPU when it trains on one (each domain's
    images copied there once), in host memory otherwise (``None``)."""
    device = str(config.device)
    return None if device == "cpu" else device


def build_benchmark(
    preset: RunConfig | str, *, seed: int, method: str | None = None
) -> SETSBenchmark:
    """The SETS benchmark a preset describes (episode streams seeded by ``seed``; on a GPU
    preset, gathered on the GPU: :func:`data_device`).

    ``preset``: the run's :class:`~avalanche_sets.presets.RunConfig`, or a preset's name as the
    command line's ``--preset`` (``build_benchmark("quick", seed=0)``; a dictionary of settings
    is refused: ``RunConfig.of(settings)`` checks it). ``method``: the benchmark that method trains on in the command line's
    run of it — the preset's stream, except for the methods of the ``joint`` family, which
    train on the stationary mixture of its domains (:func:`method_benchmark`).
    """
    config = run_config(preset)  # a name resolved here; a dictionary refused with the fix
    if method is not None:
        return method_benchmark(method, _benchmark(method_preset(method, config), seed), seed=seed)
    return _benchmark(config, seed)


def _benchmark(config: RunConfig, seed: int) -> SETSBenchmark:
    """:func:`build_benchmark` of a config."""
    source = config.source
    root = config.root if source == "synthetic" else data_root(source, config.root)
    if source == "packs" and root is None:
        raise ValueError(
            "the packs source needs a folder of .npz domain packs: pass --root (e.g. "
            f"../shared/data/sets-mini) or set {PACKS_ENV}; " + NO_PACKS_HINT
        )
    return sets_benchmark(
        source,
        root=root,
        domains=config.domains,
        ood=config.ood,
        order=1 if config.order is None else config.order,
        n_way=config.n_way,
        n_shot=config.n_shot,
        n_query=config.n_query,
        n_unlabeled=config.n_unlabeled,
        n_ood=config.n_ood,
        tasks_per_domain=config.tasks_per_domain,
        n_val_episodes=config.n_val_episodes,
        n_test_episodes=config.n_test_episodes,
        image_size=config.image_size,
        seed=seed,
        small_classes=config.small_classes,
        data_device=data_device(config),
    )


def method_benchmark(method: str, benchmark: SETSBenchmark, *, seed: int) -> SETSBenchmark:
    """What ``method`` trains on, from the preset's ``benchmark`` (built from
    :func:`method_preset`): the stationary mixture of its domains for the joint methods
    (:func:`~avalanche_sets.baselines.joint.joint_benchmark`, shuffled by ``seed``), the
    benchmark itself for every other method (:func:`~avalanche_sets.methods.training_benchmark`)."""
    return training_benchmark(method, benchmark, seed=seed)


def evaluator(
    loggers,
    out: Path,
    *,
    verbose: bool = False,
    log_file: IO[str] | None = None,
    config: dict | None = None,
    log_every: int = DEFAULT_LOG_EVERY,
) -> EvaluationPlugin:
    """The run's ``EvaluationPlugin``: Avalanche's metrics, the SETS episode metrics and the
    loss terms.

    Every metric value goes to ``log_file`` (default: ``out/log.txt``, appended to) whatever
    ``loggers`` says, so the evaluator always has a logger and nothing is lost; ``loggers``
    adds terminal and file loggers (:data:`~avalanche_sets.training.loggers.LOGGERS`), ``verbose`` also prints the
    metric values on the terminal. The file loggers (``csv/``, ``tb/``, ``wandb/`` in ``out``)
    are the resumable ones of :mod:`avalanche_sets.training.run_loggers`: a resumed run continues
    them at its checkpoint's steps. The W&B run is named after ``out`` and gets ``config``
    (the run's settings); it is offline unless ``WANDB_MODE`` says otherwise, so a run never
    needs the network: ``wandb sync out/wandb/offline-run-*`` uploads it.

    Training accuracy and loss (``Top1_Acc_Epoch``, ``Loss_Epoch``: the CSV's
    ``training_accuracy`` and ``training_loss`` columns) are measured per training epoch, one
    per domain; a run resumed in a domain's middle measures them over the whole domain too
    (their running state is in the checkpoint:
    :func:`~avalanche_sets.training.checkpoint.running_metric_state`). The loss terms of
    training (``meta``, ``mi``, ``ot``, every plugin's ``TERM``) go to every logger as their means over ``log_every`` iterations and over each domain's last,
    shorter interval (:class:`~avalanche_sets.training.loss_terms.LossTerms`): a line
    ``loss terms at iteration N: ...`` in ``log.txt``, ``csv/loss_terms.csv``,
    ``LossTerm/train_phase/train_stream/<term>`` scalars in TensorBoard and W&B, and the
    progress bar.

    Raises:
        ValueError: an unknown logger, or ``wandb`` without wandb installed
            (:func:`~avalanche_sets.training.loggers.check_loggers`), or ``log_every`` < 1.
    """
    loggers = check_loggers(loggers)
    if log_file is None:  # the run folder's log, owned by the logger from here on
        log_file = open(out / LOG_FILE, "a", buffering=1)  # noqa: SIM115
    made = [RunTextLogger(log_file)]
    if "progress" in loggers:
        made.append(DomainProgressLogger())
    if "interactive" in loggers:
        made.append(InteractiveLogger())
    elif verbose:  # the interactive logger prints the metric values already
        made.append(RunTextLogger(sys.stdout))
    if "csv" in loggers:
        made.append(ResumableCSVLogger(log_folder=out / "csv"))
    if "tensorboard" in loggers:
        made.append(ResumableTensorboardLogger(tb_log_dir=str(out / "tb")))
    if "wandb" in loggers:
        made.append(
            WandBLogger(
                run_name=out.name,
                dir=out,
                config=config,
                mode=None if os.environ.get("WANDB_MODE") else "offline",
                log_file=log_file,
                own_folder=True,
            )
        )
    return RunEvaluator(
        accuracy_metrics(epoch=True, experience=True, stream=True),
        loss_metrics(epoch=True, experience=True, stream=True),
        forgetting_metrics(experience=True, stream=True),
        bwt_metrics(experience=True, stream=True),
        timing_metrics(epoch=True),
        *episode_metrics(),
        LossTerms(every=log_every),
        loggers=made,
    )


#: The run's loggers that hold something open (a bar, files, a W&B run) until closed.
_CLOSED_LOGGERS = (
    DomainProgressLogger,
    ResumableCSVLogger,
    ResumableTensorboardLogger,
    WandBLogger,
)


def check_run(
    method: str,
    preset: RunConfig,
    strategy_overrides: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    given: Iterable[str] = (),
    eval_stream: str = "test",
) -> RunConfig:
    """Check a run before any data loads or any folder is made; returns its config.

    :func:`~avalanche_sets.methods.check_method` (the method's name, preset, options and
    ``given`` settings; the options typed once, or taken as they are when typed already:
    :class:`~avalanche_sets.methods.MethodOptions`), then the strategy built once and dropped — with a silent evaluator and
    no added plugins — so that what only its construction checks (a method class of one's own
    and the plugins it builds, a strategy's own argument checks) fails here, before the stream
    is built or described. A method class is therefore built twice per run: here, and by
    :func:`run_experiment`, which builds the run's strategy with its evaluator and plugins.
    Building a strategy is cheap (a small network, no data) and seeds its own model, so the
    probe changes nothing the run computes.

    Raises:
        ValueError, TypeError: as :func:`~avalanche_sets.methods.check_method`, and whatever
            the strategy's (or its plugins') construction raises.
    """
    config, options = checked_method(
        method, preset, strategy_overrides, given=given, eval_stream=eval_stream
    )
    check_device(config)
    build_checked_strategy(method, config, options, seed=seed)
    return config


def _close(loggers: Sequence[Any], log: IO[str]) -> None:
    """Close the run's loggers that hold something open, then its log."""
    for logger in loggers:
        if isinstance(logger, _CLOSED_LOGGERS):
            logger.close()
    log.close()


def _first_missing(folder: Path) -> Path | None:
    """The outermost of ``folder`` and its parents that does not exist yet (what making
    ``folder`` creates), or ``None`` when ``folder`` exists."""
    missing = None
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing = path
    return missing


def _remove_unstarted(folder: Path, made: Path) -> None:
    """Remove ``folder``, made by this call for a run that failed before training began, and
    the empty parents up to ``made`` that the call made with it. A folder holding a checkpoint
    or a result is never removed (only a run that began training writes one)."""
    checkpoint = folder / CHECKPOINT_FILE
    if any(p.exists() for p in (checkpoint, previous_checkpoint_path(checkpoint))):
        return
    if is_finished(folder):
        return
    shutil.rmtree(folder, ignore_errors=True)
    for parent in folder.parents:
        if not parent.is_relative_to(made):
            break
        try:
            parent.rmdir()  # only when empty: another run may have made a folder there since
        except OSError:
            break


def note_memory(fills: Sequence[MemoryFill], *, log: IO[str] | None = None) -> list[str]:
    """Say, once, that a run's memory does not evict before its last domain
    (:class:`~avalanche_sets.training.memory_fill.MemoryFill`, with the numbers): on stderr
    and in ``log`` (the run's ``log.txt``; a resumed run has it there already).
    A memory that evicts before the last domain, or a run without a memory, says nothing.

    Returns:
        the notes.
    """
    notes = [f.message() for f in fills if not f.evicts_before_last_domain]
    for note in notes:
        print(note, file=sys.stderr, flush=True)
        if log is not None:
            print(note, file=log, flush=True)
    return notes


def run_experiment(
    method: str,
    preset: RunConfig | str,
    *,
    seed: int,
    out_root: str | Path,
    loggers: tuple[str, ...] = ("progress",),
    verbose: bool = False,
    checkpoint_every: int | None = 50,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
    plugins: Sequence[SupervisedPlugin] = (),
    tag: str = "",
    wait: bool = False,
    benchmark: SETSBenchmark | None = None,
    checked: bool = False,
    log_every: int = DEFAULT_LOG_EVERY,
) -> RunRecord:
    """Run (or resume, or skip if finished) one method/preset/seed; returns its record.

    The protocol, step by step: the arguments are checked and the run settled once
    (:class:`~.run.Run`); a finished folder is checked and read; else the folder is locked,
    the run started (log, loggers, strategy, benchmark), trained, and its records written.

    The run folder (see :mod:`avalanche_sets.runs.folder`) is locked while the run is in
    progress: when another process holds it, this raises
    :class:`~avalanche_sets.runs.folder.RunLockedError` (``wait=False``) or waits for that
    process and returns its result (``wait=True``); a finished run is never run again.
    Checkpoints are written every ``checkpoint_every`` iterations and at every domain end;
    a killed run resumes from the newest good one and ends with the same ``result.json``.

    Every metric value goes to the run folder's ``log.txt`` (appended to on resume);
    ``loggers`` adds terminal or file loggers
    (:data:`~avalanche_sets.training.loggers.LOGGERS`; ``progress`` draws one bar per domain), and ``verbose=True`` prints the metric values on the terminal too.
    The loss terms are logged as means over ``log_every`` iterations (:func:`evaluator`). A
    finished run is not run again, so file loggers (``csv``, ``tensorboard``, ``wandb``) that
    its folder has no output of are refused
    (:func:`~avalanche_sets.training.loggers.check_finished_loggers`).

    ``preset``: the run's :class:`~avalanche_sets.presets.RunConfig`, or a preset's name (a
    dictionary of settings is refused: ``RunConfig.of(settings)`` checks it). ``method``: a
    built-in method's name or a method class of one's own (an installed entry point or
    ``"package.module:Class"``: :mod:`avalanche_sets.methods`).
    ``plugins``: plugins added to the method (after its own); they are part of the run's identity
    (:func:`~.run.plugin_description`: class and public settings) and of its folder's name
    (``mskm+MyPlugin/...``). Pass new plugin objects to every run: a plugin keeps state.

    The code that defines the run is part of its identity: the library's files by their content
    hash (``code.package``), a method or plugin of one's own by its source's
    (:func:`~.code.user_code`). A finished run or a checkpoint made by other code is refused,
    never reported finished (:func:`~.folder.check_finished`). ``tag`` keeps this run apart from
    the same run untagged (:func:`~.folder.check_tag`; recorded, and in its folder's name).

    ``benchmark``: the :func:`build_benchmark` of this ``preset`` and ``seed`` when the caller
    has built it already (the command line describes it first). A run that fails before its
    training begins (a plugin's error, data that does not load) leaves no folder behind that
    this call made; a folder that was there is never removed. The record keeps every memory's
    filling (:func:`note_memory` says when a storage rule cannot matter before the last domain).

    ``checked=True``: the caller checked these arguments already
    (:func:`~avalanche_sets.methods.check_method`): the method is checked once per command.
    ``strategy_overrides`` are typed once, here, unless typed already
    (:class:`~avalanche_sets.methods.MethodOptions`, as the command line and a sweep hand
    them): the run names its folder and builds its strategy with them as typed.

    Returns:
        the run's :class:`~.record.RunRecord` as its folder holds it (``result.json``; its
        ``run.json`` as ``provenance``: ``seconds``, ``date``, ``machine``, ...), with
        ``status`` (not stored) saying what this call did: ``"ran"`` when it computed the run
        (from the start or from a checkpoint), ``"finished before"`` when it found the run
        finished — before taking the lock, or after waiting for the process that held it.
        Decided under the lock, so two sweeps on one folder never both report a run as theirs.
    """
    if checked:  # options typed by the caller (MethodOptions) are not typed again
        config, options = run_config(preset), typed_options(method, strategy_overrides or {})
    else:
        config, options = checked_method(method, preset, strategy_overrides)
    run, bench_config, loggers = _prepare(
        method, config, seed=seed, loggers=loggers, log_every=log_every, eval_stream=eval_stream,
        strategy_overrides=options, plugins=plugins, tag=tag,
    )  # fmt: skip
    _check_benchmark(benchmark, seed)
    out = run.folder(out_root)
    if is_finished(out):
        return _finished_before(run, out, loggers)
    made = _first_missing(out)  # the folder this call creates (None: it was there)
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, wait=wait) as lock:
        if is_finished(out):  # finished by the process that held the lock
            lock.remove()
            return _finished_before(run, out, loggers)
        started = _start(
            run, out, made=made, loggers=loggers, verbose=verbose, log_every=log_every,
            plugins=plugins, benchmark=benchmark, bench_config=bench_config,
        )  # fmt: skip
        trained = _train(run, started, checkpoint_every=checkpoint_every)
        _write(run, started, trained)
        # Safe to remove while held: a process waiting on it re-checks result.json first.
        lock.remove()
        return dataclasses.replace(read_record(out), status="ran")


def _prepare(
    method: str,
    config: RunConfig,
    *,
    seed: int,
    loggers: Iterable[str],
    log_every: int,
    eval_stream: str,
    strategy_overrides: Mapping[str, Any] | None,
    plugins: Sequence[SupervisedPlugin],
    tag: str,
) -> tuple[Run, RunConfig, tuple[str, ...]]:
    """Check what :func:`run_experiment` was handed besides its checked ``config``, before any
    data loads or any folder is made, and settle the run once (:class:`~.run.Run`: its options
    typed, precision resolved, folder named, data hashed); returns it, the config its benchmark
    is built from (:func:`method_preset`) and the checked loggers.

    Raises:
        ValueError, TypeError: a logger, ``log_every``, tag, option, device or data folder
            that cannot run, each with the fix.
    """
    loggers = check_loggers(loggers)
    check_log_every(log_every)
    check_tag(tag)
    run = Run.of(
        method, config, seed=seed, eval_stream=eval_stream,
        strategy_overrides=strategy_overrides, plugins=plugins, tag=tag,
    )  # fmt: skip
    bench_config = method_preset(method, run.config)  # its refusals come before any data loads
    check_device(run.config)  # before a strategy is built on it
    run.identity  # noqa: B018  the data's content hash, once per run (before any data loads)
    return run, bench_config, loggers


def _check_benchmark(benchmark: SETSBenchmark | None, seed: int) -> None:
    """Refuse a benchmark handed to :func:`run_experiment` that another seed built."""
    if benchmark is not None and benchmark.seed != seed:
        raise ValueError(
            f"run_experiment(seed={seed}) was handed the benchmark of seed {benchmark.seed}; "
            "fix: pass build_benchmark(preset, seed=seed), or no benchmark"
        )


def _finished_before(run: Run, out: Path, loggers: Sequence[str]) -> RunRecord:
    """The record of the run finished in ``out``, once it is the asked run and has the output
    of every asked file logger (named first: what the loggers would miss).

    Raises:
        ValueError: a file logger the finished run did not write
            (:func:`~avalanche_sets.training.loggers.check_finished_loggers`).
        RunConflictError: the folder holds another run (:func:`~.folder.check_finished`).
    """
    check_finished_loggers(out, loggers)
    record = check_finished(out, run.identity, run.seed)
    return dataclasses.replace(record, status="finished before")


@dataclass(frozen=True, kw_only=True)
class _Started:
    """A run ready to train: its folder, log, strategy (with its evaluator's loggers), what it
    trains on, its memories' filling, whether it resumes, and the code that runs it."""

    out: Path
    log: IO[str]
    strategy: Any
    bench: SETSBenchmark
    fills: list[MemoryFill]
    resuming: bool
    code: dict[str, Any]


def _start(
    run: Run,
    out: Path,
    *,
    made: Path | None,
    loggers: tuple[str, ...],
    verbose: bool,
    log_every: int,
    plugins: Sequence[SupervisedPlugin],
    benchmark: SETSBenchmark | None,
    bench_config: RunConfig,
) -> _Started:
    """Open the run's log and loggers, build its strategy, then what it trains on (the strategy
    first: a method's or a plugin's errors come before any data loads), and say what its
    memory does (:func:`note_memory`). A resume with other history loggers than the run
    started with is refused first (:func:`~avalanche_sets.training.loggers.keep_history`).
    A failure here closes what was opened and leaves no
    folder this call ``made`` (:func:`_remove_unstarted`) unless the run resumes."""
    checkpoint = out / CHECKPOINT_FILE
    resuming = checkpoint.exists() or previous_checkpoint_path(checkpoint).exists()
    keep_history(out, loggers, resuming=resuming)  # before anything is opened
    torch.set_num_threads(int(run.config.threads))
    # The run log: every metric value (and resumes); closed with the loggers after training.
    log = open(out / LOG_FILE, "a", buffering=1)  # noqa: SIM115
    made_loggers: list = []
    try:  # until training begins: a failure leaves no folder this call made
        print(f"# {utc_now()}: {command_line()}", file=log)
        run_evaluator = evaluator(
            loggers, out, verbose=verbose, log_file=log, config=run.wandb_config,
            log_every=log_every,
        )  # fmt: skip
        made_loggers = run_evaluator.loggers
        strategy = build_checked_strategy(  # checked and typed once, when the run was handed over
            run.method, run.config, run.strategy_options, seed=run.seed, evaluator=run_evaluator,
            plugins=list(plugins),
        )  # fmt: skip
        if benchmark is None or bench_config is not run.config:  # more training tasks: rebuilt
            benchmark = build_benchmark(bench_config, seed=run.seed)
        bench = method_benchmark(run.method, benchmark, seed=run.seed)
        fills = memory_fills(strategy, bench)
        note_memory(fills, log=None if resuming else log)  # log.txt: once per run
    except BaseException:
        _close(made_loggers, log)
        if made is not None and not resuming:
            _remove_unstarted(out, made)
        raise
    code = {"package": code_info()["package"], "user_code": dict(run.user_code)}
    return _Started(
        out=out, log=log, strategy=strategy, bench=bench, fills=fills, resuming=resuming,
        code=code,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class _Trained:
    """What training gave: the result, the seconds it took over every resume, the resumes."""

    result: Any
    seconds: float
    resumes: list[dict]


def _train(run: Run, started: _Started, *, checkpoint_every: int | None) -> _Trained:
    """Train the started run from its newest good checkpoint (or the start), checkpointing
    every ``checkpoint_every`` iterations; a checkpoint of other code is refused
    (:func:`~.folder.check_checkpoint_code`). Its loggers and log are closed at the end, also
    when training stops early."""
    out, log = started.out, started.log
    checkpoint = out / CHECKPOINT_FILE
    clock = {"before": 0.0, "start": time.perf_counter()}
    resumes: list[dict] = []

    def elapsed() -> float:
        return clock["before"] + time.perf_counter() - clock["start"]

    def on_resume(restored: dict) -> None:
        check_checkpoint_code(restored["path"], restored["extra"].get("code"), started.code)
        clock["before"] = float(restored["extra"].get("seconds", 0.0))
        pos = restored["position"]
        resumes.append(
            {
                "from": restored["path"],
                "position": pos,
                "skipped_damaged": restored["skipped"],
                "date": utc_now(),
            }
        )
        domain, n_domains = pos["experience"] + 1, len(started.bench.train_stream)  # from 1
        at = f"domain {domain}, iteration {pos['iteration']}" if domain <= n_domains else "its end"
        message = f"resuming {out} from {restored['path']} at {at}"
        print(message, file=sys.stderr, flush=True)
        print(message, file=log, flush=True)
        note = resume_note(restored)  # epoch metrics over the iterations after it only
        if note:
            print(note, file=log, flush=True)

    try:
        # looked up on the module when called, so a test can replace the training loop
        result = training.run_sets(
            started.strategy,
            started.bench,
            checkpoint_path=checkpoint,
            checkpoint_every=checkpoint_every,
            eval_stream=run.eval_stream,
            interim_episodes=run.config.interim_test_episodes,
            checkpoint_extra=lambda: {"seconds": elapsed(), "code": started.code},
            on_resume=on_resume,
        )
    finally:  # also when the run stops early: bars, files and the W&B run are closed
        _close(started.strategy.evaluator.loggers, log)
    return _Trained(result=result, seconds=elapsed(), resumes=resumes)


def _write(run: Run, started: _Started, trained: _Trained) -> None:
    """Write the run's report and its records (``result.json`` last, atomically: it marks the
    run finished), then remove its checkpoints."""
    # host: which node of a cluster ran it (sweep --ray-address)
    how = provenance(host=platform.node(), pid=os.getpid(), resumes=trained.resumes)
    record = RunRecord(
        avalanche_sets=__version__,
        method=run.method,
        seed=run.seed,
        preset=run.settings,  # the precision as resolved here: what "auto" meant
        eval_stream=run.eval_stream,
        strategy_overrides=dict(run.strategy_options),
        unread_settings=run.unread,
        plugins=tuple(run.plugins),
        user_code=dict(run.user_code),
        tag=run.tag,
        code=code_info(),
        numerics=numerics_info(device=run.config.device, precision=run.precision),
        data=run.data,
        memory=tuple(f.to_dict() for f in started.fills),
        result=trained.result.to_dict(),
        ood_split=trained.result.ood_split,  # None (left out): a learner without a split
        provenance=Provenance.from_json({"seconds": trained.seconds, **how}),
    )
    write_run_report(started.out, record)
    write_record(started.out, record)
    checkpoint = started.out / CHECKPOINT_FILE
    for ckpt in (checkpoint, previous_checkpoint_path(checkpoint), started.out / LOGGERS_FILE):
        ckpt.unlink(missing_ok=True)
