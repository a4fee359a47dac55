"""Checkpoint and resume of a whole SETS run: atomic, checksummed, with a previous good copy.

Avalanche 0.6's ``save_checkpoint`` pickles the whole strategy with ``dill``, which fails on
torch optimisers here (design §7), and it cannot resume in the middle of an experience. This
module saves what a run needs to continue bit-for-bit instead: the model, the optimiser, every
plugin and metric that exposes ``state_dict()``/``load_state_dict()`` (ORDER's memory,
variational networks and generators; episode metrics) and the first accuracy of every
experience that Avalanche's forgetting and BWT metrics hold, the global RNG states, and the stream
position (experience, iteration) plus any results so far. It also saves Avalanche's
``strategy.clock`` (the steps every logged value is plotted at) and the state of every evaluator
logger that has a ``state_dict()`` (:mod:`avalanche_sets.training.run_loggers`: how far their files
are written), so that a resumed run's TensorBoard, CSV and W&B logs continue at the steps where
the checkpoint left them, as an uninterrupted run's. And it saves the running state of every
evaluator metric that accumulates over the training iterations (Avalanche's epoch accuracy and
loss, ``Top1_Acc_Epoch`` and ``Loss_Epoch``: :func:`running_metric_state`), which a run resumed in
the middle of a domain puts back after Avalanche resets it at the epoch's start
(:func:`restore_running_metrics`), so that the epoch's values cover every iteration of the
domain, as an uninterrupted run's. Wall time (``timing_metrics``) is not state: a resumed run
measures the time after the resume.

Loading a checkpoint runs no code: its payload holds only tensors, numbers, strings and plain
containers (a NumPy array, such as the legacy RNG's state, is stored as its bytes, dtype and
shape), and it is read with ``torch.load(..., weights_only=True)``, whose unpickler builds
nothing else. The checksum proves that a file is whole, not where it came from; a checkpoint from
a collaborator or a paper's artefacts is therefore as safe to resume as one's own. A plugin
whose ``state_dict()`` holds another type is refused when the checkpoint is written, naming
where.

A run that is killed at any instant (SIGKILL, power loss) must find a usable checkpoint, so a
checkpoint file is never written in place:

1. the state is serialised in memory and prefixed with a header holding the format version and
   the SHA-256 of the payload;
2. it is written to ``<name>.tmp`` and flushed to disk (``fsync``);
3. the current checkpoint, if any, is renamed to ``<name>.prev`` (the last good one), then the
   new file is renamed into place (:func:`avalanche_sets.files.atomic_write`). Renames are
   atomic on POSIX file systems, so at every instant ``<name>`` or ``<name>.prev`` is a
   complete checkpoint.

:func:`load_latest_checkpoint` verifies the checksum and falls back from ``<name>`` to
``<name>.prev`` when the newest file is truncated or corrupt, saying so with a
:class:`CheckpointWarning` that names the file; when neither is usable it says that the run
starts over. It never falls back silently.
"""

from __future__ import annotations

import hashlib
import io
import math
import pickle
import random
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation.metric_definitions import GenericPluginMetric, PluginMetric
from avalanche.evaluation.metrics.forgetting_bwt import GenericExperienceForgetting
from avalanche.evaluation.metrics.mean import Mean
from avalanche.evaluation.metrics.timing import TimePluginMetric

from ..files import atomic_write

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "read_checkpoint",
    "previous_checkpoint_path",
    "running_metric_state",
    "restore_running_metrics",
    "resume_note",
    "CheckpointPlugin",
    "CheckpointError",
    "CorruptCheckpointError",
    "CheckpointWarning",
    "FORMAT_VERSION",
]

FORMAT_VERSION = 4
"""Version of the checkpoint file layout (4: as 3, with Avalanche's clock and the loggers'
state, so that a resumed run logs at the steps an uninterrupted one does, and, optionally, the
running state of the training metrics (``"running_metrics"``; a checkpoint without it resumes
with the epoch metrics of its domain over the iterations after the resume); 3: a payload of
tensors and plain values, read with ``weights_only=True``; 2: checksummed header, any pickle;
1: a bare ``torch.save``)."""

#: Avalanche's ``strategy.clock`` counters: the x values (steps) of every logged metric.
CLOCK_FIELDS = (
    "train_iterations",
    "train_exp_counter",
    "train_exp_epochs",
    "train_exp_iterations",
    "train_epoch_iterations",
    "total_iterations",
)

