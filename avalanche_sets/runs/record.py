"""The record of a finished run, typed: :class:`RunRecord` (``result.json``) with its
:class:`Provenance` (``run.json``), read and written by :func:`read_record` / :func:`write_record`.

A finished run folder holds two records (:mod:`avalanche_sets.runs.folder`):

* ``result.json`` (:data:`RESULT_FILE`) — what the run computed, of :data:`RESULT_FORMAT`:
  one :class:`RunRecord` field per top-level key, in the order the file lists them
  (``format``, ``avalanche_sets``, ``method``, ``seed``, ``preset``, ``eval_stream``,
  ``strategy_overrides``, ``unread_settings``, ``plugins``, ``user_code``, ``tag``, ``code``,
  ``numerics``, ``data``, ``memory``, ``result``, ``ood_split``). ``plugins``, ``user_code``,
  ``tag``, ``memory`` and ``ood_split`` are written only when the run has them (a built-in run
  without plugins, tag or memory has no such key, a learner without an OOD split no
  ``ood_split``); ``avalanche_sets``, ``numerics`` and ``data`` only when known;
* ``run.json`` (:data:`RUN_FILE`) — how it was computed: :class:`Provenance` (wall time,
  command, date, machine, code, host, pid, resumes).

Writing is ``json.dumps(indent=2)`` plus a newline, so a record read and written back gives the
same bytes; ``run.json`` keeps the order its keys were read in. Reading refuses, each with the
fix, a file that is no JSON object, a record of another format (:class:`ResultsVersionError`),
a missing key of :data:`RECORD_KEYS`, a key no record of this format holds and a value of the
wrong type.

The two ``code`` blocks: :attr:`RunRecord.code` is ``result.json``'s (what computed it,
deterministic), :attr:`Provenance.code` is ``run.json``'s (the process that wrote the folder);
:attr:`RunRecord.made_by` answers "which code made this run": ``run.json``'s where it names
one, else ``result.json``'s. The ``result`` block stays a mapping
(:meth:`avalanche_sets.training.RunResult.to_dict`): this module loads with the standard library
alone, as the command line reads records before it needs torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..files import atomic_write

__all__ = [
    "RESULT_FILE",
    "RUN_FILE",
    "RESULT_FORMAT",
    "RECORD_KEYS",
    "UNREAD_FIELD",
    "OOD_METRICS",
    "OOD_SPLIT_KEYS",
    "ResultsVersionError",
    "RecordError",
    "Provenance",
    "RunRecord",
    "read_record",
    "write_record",
]

RESULT_FILE = "result.json"
RUN_FILE = "run.json"

RESULT_FORMAT = 3
"""The run record format this version writes and reads: ``result.json`` (what was computed,
deterministic) + ``run.json`` (provenance), with ``result.forgetting`` of
:mod:`avalanche_sets.metrics.stats` (the last domain ``null``), ``result.average_forgetting``,
``result.bwt`` and the ``preset``'s ``precision``. A record of another format is refused
(:class:`ResultsVersionError`)."""

UNREAD_FIELD = "unread_settings"
"""The key of ``result.json`` naming the preset settings the run did not read, each with the
reason (:func:`~avalanche_sets.methods.unread_settings`): its ``preset`` holds every setting,
its identity and its table row leave these out."""

RECORD_KEYS = ("method", "seed", "preset", "result", "code")
"""The keys of ``result.json`` that every record of :data:`RESULT_FORMAT` holds and its readers
read (the identity, the numbers, the code that made them)."""

_RERUN = "fix: re-run it (delete the folder, or write the run to a new --out folder)"


class ResultsVersionError(ValueError):
    """A run folder written by a version of avalanche-sets whose format this one cannot read."""


class RecordError(ValueError):
    """A run record that is not one this version writes (edited or made by hand)."""


OOD_METRICS = ("auroc", "precision", "recall")
"""The measures of an OOD split a record holds (:attr:`RunRecord.ood_split`)."""
OOD_SPLIT_KEYS = ("domains", *OOD_METRICS, "n_unlabeled", "pooled")
"""The keys of a record's ``ood_split``, in the order it writes them."""

