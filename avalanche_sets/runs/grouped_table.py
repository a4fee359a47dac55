"""A table in a paper's shape: one line per method, one column per value of a setting
(``avalanche-sets table --format latex --columns n_shot``: the paper's Table 2, 1-shot and
5-shot side by side), in LaTeX (booktabs) or Markdown.

Each cell is the mean over seeds ± its 95% interval, the same numbers as the table's CSV
(:func:`~.report.write_table`), rounded as its Markdown. The best cell of a column is bold only
where its difference to the next best is resolved by the seed rule: the paired Student-t
interval over the seeds both rows ran excludes 0, with at least 3 seeds
(:func:`~avalanche_sets.metrics.stats.paired_over_seeds` and its ``resolved``, the rule of the
table's Δ ✓), and both rows were made in the same setting (same test episodes,
:func:`.protocols.settings_agree`). Footnotes say what ± is, what bold means, ``†`` (fewer than
3 seeds: no seed-level claim) and ``*`` (one seed: the interval is over test episodes); the
protocol every row shares follows (in LaTeX as comments: a paper sets its own caption).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..metrics import stats
from ..suggest import did_you_mean
from .protocols import settings_agree
from .report import _labels, _sort_key, protocol_lines
from .row_names import check_labels, row_method, row_names

__all__ = ["FORMATS", "Cell", "check_columns", "grouped_cells", "grouped_table"]

#: the formats of ``table --format``
FORMATS = ("markdown", "latex")
FEW, ONE = "†", "*"
_MEASURES = {"accuracy": "test accuracy", "ood_auroc": "OOD AUROC",
             "ood_precision": "ID precision", "ood_recall": "ID recall"}  # fmt: skip


class Cell(NamedTuple):
    """One cell of a grouped table: a row's value in one column."""

    value: float
    ci95: float
    """Its 95% half-width (NaN: none)."""
    ci_over: str
    """``seeds``, or ``episodes`` (one seed)."""
    per_seed: dict
    """``{seed: value}``: what the seed rule pairs."""
    setting: dict
    """The row's :func:`.protocols.protocol_setting` (its test episodes)."""
    bold: bool = False


def check_columns(rows: Sequence[Mapping], columns: str) -> None:
    """Refuse a ``--columns`` setting that is no column of the table or does not vary.

    Raises:
        ValueError: names the setting, the closest column and the settings that vary (the fix).
    """
    varying = [k for k in _labels(list(rows)) if k != "method"
               and len({str(r[k]) for r in rows}) > 1]  # fmt: skip
    if columns == "method":
        raise ValueError("--columns method: the methods are the rows; fix: name a setting "
                         "the rows differ in, e.g. --columns n_shot")  # fmt: skip
    if not varying or columns not in varying:
        known = ", ".join(varying) or "none (the rows differ only in their method)"
        present = columns in rows[0] or columns in rows[0].get("protocol_settings", {})
        why = ("every row has the same value: nothing to group by" if present
               else f"no row has this setting{did_you_mean(columns, varying)}")  # fmt: skip
        raise ValueError(f"--columns {columns}: {why}; fix: --columns one of the settings the "
                         f"rows differ in: {known}")  # fmt: skip


def _cell(row: Mapping, metric: str) -> Cell | None:
    """A row's cell of ``metric``; None where the row has no value of it (no OOD split)."""
    if metric == "accuracy":
        return Cell(row["accuracy"], row["ci95"], row["ci_over"], dict(row["seed_accuracy"]),
                    row["paired_setting"])  # fmt: skip
    ood = row.get("ood")
    if not ood:
        return None
    got = ood[metric.removeprefix("ood_")]
    return Cell(got["value"], got["ci95"], "seeds", dict(zip(ood["seed_list"], got["each"])),
                row["paired_setting"])  # fmt: skip


def _bold(cells: list[Cell | None]) -> list[Cell | None]:
    """The column with its best cell bold where the seed rule resolves it from the next."""
    ranked = sorted((c.value, i) for i, c in enumerate(cells)
                    if c is not None and math.isfinite(c.value))  # fmt: skip
    if len(ranked) < 2:
        return cells
    (_, best), (_, nxt) = ranked[-1], ranked[-2]
    a, b = cells[best], cells[nxt]
    if (
        settings_agree(a.setting, b.setting)
        and stats.paired_over_seeds(a.per_seed, b.per_seed).resolved
    ):
        cells = list(cells)
        cells[best] = a._replace(bold=True)
    return cells


def grouped_cells(
    rows: Sequence[Mapping],
    columns: str | None,
    *,
    metric: str = "accuracy",
    labels: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str], list[list[Cell | None]]]:
    """``(column heads, line names, cells[line][column])`` of the grouped table: lines are the
    rows' names without ``columns`` (:func:`.row_names.row_names`), in the order of ``labels``
    (a paper's order), then the table's; one column per value of ``columns`` in numeric order
    (None: one column). Bold as the module says.

    Raises:
        ValueError: :func:`check_columns`, :func:`.row_names.check_labels`.
    """
    skip = [] if columns is None else [columns]
    if columns is not None:
        check_columns(rows, columns)
    check_labels(rows, labels or {}, skip=skip)
    names = row_names(rows, labels, skip=skip)
    keys = list(labels or {})
    defaults = row_names(rows, skip=skip)

    def rank(i: int) -> int:
        hits = [keys.index(k) for k in (defaults[i], row_method(rows[i])) if k in keys]
        return min(hits, default=len(keys))

    lines = list(dict.fromkeys(names[i] for i in sorted(range(len(rows)), key=rank)))
    values = (["all"] if columns is None
              else sorted({str(r[columns]) for r in rows}, key=_sort_key))  # fmt: skip
    cells: list[list[Cell | None]] = [[None] * len(values) for _ in lines]
    for row, name in zip(rows, names):
        col = 0 if columns is None else values.index(str(row[columns]))
        cells[lines.index(name)][col] = _cell(row, metric)
    for j in range(len(values)):
        for i, c in enumerate(_bold([line[j] for line in cells])):
            cells[i][j] = c
    heads = [_MEASURES[metric] + " (%)" if columns is None else _head(columns, v) for v in values]
    return heads, lines, cells


