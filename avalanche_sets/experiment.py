"""One run = one method on one benchmark with one preset and seed, written to a folder.

A run folder holds ``result.json`` (accuracy matrix, final per-domain accuracy with 95% CIs,
settings: identical for identical seeds), ``run.json`` (timing, machine, command, resumes),
``table.md``, ``accuracy_matrix.png`` and, while it runs, a checkpoint and a lock (see
:mod:`avalanche_sets.run_folder`). A folder with a ``result.json`` is finished and is not run
again; a folder with a checkpoint resumes from it.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

# torch is imported where it is used, so that the command line parses and prints without it.

__all__ = [
    "run_experiment",
    "build_benchmark",
    "run_dir_name",
    "run_identity",
    "record_identity",
    "run_table",
    "run_precision",
    "LOGGERS",
    "LOG_FILE",
    "machine_info",
]

LOGGERS = ("progress", "interactive", "text", "csv", "tensorboard")
"""Loggers a run can add: ``progress`` (one bar per domain on stderr), ``interactive``
(Avalanche's bars and metric values on stdout), ``csv``, ``tensorboard``. ``text`` (the metric
values in the run folder's ``log.txt``) is always on and accepted for compatibility."""

LOG_FILE = "log.txt"
"""The file of a run folder that receives every metric value and message of the run."""


def machine_info() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def build_benchmark(preset: dict, *, seed: int):
    """The SETS benchmark a preset describes (episode streams seeded by ``seed``)."""
    from .data import sets_benchmark
    from .data.packs import NO_PACKS_HINT

    source = preset["source"]
    root = preset.get("root")
    if source == "packs" and root is None:
        root = os.environ.get("AVALANCHE_SETS_PACKS")
        if root is None:
            raise ValueError(
                "the packs source needs a folder of .npz domain packs: pass --root (e.g. "
                "../shared/data/sets-mini) or set AVALANCHE_SETS_PACKS; " + NO_PACKS_HINT
            )
    return sets_benchmark(
        source,
        root=root,
        domains=preset.get("domains"),
        ood=preset.get("ood"),
        order=preset.get("order", 1),
        n_way=preset["n_way"],
        n_shot=preset["n_shot"],
        n_query=preset["n_query"],
        n_unlabeled=preset["n_unlabeled"],
        n_ood=preset["n_ood"],
        tasks_per_domain=preset["tasks_per_domain"],
        n_val_episodes=preset["n_val_episodes"],
        n_test_episodes=preset["n_test_episodes"],
        image_size=preset["image_size"],
        seed=seed,
        small_classes=preset.get("small_classes", "error"),
    )


# Settings spelled out in the base of a run folder's name, and settings that do not change
# what a run computes (where the data lives, how many threads, the preset's seed list).
# ``precision`` is named by its resolved value: "-bf16" when bf16, nothing for fp32 (so the
# folders of runs recorded before the setting existed keep their names).
_IN_BASE_NAME = ("source", "order", "n_way", "n_shot", "n_ood", "precision")
_NOT_IDENTITY = ("seeds", "threads", "root")
_MISSING = object()


def run_precision(preset: dict) -> str:
    """The precision a run of ``preset`` computes in: ``"fp32"`` or ``"bf16"``.

    The preset's ``precision`` resolved on its device (``"auto"`` means bf16 only where the
    device runs it natively); a preset without the setting — every run recorded before it
    existed — means fp32, the only precision there was.
    """
    from .models.backbone import resolve_precision

    device_type = str(preset.get("device", "cpu")).split(":")[0]
    return resolve_precision(preset.get("precision", "fp32"), device_type)


def _identity_preset(preset: dict) -> dict:
    """The preset as far as it decides what a run computes (precision resolved)."""
    out = {k: v for k, v in preset.items() if k not in _NOT_IDENTITY}
    out["precision"] = run_precision(preset)
    return out


def run_identity(
    method: str,
    preset: dict,
    *,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
) -> dict:
    """Everything that decides what a run computes, except its seed (JSON-normalised).

    The precision enters resolved (``"fp32"`` or ``"bf16"``, :func:`run_precision`): bf16
    changes the numbers, and ``"auto"`` means different things on different machines.
    """
    import json

    ident = {
        "method": method,
        "preset": _identity_preset(preset),
        "eval_stream": eval_stream,
        "strategy_overrides": dict(strategy_overrides or {}),
    }
    return json.loads(json.dumps(ident, sort_keys=True, default=str))


def record_identity(record: dict) -> dict:
    """:func:`run_identity` of a finished run's record (``result.json``, any readable format)."""
    return run_identity(
        record["method"], record["preset"], eval_stream=record.get("eval_stream", "test"),
        strategy_overrides=record.get("strategy_overrides"),
    )  # fmt: skip


def run_table(record: dict) -> str:
    """The ``table.md`` of a finished run, recomputed from its record's accuracy matrix.

    Per-domain accuracy ± 95% CI, forgetting and BWT as :class:`~.training.RunResult.table`
    writes them (one definition, :mod:`avalanche_sets.metrics.stats`), whatever the format of
    the ``result.json`` the record was read from.
    """
    from .training.runner import RunResult  # imports torch; the CLI loads this module without it

    res = record["result"]
    return (
        RunResult(
            domains=res["domains"],
            matrix=res["matrix"],
            ci95=res["ci95"],
            episode_acc=res["episode_acc"],
        ).table()  # fmt: skip
        + "\n"
    )


def _name_part(value) -> str:
    text = "+".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return "".join(c if c.isalnum() or c in "._+" else "_" for c in text)


def run_dir_name(
    method: str,
    preset: dict,
    seed: int,
    *,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
) -> str:
    """``<method>/<source>-o<order>-<N>w<K>s-R<R>-seed<s>`` plus what else sets the run apart.

    Appended, in this order: every preset setting that differs from the closest named preset
    (``-mem_size50``), every strategy override (``-beta0.003-lam1e_05``), ``-bf16`` when the
    backbone computes in bf16 (:func:`run_precision`; fp32 adds nothing) and the evaluation
    stream when it is not ``test`` (``-valid``). Runs that compute different things therefore
    never share a folder, and a plain named-preset run keeps the short name.
    """
    from .presets import PRESETS

    src = preset["source"]
    order = preset.get("order", 1)
    name = (
        f"{method}/{src}-o{order}-{preset['n_way']}w{preset['n_shot']}s-R{preset['n_ood']}"
        f"-seed{seed}"
    )
    rest = {k: v for k, v in preset.items() if k not in _IN_BASE_NAME + _NOT_IDENTITY}
    diffs = [
        {k: v for k, v in rest.items() if named.get(k, _MISSING) != v} for named in PRESETS.values()
    ]
    diff = min(diffs, key=len)  # ties: the first preset (PRESETS order), so the name is stable
    for key, value in [*sorted(diff.items()), *sorted((strategy_overrides or {}).items())]:
        name += f"-{key}{_name_part(value)}"
    if run_precision(preset) == "bf16":
        name += "-bf16"
    if eval_stream != "test":
        name += f"-{eval_stream}"
    return name


def _evaluator(loggers, out: Path, *, verbose: bool = False, log_file=None):
    """The run's ``EvaluationPlugin``: Avalanche's metrics and the SETS episode metrics.

    Every metric value goes to ``log_file`` (default: ``out/log.txt``, appended to) whatever
    ``loggers`` says, so the evaluator always has a logger and nothing is lost; ``loggers``
    adds terminal and file loggers (:data:`LOGGERS`), ``verbose`` also prints the metric
    values on the terminal.
    """
    from avalanche.evaluation.metrics import (
        accuracy_metrics,
        bwt_metrics,
        forgetting_metrics,
        loss_metrics,
        timing_metrics,
    )
    from avalanche.logging import CSVLogger, InteractiveLogger, TensorboardLogger, TextLogger
    from avalanche.training.plugins import EvaluationPlugin

    from .metrics import episode_metrics
    from .training.progress import DomainProgressLogger

    unknown = set(loggers) - set(LOGGERS)
    if unknown:
        raise ValueError(f"unknown logger(s) {sorted(unknown)}; choose from {LOGGERS}")
    if log_file is None:  # the run folder's log, owned by the logger from here on
        log_file = open(out / LOG_FILE, "a", buffering=1)  # noqa: SIM115
    made = [TextLogger(log_file)]
    if "progress" in loggers:
        made.append(DomainProgressLogger())
    if "interactive" in loggers:
        made.append(InteractiveLogger())
    elif verbose:  # the interactive logger prints the metric values already
        made.append(TextLogger(sys.stdout))
    if "csv" in loggers:
        made.append(CSVLogger(log_folder=str(out / "csv")))
    if "tensorboard" in loggers:
        made.append(TensorboardLogger(tb_log_dir=str(out / "tb")))
    return EvaluationPlugin(
        accuracy_metrics(epoch=True, experience=True, stream=True),
        loss_metrics(epoch=True, experience=True, stream=True),
        forgetting_metrics(experience=True, stream=True),
        bwt_metrics(experience=True, stream=True),
        timing_metrics(epoch=True),
        *episode_metrics(),
        loggers=made,
    )


def _finished(out: Path, asked: dict, seed: int) -> dict:
    """The finished run in ``out``, after checking it is the run that was asked for."""
    from .run_folder import RunConflictError, read_record

    rec = read_record(out)
    have = record_identity(rec)
    if have != asked or rec["seed"] != seed:
        diff = [f"seed: {rec['seed']} there, {seed} asked"] if rec["seed"] != seed else []
        for part in ("method", "eval_stream", "strategy_overrides"):
            if have[part] != asked[part]:
                diff.append(f"{part}: {have[part]!r} there, {asked[part]!r} asked")
        for k in sorted(set(have["preset"]) | set(asked["preset"])):
            a, b = have["preset"].get(k, "(absent)"), asked["preset"].get(k, "(absent)")
            if a != b:
                diff.append(f"{k}: {a!r} there, {b!r} asked")
        raise RunConflictError(
            f"run folder {out} already holds a finished run with other settings "
            f"({'; '.join(diff)}); it is not reused for this run. Fix: write to another "
            "--out folder (or pass a distinguishing tag), or delete that folder to redo it"
        )
    return rec


def _portable(preset: dict) -> dict:
    """``preset`` with its data folder as the user gave it, never as this machine's absolute
    path: an absolute ``root`` is stored relative to the working directory, so a result file
    says the same on every machine that runs the same command from the same place."""
    root = preset.get("root")
    if root is None or not Path(root).is_absolute():
        return preset
    return {**preset, "root": os.path.relpath(root, Path.cwd())}


def _command() -> str:
    """The command line of this process, with the program's name instead of its path."""
    if not sys.argv:
        return ""
    prog = Path(sys.argv[0]).name
    if prog == "__main__.py":  # python -m avalanche_sets
        prog = f"python -m {Path(sys.argv[0]).parent.name}"
    return " ".join([prog, *sys.argv[1:]])


def run_experiment(
    method: str,
    preset: dict,
    *,
    seed: int,
    out_root: str | Path,
    loggers: tuple[str, ...] = ("progress",),
    verbose: bool = False,
    checkpoint_every: int | None = 50,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
    tag: str = "",
    wait: bool = False,
) -> dict:
    """Run (or resume, or skip if finished) one method/preset/seed; returns its record.

    The run folder (see :mod:`avalanche_sets.run_folder`) is locked while the run is in
    progress: when another process holds it, this raises
    :class:`~avalanche_sets.run_folder.RunLockedError` (``wait=False``) or waits for that
    process and returns its result (``wait=True``); a finished run is never run again.
    Checkpoints are written every ``checkpoint_every`` iterations and at every domain end;
    a killed run resumes from the newest good one and ends with the same ``result.json``.

    Every metric value goes to the run folder's ``log.txt`` (appended to on resume);
    ``loggers`` adds terminal or file loggers (:data:`LOGGERS`; ``progress`` draws one bar per
    domain), and ``verbose=True`` prints the metric values on the terminal too.

    Returns:
        ``result.json`` merged with ``run.json`` (``seconds``, ``date``, ``machine``, ...),
        plus ``"status"`` (not stored): ``"ran"`` when this call computed the run (from the
        start or from a checkpoint), ``"finished before"`` when it found the run finished —
        before taking the lock, or after waiting for the process that held it. Decided under
        the lock, so two sweeps on one folder never both report a run as theirs.
    """
    from . import __version__
    from .methods import build_strategy, check_method
    from .metrics import plot_accuracy_matrix
    from .run_folder import RunLock, read_record, write_record
    from .training import run_sets
    from .training.progress import DomainProgressLogger

    check_method(method, preset, strategy_overrides)  # before any data is loaded
    where = {"eval_stream": eval_stream, "strategy_overrides": strategy_overrides}
    out = Path(out_root) / (run_dir_name(method, preset, seed, **where) + tag)
    asked = run_identity(method, preset, **where)
    if (out / "result.json").is_file():
        return {**_finished(out, asked, seed), "status": "finished before"}
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, wait=wait):
        if (out / "result.json").is_file():  # finished by the process that held the lock
            (out / ".lock").unlink(missing_ok=True)
            return {**_finished(out, asked, seed), "status": "finished before"}
        import torch

        torch.set_num_threads(int(preset.get("threads", 1)))
        # The run log: every metric value (and resumes); an exception leaves it to the
        # garbage collector, which closes it.
        log = open(out / LOG_FILE, "a", buffering=1)  # noqa: SIM115
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        print(f"# {stamp}: {_command()}", file=log)
        bench = build_benchmark(preset, seed=seed)
        if method == "joint":
            from .baselines.joint import joint_benchmark

            bench = joint_benchmark(bench, seed=seed)
        strategy = build_strategy(
            method,
            preset,
            seed=seed,
            evaluator=_evaluator(loggers, out, verbose=verbose, log_file=log),
            **(strategy_overrides or {}),
        )
        clock = {"before": 0.0, "start": time.perf_counter()}
        resumes: list[dict] = []

        def elapsed() -> float:
            return clock["before"] + time.perf_counter() - clock["start"]

        def on_resume(restored: dict) -> None:
            clock["before"] = float(restored["extra"].get("seconds", 0.0))
            pos = restored["position"]
            resumes.append(
                {
                    "from": restored["path"],
                    "position": pos,
                    "skipped_damaged": restored["skipped"],
                    "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                }
            )
            message = (
                f"resuming {out} from {restored['path']} at domain {pos['experience']}, "
                f"iteration {pos['iteration']}"
            )
            print(message, file=sys.stderr, flush=True)
            print(message, file=log, flush=True)

        result = run_sets(
            strategy,
            bench,
            checkpoint_path=out / "checkpoint.pt",
            checkpoint_every=checkpoint_every,
            eval_stream=eval_stream,
            interim_episodes=preset.get("interim_test_episodes"),
            checkpoint_extra=lambda: {"seconds": elapsed()},
            on_resume=on_resume,
        )
        for logger in strategy.evaluator.loggers:  # a run stopped early leaves one open
            if isinstance(logger, DomainProgressLogger):
                logger.close()
        log.close()
        computed = {
            "avalanche_sets": __version__,
            "method": method,
            "seed": seed,
            # the precision as resolved here: what "auto" meant on this machine
            "preset": _portable(
                {
                    **{k: v for k, v in preset.items() if k != "seeds"},
                    "precision": run_precision(preset),
                }
            ),
            "eval_stream": eval_stream,
            "strategy_overrides": strategy_overrides or {},
            "result": result.to_dict(),
        }
        provenance = {
            "seconds": elapsed(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "command": _command(),
            "host": platform.node(),  # which node of a cluster ran it (sweep --ray-address)
            "pid": os.getpid(),
            "resumes": resumes,
        }
        (out / "table.md").write_text(run_table(computed))
        plot_accuracy_matrix(
            [[100 * v for v in row] for row in result.matrix],
            result.domains,
            out / "accuracy_matrix.png",
            title=f"{method}, seed {seed}: test accuracy (%) after each training domain",
        )
        write_record(out, computed, provenance)
        from .training.checkpoint import previous_checkpoint_path

        for ckpt in (out / "checkpoint.pt", previous_checkpoint_path(out / "checkpoint.pt")):
            ckpt.unlink(missing_ok=True)
        # Safe to remove while held: a process waiting on it re-checks result.json first.
        (out / ".lock").unlink(missing_ok=True)
        return {**read_record(out), "status": "ran"}