# What a value of each kind is in JSON, and how a field's value is written back.
_KINDS: dict[str, tuple[str, Any]] = {
    "str": ("a string", lambda v: isinstance(v, str)),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "number": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "dict": ("an object", lambda v: isinstance(v, dict)),
    "list_str": ("a list of strings",
                 lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "list_dict": ("a list of objects",
                  lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v)),
    "ood_split": ("an object of OOD split lists, one entry per domain, and their pooled values "
                  f"(keys {', '.join(OOD_SPLIT_KEYS)})", lambda v: _is_ood_split(v)),
}  # fmt: skip


def _is_ood_split(v: Any) -> bool:
    """Whether ``v`` is an ``ood_split`` as a run writes it
    (:func:`~avalanche_sets.metrics.ood_split_record`): :data:`OOD_SPLIT_KEYS`, a list per
    measure of one value in [0, 1] or ``null`` per domain, the images judged per domain, and
    ``pooled`` with one of each."""
    if not isinstance(v, dict) or tuple(v) != OOD_SPLIT_KEYS:
        return False
    domains, pooled = v["domains"], v["pooled"]
    if not (isinstance(domains, list) and all(isinstance(d, str) for d in domains)):
        return False
    if not isinstance(pooled, dict) or tuple(pooled) != (*OOD_METRICS, "n_unlabeled"):
        return False
    is_int = _KINDS["int"][1]
    measure = lambda x: x is None or (_KINDS["number"][1](x) and 0 <= x <= 1)  # noqa: E731
    lists = [v[name] for name in (*OOD_METRICS, "n_unlabeled")]
    return (
        all(isinstance(x, list) and len(x) == len(domains) for x in lists)
        and all(measure(x) for name in OOD_METRICS for x in v[name])
        and all(is_int(n) for n in v["n_unlabeled"])
        and all(measure(pooled[name]) for name in OOD_METRICS)
        and is_int(pooled["n_unlabeled"])
    )


def _key(kind: str, *, omit: str = "never", key: str | None = None) -> dict[str, Any]:
    """A stored field's metadata: its JSON ``kind`` (:data:`_KINDS`), when writing omits it
    (``"never"``, ``"none"``: when ``None``, ``"empty"``: when empty) and its JSON key where it
    is not the field's name."""
    return {"kind": kind, "omit": omit, "key": key}


def _stored(cls) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "kind" in f.metadata]


def _json_key(f: dataclasses.Field) -> str:
    return f.metadata["key"] or f.name


def _omitted(f: dataclasses.Field, value: Any) -> bool:
    omit = f.metadata["omit"]
    return (omit == "none" and value is None) or (omit == "empty" and not value)


def _to_json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _from_json(kind: str, value: Any) -> Any:
    return tuple(value) if kind.startswith("list_") else value


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def _stored_json(record: Any, *, order: tuple[str, ...] = ()) -> str:
    """The stored fields of ``record`` (a :class:`Provenance` or :class:`RunRecord`) as its
    file's text: the keys of ``order`` first, then the others in field order; a field without a
    value (:func:`_omitted`) left out."""
    stored = {_json_key(f): f for f in _stored(type(record))}
    out = {}
    for key in dict.fromkeys([*order, *stored]):
        f = stored[key]
        value = getattr(record, f.name)
        if not _omitted(f, value):
            out[key] = _to_json(value)
    return _dumps(out)


