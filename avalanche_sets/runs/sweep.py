"""Many runs: in this process, in a local process pool, or as Ray tasks — one implementation.

``avalanche-sets sweep`` and ``benchmarks/reproduce.py`` both hand a list of
:class:`RunSpec` to :func:`run_sweep`. It checks every run's method before the first one
starts, runs each through :func:`~avalanche_sets.runs.experiment.run_experiment` (finished
runs are read, not run again; interrupted ones resume), and comes back once its own runs are
done to the runs another process was running (another sweep on the same folder: their
folder was locked), waiting for them instead of running them twice.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..methods import run_config, typed_options, unread_settings
from ..presets import RunConfig
from .experiment import check_run, run_experiment
from .folder import RunLockedError, check_tag, is_finished
from .record import RunRecord
from .run import Run
from .terminal_warnings import recorded_warnings, show_recorded

__all__ = ["RunSpec", "RunOutcome", "check_specs", "run_one", "run_sweep"]


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: the arguments of :func:`~.experiment.run_experiment`.

    ``preset``: the run's :class:`~avalanche_sets.presets.RunConfig`, or a preset's name
    (resolved when the spec is made; a dictionary of settings is refused with the fix). ``tag``: the run's tag
    (:func:`~.folder.check_tag`, checked when the spec is made; ``""``: none).
    ``strategy_overrides``: typed once, when the spec is made
    (:func:`~avalanche_sets.methods.typed_options`; options typed already, as the command
    line's :class:`~avalanche_sets.methods.MethodOptions`, are taken as they are), and taken as
    they are by every later step.

    Raises:
        ValueError, TypeError: an unknown method, a preset that is neither a config nor a name,
            a bad tag, or an option the method does not take or a value of another type.
    """

    method: str
    preset: RunConfig
    seed: int
    out_root: str | Path
    eval_stream: str = "test"
    strategy_overrides: Mapping[str, Any] = field(default_factory=dict)
    checkpoint_every: int | None = 50
    verbose: bool = False
    tag: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "preset", run_config(self.preset))  # a name resolved here
        check_tag(self.tag)
        options = typed_options(self.method, self.strategy_overrides)
        object.__setattr__(self, "strategy_overrides", options)

    @property
    def folder(self) -> Path:
        """The run's folder (its :class:`~.run.Run`'s, under ``out_root``)."""
        run = Run.of(
            self.method, self.preset, seed=self.seed, eval_stream=self.eval_stream,
            strategy_overrides=self.strategy_overrides, tag=self.tag,
        )  # fmt: skip
        return run.folder(self.out_root)

    @property
    def label(self) -> str:
        over = f" {dict(self.strategy_overrides)}" if self.strategy_overrides else ""
        return f"{self.method} seed {self.seed}{over}" + (f" tag {self.tag}" if self.tag else "")


@dataclass
class RunOutcome:
    """What became of one :class:`RunSpec`.

    Attributes:
        spec: the run.
        status: ``"ran"``, ``"finished before"`` (found finished: not run again), ``"locked"``
            (another process is running it) or ``"failed"`` (``keep_going``: see ``error``).
        record: the run's :class:`~.record.RunRecord` (as
            :func:`~.experiment.run_experiment` returns it, ``status`` set) when it finished.
        error: ``"<method> seed <s>: <Exception>: <message>"`` of a failed run.
    """

    spec: RunSpec
    status: str
    record: RunRecord | None = None
    error: str | None = None

    @property
    def accuracy(self) -> float:
        """The run's mean final accuracy (NaN when it did not finish)."""
        return float("nan") if self.record is None else self.record.mean_accuracy

    @property
    def seconds(self) -> float:
        """The run's wall time (NaN when it did not finish)."""
        return float("nan") if self.record is None else self.record.seconds