def _head(key: str, value: str) -> str:
    return {"n_shot": f"{value}-shot", "n_way": f"{value}-way"}.get(key, f"{key} = {value}")


def _text(c: Cell) -> str:
    """``65.24 ± 2.58`` (``*``, ``†`` after), as the table's Markdown rounds it."""
    ci = "" if math.isnan(c.ci95) else f" ± {100 * c.ci95:.2f}"
    return f"{100 * c.value:.2f}{ci}" if math.isfinite(c.value) else "n/a"


def _marks(c: Cell) -> str:
    few = len(c.per_seed) < stats.MIN_SEEDS_TO_RESOLVE
    return (ONE if c.ci_over == "episodes" else "") + (FEW if few else "")


def _notes(cells: list[list[Cell | None]], metric: str) -> list[str]:
    """What ±, bold, † and * mean (only the marks present)."""
    flat = [c for line in cells for c in line if c is not None]
    ns = sorted({len(c.per_seed) for c in flat if c.ci_over == "seeds"})
    n = "n = " + (str(ns[0]) if len(ns) == 1 else "each row's seeds")
    notes = [
        f"Cells: mean {_MEASURES[metric]} (%) over seeds ± the 95% Student-t interval over "
        f"seeds ({n}). Bold: the best of its column, where its paired difference to the next "
        "best is resolved over seeds (the paired 95% Student-t interval over the seeds both "
        f"ran excludes 0, at least {stats.MIN_SEEDS_TO_RESOLVE} seeds, same setting); no bold: "
        "not resolved. —: no run in that column.",
    ]
    if any(FEW in _marks(c) for c in flat):
        notes.append(f"{FEW} fewer than {stats.MIN_SEEDS_TO_RESOLVE} seeds: no seed-level "
                     "claim can be made (never bold).")  # fmt: skip
    if any(c.ci_over == "episodes" for c in flat):
        notes.append(f"{ONE} one seed: the ± is the 95% interval over its test episodes, not "
                     "over seeds.")  # fmt: skip
    return notes


def grouped_table(
    rows: Sequence[Mapping],
    columns: str | None = None,
    *,
    fmt: str = "markdown",
    metric: str = "accuracy",
    labels: Mapping[str, str] | None = None,
) -> str:
    """The grouped table (:func:`grouped_cells`) as ``fmt`` (:data:`FORMATS`), with its notes
    and :func:`~.report.protocol_lines`.

    Raises:
        ValueError: an unknown ``fmt``; :func:`grouped_cells`'s.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    heads, lines, cells = grouped_cells(rows, columns, metric=metric, labels=labels)
    notes, protocol = _notes(cells, metric), protocol_lines(list(rows))
    if fmt == "latex":
        return _latex(heads, lines, cells, notes, protocol)
    out = ["| method | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for name, line in zip(lines, cells):
        texts = ["—" if c is None else (f"**{_text(c)}**" if c.bold else _text(c)) + _marks(c)
                 for c in line]  # fmt: skip
        out.append(f"| {name} | " + " | ".join(texts) + " |")
    return "\n".join(out + [""] + [f"{x}  " for x in [*notes, *protocol]]).rstrip()


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "±": r"$\pm$", "—": "---", "–": "--", "†": r"$^\dagger$", "≥": r"$\geq$"}  # fmt: skip


def tex_escape(text: str) -> str:
    """``text`` as LaTeX prints it (its special characters and ±, —, †, ≥ spelled out)."""
    return "".join(_TEX.get(ch, ch) for ch in text)


def _latex(heads, lines, cells, notes: list[str], protocol: list[str]) -> str:
    """booktabs ``tabular``; notes after it as small text, the protocol as comments."""
    out = ["% avalanche-sets table --format latex; needs \\usepackage{booktabs}",
           "\\begin{tabular}{l" + "c" * len(heads) + "}", "\\toprule",
           "Method & " + " & ".join(map(tex_escape, heads)) + " \\\\", "\\midrule"]  # fmt: skip
    for name, line in zip(lines, cells):
        texts = []
        for c in line:
            if c is None:
                texts.append("--")
                continue
            body = "$" + _text(c).replace(" ± ", r" \pm ") + "$"
            marks = _marks(c).replace(ONE, "^{*}").replace(FEW, "^{\\dagger}")
            body = body[:-1] + marks + "$" if marks else body
            texts.append("{\\boldmath" + body + "}" if c.bold else body)
        out.append(tex_escape(name) + " & " + " & ".join(texts) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}", "", "{\\footnotesize"]
    out += [tex_escape(n) + ("\\\\" if k < len(notes) - 1 else "") for k, n in enumerate(notes)]
    return "\n".join([*out, "}", *(f"% {line}" for line in protocol)])