def _check_values(cls, data: Mapping[str, Any], path: Path, *, required: tuple = ()) -> dict:
    """``data``'s values as ``cls``'s keyword arguments, once every key is one of its fields,
    every key of ``required`` is there and every value has its field's kind.

    Raises:
        RecordError: a missing key, a key no record holds, or a value of another kind; each
            named, with the fix.
    """
    fields = {_json_key(f): f for f in _stored(cls)}
    lacking = [key for key in required if key not in data]
    if lacking:
        raise RecordError(
            f"{path} lacks {lacking}, which every run of result format {RESULT_FORMAT} writes: "
            f"the file was edited or made by hand; {_RERUN}"
        )
    unknown = [key for key in data if key not in fields]
    if unknown:
        raise RecordError(
            f"{path} holds {unknown}, which no run record of result format {RESULT_FORMAT} "
            f"holds (it holds {', '.join(fields)}): the file was edited or made by hand; "
            f"{_RERUN}"
        )
    values = {}
    for key, value in data.items():
        f = fields[key]
        what, ok = _KINDS[f.metadata["kind"]]
        if not ok(value):
            raise RecordError(
                f"{path}: {key!r} is {type(value).__name__} {value!r:.60}, not {what} as every "
                f"run of result format {RESULT_FORMAT} writes it: the file was edited or made "
                f"by hand; {_RERUN}"
            )
        values[f.name] = _from_json(f.metadata["kind"], value)
    return values


def _load(path: Path) -> dict:
    """The JSON object in ``path``.

    Raises:
        RecordError: not valid JSON, or no object (names the file and the fix).
    """
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RecordError(
            f"{path} is not valid JSON ({err}); delete the folder to re-run"
        ) from None
    return _require_object(data, path)