_MAGIC = b"AVALANCHE-SETS-CHECKPOINT"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used by this strategy or this version of the package."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file that is truncated or damaged (its checksum or header does not match)."""


class CheckpointWarning(UserWarning):
    """A checkpoint was skipped (corrupt) and the run fell back to an older one or started over."""


def previous_checkpoint_path(path: str | Path) -> Path:
    """Where the last good checkpoint before ``path`` is kept (``<name>.prev``)."""
    path = Path(path)
    return path.with_name(path.name + ".prev")


#: Plain types a checkpoint's payload may hold besides tensors and containers.
_PLAIN = (str, bytes, int, float, complex, bool, type(None), torch.Size, torch.dtype)
#: Key of the dict a NumPy array is stored as.
_NDARRAY = "__numpy_ndarray__"
#: Key of the dict a NumPy scalar is stored as.
_NPSCALAR = "__numpy_scalar__"


def _rebuilt(obj: Any, items: Any) -> Any:
    """``obj`` when ``items`` (its converted elements: a dict or a list) are its own, else a
    container of ``obj``'s type holding them (a state dict keeps its ``_metadata``)."""
    if isinstance(obj, dict):
        if all(items[k] is v for k, v in obj.items()):
            return obj
        out = type(obj)(items)
        if hasattr(obj, "_metadata"):
            out._metadata = obj._metadata
        return out
    if all(a is b for a, b in zip(items, obj)):
        return obj
    return type(obj)(items)


