"""The on-disk contract of a run: its folder's name and identity, its records, its lock.

A run is stored in ``<out>/<method>/<source>-o<order>-<N>w<K>s-R<R>-seed<s>[...]``
(:func:`run_dir_name`; :func:`run_folder` adds the ``out`` root and a tag). A finished run
folder holds

* ``result.json`` (:data:`RESULT_FILE`) — what the run *computed*: method, seed, settings
  and metrics (the ``"result"`` is :meth:`avalanche_sets.training.RunResult.to_dict`), the
  format version, and what computed it: ``code``, ``numerics`` (:mod:`.code`) and ``data``
  (:func:`run_data`). It depends only on the code, the settings, the data and the seed, so two
  runs with the same seed on one checkout and machine write byte-identical files (CPU), and an
  interrupted-and-resumed run writes the same file as an uninterrupted one;
* ``run.json`` (:data:`RUN_FILE`) — how it was computed (:func:`~.code.provenance`): wall time, date,
  machine, command, and any resumes (which checkpoint, which damaged ones were skipped). It
  differs from run to run by nature;
* ``table.md`` and ``accuracy_matrix.png`` (:mod:`avalanche_sets.runs.report` writes them from
  the record) and ``log.txt`` (every metric value; ``csv/``, ``tb/`` and ``wandb/`` with those loggers).

The two records are one typed :class:`~.record.RunRecord` (:mod:`.record`: its fields, how it
is read and written; :func:`read_record`, :func:`write_record` and the format's names are
importable from here too).

While a run is in progress the folder holds its checkpoint and ``.lock``
(:class:`~.lock.RunLock`): a second process (another sweep pointed at the same folder) sees the
lock and does not run it again.

Every file is written atomically (:func:`atomic_write`, the one implementation the whole
package uses). This module loads with the standard library alone — the command line names
run folders before torch loads — so :func:`run_precision` of ``"auto"``, which needs torch,
imports it where it uses it.

The naming and identity functions take a run's :class:`~avalanche_sets.presets.RunConfig`
(a dictionary is refused, naming :meth:`~avalanche_sets.presets.RunConfig.of`);
:func:`record_identity` reads the settings a record holds as they are. They check
nothing: a config was checked when it was made, and a record holds what a run computed with.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..data.content import data_content, data_root
from ..files import atomic_write
from ..methods import method_folder_name
from ..presets import NAMING_PRESETS, PRESETS, RunConfig, require_config
from .code import NO_SOURCE, code_info, short_code
from .lock import LOCK_FILE, RunLock, RunLockedError
from .record import (
    RESULT_FILE,
    RUN_FILE,
    RunRecord,
    read_record,
)

__all__ = [
    "LOCK_FILE",
    "TABLE_FILE",
    "MATRIX_PLOT",
    "LOG_FILE",
    "CHECKPOINT_FILE",
    "RUN_FILES",
    "RunLockedError",
    "RunConflictError",
    "RunLock",
    "atomic_write",
    "is_finished",
    "check_finished",
    "check_checkpoint_code",
    "run_dir_name",
    "run_folder",
    "run_identity",
    "record_identity",
    "record_dir_name",
    "check_tag",
    "identity_differences",
    "run_data",
    "run_precision",
    "portable_preset",
]

# ------------------------------------------------------------------------ the files
TABLE_FILE = "table.md"
MATRIX_PLOT = "accuracy_matrix.png"
LOG_FILE = "log.txt"
"""The file of a run folder that receives every metric value and message of the run."""
CHECKPOINT_FILE = "checkpoint.pt"

RUN_FILES: tuple[tuple[str, str], ...] = (
    (RESULT_FILE, "accuracy matrix, final accuracies with 95% CIs, settings"),
    (RUN_FILE, "wall time, date, machine, command"),
    (TABLE_FILE, "the table above"),
    (MATRIX_PLOT, "heatmap: accuracy on every domain after each training domain"),
    (LOG_FILE, "every metric value of the run (--verbose prints them)"),
)
"""What a finished run folder holds, as the command line lists it."""


class RunConflictError(ValueError):
    """A run folder already holds a finished run whose settings differ from the asked ones."""


def is_finished(folder: str | Path) -> bool:
    """Whether ``folder`` holds a finished run (its ``result.json``)."""
    return (Path(folder) / RESULT_FILE).is_file()


# ------------------------------------------------------------------------ identity and name
# Settings spelled out in the base of a run folder's name, and settings that do not change
# what a run computes (where the data lives — its content enters as ``data`` —, the preset's
# seed list). ``precision`` is named by its resolved value: "-bf16" when bf16, nothing for fp32,
# and ``threads`` as "-t<n>" when it is not the closest named preset's (so a plain named-preset
# run keeps the short name).
_IN_BASE_NAME = ("source", "order", "n_way", "n_shot", "n_ood", "precision")
_NOT_IDENTITY = ("seeds", "root")
_NAMED_APART = ("threads",)
_MISSING = object()


def _settings(preset: RunConfig, what: str, precision: str | None = None) -> dict[str, Any]:
    """The settings of ``preset``, a config (anything else is refused: a ``TypeError`` naming
    the fix), with ``precision`` when the caller resolved it already."""
    preset = require_config(
        preset, what, also=" (a finished run's record: record_identity(record), "
        "record_dir_name(record))",
    )  # fmt: skip
    return {**preset.as_dict(), **({} if precision is None else {"precision": precision})}


def _precision(settings: Mapping[str, Any]) -> str:
    """``settings``' ``precision`` resolved on its device (``"auto"`` means bf16 only where the
    device runs it natively); a resolved one as it is, without torch (``table`` reads many)."""
    precision = settings["precision"]
    if precision in ("fp32", "bf16"):
        return precision
    from ..models.backbone import resolve_precision  # torch (see the module's docstring)

    return resolve_precision(precision, str(settings["device"]).split(":")[0])


def run_precision(preset: RunConfig) -> str:
    """The precision a run of ``preset`` computes in: ``"fp32"`` or ``"bf16"``: its
    ``precision`` resolved on its device. A run resolves it once
    (:class:`~avalanche_sets.runs.run.Run`).

    Raises:
        TypeError: ``preset`` is no RunConfig.
    """
    return _precision(_settings(preset, "run_precision"))


def _identity_preset(settings: Mapping[str, Any], unread: Iterable[str] = ()) -> dict:
    """The settings as far as they decide what a run computes (precision resolved), less the
    settings the run does not read."""
    skip = {*_NOT_IDENTITY, *unread}
    out = {k: v for k, v in settings.items() if k not in skip}
    out["precision"] = _precision(settings)
    return out


def _portable_root(root: str | os.PathLike) -> str:
    """A data folder as a record stores it: an absolute path relative to the working folder."""
    return os.path.relpath(root, Path.cwd()) if Path(root).is_absolute() else root


def run_data(preset: RunConfig) -> dict[str, Any]:
    """The ``data`` of a run of ``preset``'s record: ``{"source", "root", "content"}``.

    ``root``: the data folder as :func:`portable_preset` stores it (``None`` for the synthetic
    source); ``content``: :func:`~avalanche_sets.data.content.data_content` of that folder
    (``None`` for the synthetic source, whose images the preset and the code decide).

    Raises:
        ValueError: the preset's data folder does not exist.
    """
    settings = _settings(preset, "run_data")
    source = str(settings["source"])
    root = data_root(source, settings.get("root"))
    return {
        "source": source,
        "root": None if root is None else _portable_root(str(root)),
        "content": data_content(source, root),
    }


def run_identity(
    method: str,
    preset: RunConfig,
    *,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
    plugins: Sequence[str] = (),
    unread: Iterable[str] = (),
    data: Any = _MISSING,
    user_code: Mapping[str, str] | None = None,
    tag: str = "",
    precision: str | None = None,
) -> dict:
    """Everything that decides what a run computes, except its seed and the library's code
    (JSON-normalised).

    ``strategy_overrides``: the options as the run holds them, an option equal to the value the
    method runs with anyway left out; ``unread``: the preset settings the run does not read,
    left out of its preset (both: :func:`~avalanche_sets.runs.experiment.run_settings`). So
    runs that compute the same thing have one identity.

    The numeric path enters with the preset: its device, its ``threads`` (another thread count
    sums in another order, so its numbers differ) and its precision resolved (``"fp32"`` or
    ``"bf16"``, :func:`run_precision`: bf16 changes the numbers, and ``"auto"`` means different
    things on different machines). ``data``: the content hash of the data the run reads
    (:func:`run_data`'s ``content``; computed from ``preset`` when not given), not the folder's
    path: the same files anywhere are the same run, changed files another.
    ``plugins``: the :func:`plugin_description` of every plugin added to the method.
    ``user_code``: the content hash of the code of one's own that defines the run
    (:func:`~.code.user_code`: a method of one's own, plugins defined outside the package);
    ``tag``: the name a user gave the run to keep it apart (:func:`check_tag`). Each is a key
    of the identity only when non-empty, so the identity of a built-in run without a tag has
    neither. ``precision``: the preset's precision resolved already (a
    :class:`~avalanche_sets.runs.run.Run` resolves it once); ``None``: resolved here.

    Raises:
        ValueError: the preset's data folder does not exist (when ``data`` is not given).
        TypeError: ``preset`` is no RunConfig (names the fix).
    """
    settings = _settings(preset, "run_identity", precision)
    if data is _MISSING:
        data = run_data(preset)["content"]
    return _identity(
        method, settings, eval_stream=eval_stream, strategy_overrides=strategy_overrides,
        plugins=plugins, unread=unread, data=data, user_code=user_code, tag=tag,
    )  # fmt: skip


def _identity(
    method: str,
    settings: Mapping[str, Any],
    *,
    eval_stream: str,
    strategy_overrides: Mapping[str, Any] | None,
    plugins: Sequence[str],
    unread: Iterable[str],
    data: Any,
    user_code: Mapping[str, str] | None,
    tag: str,
) -> dict:
    """:func:`run_identity` of a run's ``settings`` (a config's, or those a record holds)."""
    ident = {
        "method": method,
        "preset": _identity_preset(settings, unread),
        "eval_stream": eval_stream,
        "strategy_overrides": dict(strategy_overrides or {}),
        "data": data,
    }
    if plugins:  # a plain method's identity (and every record of one) has no such key
        ident["plugins"] = list(plugins)
    if user_code:
        ident["user_code"] = dict(user_code)
    if tag:
        ident["tag"] = tag
    return json.loads(json.dumps(ident, sort_keys=True, default=str))


def record_identity(record: RunRecord) -> dict:
    """:func:`run_identity` of a finished run's record (:class:`~.record.RunRecord`).

    The preset settings the record names in ``unread_settings`` (those the run did not read)
    are left out. Its ``data`` is the content the record names, ``None`` where it names none
    (the synthetic source reads no files; a record of a folder source that names none is the
    run of no known data, which :func:`identity_differences` tells apart from every content).
    Reads nothing but the record.
    """
    content = None if record.data is None else record.data.get("content")
    return _identity(
        record.method, record.preset, eval_stream=record.eval_stream,
        strategy_overrides=record.strategy_overrides, plugins=record.plugins,
        unread=record.unread_settings, data=content, user_code=record.user_code,
        tag=record.tag,
    )  # fmt: skip


def _short(fingerprint: str | None) -> str:
    return "(none)" if not fingerprint else short_code(fingerprint)


def _user_code_differences(
    have: Mapping[str, str], asked: Mapping[str, str], *, was: str = "there"
) -> list[str]:
    """One ``"code of <name>: <a> there, <b> now"`` per source whose hash differs (short
    hashes; ``was`` names where ``have`` was read); code that has no source file
    (:data:`~.code.NO_SOURCE`) always differs."""
    diff = []
    for name in sorted(set(have) | set(asked)):
        a, b = have.get(name), asked.get(name)
        if a != b or b == NO_SOURCE:
            diff.append(f"code of {name}: {_short(a)} {was}, {_short(b)} now")
    return diff


def _package_difference(
    have: Mapping[str, Any], now: Mapping[str, Any], *, was: str = "there"
) -> list[str]:
    """``["avalanche_sets package: <a> there, <b> now"]`` (short hashes, commits where known)
    when ``have`` names a library package hash other than ``now``'s; nothing when it names
    none (there is no hash to compare)."""
    if not have.get("package") or have["package"] == now["package"]:
        return []
    return [
        f"avalanche_sets package: {_short(have['package'])}{_commit(have)} {was}, "
        f"{_short(now['package'])}{_commit(now)} now"
    ]


def identity_differences(have: dict, asked: dict) -> list[str]:
    """What differs between two :func:`run_identity` values, one ``"<what>: <a> there, <b>
    asked"`` per setting (empty: the same run). A ``data`` of ``None`` in ``have`` where
    ``asked`` names a content (a record of a folder source that names none) differs: nothing
    says it read the asked data. A preset setting ``asked`` lacks is no difference (the asked
    run does not read it, whatever ``have`` says). User code is compared by content hash
    (``code of <source>: <a> there, <b> now``); code without a source file is never the same."""
    diff = _user_code_differences(have.get("user_code") or {}, asked.get("user_code") or {})
    for part in ("method", "eval_stream", "strategy_overrides", "plugins", "data", "tag"):
        a, b = have.get(part), asked.get(part)
        if a != b:
            there = "not recorded" if part == "data" and a is None else repr(a)
            diff.append(f"{'data content' if part == 'data' else part}: {there} there, {b!r} asked")
    for k in sorted(asked["preset"]):
        a, b = have["preset"].get(k, "(absent)"), asked["preset"][k]
        if a != b:
            diff.append(f"{k}: {a!r} there, {b!r} asked")
    return diff


def _name_part(value) -> str:
    text = "+".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return "".join(c if c.isalnum() or c in "._+" else "_" for c in text)


def run_dir_name(
    method: str,
    preset: RunConfig,
    seed: int,
    *,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
    plugins: Sequence[str] = (),
    unread: Iterable[str] = (),
    precision: str | None = None,
) -> str:
    """``<method>/<source>-o<order>-<N>w<K>s-R<R>-seed<s>`` plus what else sets the run apart.

    The method's folder is :func:`~avalanche_sets.methods.method_folder_name`, followed by
    ``+<Plugin>`` for every plugin added to it (``mskm+PrototypeSpreadPlugin``).

    Appended, in this order: every preset setting that differs from the closest of
    :data:`~avalanche_sets.presets.NAMING_PRESETS` (``-mem_size50``; a ``converged`` run is
    ``-tasks_per_domain1400``), every strategy override (``-beta0.003-lam1e_05``), ``-t<n>`` when the
    run uses another torch thread count than that preset (``-t2``), ``-bf16`` when the backbone
    computes in bf16 (:func:`run_precision`; fp32 adds nothing) and the evaluation stream when it
    is not ``test`` (``-valid``). Runs that differ in a setting therefore never share a folder,
    and a plain named-preset run keeps the short name. The settings in ``unread`` (those the run
    does not read) and the options left out of ``strategy_overrides`` (equal to their default)
    name nothing: runs that compute the same thing share a folder. The data's content is not in the name:
    a run asked again on changed data finds the folder of the other data's run, and
    :func:`check_finished` refuses it. ``precision``: as :func:`run_identity` takes it.

    Raises:
        TypeError: ``preset`` is no RunConfig (names the fix).
    """
    return _dir_name(
        method, _settings(preset, "run_dir_name", precision), seed, eval_stream=eval_stream,
        strategy_overrides=strategy_overrides, plugins=plugins, unread=unread,
    )  # fmt: skip


def record_dir_name(record: RunRecord) -> str:
    """:func:`run_dir_name` of a finished run's record (:class:`~.record.RunRecord`): the
    folder its run is found in, from the settings it recorded as they are. Reads nothing but
    the record."""
    return _dir_name(
        record.method, record.preset, record.seed, eval_stream=record.eval_stream,
        strategy_overrides=record.strategy_overrides, plugins=record.plugins,
        unread=record.unread_settings,
    )  # fmt: skip


def _dir_name(
    method: str,
    preset: Mapping[str, Any],
    seed: int,
    *,
    eval_stream: str,
    strategy_overrides: Mapping[str, Any] | None,
    plugins: Sequence[str],
    unread: Iterable[str],
) -> str:
    """:func:`run_dir_name` of a run's settings (a config's, or those a record holds)."""
    src = preset["source"]
    order = preset.get("order", 1)
    added = "".join(f"+{p.split('(')[0]}" for p in plugins)
    name = (
        f"{method_folder_name(method)}{added}/{src}-o{order}-{preset['n_way']}w{preset['n_shot']}s-R{preset['n_ood']}"
        f"-seed{seed}"
    )
    named = {*_IN_BASE_NAME, *_NOT_IDENTITY, *_NAMED_APART, *unread}
    rest = {k: v for k, v in preset.items() if k not in named}
    diffs = [
        {k: v for k, v in rest.items() if PRESETS[n].get(k, _MISSING) != v} for n in NAMING_PRESETS
    ]
    closest = min(range(len(diffs)), key=lambda i: len(diffs[i]))  # ties: the first (stable)
    for key, value in [
        *sorted(diffs[closest].items()),
        *sorted((strategy_overrides or {}).items()),
    ]:
        name += f"-{key}{_name_part(value)}"
    default_threads = PRESETS[NAMING_PRESETS[closest]]["threads"]
    if preset.get("threads", default_threads) != default_threads:
        name += f"-t{preset['threads']}"
    if _precision(preset) == "bf16":
        name += "-bf16"
    if eval_stream != "test":
        name += f"-{eval_stream}"
    return name


TAG_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"
"""What a run's tag may be: a letter or digit, then up to 63 letters, digits, ``.``, ``_``,
``+`` or ``-`` (it becomes part of a folder's name)."""


def check_tag(tag: str) -> str:
    """``tag`` once it is a name a run may carry (:data:`TAG_PATTERN`); ``""`` is no tag.

    Raises:
        ValueError: names the tag and what a tag may hold.
    """
    if not isinstance(tag, str):
        raise ValueError(f"a run's tag is a name (text), got {type(tag).__name__} {tag!r}")
    if tag and not re.fullmatch(TAG_PATTERN, tag):
        raise ValueError(
            f"tag {tag!r} is not a name a run folder can carry; fix: start it with a letter or "
            "digit and use only letters, digits, '.', '_', '+' and '-' (at most 64 characters)"
        )
    return tag


def run_folder(
    out_root: str | Path,
    method: str,
    preset: RunConfig,
    seed: int,
    *,
    eval_stream: str = "test",
    strategy_overrides: dict | None = None,
    plugins: Sequence[str] = (),
    unread: Iterable[str] = (),
    tag: str = "",
) -> Path:
    """The folder of one run under ``out_root``: :func:`run_dir_name`, followed by
    ``-tag_<tag>`` for a tagged run (:func:`check_tag`).

    Raises:
        ValueError: a tag that :func:`check_tag` refuses.
    """
    where = {"eval_stream": eval_stream, "strategy_overrides": strategy_overrides}
    where["plugins"] = plugins
    where["unread"] = unread
    named = run_dir_name(method, preset, seed, **where)
    return Path(out_root) / (named + f"-tag_{tag}" if check_tag(tag) else named)


def check_finished(folder: str | Path, asked: dict, seed: int) -> RunRecord:
    """The finished run in ``folder``, after checking it is the run that was asked for, made by
    the same code.

    ``asked`` is the :func:`run_identity` of the asked run: the numeric path (device, threads,
    precision), the data's content and the hash of the user's own code (``user_code``)
    included, so a run that would compute other numbers is never reported finished. The
    library's code is compared too: a record whose ``code.package`` hash
    (:func:`~.code.package_fingerprint`) differs from this process's was made by other library
    code. A record that names no package hash is taken for the asked run when everything else
    matches (there is no hash to compare); a record of a folder source that names no data
    content is not (:func:`identity_differences`: nothing says it read the asked data).

    Raises:
        RunConflictError: the folder holds a run with other settings or of other code (each
            difference named, code by short hashes and commits) and the fix: ``--tag NAME``
            to run beside it, another ``--out``, or deleting the folder.
    """
    folder = Path(folder)
    rec = read_record(folder)
    diff = [f"seed: {rec.seed} there, {seed} asked"] if rec.seed != seed else []
    diff += identity_differences(record_identity(rec), asked)
    diff += _package_difference(rec.made_by, code_info())
    if diff:
        changed = any(d.startswith(("code of ", "avalanche_sets package")) for d in diff)
        raise RunConflictError(
            f"run folder {folder} already holds a finished run "
            f"{'of other code or settings' if changed else 'with other settings'} "
            f"({'; '.join(diff)}); it is not reused for this run. Fix: run it beside that one "
            "with --tag NAME (run_experiment(tag=...)), write to another --out folder, or "
            "delete that folder to redo it"
        )
    return rec


def check_checkpoint_code(
    path: str | Path, then: Mapping[str, Any] | None, now: Mapping[str, Any]
) -> None:
    """Refuse to resume from the checkpoint ``path`` written by other code: ``then``, the code
    it stored (``{"package", "user_code"}``: the library's :func:`~.code.package_fingerprint`
    and the run's :func:`~.code.user_code`), must be ``now``, this process's. A checkpoint that
    stored none is resumed (there is nothing to compare), as a record without it is reused.

    Raises:
        RunConflictError: names the checkpoint, what changed (short hashes) and the fix.
    """
    if then is None or dict(then) == dict(now):
        return
    changed = _package_difference(then, now, was="then") + _user_code_differences(
        then.get("user_code") or {}, now["user_code"], was="then"
    )
    path = Path(path)
    checkpoint = path.parent / CHECKPOINT_FILE
    raise RunConflictError(
        f"the checkpoint {path} was written by other code ({'; '.join(changed)}): resuming "
        f"it would mix two versions of the code in one run. Fix: delete {checkpoint} (and "
        f"{checkpoint.name}.prev) to start the run over, or restore the code that wrote it"
    )


def _commit(code: Mapping[str, Any]) -> str:
    """`` (commit 1a2b3c4[+dirty])`` of a record's ``code``, or nothing without a commit."""
    if not code.get("commit"):
        return ""
    return f" (commit {code['commit'][:7]}{'+dirty' if code.get('dirty') else ''})"


def portable_preset(preset: RunConfig) -> dict[str, Any]:
    """``preset``'s settings as a dictionary, with its data folder as the user gave it, never as
    this machine's absolute path: an absolute ``root`` is stored relative to the working
    directory, so a result file says the same on every machine that runs the same command from
    the same place.

    Raises:
        TypeError: ``preset`` is no RunConfig (names the fix).
    """
    settings = _settings(preset, "portable_preset")
    if settings.get("root") is not None:
        settings["root"] = _portable_root(settings["root"])
    return settings