def check_specs(specs: Sequence[RunSpec], *, given: Iterable[str] = ()) -> list[RunSpec]:
    """Check the method, preset and strategy options of every run (before any starts) and
    return the specs, one per distinct run (in their order).

    ``given``: the preset settings the user set. Each must be read by some run of the sweep,
    or it is refused (it would change nothing). A method that does not read one
    (:func:`~avalanche_sets.methods.unread_settings`: ``mem_size`` for ``mskm``) runs once
    for all its values — its grid points are one run, one folder — and one warning line on
    stderr per method and setting says so, with the reason.

    Raises:
        ValueError, TypeError: as :func:`~.experiment.check_run` (the method's checks, and
            its strategy's construction, built once per method, setting and options); a given
            setting that no run of the sweep reads.
    """
    given = set(given)
    ignored: dict[tuple[str, str], str] = {}
    read: set[str] = set()
    for spec in specs:
        unread = unread_settings(
            spec.method, spec.preset, spec.strategy_overrides, eval_stream=spec.eval_stream
        )
        read |= given - set(unread)
        ignored.update({(spec.method, k): unread[k] for k in given & set(unread)})
    probed: list[tuple] = []  # the seed aside, the runs whose strategy was built
    for spec in specs:  # a setting no run reads is refused with the method's own message
        key = (spec.method, spec.preset, spec.eval_stream, spec.strategy_overrides)
        if key in probed:
            continue
        # the strategy built once (check_run): a method's or plugin's construction errors
        check_run(
            spec.method, spec.preset, spec.strategy_overrides, seed=spec.seed,
            given=given - read, eval_stream=spec.eval_stream,
        )  # fmt: skip
        probed.append(key)
    for (method, key), why in ignored.items():
        if key in read:
            print(f"warning: {method} does not read {key} ({why}): it runs once for every "
                  f"value of {key} of this sweep", file=sys.stderr, flush=True)  # fmt: skip
    runs: dict[Path, RunSpec] = {}
    for spec in specs:
        runs.setdefault(spec.folder, spec)
    return list(runs.values())


def run_one(
    spec: RunSpec, *, wait: bool = False, keep_going: bool = False, checked: bool = False
) -> RunOutcome:
    """Run one spec (no terminal loggers); a held lock gives status ``"locked"`` unless
    ``wait``. With ``keep_going`` an error is printed and returned as status ``"failed"``
    instead of raised, so that one failing run does not stop the others."""
    try:
        rec = run_experiment(
            spec.method, spec.preset, seed=spec.seed, out_root=spec.out_root, loggers=(),
            verbose=spec.verbose, eval_stream=spec.eval_stream,
            strategy_overrides=spec.strategy_overrides, checkpoint_every=spec.checkpoint_every,
            wait=wait, checked=checked, tag=spec.tag,
        )  # fmt: skip
    except RunLockedError:
        return RunOutcome(spec, "locked")
    except Exception as err:
        if not keep_going:
            raise
        traceback.print_exc()
        return RunOutcome(spec, "failed", error=f"{spec.label}: {type(err).__name__}: {err}")
    return RunOutcome(spec, rec.status, record=rec)


def _task(item: tuple[int, RunSpec, bool, bool]) -> tuple[int, RunOutcome]:
    """One run, its specs checked by the driver."""
    i, spec, wait, keep_going = item
    return i, run_one(spec, wait=wait, keep_going=keep_going, checked=True)


def _worker_task(item: tuple[int, RunSpec, bool, bool]) -> tuple[int, RunOutcome, list]:
    """:func:`_task` in a worker (pool process or Ray task), with the warnings it raised, which
    the driver shows (:func:`~.terminal_warnings.show_recorded`)."""
    (i, outcome), warned = recorded_warnings(lambda: _task(item))
    return i, outcome, warned


def _parallel(spec: RunSpec, threads: int | None, **changes: Any) -> RunSpec:
    """The spec for a worker that shares the machine with others: ``threads`` per run
    (``None``: the preset's)."""
    preset = spec.preset if threads is None else spec.preset.replace(threads=threads)
    return dataclasses.replace(spec, preset=preset, **changes)