def _to_plain(obj: Any, where: str) -> Any:
    """``obj`` with NumPy arrays and scalars replaced by plain tagged dicts; ``obj`` itself
    where nothing changes (:func:`_rebuilt`).

    Raises:
        CheckpointError: ``obj`` holds a type that ``torch.load(weights_only=True)`` would
            refuse, named with its place ``where``.
    """
    if isinstance(obj, torch.Tensor) or type(obj) in _PLAIN:
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise CheckpointError(
                f"cannot checkpoint {where}: a NumPy array of Python objects; store numbers"
            )
        arr = np.ascontiguousarray(obj)
        return {_NDARRAY: arr.tobytes(), "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(obj, np.generic):
        return {_NPSCALAR: obj.item(), "dtype": obj.dtype.str}
    if type(obj) in (dict, OrderedDict):
        return _rebuilt(obj, {k: _to_plain(v, f"{where}[{k!r}]") for k, v in obj.items()})
    if type(obj) in (list, tuple, set):
        return _rebuilt(obj, [_to_plain(v, f"{where}[{i}]") for i, v in enumerate(obj)])
    raise CheckpointError(
        f"cannot checkpoint {where}: a {type(obj).__module__}.{type(obj).__qualname__}. A "
        "checkpoint holds tensors, numbers, strings, NumPy arrays and lists, tuples, sets and "
        "dicts of them, so that loading it runs no code; fix: return such values from the "
        "plugin's state_dict() (e.g. a dataclass as a dict of its fields)"
    )


def _from_plain(obj: Any) -> Any:
    """The inverse of :func:`_to_plain`."""
    if isinstance(obj, dict):
        if _NDARRAY in obj:
            arr = np.frombuffer(obj[_NDARRAY], dtype=np.dtype(obj["dtype"]))
            return arr.reshape(obj["shape"]).copy()
        if _NPSCALAR in obj:
            return np.dtype(obj["dtype"]).type(obj[_NPSCALAR])
        return _rebuilt(obj, {k: _from_plain(v) for k, v in obj.items()})
    if isinstance(obj, (list, tuple, set)):
        return _rebuilt(obj, [_from_plain(v) for v in obj])
    return obj


class _ForgettingState:
    """The state of Avalanche's forgetting and BWT metrics that outlives an evaluation: the
    accuracy of every experience right after its training (``forgetting.initial``). Without
    it a resumed run would log no forgetting for the experiences trained before the resume
    (and a stream forgetting of 0)."""

    def __init__(self, metric: GenericExperienceForgetting) -> None:
        self.metric = metric

    def state_dict(self) -> dict:
        return {"initial": dict(self.metric.forgetting.initial)}

    def load_state_dict(self, state: dict) -> None:
        self.metric.forgetting.initial = dict(state["initial"])


def _stateful(strategy) -> dict[str, Any]:
    """Plugins and metrics with a state_dict, keyed by position and class name (stable)."""
    out = {}
    for i, p in enumerate(strategy.plugins):
        if hasattr(p, "state_dict") and hasattr(p, "load_state_dict"):
            out[f"plugin{i}:{type(p).__name__}"] = p
    evaluator = getattr(strategy, "evaluator", None)
    for i, m in enumerate(getattr(evaluator, "metrics", []) or []):
        if hasattr(m, "state_dict") and hasattr(m, "load_state_dict"):
            out[f"metric{i}:{type(m).__name__}"] = m
        elif isinstance(m, GenericExperienceForgetting):  # stream forgetting and BWT too
            out[f"metric{i}:{type(m).__name__}"] = _ForgettingState(m)
    return out


def _loggers(strategy) -> dict[str, Any]:
    """The evaluator's loggers with a state_dict, keyed by class name and rank among loggers of
    that class (``ResumableCSVLogger#0``), so that adding or dropping another logger on resume
    does not change their keys."""
    out: dict[str, Any] = {}
    evaluator = getattr(strategy, "evaluator", None)
    for logger in getattr(evaluator, "loggers", []) or []:
        if hasattr(logger, "state_dict") and hasattr(logger, "load_state_dict"):
            name = type(logger).__name__
            rank = sum(k.rsplit("#", 1)[0] == name for k in out)
            out[f"{name}#{rank}"] = logger
    return out


#: Metrics whose running state is wall time, which a resumed process cannot continue: a domain
#: resumed in its middle logs the time after the resume (``Time_Epoch``). Not saved, by design.
WALL_TIME_METRICS = (TimePluginMetric,)


def _running_metrics(strategy) -> tuple[dict[str, Any], list[str]]:
    """The evaluator's metrics that accumulate over training iterations and have no
    ``state_dict`` of their own (those are saved with the components), keyed as the components
    are (``metric3:EpochLoss``); and the names of the others that accumulate over training
    iterations in a way this module cannot read (a metric of one's own that overrides
    ``after_training_iteration``), which a resumed run names rather than skips.

    Accumulating: Avalanche's train-mode ``GenericPluginMetric`` not reset every iteration
    (``EpochAccuracy``, ``EpochLoss``, ``RunningEpochAccuracy``, ...), but for
    :data:`WALL_TIME_METRICS`."""
    saved: dict[str, Any] = {}
    unsaved: list[str] = []
    evaluator = getattr(strategy, "evaluator", None)
    for i, m in enumerate(getattr(evaluator, "metrics", []) or []):
        key = f"metric{i}:{type(m).__name__}"
        if hasattr(m, "state_dict") and hasattr(m, "load_state_dict"):
            continue  # a component
        if isinstance(m, GenericPluginMetric):
            if m._mode == "train" and m._reset_at != "iteration":
                if not isinstance(m, WALL_TIME_METRICS):
                    saved[key] = m
        elif isinstance(m, PluginMetric) and (
            type(m).after_training_iteration is not PluginMetric.after_training_iteration
        ):
            unsaved.append(f"{key} (no state_dict())")
    return saved, unsaved


def _mean_state(mean: Mean) -> dict[str, float]:
    return {"summed": float(mean.summed), "weight": float(mean.weight)}


def _metric_state(metric: Any, where: str) -> dict[str, Any]:
    """The running state of an Avalanche metric object (a plugin metric's ``_metric``): its
    ``state_dict()``, or each attribute that is a ``Mean`` or a dict of ``Mean``s (Avalanche's
    accuracy and loss; a task-aware one's per-task means). Anything else raises a
    :class:`CheckpointError` naming the attribute: a state saved in part would resume wrong."""
    if hasattr(metric, "state_dict") and hasattr(metric, "load_state_dict"):
        return {"state_dict": metric.state_dict()}
    out: dict[str, Any] = {}
    for name, value in vars(metric).items():
        if isinstance(value, Mean):
            out[name] = _mean_state(value)
        elif isinstance(value, dict) and all(isinstance(v, Mean) for v in value.values()):
            out[name] = {"means": {k: _mean_state(v) for k, v in value.items()}}
        else:
            raise CheckpointError(
                f"{where}: the running state of {type(metric).__name__}.{name} "
                f"({type(value).__name__}) cannot be saved; give the metric a state_dict()/"
                "load_state_dict() holding tensors and plain values"
            )
    return out


def running_metric_state(strategy) -> dict[str, Any]:
    """The running state of the evaluator's metrics that accumulate over the training
    iterations of an epoch (``{"state": {key: ...}, "unsaved": [names]}``; see
    :func:`restore_running_metrics`). ``unsaved`` names the metrics that accumulate in a way
    that cannot be read (a resumed run says so in its log: :func:`resume_note`).

    Raises:
        CheckpointError: an accumulating Avalanche metric holds a state this cannot read,
            naming it.
    """
    metrics, unsaved = _running_metrics(strategy)
    state = {key: _metric_state(m._metric, key) for key, m in metrics.items()}
    return {"state": state, "unsaved": unsaved}


def _load_means(metric: Any, state: dict[str, Any]) -> None:
    if "state_dict" in state:
        metric.load_state_dict(state["state_dict"])
        return
    for name, value in state.items():
        if "means" in value:
            means = getattr(metric, name)
            means.clear()  # a defaultdict keeps its factory
            for k, v in value["means"].items():
                means[k] = Mean()
                means[k].summed, means[k].weight = v["summed"], v["weight"]
        else:
            mean = getattr(metric, name)
            mean.summed, mean.weight = value["summed"], value["weight"]


def restore_running_metrics(strategy, saved: dict[str, Any], *, domain_start: bool = False) -> None:
    """Put the running state :func:`running_metric_state` saved back into ``strategy``'s
    evaluator metrics. Call it where the resumed epoch has begun (after Avalanche's
    ``before_training_epoch`` has reset them): :func:`~avalanche_sets.training.run_sets` does.
    ``domain_start``: the run resumes at a domain's first iteration, where an uninterrupted
    run has reset every metric but those never reset, so only those get their state back.

    Raises:
        CheckpointError: the evaluator's accumulating metrics differ from the saved ones.
    """
    metrics, _ = _running_metrics(strategy)
    if sorted(metrics) != sorted(saved["state"]):
        raise CheckpointError(
            f"the evaluator's training metrics {sorted(metrics)} differ from the checkpoint's "
            f"{sorted(saved['state'])}; resume with the evaluator that started the run"
        )
    for key, metric in metrics.items():
        if not domain_start or metric._reset_at == "never":
            _load_means(metric._metric, saved["state"][key])


def resume_note(restored: dict) -> str | None:
    """A line for the run's log when a run resumed in the middle of a domain logs epoch metrics
    that cover only the iterations after the resume (a checkpoint written without their state,
    or metrics whose state cannot be saved); ``None`` when they cover the whole domain."""
    if not restored["position"].get("iteration"):
        return None  # resumed at a domain's start: nothing of its epoch was lost
    running = restored.get("running_metrics")
    if running is None:
        return (
            "note: this checkpoint holds no running state of the training metrics (written by "
            "an earlier avalanche-sets), so the epoch metrics of the resumed domain "
            "(Top1_Acc_Epoch, Loss_Epoch) cover only the iterations after the resume"
        )
    if running["unsaved"]:
        return (
            f"note: the state of {', '.join(running['unsaved'])} is not in the checkpoint: "
            "where it accumulates over training iterations, its values for the resumed domain "
            "cover only the iterations after the resume"
        )
    return None


def save_checkpoint(
    path: str | Path,
    strategy,
    *,
    position: dict,
    extra: dict | None = None,
    keep_previous: bool = True,
) -> Path:
    """Atomically write a checkpoint of ``strategy`` at stream ``position``.

    Args:
        path: destination file (its folder is created).
        strategy: an :class:`~avalanche_sets.training.EpisodicTemplate` (or subclass).
        position: where the run stands, e.g. ``{"experience": 2, "iteration": 150}``.
        extra: anything else to restore (results so far, elapsed time).
        keep_previous: move the checkpoint being replaced to ``<name>.prev`` (the fallback
            :func:`load_latest_checkpoint` uses when the newest file is damaged).

    Returns:
        ``path``.
    """
    check = getattr(strategy, "check_deferred", None)
    if check is not None:  # a step skipped on the device for NaN/inf: no checkpoint of it
        check()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT_VERSION,
        "model": strategy.model.state_dict(),
        "optimizer": strategy.optimizer.state_dict(),
        "components": {k: v.state_dict() for k, v in _stateful(strategy).items()},
        "clock": {k: int(getattr(strategy.clock, k)) for k in CLOCK_FIELDS},
        "loggers": {k: v.state_dict() for k, v in _loggers(strategy).items()},
        "running_metrics": running_metric_state(strategy),
        "rng": {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        },
        "position": dict(position),
        "extra": extra or {},
    }
    buffer = io.BytesIO()
    torch.save(_to_plain(state, "the checkpoint"), buffer)
    payload = buffer.getvalue()
    header = b"%s %d %s\n" % (_MAGIC, FORMAT_VERSION, hashlib.sha256(payload).hexdigest().encode())
    previous = previous_checkpoint_path(path) if keep_previous else None
    return atomic_write(path, header + payload, previous=previous, single_writer=True)