def _require_object(data: Any, path: Path) -> dict:
    """``data`` once it is a JSON object (a record file holds one).

    Raises:
        RecordError: names the file, what it holds and the fix.
    """
    if not isinstance(data, dict):
        raise RecordError(
            f"{path} holds a {type(data).__name__}, not a run record; delete the folder to re-run"
        )
    return data


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """How a run was computed: its ``run.json`` (:func:`~.code.provenance` plus the wall time).
    Every field is optional (a record made by a script may name only ``seconds``); a field of
    ``None`` is not written. ``key_order``: the order ``run.json`` listed its keys in, so a
    record read and written back is the same file (not compared; ``None``: the fields'
    order)."""

    seconds: float | None = field(default=None, metadata=_key("number", omit="none"))
    """Wall time of the run over every resume."""
    command: str | None = field(default=None, metadata=_key("str", omit="none"))
    date: str | None = field(default=None, metadata=_key("str", omit="none"))
    """When it finished (UTC, ISO 8601)."""
    machine: dict[str, Any] | None = field(default=None, metadata=_key("dict", omit="none"))
    """:func:`~.code.machine_info` of the machine that ran it."""
    code: dict[str, Any] | None = field(default=None, metadata=_key("dict", omit="none"))
    """:func:`~.code.code_info` of the process that wrote the folder."""
    host: str | None = field(default=None, metadata=_key("str", omit="none"))
    """The node that ran it (a Ray cluster's)."""
    pid: int | None = field(default=None, metadata=_key("int", omit="none"))
    resumes: tuple[dict[str, Any], ...] | None = field(
        default=None, metadata=_key("list_dict", omit="none")
    )
    """One ``{"from", "position", "skipped_damaged", "date"}`` per resume from a checkpoint."""
    migrated: dict[str, Any] | None = field(default=None, metadata=_key("dict", omit="none"))
    """What a one-off migration of a committed record filled in, and from where."""
    key_order: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, path: str | Path = RUN_FILE) -> Provenance:
        """The provenance a ``run.json`` object holds (``path`` names the file in errors).

        Raises:
            RecordError: a key no ``run.json`` holds, or a value of another kind.
        """
        values = _check_values(cls, data, Path(path))
        return cls(**values, key_order=tuple(data))

    def to_json(self) -> str:
        """``run.json``'s text: its keys in :attr:`key_order`, then the others in field order."""
        return _stored_json(self, order=self.key_order or ())


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """A finished run's record: what it computed (``result.json``, one field per key, in the
    file's order) and how (:attr:`provenance`, its ``run.json``).

    ``folder`` and ``status`` are not stored (nor compared): the folder :func:`read_record` read
    it from, and what the :func:`~.experiment.run_experiment` call that returned it did
    (``"ran"``, ``"finished before"``). ``result`` is
    :meth:`~avalanche_sets.training.RunResult.to_dict`: ``record.result["mean_accuracy"]``.
    """

    format: int = field(default=RESULT_FORMAT, metadata=_key("int"))
    avalanche_sets: str | None = field(default=None, metadata=_key("str", omit="none"))
    """The version of the package that wrote it."""
    method: str = field(metadata=_key("str"))
    seed: int = field(metadata=_key("int"))
    preset: dict[str, Any] = field(metadata=_key("dict"))
    """Every setting of the run as it ran (its precision resolved)."""
    eval_stream: str = field(default="test", metadata=_key("str"))
    strategy_overrides: dict[str, Any] = field(default_factory=dict, metadata=_key("dict"))
    """The method's options the run set (less those equal to their default)."""
    unread_settings: dict[str, str] = field(default_factory=dict, metadata=_key("dict"))
    """The preset settings the run did not read, each with the reason (:data:`UNREAD_FIELD`)."""
    plugins: tuple[str, ...] = field(default=(), metadata=_key("list_str", omit="empty"))
    """The plugins added to the run (:func:`~.run.plugin_description`)."""
    user_code: dict[str, str] = field(default_factory=dict, metadata=_key("dict", omit="empty"))
    """``{source: content hash}`` of one's own code the run ran (:func:`~.code.user_code`)."""
    tag: str = field(default="", metadata=_key("str", omit="empty"))
    code: dict[str, Any] = field(metadata=_key("dict"))
    """:func:`~.code.code_info` of the code that computed it."""
    numerics: dict[str, Any] | None = field(default=None, metadata=_key("dict", omit="none"))
    """:func:`~.code.numerics_info`: what decided its arithmetic."""
    data: dict[str, Any] | None = field(default=None, metadata=_key("dict", omit="none"))
    """``{"source", "root", "content"}`` (:func:`~.folder.run_data`)."""
    memory: tuple[dict[str, Any], ...] = field(default=(), metadata=_key("list_dict", omit="empty"))
    """Every memory's filling (:meth:`~avalanche_sets.training.MemoryFill.to_dict`)."""
    result: dict[str, Any] = field(metadata=_key("dict"))
    """What it computed (:meth:`~avalanche_sets.training.RunResult.to_dict`)."""
    ood_split: dict[str, Any] | None = field(default=None, metadata=_key("ood_split", omit="none"))
    """How well its learner told in-distribution from OOD unlabeled images at the final
    evaluation, against the oracle (:func:`~avalanche_sets.metrics.ood_split_record`: per
    domain and ``pooled``, keys :data:`OOD_SPLIT_KEYS`); ``None`` (not written) for a learner
    that splits no unlabeled images."""
    provenance: Provenance | None = field(default=None)
    """Its ``run.json`` (``None``: the folder has none)."""
    folder: Path | None = field(default=None, compare=False)
    status: str | None = field(default=None, compare=False)

    @property
    def made_by(self) -> dict[str, Any]:
        """Which code made this run: ``run.json``'s ``code`` where it names one, else
        ``result.json``'s."""
        prov = self.provenance
        return prov.code if prov is not None and prov.code is not None else self.code

    @property
    def seconds(self) -> float:
        """The run's wall time (NaN where its provenance names none)."""
        prov = self.provenance
        return math.nan if prov is None or prov.seconds is None else float(prov.seconds)

    @property
    def mean_accuracy(self) -> float:
        """The mean over domains of the final accuracy (``result["mean_accuracy"]``)."""
        return self.result["mean_accuracy"]

    def ood_value(self, measure: str) -> float | None:
        """The pooled value of ``measure`` (one of :data:`OOD_METRICS`) of its OOD split: NaN
        where undefined, ``None`` where the record holds no split.

        Raises:
            ValueError: a measure that is not one of :data:`OOD_METRICS`.
        """
        if measure not in OOD_METRICS:
            raise ValueError(
                f"ood_value({measure!r}): no such measure of an OOD split; use one of "
                f"{', '.join(OOD_METRICS)}"
            )
        if self.ood_split is None:
            return None
        value = self.ood_split["pooled"][measure]
        return math.nan if value is None else float(value)

    @property
    def where(self) -> str:
        """The record as a message names it: its folder, else ``<method> seed <s>``."""
        return str(self.folder) if self.folder is not None else f"{self.method} seed {self.seed}"

    @classmethod
    def from_json(
        cls,
        body: Any,
        provenance: Any = None,
        *,
        folder: str | Path = ".",
    ) -> RunRecord:
        """The record a ``result.json`` object (``body``) and ``run.json`` object
        (``provenance``; ``None``: none) hold; ``folder`` names them in errors and becomes
        :attr:`folder`.

        Raises:
            ResultsVersionError: a record of another format than :data:`RESULT_FORMAT` (the
                fix: re-run it, or read it with the version that wrote it).
            RecordError: no object, a missing key of :data:`RECORD_KEYS`, a key no record of
                this format holds, a value of another kind (each named, with the fix).
        """
        folder = Path(folder)
        path = folder / RESULT_FILE
        _check_format(folder, _require_object(body, path))
        values = _check_values(cls, body, path, required=RECORD_KEYS)
        prov = None
        if provenance is not None:
            run = folder / RUN_FILE
            prov = Provenance.from_json(_require_object(provenance, run), path=run)
        return cls(**values, provenance=prov, folder=folder)

    def to_result_json(self) -> str:
        """``result.json``'s text: the stored fields in their order, those without a value
        left out."""
        return _stored_json(self)

    def to_run_json(self) -> str | None:
        """``run.json``'s text (``None``: no provenance)."""
        return None if self.provenance is None else self.provenance.to_json()


