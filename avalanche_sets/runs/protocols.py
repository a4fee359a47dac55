"""Which run records are one protocol: the rows of ``avalanche-sets table``.

A *protocol* is everything that decides what a run computes except its seed — the record's
:func:`~avalanche_sets.runs.folder.record_identity` (method, every preset setting, every
strategy option, extra plugins, evaluation stream, the hash of the user's own code, the tag,
and whatever else that function counts) — plus the library code that ran it
(:attr:`~.record.RunRecord.made_by`: the content hash of its package's files where the record
has one, its commit and whether the tree was dirty otherwise).
Runs of one protocol differ only in their seed, so their mean and its interval over seeds mean
something; runs of two protocols are never averaged together.

* :func:`group_protocols` — records → one list of runs per protocol (a seed twice in one
  protocol is refused, naming both folders);
* :func:`protocol_settings` — a record's identity flattened to ``setting → value``, the names a
  table's columns and ``--by`` use (``n_shot``, ``gamma``, ``plugins``, ``numerics.threads``);
* :func:`protocol_setting` / :func:`settings_agree` — the setting a run was made in (its
  identity less the method and its options), and whether two runs share theirs on every
  setting both read (the pairing of ``table --vs``);
* :func:`code_key` / :func:`code_label` — the code a record names;
* :func:`check_setting_names` — a grouping key no record has, refused with "did you mean";
* :func:`data_label` / :func:`numerics_label` / :func:`ood_label` / :func:`domain_order_label`
  / :func:`shared_settings` — what a table says of the protocol all its rows share (its
  footer, its ``.json`` companion, its plots' captions).

Standard library only (with :mod:`.folder`): the ``table`` command reads thousands of records
in well under a second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ..defaults import DEFAULT_OOD
from ..suggest import did_you_mean
from .code import short_code
from .folder import record_identity
from .record import RunRecord

__all__ = [
    "ARM_FIELDS",
    "code_key",
    "code_label",
    "protocol_settings",
    "protocol_key",
    "protocol_setting",
    "settings_agree",
    "group_protocols",
    "check_setting_names",
    "data_label",
    "numerics_label",
    "ood_label",
    "domain_order_label",
    "shared_settings",
]

ARM_FIELDS = ("method", "strategy_overrides", "plugins", "user_code", "tag")
"""The identity fields that say which method a run is (its options, added plugins, the hash of
its code of one's own and its tag: a variant of a method, such as changed code run beside the
old with ``--tag``); the rest is the setting two methods are compared in (``table --vs``)."""

# identity fields whose settings a user names bare (``--set n_shot=5``, ``--strategy-set
# gamma=0.5``); the settings of any other nested field are named with its prefix
_BARE = ("preset", "strategy_overrides")


def code_key(record: RunRecord) -> tuple:
    """What tells the library code of two records apart: the content hash of the package's
    files (``code.package``: two installs of different files, with or without git, differ;
    two dirty trees of one commit with different changes differ), else ``(commit, dirty)`` (a
    record that names no hash), else the package version (neither)."""
    code = record.made_by
    if code.get("package"):
        return ("package", code["package"])
    if code.get("commit"):
        return (code["commit"], bool(code.get("dirty")))
    return ("version", code.get("version"))


def code_label(record: RunRecord) -> str:
    """The code of a record as a table shows it: ``1a2b3c4`` (short commit), ``1a2b3c4+dirty``
    (uncommitted changes), ``0.1.0 (no git)`` (not a git checkout); with the package's content
    hash where the record has one (:func:`code_key`): ``1a2b3c4+dirty (pkg 3fa2b1c)``, ``0.1.0
    (no git, pkg 3fa2b1c)``."""
    code = record.made_by
    pkg = code.get("package")
    if not code.get("commit"):
        return f"{code.get('version', '?')} (no git{f', pkg {pkg[:7]}' if pkg else ''})"
    label = code["commit"][:7] + ("+dirty" if code.get("dirty") else "")
    return label + (f" (pkg {pkg[:7]})" if pkg else "")


def _text(value) -> str:
    if isinstance(value, (list, tuple)):
        return "+".join(map(_text, value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def protocol_settings(record: RunRecord) -> dict[str, str]:
    """A record's :func:`~.folder.record_identity` flattened to ``{setting: value as text}``.

    Preset settings and strategy options keep their own names (``n_shot``, ``gamma``); the
    settings of any other nested field are ``field.setting``; the data's content hash is
    ``data`` and the thread count ``threads`` (a preset setting); a name that is both a preset
    setting and a strategy option is spelled ``preset.X`` and ``strategy_overrides.X``. Lists read ``a+b`` (``plugins``).
    The hash of a user's own code is ``user_code.<source>``, shown by its first 7 hex digits
    (rows stay apart by the whole hash); a run's tag is ``tag``.
    """
    flat: dict[tuple[str, ...], str] = {}
    for field, value in record_identity(record).items():
        if isinstance(value, dict):
            for name, inner in value.items():
                flat[(field, name)] = _text(inner)
        else:
            flat[(field,)] = _text(value)
    bare = [path[-1] for path in flat if path[0] in _BARE]
    out = {}
    for path, value in flat.items():
        if path[0] == "user_code":
            value = short_code(value)  # short hashes, as a commit's
        short = path[-1] if path[0] in _BARE and bare.count(path[-1]) == 1 else ".".join(path)
        out[short] = value
    return out


def protocol_key(record: RunRecord, *, pool_code: bool = False, drop: Sequence[str] = ()) -> str:
    """The protocol of a record as a comparable string: its identity (less the identity fields
    in ``drop``) and, unless ``pool_code``, its :func:`code_key`."""
    ident = {k: v for k, v in record_identity(record).items() if k not in drop}
    code = None if pool_code else code_key(record)
    return json.dumps([ident, code], sort_keys=True, default=str)


def protocol_setting(
    record: RunRecord, *, pool_code: bool = False, drop: Sequence[str] = ARM_FIELDS
) -> dict[str, str]:
    """The setting a record's run was made in: its :func:`~.folder.record_identity` less the
    fields in ``drop`` (the method and its options: :data:`ARM_FIELDS`), flattened to
    ``{"field.setting": value as JSON}``, and, unless ``pool_code``, its ``code``
    (:func:`code_key`). A setting the run did not read is absent (``preset.mem_size`` of an
    MSKM run): compare two with :func:`settings_agree`."""
    flat = {}
    for field, value in record_identity(record).items():
        if field in drop:
            continue
        inner = value.items() if isinstance(value, dict) else [(None, value)]
        for name, v in inner:
            key = field if name is None else f"{field}.{name}"
            flat[key] = json.dumps(v, sort_keys=True, default=str)
    if not pool_code:
        flat["code"] = json.dumps(code_key(record), default=str)
    return flat


def settings_agree(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether two :func:`protocol_setting` values agree on every setting both have: a memory
    method's run at ``mem_size=20`` was made in the setting of an MSKM run, which reads no
    memory size; two runs that differ in a setting both read were not."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def group_protocols(
    records: Iterable[RunRecord], *, pool_code: bool = False
) -> list[list[RunRecord]]:
    """The records grouped by protocol (:func:`protocol_key`), each group sorted by seed.

    ``pool_code``: records that differ only in their code share a group (the table then says
    which code versions each row holds).

    Raises:
        ValueError: one seed twice in one protocol (the same run written twice, or a run of
            other code under ``pool_code``), naming both folders.
    """
    groups: dict[str, dict[int, RunRecord]] = {}
    for rec in records:
        group = groups.setdefault(protocol_key(rec, pool_code=pool_code), {})
        seed = rec.seed
        if seed in group:
            other = group[seed]
            raise ValueError(
                f"seed {seed} of {rec.method} appears twice in one protocol: "
                f"{other.where} ({code_label(other)}) and {rec.where} "
                f"({code_label(rec)}); a mean over seeds would count it twice. Fix: keep one of "
                "the two folders"
                + (
                    ", or drop --pool-code to table each code on its own row"
                    if pool_code and code_key(rec) != code_key(other)
                    else ""
                )
            )
        group[seed] = rec
    return [[g[s] for s in sorted(g)] for g in groups.values()]


def check_setting_names(
    names: Sequence[str], settings: Iterable[dict[str, str]], *, flag: str
) -> None:
    """Refuse a setting name that no record has (the ``--by`` of a table).

    ``settings``: the :func:`protocol_settings` of the records (one per protocol suffices).

    Raises:
        ValueError: names the unknown key, the closest known one and every key the records
            have.
    """
    known = {"code"}
    for setting in settings:
        known.update(setting)
    for name in names:
        if name not in known:
            raise ValueError(
                f"{flag} {name!r}: no run record has this setting{did_you_mean(name, known, n=2)}; "
                f"the records' settings are {', '.join(sorted(known))}"
            )


# ------------------------------------------------------------------------ a table's protocol
def data_label(record: RunRecord) -> str:
    """The data of a record as a table's footer names it: ``packs at ../shared/data/sets-mini,
    content sha256:1a2b3c4d5e6f`` (the source, the folder as recorded, the content hash cut to
    12 hex digits), ``… content not recorded`` for a record that names no hash, ``synthetic
    (generated, no files)``, or ``not recorded`` for a record without ``data``."""
    data = record.data
    if data is None:
        return "not recorded"
    source, root, content = data.get("source", "?"), data.get("root"), data.get("content")
    if root is None and content is None:
        return f"{source} (generated, no files)"
    if content:
        kind, _, digest = str(content).rpartition(":")
        content = f"content {kind + ':' if kind else ''}{digest[:12]}"
    where = "" if root is None else f" at {root}"
    return f"{source}{where}, {content or 'content not recorded'}"


def numerics_label(record: RunRecord) -> str:
    """The numeric path of a record (its ``numerics``) as a table's footer names it: ``device
    cpu, precision fp32, threads 1, cpu_bf16 False`` (a value the record lacks is ``not
    recorded``), or ``not recorded`` for a record without ``numerics``."""
    num = record.numerics
    if num is None:
        return "not recorded"
    keys = ("device", "precision", "threads", "cpu_bf16")
    return ", ".join(f"{k} {'not recorded' if num.get(k) is None else num[k]}" for k in keys)


def ood_label(record: RunRecord) -> str:
    """The OOD sources of a record's episodes as a table's protocol names them: the preset's
    ``ood`` (``omniglot, vggflower, fish``), the source's default named
    (:data:`~avalanche_sets.defaults.DEFAULT_OOD`), ``none (n_ood 0)``, or, for a folder of
    packs that decides its own, what decided them (the run did not record their names)."""
    preset = record.preset
    if preset.get("n_ood") == 0:
        return "none (n_ood 0)"
    if preset.get("ood") is not None:
        return ", ".join(map(str, preset["ood"])) or "none"
    source = str(preset.get("source", "?"))
    if source in DEFAULT_OOD:
        return f"{', '.join(DEFAULT_OOD[source])} ({source}'s default)"
    return (f"the default of {source} at {preset.get('root', '?')}: its ood_* packs or its "
            "stream manifest (names not recorded by the run)")  # fmt: skip


def domain_order_label(record: RunRecord) -> str:
    """The domains of a record's stream in the order it trained on them (``a → b → c``), as
    the record holds them (its result's ``domains``), with the paper's order number when the
    preset names one (``order 2: …``)."""
    order = record.preset.get("order")
    names = " → ".join(map(str, record.result.get("domains") or ["not recorded"]))
    return names if order is None else f"order {order}: {names}"


def shared_settings(
    settings: Sequence[dict[str, str]], *, skip: Iterable[str] = ()
) -> dict[str, str]:
    """The settings every one of ``settings`` (the :func:`protocol_settings` of a table's rows)
    has with one value, in their first row's order, less the names in ``skip`` (those the
    table shows as columns, or names on a footer line of their own); a setting some row lacks
    or has with another value is not shared (the table shows it as a column)."""
    skip = set(skip)
    if not settings:
        return {}
    first, *rest = settings
    return {k: v for k, v in first.items()
            if k not in skip and all(s.get(k) == v for s in rest)}  # fmt: skip