def run_sweep(
    specs: Sequence[RunSpec],
    *,
    jobs: int = 1,
    ray_address: str | None = None,
    keep_going: bool = False,
    on_done: Callable[[RunOutcome], None] | None = None,
    progress: bool = True,
    checked: bool = False,
    threads: int | None = 1,
) -> list[RunOutcome]:
    """Run every spec; the outcomes in the order of ``specs``.

    Args:
        specs: the runs. Every one is checked (:func:`check_specs`) before the first starts,
            unless ``checked`` says the caller has done so.
        jobs: runs at a time in local processes (``spawn``, ``threads`` threads each); 1 runs
            them here, one after the other, with their presets' threads.
        ray_address: run every unfinished run as a Ray task (one CPU each, plus one GPU when
            its preset runs on CUDA; ``threads`` CPUs with as many threads when ``threads`` is
            set, else the preset's): ``local`` starts a cluster on this machine, ``auto``
            joins the one ``ray start`` started, or ``ray://host:10001``. Finished runs are
            read here, without a task.
        keep_going: a failing run is reported (status ``"failed"``) instead of stopping the
            sweep.
        on_done: called here with each outcome as its run ends (in the order they end).
        progress: show a progress bar (stderr).
        threads: torch threads of every run that runs beside others (``jobs > 1`` or Ray);
            ``None`` keeps each preset's ``threads``.

    Runs another process holds (status ``"locked"`` in the first pass) are waited for once
    this sweep's own runs are done, and their results reported, never run a second time.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be a positive number of parallel runs, got {jobs!r}")
    if not checked:
        check_specs(specs)
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive number or None, got {threads!r}")
    how = (jobs, ray_address, threads, keep_going, on_done, progress)
    outcomes = _pass(specs, False, *how)
    locked = [i for i, o in enumerate(outcomes) if o.status == "locked"]
    if locked:
        print(f"waiting for {len(locked)} run(s) held by another process", flush=True)
        again = _pass([specs[i] for i in locked], True, *how)
        for i, outcome in zip(locked, again):
            outcomes[i] = outcome
    return outcomes


def _pass(
    specs, wait, jobs, ray_address, threads, keep_going, on_done, progress
) -> list[RunOutcome]:
    items = [(i, spec, wait, keep_going) for i, spec in enumerate(specs)]
    if not items:  # nothing to run: no pool, no cluster
        return []
    results: list[RunOutcome | None] = [None] * len(items)
    bar = tqdm(total=len(items), desc="runs", disable=not progress)

    def done(i: int, outcome: RunOutcome, warned: Sequence = ()) -> None:
        show_recorded(warned)  # a worker's warnings, shown here
        results[i] = outcome
        if on_done is not None and outcome.status != "locked":
            on_done(outcome)
        bar.update(1)

    with bar:
        if ray_address:
            _ray_pass(ray_address, items, done, threads)
        elif jobs > 1:
            items = [(i, _parallel(s, threads), w, k) for i, s, w, k in items]
            with mp.get_context("spawn").Pool(jobs) as pool:
                for result in pool.imap_unordered(_worker_task, items, chunksize=1):
                    done(*result)
        else:
            for item in items:
                done(*_task(item))
    return results  # type: ignore[return-value]


def _ray_pass(
    address: str, items: list, done: Callable[[int, RunOutcome], None], threads: int | None
) -> None:
    """The unfinished runs as Ray tasks; connects to ``address`` unless this process already
    is connected (and then leaves the connection open). A worker imports a method of one's
    own as the driver does: the driver's working folder and Python path go with the job."""
    import ray  # optional and heavy: only a Ray sweep loads it (pip install 'avalanche-sets[ray]')

    todo = []
    for i, spec, wait, keep_going in items:
        if is_finished(spec.folder):
            done(*_task((i, spec, wait, keep_going)))  # read (and checked) here, no task needed
        else:
            # one core per task; the folder as an absolute path, the same on every worker of
            # one machine (on a cluster: a folder every node mounts at that path)
            job = _parallel(spec, threads, out_root=str(Path(spec.out_root).resolve()))
            gpu = spec.preset.device.startswith("cuda")
            todo.append(((i, job, wait, keep_going), gpu, int(job.preset.threads)))
    if not todo:
        return
    connected_here = not ray.is_initialized()
    if connected_here:
        search = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=any(item[1].verbose for item, _, _ in todo),  # -v prints values
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(search)}},
        )
    try:
        pending = [
            ray.remote(num_cpus=cpus, num_gpus=int(gpu))(_worker_task).remote(item)
            for item, gpu, cpus in todo
        ]
        while pending:  # report runs as they finish, in any order
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                done(*ray.get(ref))
    finally:
        if connected_here:
            ray.shutdown()