def _check_format(folder: Path, rec: Mapping[str, Any]) -> None:
    """Refuse a record of another format than :data:`RESULT_FORMAT`, saying how to read it."""
    fmt = rec.get("format", 1)  # format 1 had no "format" key
    if fmt == RESULT_FORMAT and _KINDS["int"][1](fmt):
        return
    by = f"by avalanche-sets {rec.get('avalanche_sets', '?')}"
    if _KINDS["int"][1](fmt) and 1 <= fmt < RESULT_FORMAT:
        raise ResultsVersionError(
            f"{folder} holds a run record of result format {fmt} ({by}), older than the format "
            f"{RESULT_FORMAT} this version ({__version__}) reads; fix: re-run it (delete the "
            "folder, or write the run to a new --out folder), or read it with the version that "
            "wrote it"
        )
    raise ResultsVersionError(
        f"{folder} was written by another version of avalanche-sets (result format {fmt!r}, "
        f"{by}); this version ({__version__}) reads format {RESULT_FORMAT}. Read it with that "
        "version, or write this run to a new --out folder"
    )


def read_record(folder: str | Path) -> RunRecord:
    """The record of the finished run in ``folder``: its ``result.json`` and ``run.json``
    (:attr:`RunRecord.provenance`, ``None`` where the folder has none); :attr:`RunRecord.folder`
    is ``folder``.

    Raises:
        FileNotFoundError: the folder has no ``result.json`` (not finished).
        ResultsVersionError: a record of another format than :data:`RESULT_FORMAT` (the
            message names the fix: re-run it, or read it with the version that wrote it).
        RecordError: a file that is not valid JSON, lacks one of :data:`RECORD_KEYS`, holds a
            key no record holds or a value of the wrong kind (names the file and the fix).
    """
    folder = Path(folder)
    body = _load(folder / RESULT_FILE)
    run = folder / RUN_FILE
    return RunRecord.from_json(body, _load(run) if run.is_file() else None, folder=folder)


def write_record(folder: str | Path, record: RunRecord) -> None:
    """Write ``record`` to ``folder``: ``run.json`` (when it has provenance) then
    ``result.json`` (atomically; ``result.json`` marks the run finished)."""
    folder = Path(folder)
    run = record.to_run_json()
    if run is not None:
        atomic_write(folder / RUN_FILE, run, single_writer=True)
    atomic_write(folder / RESULT_FILE, record.to_result_json(), single_writer=True)