def read_checkpoint(path: str | Path) -> dict:
    """Read and verify a checkpoint file; returns its state dict.

    Raises:
        FileNotFoundError: no file at ``path``.
        CorruptCheckpointError: the file is truncated or damaged (names the file and why).
        CheckpointError: the file was written by another version of the package, or its
            payload holds anything but tensors and plain values (loading it would run code).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    data = path.read_bytes()
    newline = data.find(b"\n", 0, 256)
    first = data[:newline].split(b" ") if newline > 0 else []
    if len(first) != 3 or first[0] != _MAGIC:
        if data[:2] == b"PK":  # a bare torch.save zip: format 1, before checksums
            raise CheckpointError(
                f"checkpoint {path} was written by an older avalanche-sets (format 1, without a "
                f"checksum); this version reads format {FORMAT_VERSION}. Finish the run with the "
                "version that started it, or delete the file to start the run over"
            )
        raise CorruptCheckpointError(
            f"checkpoint {path} is corrupt: it does not start with the avalanche-sets checkpoint "
            f"header ({len(data)} bytes)"
        )
    try:
        version = int(first[1])
    except ValueError:
        raise CorruptCheckpointError(f"checkpoint {path} is corrupt: unreadable header") from None
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format {version}, this version of avalanche-sets reads "
            f"format {FORMAT_VERSION}; finish the run with the version that started it, or "
            "delete the file to start the run over"
        )
    payload = data[newline + 1 :]
    digest = hashlib.sha256(payload).hexdigest().encode()
    if digest != first[2]:
        raise CorruptCheckpointError(
            f"checkpoint {path} is corrupt: its checksum does not match ({len(payload)} payload "
            "bytes; the file was truncated or damaged)"
        )
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"checkpoint {path} holds more than tensors and plain values, so loading it could "
            f"run code; it was refused ({reason}). avalanche-sets never writes such a file: do "
            "not resume from it unless you know where it came from"
        ) from None
    return _from_plain(state)


def load_checkpoint(path: str | Path, strategy) -> dict:
    """Restore ``strategy`` from one checkpoint; returns ``{"position", "extra",
    "running_metrics"}``.

    The strategy must be built the same way as the one that was saved (same model, optimiser,
    plugins and metrics, in the same order); mismatches raise a :class:`CheckpointError`
    naming them. A damaged file raises :class:`CorruptCheckpointError`. Avalanche's clock is
    restored, and every evaluator logger with a ``load_state_dict`` gets its saved state
    (``None`` for a logger the checkpoint did not have, which then starts fresh).
    ``running_metrics`` is the running state of the training metrics
    (:func:`running_metric_state`; ``None`` in a checkpoint written without it), which is
    restored only where the resumed epoch begins (:func:`restore_running_metrics`), since
    Avalanche resets it there.

    Where it loads to: the file is read onto the CPU (``map_location="cpu"`` in
    :func:`read_checkpoint`, whatever device wrote it — RNG states must be CPU tensors); the
    model is moved to ``strategy.device`` (where training will run it), then the model's and
    the optimiser's tensors are copied onto the device of the model's parameters by their
    ``load_state_dict``, and plugins put their device state next to the
    model (ORDER's MI networks are rebuilt at their first use, on the device of the embeddings;
    its replay memory moves to the model's device at its first replay). So a run resumes on the device the strategy's model is on.
    """
    path = Path(path)
    state = read_checkpoint(path)
    components = _stateful(strategy)
    missing = sorted(set(state["components"]) ^ set(components))
    if missing:
        raise CheckpointError(
            f"{path}: the strategy's plugins/metrics differ from the checkpoint's: {missing}; "
            "build the strategy with the same plugins and metrics to resume"
        )
    running = state.get("running_metrics")
    if running is not None:
        names = sorted(_running_metrics(strategy)[0])
        if names != sorted(running["state"]):
            raise CheckpointError(
                f"{path}: the evaluator's training metrics {names} differ from the "
                f"checkpoint's {sorted(running['state'])}; build the strategy with the same "
                "metrics to resume"
            )
    try:
        strategy.model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise CheckpointError(
            f"{path}: the model does not match the checkpoint's ({err}); resume with the same "
            "method and settings that started the run"
        ) from None
    # The optimiser's state (Adam's moments) is cast onto the device of the parameters it
    # belongs to as it loads; Avalanche moves the model to ``strategy.device`` only inside
    # train(), so the model goes there first, or a GPU run would resume with its moments on
    # the CPU and fail at its first step with tensors on two devices.
    strategy.model.to(strategy.device)
    strategy.optimizer.load_state_dict(state["optimizer"])
    for key, comp in components.items():
        comp.load_state_dict(state["components"][key])
    for key, value in state["clock"].items():
        setattr(strategy.clock, key, value)
    # a logger the checkpoint has no state for (added on resume) starts fresh; the state of a
    # logger that is gone is not needed
    for key, logger in _loggers(strategy).items():
        logger.load_state_dict(state["loggers"].get(key))
    torch.set_rng_state(state["rng"]["torch"])
    np.random.set_state(state["rng"]["numpy"])
    random.setstate(state["rng"]["python"])
    return {"position": state["position"], "extra": state["extra"], "running_metrics": running}


def load_latest_checkpoint(path: str | Path, strategy) -> dict | None:
    """Restore ``strategy`` from ``path``, or from ``<name>.prev`` when ``path`` is damaged.

    Returns ``{"position", "extra", "path", "skipped"}`` — ``path`` is the file actually used,
    ``skipped`` the damaged files passed over with why — or ``None`` when there is nothing to
    resume from (no checkpoint, or only damaged ones: then the run starts over). Every skipped
    file is reported with a :class:`CheckpointWarning` naming it; a checkpoint of another
    version or of a differently built strategy raises :class:`CheckpointError` instead, since
    starting over would silently discard it.
    """
    path = Path(path)
    skipped: list[str] = []
    candidates = [path, previous_checkpoint_path(path)]
    for i, candidate in enumerate(candidates):
        if not candidate.is_file():
            continue
        try:
            restored = load_checkpoint(candidate, strategy)
        except CorruptCheckpointError as err:
            skipped.append(str(err))
            then = f"trying {candidates[i + 1]}" if i + 1 < len(candidates) else "not using it"
            warnings.warn(f"{err}; {then}", CheckpointWarning, stacklevel=2)
            continue
        restored.update(path=str(candidate), skipped=skipped)
        if skipped:
            warnings.warn(
                f"resuming from the previous good checkpoint {candidate}", CheckpointWarning,
                stacklevel=2,
            )  # fmt: skip
        return restored
    if skipped:
        warnings.warn(
            f"no usable checkpoint for {path} (all damaged: {'; '.join(skipped)}); the run "
            "starts over from the beginning",
            CheckpointWarning,
            stacklevel=2,
        )
    return None


class CheckpointPlugin(SupervisedPlugin):
    """Save a checkpoint every ``every`` training iterations (put it last in the plugin list).

    Args:
        path: checkpoint file.
        every: iterations between checkpoints.
        extra_fn: returns the ``extra`` dict to store (e.g. the results so far).
        at_experience_end: also checkpoint after the last iteration of an experience when it
            falls on ``every``. :func:`~avalanche_sets.training.run_sets` turns it off: it
            checkpoints after the evaluation that follows, and a checkpoint in between would
            resume past the end of the training epoch, so its end (the epoch's logged metrics,
            a CSV row) would never be logged.
    """

    def __init__(
        self, path: str | Path, *, every: int, extra_fn=None, at_experience_end: bool = True
    ) -> None:
        super().__init__()
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive number of iterations, got {every!r}")
        self.path = Path(path)
        self.every = int(every)
        self.extra_fn = extra_fn or (lambda: {})
        self.at_experience_end = at_experience_end

    def after_training_iteration(self, strategy, **kwargs) -> None:
        done = strategy.exp_iteration + 1  # the template counts this iteration after plugins
        if not self.at_experience_end:
            n_iter = math.ceil(len(strategy.experience.dataset) / strategy.train_mb_size)
            if done >= n_iter:
                return
        if done % self.every == 0:
            position = {
                "experience": strategy.experience.current_experience,
                "iteration": done,
            }
            save_checkpoint(self.path, strategy, position=position, extra=self.extra_fn())
