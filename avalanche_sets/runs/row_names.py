"""The names a reader sees for a table's rows: in legends, the LaTeX table, the ``label``
column of the Markdown and CSV (``avalanche-sets table --label order=ORDER``).

A row's default name is its method's name, followed by only the settings that tell it apart
from the other rows of the same method (``order, mem_size=50``). Settings that are hashes (the
code, a user's own code, the data's content) are left out of a name unless two rows could not be
told apart without them: the identity itself stays in the table's columns, its ``.json``
companion and the pictures' captions. ``--label KEY=NAME`` renames rows: KEY is a method (every
row of it; its variants keep their settings after the name) or a row's default name (that row
alone). Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..suggest import did_you_mean

__all__ = [
    "VALUE_FIELDS",
    "check_labels",
    "companion_rows",
    "label_column",
    "label_keys",
    "parse_labels",
    "row_method",
    "row_names",
]

#: the fields of an aggregated row (:func:`.report.aggregate_results`) that are values, not the
#: labels it is shown by
VALUE_FIELDS = (
    "seeds",
    "seed_list",
    "accuracy",
    "ci95",
    "ci_over",
    "forgetting",
    "forgetting_ci95",
    "bwt",
    "bwt_ci95",
    "per_domain",
    "per_domain_ci95",
    "per_domain_each",
    "matrix",
    "matrix_ci95",
    "matrix_each",
    "seconds",
    "codes",
    "data_sources",
    "numeric_paths",
    "ood_sources",
    "domain_orders",
    "seed_accuracy",
    "paired_setting",
    "protocol_settings",
    "delta",
    "ood",
)


def label_keys(rows: Sequence[Mapping]) -> list[str]:
    """The label columns of aggregated rows (their first row's fields less
    :data:`VALUE_FIELDS`), in the table's order."""
    return [k for k in rows[0] if k not in VALUE_FIELDS]


#: the label columns whose values are hashes, not settings a reader knows by name
_HASHES = ("code", "data")


def _is_hash(key: str) -> bool:
    return key in _HASHES or key.startswith("user_code.") or key.endswith(".content")


def parse_labels(specs: Iterable[str] | None) -> dict[str, str]:
    """``["order=ORDER", "energy_order:EnergyOrder=Energy"]`` → ``{KEY: NAME}``, split at the
    last ``=`` (a method or row name may hold ``=``; a label may not).

    Raises:
        ValueError: a spec without ``=``, with an empty side, or a KEY given twice (the fix).
    """
    out: dict[str, str] = {}
    for spec in specs or ():
        key, eq, name = spec.rpartition("=")
        key, name = key.strip(), name.strip()
        if not eq or not key or not name:
            raise ValueError(
                f"--label {spec!r}: write KEY=NAME, KEY a method or a row's name and NAME what "
                "the table and legends call it, e.g. --label order=ORDER"
            )
        if key in out:
            raise ValueError(f"--label {key!r} is given twice ({out[key]!r}, {name!r}): keep one")
        out[key] = name
    return out


def row_method(row: Mapping) -> str:
    """The method of an aggregated row (the method's name as its records hold it)."""
    return str(row.get("protocol_settings", {}).get("method", row.get("method", "?")))


def _suffixes(rows: Sequence[Mapping], keys: Sequence[str], skip: Iterable[str]) -> list[str]:
    """Each row's ``, key=value`` settings that tell it apart from the other rows of its
    method: hashes only where the other settings leave two rows alike."""
    skip = [k for k in skip if k in keys]

    def text(r: Mapping, ks: list[str]) -> str:
        return "".join(f", {k}={r[k]}" for k in ks if r[k] != "—")

    out = []
    for row in rows:
        same = [r for r in rows if row_method(r) == row_method(row)]
        differ = [k for k in keys if k != "method" and k not in skip
                  and len({str(r[k]) for r in same}) > 1]  # fmt: skip
        plain = [k for k in differ if not _is_hash(k)]
        # the rows this one would be mistaken for: same plain name, same skipped settings
        alike = [r for r in same if text(r, plain) == text(row, plain)
                 and all(r[k] == row[k] for k in skip)]  # fmt: skip
        hashes = [k for k in differ if _is_hash(k) and len({str(r[k]) for r in alike}) > 1]
        out.append(text(row, [k for k in differ if k in plain or k in hashes]))
    return out


def row_names(
    rows: Sequence[Mapping],
    labels: Mapping[str, str] | None = None,
    *,
    keys: Sequence[str] | None = None,
    skip: Iterable[str] = (),
) -> list[str]:
    """Each row's name (module docstring), with ``labels`` (:func:`parse_labels`) applied.

    ``keys``: the rows' label columns (default: every non-value field of the first row, as a
    table shows them); ``skip``: settings left out of the names (a grouped table's
    ``--columns`` setting, which its column heads name).
    """
    keys = list(label_keys(rows) if keys is None else keys)
    labels = dict(labels or {})
    suffixes = _suffixes(rows, keys, skip)
    names = []
    for row, suffix in zip(rows, suffixes):
        method = row_method(row)
        default = method + suffix
        if default in labels:
            names.append(labels[default])
        else:
            names.append(labels.get(method, method) + suffix)
    return names


def check_labels(
    rows: Sequence[Mapping], labels: Mapping[str, str], *, skip: Iterable[str] = ()
) -> None:
    """Refuse a ``--label`` KEY that names no method and no row of the table, and labels that
    give two rows one name.

    Raises:
        ValueError: names the KEY, the closest method or row name and all of them; or the two
            rows that would share a name (the fix: another label).
    """
    skip = list(skip)
    defaults = row_names(rows, skip=skip)
    methods = sorted({row_method(r) for r in rows})
    known = [*methods, *(d for d in defaults if d not in methods)]
    for key in labels:
        if key not in known:
            raise ValueError(
                f"--label {key}={labels[key]}: no row of this table is of method {key!r} or is "
                f"named so{did_you_mean(key, known)}; fix: a KEY among the methods and rows "
                f"{', '.join(map(repr, known))}"
            )
    named = row_names(rows, labels, skip=skip)
    seen: dict[tuple, str] = {}
    for row, default, name in zip(rows, defaults, named):
        where = (name, *(str(row.get(k, "—")) for k in skip))
        if where in seen and seen[where] != default:
            raise ValueError(
                f"--label: rows {seen[where]!r} and {default!r} would both be named {name!r}; "
                "fix: give each its own --label"
            )
        seen[where] = default


def label_column(rows: list[dict], labels: Mapping[str, str] | None) -> dict[str, list[str]]:
    """``{"label": each row's name}`` when ``labels`` are given (:func:`.row_names.row_names`,
    checked: :func:`.row_names.check_labels`), else ``{}``: a table's first column."""
    if not labels:
        return {}
    check_labels(rows, labels)
    return {"label": row_names(rows, labels)}


def companion_rows(rows: list[dict], labels: Mapping[str, str] | None = None) -> list[dict]:
    """Each row as the ``.json`` companion of a table's CSV names it: ``{"name"`` (its
    :func:`.row_names.row_names`, with ``labels``), ``"method"``, ``"seeds"``, ``"settings"``
    (its whole :func:`.protocols.protocol_settings`, hashes included)``}``."""
    return [
        {"name": n, "method": row_method(r), "seeds": r["seed_list"],
         "settings": r["protocol_settings"]}
        for r, n in zip(rows, row_names(rows, labels))
    ]  # fmt: skip
