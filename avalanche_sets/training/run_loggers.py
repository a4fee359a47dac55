"""File loggers that a resumed run continues: CSV, TensorBoard and Weights & Biases; the
run log's text logger.

Avalanche's loggers know nothing of checkpoints. A resumed process opens them anew: its
``CSVLogger`` truncates the CSV files the first process wrote, its ``TensorboardLogger`` adds an
event file next to the first one, and both keep whatever the first process logged after its
last checkpoint, which the resumed process logs again. The loggers here take part in the run's
checkpoint (:func:`avalanche_sets.training.save_checkpoint` saves the ``state_dict()`` of every
evaluator logger that has one): the checkpoint records how far each file was written, and a
resumed run cuts the files back to that point before it logs anything, so the files of an
interrupted-and-resumed run hold each step once, at the steps of an uninterrupted run (the
steps come from Avalanche's clock, which the checkpoint restores too).

A logger's folder belongs to one run: a run that resumes removes what was logged after its
checkpoint (and event files that the checkpoint never saw), and a run that starts from the
beginning (no checkpoint) clears what an earlier attempt left there.

:class:`WandBLogger` is Avalanche's ``WandBLogger`` made to work with the wandb release pinned
in the ``wandb`` extra (``pip install "avalanche-sets[wandb]"``): Avalanche 0.6 calls
``wandb.util.generate_id`` and ``wandb.viz.CustomChart``, which wandb no longer has.

:class:`RunTextLogger` is Avalanche's ``TextLogger`` (the run's ``log.txt``) that also writes
the loss terms (:mod:`avalanche_sets.training.loss_terms`) as they are logged, one line per
interval, where ``TextLogger`` would keep only each term's last value until the domain ends.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
from avalanche.evaluation.metric_results import AlternativeValues, TensorImage
from avalanche.logging import CSVLogger, TensorboardLogger, TextLogger
from avalanche.logging import WandBLogger as _AvalancheWandBLogger
from matplotlib.figure import Figure
from PIL.Image import Image as PILImage
from torch import Tensor

from .loggers import WANDB_INSTALL
from .loss_terms import LOSS_TERM_PREFIX

__all__ = [
    "ResumableCSVLogger",
    "ResumableTensorboardLogger",
    "WandBLogger",
    "RunTextLogger",
    "loss_terms_of",
    "format_loss_terms",
]


# OOD_AUROC/eval_phase/test_stream/Exp001 -> AUROC, test, 001; .../test_stream -> pooled
_OOD_VALUE = re.compile(r"^OOD_(AUROC|Precision|Recall)/eval_phase/(\w+?)_stream(?:/Exp(\d+))?$")


def loss_terms_of(metric_values) -> dict[int, dict[str, float]]:
    """The loss-term values among ``metric_values``: ``{step: {term: mean}}``."""
    out: dict[int, dict[str, float]] = {}
    for m in metric_values:
        if m.name.startswith(LOSS_TERM_PREFIX):
            out.setdefault(int(m.x_plot), {})[m.name[len(LOSS_TERM_PREFIX) :]] = float(m.value)
    return out


def format_loss_terms(terms: dict[str, float]) -> str:
    """``meta=1.234 mi=-1.2e-05``: loss terms as one short line."""
    return " ".join(f"{k}={v:.4g}" for k, v in terms.items())


class RunTextLogger(TextLogger):
    """Avalanche's ``TextLogger`` that writes every logged interval of loss terms as a line,
    ``loss terms at iteration 50: meta=1.234 mi=-1.2e-05 ot=0.0123`` (the terms' means over
    the iterations since the previous line), when it is logged. Every other value is written as
    ``TextLogger`` writes it."""

    def log_metrics(self, metric_values) -> None:
        rest = [m for m in metric_values if not m.name.startswith(LOSS_TERM_PREFIX)]
        super().log_metrics(rest)
        for step, terms in loss_terms_of(metric_values).items():
            print(f"loss terms at iteration {step}: {format_loss_terms(terms)}", file=self.file)


class _Resumable:
    """Calls :meth:`_begin` once, before the first metric value is logged: with the state a
    checkpoint restored (``load_state_dict``) or, when none was restored, as a fresh run."""

    _restored: dict | None = None
    _begun: bool = False

    def log_metrics(self, metric_values) -> None:
        # the evaluator calls log_metrics first at every event, before the logger's callback
        if not self._begun:
            self._begun = True
            self._begin(self._restored)
        super().log_metrics(metric_values)

    def load_state_dict(self, state: dict | None) -> None:
        """Continue from a checkpoint's ``state_dict()`` (``None``: the checkpoint has no state
        for this logger, which then starts fresh). Must come before anything is logged."""
        if self._begun:
            raise RuntimeError(
                f"{type(self).__name__}: a checkpoint must be loaded before anything is logged"
            )
        self._restored = state

    def _begin(self, state: dict | None) -> None:
        raise NotImplementedError


class ResumableCSVLogger(_Resumable, CSVLogger):
    """Avalanche's ``CSVLogger`` (``training_results.csv``, ``eval_results.csv`` in
    ``log_folder``), continued by a resumed run instead of truncated.

    The CSV files have no step column: a row is one training epoch (``training_exp``,
    ``epoch``) or one evaluated experience (``eval_exp``, ``training_exp``). A checkpoint
    stores the files' lengths; a resumed run cuts the files back to them, so the rows logged
    after the checkpoint are written once, by the resumed run.

    The ``training_accuracy`` and ``training_loss`` columns are filled from the
    ``Top1_Acc_Epoch`` and ``Loss_Epoch`` metrics: without ``accuracy_metrics(epoch=True)`` and
    ``loss_metrics(epoch=True)`` in the evaluator they are written as 0.

    A third file, ``loss_terms.csv``, holds the loss terms the evaluator's
    :class:`~avalanche_sets.training.loss_terms.LossTerms` logs: one row per term and interval,
    ``step`` (training iterations done), ``training_exp``, ``term`` and ``value`` (the term's
    mean over the interval).

    A fourth, ``ood_split.csv``, holds the values of
    :class:`~avalanche_sets.metrics.OODDetection` (a learner's OOD split against the oracle),
    which ``eval_results.csv`` has no column for: one row per evaluation, domain and measure,
    ``step``, ``training_exp`` (the domain trained last), ``stream``, ``eval_exp`` (the
    evaluated domain; empty: pooled over the stream), ``measure`` (``auroc``, ``precision``,
    ``recall``) and ``value``. A learner without a split leaves it with its header only.
    """

    _FILES = ("training_results.csv", "eval_results.csv", "loss_terms.csv", "ood_split.csv")

    def __init__(self, log_folder: str | Path | None = None) -> None:
        # not CSVLogger.__init__: it truncates the files before a checkpoint can be loaded
        super(CSVLogger, self).__init__()
        self.log_folder = str(log_folder) if log_folder is not None else "csvlogs"
        os.makedirs(self.log_folder, exist_ok=True)
        # append mode: every write goes to the end, wherever _begin cut the file
        self.training_file = open(self._path(0), "a")  # noqa: SIM115
        self.eval_file = open(self._path(1), "a")  # noqa: SIM115
        self.loss_terms_file = open(self._path(2), "a")  # noqa: SIM115
        self.ood_file = open(self._path(3), "a")  # noqa: SIM115
        self.training_exp_id = None
        self.in_train_phase = None
        self.val_acc, self.val_loss = 0, 0

    def _path(self, i: int) -> str:
        return os.path.join(self.log_folder, self._FILES[i])

    @property
    def _files(self) -> tuple:
        return (self.training_file, self.eval_file, self.loss_terms_file, self.ood_file)

    def state_dict(self) -> dict:
        """How far the files are written, and the logger's position in the stream."""
        for f in self._files:
            f.flush()
        return {
            "bytes": [os.path.getsize(self._path(i)) for i in range(len(self._FILES))],
            "training_exp_id": self.training_exp_id,
            "in_train_phase": self.in_train_phase,
            "val_acc": self.val_acc,
            "val_loss": self.val_loss,
        }

    def _begin(self, state: dict | None) -> None:
        if state is None:  # from the beginning: what an earlier attempt wrote goes
            for f in self._files:
                f.truncate(0)
            self._write_headers()
            return
        for f, size in zip(self._files, state["bytes"]):
            f.flush()
            f.truncate(int(size))
        # a checkpoint from before loss_terms.csv or ood_split.csv: those start afresh
        if len(state["bytes"]) < 3:
            self.loss_terms_file.truncate(0)
            self._write_loss_terms_header()
        if len(state["bytes"]) < 4:
            self.ood_file.truncate(0)
            self._write_ood_header()
        self.training_exp_id = state["training_exp_id"]
        self.in_train_phase = state["in_train_phase"]
        self.val_acc, self.val_loss = state["val_acc"], state["val_loss"]

    def _write_headers(self) -> None:
        print(
            "training_exp", "epoch", "training_accuracy", "val_accuracy", "training_loss",
            "val_loss", sep=",", file=self.training_file, flush=True,
        )  # fmt: skip
        print(
            "eval_exp", "training_exp", "eval_accuracy", "eval_loss", "forgetting",
            sep=",", file=self.eval_file, flush=True,
        )  # fmt: skip
        self._write_loss_terms_header()
        self._write_ood_header()

    def _write_ood_header(self) -> None:
        print(
            "step", "training_exp", "stream", "eval_exp", "measure", "value",
            sep=",", file=self.ood_file, flush=True,
        )  # fmt: skip

    def _write_loss_terms_header(self) -> None:
        print(
            "step", "training_exp", "term", "value", sep=",", file=self.loss_terms_file, flush=True
        )

    def log_single_metric(self, name, value, x_plot) -> None:
        if name.startswith(LOSS_TERM_PREFIX):
            term = name[len(LOSS_TERM_PREFIX) :]
            print(
                x_plot, self.training_exp_id, term, f"{float(value):.6g}",
                sep=",", file=self.loss_terms_file, flush=True,
            )  # fmt: skip
            return
        match = _OOD_VALUE.match(name)
        if match is not None:
            measure, stream, exp = match.groups()
            print(
                x_plot, self.training_exp_id, stream, "" if exp is None else int(exp),
                measure.lower(), f"{float(value):.6g}", sep=",", file=self.ood_file, flush=True,
            )  # fmt: skip

    def close(self) -> None:
        super().close()
        self.loss_terms_file.close()
        self.ood_file.close()


class ResumableTensorboardLogger(_Resumable, TensorboardLogger):
    """Avalanche's ``TensorboardLogger`` writing into ``tb_log_dir``, continued by a resumed run.

    Every process writes its own event file. A checkpoint stores the length of every event file
    in the folder; a resumed run cuts them back to those lengths and removes event files the
    checkpoint did not see (written after it by a process that was then stopped), so TensorBoard
    shows each step once. The steps are Avalanche's ``strategy.clock.train_iterations``, which
    the checkpoint restores.
    """

    _PATTERN = "events.out.tfevents.*"

    def __init__(self, tb_log_dir: str | Path = "./tb_data", filename_suffix: str = "") -> None:
        super().__init__(tb_log_dir=tb_log_dir, filename_suffix=filename_suffix)
        self._kept: dict[str, int] = {}  # earlier processes' files, as the checkpoint saw them

    @property
    def _folder(self) -> Path:
        return Path(self.writer.get_logdir())

    @property
    def _own(self) -> Path:
        return Path(self.writer.file_writer.event_writer._file_name)

    def state_dict(self) -> dict:
        """The length of every event file of the run so far, this process's included."""
        self.writer.flush()
        return {"bytes": {**self._kept, self._own.name: self._own.stat().st_size}}

    def _begin(self, state: dict | None) -> None:
        sizes = {} if state is None else dict(state["bytes"])
        for path in sorted(self._folder.glob(self._PATTERN)):
            if path == self._own:
                continue
            if path.name in sizes:
                with open(path, "r+b") as f:
                    f.truncate(int(sizes[path.name]))
                self._kept[path.name] = int(sizes[path.name])
            else:  # logged by an attempt the checkpoint does not continue
                path.unlink()

    def close(self) -> None:
        self.writer.close()


class WandBLogger(_Resumable, _AvalancheWandBLogger):
    """Avalanche's ``WandBLogger`` for the pinned wandb (the ``wandb`` extra), resumable.

    Avalanche 0.6's logger calls ``wandb.util.generate_id`` (gone from ``wandb.util``) and
    checks values against ``wandb.viz.CustomChart`` (now ``wandb.plot.CustomChart``), so it
    fails with current wandb releases at construction and at the first value. This subclass uses
    the current names and logs every metric value at its step (``x_plot``, Avalanche's
    ``clock.train_iterations``).

    W&B keeps one step counter per run and drops a value logged at a step below the run's
    current one, where TensorBoard plots each tag on its own axis. A metric whose ``x_plot`` is
    not the clock's step — the accuracy-matrix family (``AccMatrix``, ``AccMatrix_AvgAcc``,
    ``AccMatrix_Forgetting``, ``AccMatrix_BWT``), plotted at the matrix row ``i`` — is logged at
    W&B's current step instead (the clock's, or the highest step logged so far if that is
    higher), with its own ``x_plot`` in a field ``<family>_step`` (e.g.
    ``AccMatrix_AvgAcc_step``) that ``define_metric`` makes the metric's x-axis in W&B's charts.
    So the W&B run holds every value TensorBoard holds, each with TensorBoard's x.

    **Whole steps.** The values of one step are gathered here and handed to W&B as one row
    (``run.log(row, step=step, commit=True)``) when the first value of a later step comes, or
    when the logger is closed at the run's end. W&B's history thus never holds part of a step:
    a row it has is the row an uninterrupted run logs.

    **Resume.** The W&B run starts at the first logged value (``wandb.init`` with ``dir``: files
    in ``<dir>/wandb/``). The checkpoint (``state_dict``) holds the run's id, every row handed
    to W&B so far and the row being gathered; a resumed process continues that run, same id:

    - offline (``mode="offline"``, or wandb's own setting): a killed process's ``.wandb`` file
      holds only what wandb had written when the process died (often nothing of a short run).
      The resumed process removes the offline-run folders of that id, starts the run afresh in
      one new folder with the same id and logs the checkpoint's rows into it again. The run's
      ``<dir>/wandb/`` keeps one ``offline-run-*-<id>`` folder, whose history is an
      uninterrupted run's, and ``wandb sync`` uploads it as one run.
    - online: the process continues the server's run (``resume="allow"``). W&B says where the
      server's history ends (``run.starting_step``); the checkpoint's rows from that step on
      (what the killed process logged before the checkpoint but had not uploaded) are sent
      again, and the rows the resumed process logs at steps the server has already (the
      killed process's rows after the checkpoint, the same rows again) are not sent.

    Either way each step is in the W&B run once and none is dropped. A checkpoint whose W&B
    state is the run's id alone (a logger that kept no rows) continues that run as online, in
    offline mode too: the earlier folder keeps the rows before it. Values W&B cannot take
    back from a checkpoint — images, figures and charts (a checkpoint holds numbers and
    tensors only; the run's own metrics are all numbers) — are sent with their step's row but
    not logged again by a resumed run. A logger closed while an exception propagates (a run
    stopped early) does not send the step it was gathering, which may be incomplete: the
    resumed run sends it whole; the W&B run is finished with exit code 1 (failed).

    Args:
        project_name, run_name, dir, config, params: as Avalanche's (``params`` goes to
            ``wandb.init`` last); ``save_code`` is off by default here.
        mode: ``wandb.init``'s ``mode``.
        own_folder: ``<dir>/wandb/`` belongs to this run alone (a run folder's): a run that
            starts from the beginning (no checkpoint) removes the offline-run folders that an
            earlier attempt left there, as the CSV and TensorBoard loggers clear theirs.
        log_file: where a resumed run says what it did with the W&B run (the run's
            ``log.txt``); ``None``: nowhere.

    Raises:
        ImportError: wandb is not installed (names the extra to install).
    """

    def __init__(
        self,
        project_name: str = "avalanche-sets",
        run_name: str | None = None,
        *,
        dir: str | Path | None = None,
        config: dict | None = None,
        mode: str | None = None,
        save_code: bool = False,
        params: dict | None = None,
        log_file=None,
        own_folder: bool = False,
        **kwargs,
    ) -> None:
        self._run_id: str | None = None
        self._clock = None  # the strategy's clock (W&B's step), from the first event
        self._defined: set[str] = set()  # metrics given their own x-axis (define_metric)
        self._history: list[list] = []  # [step, row] of every row handed to W&B
        self._row: dict = {}  # the values of the step being gathered
        self._row_step = 0  # that step: the highest step logged at so far
        self._first = 0  # rows before this step are on W&B already (run.starting_step)
        self._log_file = log_file
        self._own_folder = own_folder
        extra = {"mode": mode} if mode is not None else {}
        super().__init__(
            project_name=project_name,
            run_name=run_name,
            dir=None if dir is None else str(dir),
            config=config,
            save_code=save_code,
            params={**extra, **(params or {})},
            **kwargs,
        )

    def import_wandb(self) -> None:
        try:
            import wandb  # an optional dependency (pip install 'avalanche-sets[wandb]')
            from wandb.sdk.lib.runid import generate_id
        except ImportError as err:
            raise ImportError(
                f"the wandb logger needs wandb ({err}); install it with: {WANDB_INSTALL}"
            ) from None
        self.wandb = wandb
        self._generate_id = generate_id
        plot = getattr(wandb, "plot", None)
        self._chart = getattr(plot, "CustomChart", None) or wandb.viz.CustomChart

    def before_run(self) -> None:
        """Nothing yet: the W&B run starts at the first logged value (:meth:`_begin`), once a
        checkpoint had the chance to say which run it continues."""

    def _offline(self, kwargs: dict) -> bool:
        mode = kwargs.get("mode") or self.wandb.setup().settings.mode
        return mode in ("offline", "dryrun")

    def _begin(self, state: dict | None) -> None:
        kwargs = dict(self.init_kwargs)
        resumed = state is not None and bool(state.get("id"))
        if resumed:
            kwargs["id"] = state["id"]
            # a checkpoint without rows (written by a logger that kept none) cannot log them
            # again: the earlier folder keeps them and the run continues as on a server
            replay = "history" in state
            offline = replay and self._offline(kwargs)
            if not offline:  # the server's run, continued where its history ends
                kwargs["resume"] = "allow"
        else:
            kwargs["id"] = kwargs.get("id") or os.environ.get("WANDB_RUN_ID") or self._generate_id()
        if kwargs.get("dir") is not None:
            Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
        self._run = self.wandb.init(**kwargs)
        self._run_id = self._run.id
        self._first = int(self._run.starting_step or 0)
        if not resumed:
            if self._own_folder and self._run.settings._offline:
                removed = self._remove_earlier_folders("*")
                if removed and self._log_file is not None:
                    print(
                        f"W&B run {self._run_id} (offline) starts from the beginning; "
                        f"removed {', '.join(removed)}",
                        file=self._log_file,
                        flush=True,
                    )
            return
        removed = self._remove_earlier_folders(self._run_id) if offline else []
        self._row_step = int(state.get("step", 0))
        self._row = dict(state.get("row", {}))
        for name in state.get("defined", []):
            self._define(name)
        sent = [(int(step), row) for step, row in state.get("history", [])]
        for step, row in sent:
            self._history.append([step, row])  # the next checkpoint holds them too
            self._send(step, row)
        again = [step for step, _ in sent if step >= self._first]
        if self._log_file is not None:
            print(
                f"W&B run {self._run_id} ({'offline' if offline else 'online'}) continued: "
                f"{len(again)} of the checkpoint's {len(sent)} rows logged again"
                + (f" (steps {again[0]}-{again[-1]})" if again else "")
                + (f", W&B has steps before {self._first}" if self._first else "")
                + (f"; removed {', '.join(removed)}" if removed else ""),
                file=self._log_file,
                flush=True,
            )

    def _remove_earlier_folders(self, run_id: str) -> list[str]:
        """Removes the offline-run folders of ``run_id`` (a pattern) that another process wrote
        (all but this process's own), and returns their names. wandb names a folder
        ``offline-run-<time>-<id>``, with ``-<n>`` added when a process started in the same
        second as another of the same id."""
        own = Path(self._run.settings.sync_dir).resolve()
        removed = []
        parent = own.parent
        names = {*parent.glob(f"offline-run-*-{run_id}"), *parent.glob(f"offline-run-*-{run_id}-*")}
        for folder in sorted(names):
            if folder.is_dir() and folder.resolve() != own:
                shutil.rmtree(folder)
                removed.append(folder.name)
        return removed

    def state_dict(self) -> dict:
        """The W&B run's id (``None`` before the first logged value), every row handed to W&B
        (``[step, {name: value}]``) and the row being gathered, as numbers and tensors."""

        def kept(row: dict) -> dict:
            return {k: v for k, v in row.items() if isinstance(v, (int, float, Tensor))}

        return {
            "id": self._run_id,
            "history": [[step, row] for step, row in self._history],
            "step": self._row_step,
            "row": kept(self._row),
            "defined": sorted(self._defined),
        }

    def before_training(self, strategy, metric_values, **kwargs) -> None:
        self._clock = strategy.clock
        super().before_training(strategy, metric_values, **kwargs)

    def before_eval(self, strategy, metric_values, **kwargs) -> None:
        self._clock = strategy.clock
        super().before_eval(strategy, metric_values, **kwargs)

    def _define(self, name: str) -> None:
        self._run.define_metric(name, step_metric=f"{name.split('/', 1)[0]}_step")
        self._defined.add(name)

    def _put(self, values: dict, step: int) -> None:
        """Adds ``values`` to the row of ``step`` (not below the current row's step); a later
        step first hands the current row to W&B."""
        step = max(int(step), self._row_step)
        if step > self._row_step:
            self._commit()
            self._row_step = step
        self._row.update(values)

    def _commit(self) -> None:
        if self._row:
            step, row = self._row_step, self._row
            self._row = {}
            self._history.append(
                [step, {k: v for k, v in row.items() if isinstance(v, (int, float, Tensor))}]
            )
            self._send(step, row)

    def _send(self, step: int, row: dict) -> None:
        if step < self._first:  # W&B has this step (the killed process sent it)
            return
        row = {
            k: self.wandb.Histogram(np_histogram=np.histogram(v.view(-1).numpy()))
            if isinstance(v, Tensor)
            else v
            for k, v in row.items()
        }
        self._run.log(row, step=step, commit=True)

    def log_single_metric(self, name, value, x_plot) -> None:
        if name.startswith("WeightCheckpoint"):  # a model artifact, as Avalanche's logger
            return super().log_single_metric(name, value, x_plot)
        if isinstance(value, AlternativeValues):
            value = value.best_supported_value(
                PILImage, Tensor, TensorImage, Figure, float, int, self._chart
            )
        if isinstance(value, PILImage):
            value = self.wandb.Image(value)
        elif isinstance(value, TensorImage):
            value = self.wandb.Image(np.array(value))
        elif not isinstance(value, (Tensor, Figure, float, int, self._chart)):
            return  # a type W&B cannot show, skipped as by Avalanche's logger
        # W&B's current step: the clock's, or a step logged ahead of it (the loss terms are
        # logged at the count of iterations done, before the clock counts the last one)
        now = self._row_step
        if self._clock is not None:
            now = max(now, self._clock.train_iterations)
        values = {name: value}
        if x_plot < now:  # W&B would drop it: at the current step, with its own x beside it
            values[f"{name.split('/', 1)[0]}_step"] = x_plot
            if name not in self._defined:
                self._define(name)
        self._put(values, max(x_plot, now))

    def after_training_exp(self, strategy, metric_values, **kwargs) -> None:
        # the evaluator has logged metric_values already (Avalanche's logger logs them twice);
        # the experience counter and its step come from the clock, which a resumed run restores
        self._put(
            {"TrainingExperience": strategy.clock.train_exp_counter},
            strategy.clock.train_iterations,
        )

    def close(self) -> None:
        """Finish the W&B run (writes its summary; an offline run is then complete). While an
        exception propagates (the run stopped early), the row being gathered is not sent and
        the run is finished as failed."""
        run, self._run = getattr(self, "_run", None), None
        if run is None:
            return
        stopped = sys.exc_info()[0] is not None
        if not stopped:
            self._run = run
            self._commit()
            self._run = None
        run.finish(exit_code=1 if stopped else 0)
