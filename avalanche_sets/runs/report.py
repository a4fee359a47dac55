"""Tables and plots from run folders: one run's ``table.md`` and heatmap, and the paper table.

* :func:`run_table` / :func:`write_run_report` — what one finished run folder shows
  (``table.md``: per-domain accuracy ± 95% CI, forgetting, BWT; ``accuracy_matrix.png``),
  always recomputed from the record's accuracy matrix;
* :func:`find_results` / :func:`aggregate_results` / :func:`write_table` — run folders
  aggregated into one row per protocol
  (:mod:`.protocols`: runs that differ in anything but their seed are never averaged), with
  95% intervals over seeds, the paired Δ against a reference method (its interval over test
  episodes and its paired interval over seeds, which alone may call it resolved), a footer
  saying what every ± is and the protocol every row shares (settings, data, numeric path,
  code: :func:`table_protocol`) (``avalanche-sets table``, ``benchmarks/reproduce.py``);
  :mod:`.row_plots` draws the rows, captioned with that protocol.

Every derived number comes from :mod:`avalanche_sets.metrics.stats`. Reading and tabling
records needs numpy alone: torch (for :func:`run_table`) and matplotlib (for the pictures) load
in the functions that use them.
"""

from __future__ import annotations

import csv
import json
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..metrics import stats
from .folder import MATRIX_PLOT, TABLE_FILE, atomic_write
from .protocols import (
    check_setting_names,
    code_label,
    data_label,
    did_you_mean,
    domain_order_label,
    group_protocols,
    numerics_label,
    ood_label,
    protocol_setting,
    protocol_settings,
    settings_agree,
    shared_settings,
)
from .record import RESULT_FILE, RunRecord, read_record
from .row_names import companion_rows, label_column, label_keys

__all__ = [
    "run_table",
    "write_run_report",
    "write_heatmap",
    "refresh_run_table",
    "find_results",
    "aggregate_results",
    "write_table",
    "table_footer",
    "table_protocol",
    "protocol_lines",
    "row_label",
    "fit_title",
    "seed_ci95",
    "paired_difference",
    "PairedDelta",
    "paired_delta",
    "delta_text",
]


def fit_title(text: str, width: int = 60, max_lines: int = 3) -> str:
    """``text`` wrapped to lines of at most ``width`` characters (a long method name such as
    ``my_package.methods:MyMethod`` is broken too), at most ``max_lines`` of them (the last
    ends in ``…`` when cut): a picture's title that fits its figure."""
    lines = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 1] + "…"
    return "\n".join(lines)


# ------------------------------------------------------------------------ one run
def run_table(record: RunRecord) -> str:
    """The ``table.md`` of a finished run, recomputed from its record's accuracy matrix.

    Per-domain accuracy ± 95% CI, forgetting and BWT as :meth:`~.training.RunResult.table`
    writes them (one definition, :mod:`avalanche_sets.metrics.stats`), whatever the format of
    the ``result.json`` the record was read from.
    """
    from ..training.runner import RunResult  # torch: the table command does not need it

    res = record.result
    return (
        RunResult(
            domains=res["domains"],
            matrix=res["matrix"],
            ci95=res["ci95"],
            episode_acc=res["episode_acc"],
        ).table()  # fmt: skip
        + "\n"
    )


def write_run_report(folder: str | Path, record: RunRecord) -> None:
    """Write a run folder's ``table.md`` and ``accuracy_matrix.png`` from its record."""
    folder = Path(folder)
    atomic_write(folder / TABLE_FILE, run_table(record), single_writer=True)
    write_heatmap(folder, record)


def write_heatmap(folder: str | Path, record: RunRecord) -> Path:
    """Write a run folder's ``accuracy_matrix.png`` from its record (``avalanche-sets heatmap``
    draws it again for a run whose picture was not kept); a long method name wraps in the
    title (:func:`fit_title`) instead of running off the picture."""
    from ..metrics.accuracy_matrix import plot_accuracy_matrix  # matplotlib

    folder = Path(folder)
    res = record.result
    n_domains = len(res["domains"])
    title = f"{record.method}, seed {record.seed}: test accuracy (%) after each training domain"
    return plot_accuracy_matrix(
        [[math.nan if v is None else 100 * v for v in row] for row in res["matrix"]],
        res["domains"],
        folder / MATRIX_PLOT,
        # the figure is max(4, 1.1 n + 2.5) inches wide: about 9 title characters per inch
        title=fit_title(title, width=int(9 * max(4.0, 1.1 * n_domains + 2.5))),
    )


def refresh_run_table(record: RunRecord) -> bool:
    """Rewrite the ``table.md`` of the run folder a record was read from (its ``folder``, as
    :func:`~.record.read_record` sets it) when it differs from :func:`run_table`; True if it
    did.

    The record itself is left as it is: the table is derived from it.

    Raises:
        ValueError: a record that was not read from a folder.
    """
    if record.folder is None:
        raise ValueError(f"the record of {record.where} was not read from a run folder: no "
                         "table.md to refresh; fix: read it with read_record(folder)")  # fmt: skip
    path = record.folder / TABLE_FILE
    text = run_table(record)
    if path.is_file() and path.read_text() == text:
        return False
    atomic_write(path, text)
    return True


# ------------------------------------------------------------------------ many runs
def find_results(folders: Iterable[str | Path]) -> list[RunRecord]:
    """All finished run records under the given folders (recursively), in path order.

    Each is :func:`~.record.read_record` of a run folder (its ``folder`` is where it was
    found); a folder written in a format this version cannot read raises
    :class:`~.record.ResultsVersionError` naming it.
    """
    return [
        read_record(path.parent)
        for folder in folders
        for path in sorted(Path(folder).rglob(RESULT_FILE))
    ]


def seed_ci95(values: Sequence[float]) -> float:
    """Half-width of the 95% CI of the mean over seeds (Student t): :func:`.stats.seed_ci95`."""
    return stats.seed_ci95(values)


def paired_difference(a: RunRecord, b: RunRecord) -> tuple[float, float]:
    """Mean accuracy difference ``a − b`` over the *same* test episodes, with its 95% CI.

    Runs with the same benchmark seed evaluate identical episodes, so the per-episode
    differences are paired: their CI excludes the spread between domains and episodes that
    both methods share, which dominates the unpaired CI of a single seed
    (:func:`.stats.paired_difference`).
    """
    if a.seed != b.seed:
        raise ValueError("paired differences need runs of the same seed and test episodes")
    return stats.paired_difference(a.result["episode_acc"], b.result["episode_acc"])


class PairedDelta(NamedTuple):
    """A paired Δ of one row against its reference (:func:`paired_delta`)."""

    delta: float
    """Mean over the paired seeds of each seed's mean per-episode difference."""
    ci95: float
    """Its 95% half-width over test episodes (:func:`.stats.combine_paired`): not over seeds."""
    per_seed: dict[int, float]
    """``{seed: Δ_s}``, by seed."""
    seeds_ci95: float
    """The paired Student-t 95% half-width over those seeds (:func:`.stats.paired_over_seeds`;
    NaN for one seed)."""

    @property
    def resolved(self) -> bool:
        """:func:`.stats.resolved_over_seeds`: 3 seeds or more, seed-level interval without 0."""
        return stats.resolved_over_seeds(self.delta, self.seeds_ci95, len(self.per_seed))


def paired_delta(runs: Sequence[RunRecord], references: Sequence[RunRecord]) -> PairedDelta | None:
    """The paired Δ of ``runs`` against ``references`` over the seeds both have; None if none.

    Runs are paired by their seed, never by their position: a seed that one side lacks is left
    out, whatever order either side lists its runs in. Each paired seed gives
    :func:`paired_difference` on its test episodes (``Δ_s``); the seeds are combined two ways:
    :func:`.stats.combine_paired` (mean of the Δ_s, ± over the test episodes drawn — it leaves
    out the variation between training seeds) and :func:`.stats.paired_over_seeds` (the paired
    Student-t interval over the seeds, of each run's mean accuracy over its episodes: the one
    that may call the difference resolved, :attr:`PairedDelta.resolved`).
    """
    by_seed = {r.seed: r for r in references}
    pairs = {r.seed: paired_difference(r, by_seed[r.seed]) for r in runs if r.seed in by_seed}
    if not pairs:
        return None
    d, ci = stats.combine_paired(list(pairs.values()))
    over_seeds = stats.paired_over_seeds(
        {r.seed: float(np.mean(r.result["episode_acc"])) for r in runs},
        {r.seed: float(np.mean(r.result["episode_acc"])) for r in references},
    )
    return PairedDelta(d, ci, {s: p[0] for s, p in sorted(pairs.items())}, over_seeds.ci95)


#: A Δ's cell marks: resolved over seeds, and too few seeds for any seed-level claim.
RESOLVED_MARK, FEW_SEEDS_MARK = "✓", "†"


def delta_text(d: float, ci: float, each: dict, seeds_ci95: float) -> str:
    """``+1.23 ± 0.45 (+1.0, +1.5, +1.2) [seeds ± 0.80 ✓]``: a paired Δ in points ± its
    interval over test episodes, the per-seed values in parentheses, and in square brackets
    its paired interval over seeds: ``✓`` when resolved (:func:`.stats.resolved_over_seeds`),
    ``†`` with fewer than :data:`.stats.MIN_SEEDS_TO_RESOLVE` seeds (no seed-level claim)."""
    k = len(each)
    seeds = "" if k == 1 else " (" + ", ".join(f"{100 * v:+.1f}" for v in each.values()) + ")"
    if k == 1:
        over = f"[1 seed {FEW_SEEDS_MARK}]"
    else:
        mark = (
            f" {FEW_SEEDS_MARK}" if k < stats.MIN_SEEDS_TO_RESOLVE
            else f" {RESOLVED_MARK}" if stats.resolved_over_seeds(d, seeds_ci95, k) else ""
        )  # fmt: skip
        over = f"[seeds ± {100 * seeds_ci95:.2f}{mark}]"
    return f"{100 * d:+.2f} ± {100 * ci:.2f}{seeds} {over}"


def _matrix(rec: RunRecord) -> np.ndarray:
    matrix = rec.result.get("matrix")
    if matrix is None:
        raise ValueError(f"run record {rec.where} has no accuracy matrix: forgetting is undefined")
    return np.array(matrix, dtype=np.float64)  # a null (not evaluated) cell is NaN


def _over_seeds(values: Sequence[float]) -> tuple[float, float]:
    """Mean over seeds and its Student-t 95% half-width; NaN where a seed's value is
    undefined (forgetting of a one-domain stream) or there is one seed."""
    x = np.asarray(values, dtype=np.float64)
    if np.isnan(x).any():
        return float(np.mean(x)), math.nan
    return float(np.mean(x)), stats.seed_ci95(x)


def _over_seeds_each(values: np.ndarray) -> np.ndarray:
    """The Student-t 95% half-width over seeds (axis 0) of every other position; NaN where a
    seed's value is NaN (a cell not evaluated)."""
    defined = ~np.isnan(values).any(axis=0)
    out = np.full(values.shape[1:], math.nan)
    out[defined] = stats.seed_ci95(values[:, defined], axis=0)
    return out


def _episode_ci(rec: RunRecord, key: str, shape) -> list:
    """A one-seed run's stored 95% half-widths over test episodes (``final_ci95``: per domain,
    ``ci95``: per matrix cell), NaN where the record has none."""
    got = np.full(shape, math.nan)
    stored = np.array(rec.result.get(key) or [], dtype=np.float64)
    if stored.shape == got.shape:
        got = stored
    return got.tolist()


def _summary(recs: list[RunRecord]) -> dict:
    """The values of one protocol's row, from its runs (one per seed)."""
    accs = [r.mean_accuracy for r in recs]
    matrices = [_matrix(r) for r in recs]
    row: dict = {"seeds": len(recs), "seed_list": [r.seed for r in recs]}
    row["accuracy"] = float(np.mean(accs))
    if len(recs) > 1:
        row["ci95"], row["ci_over"] = stats.seed_ci95(accs), "seeds"
    else:
        row["ci95"] = stats.ci95(recs[0].result["episode_acc"])
        row["ci_over"] = "episodes"
    # recomputed from each stored matrix: one definition whatever the record's format
    row["forgetting"], row["forgetting_ci95"] = _over_seeds(
        [stats.average_forgetting(m) for m in matrices]
    )
    row["bwt"], row["bwt_ci95"] = _over_seeds([stats.backward_transfer(m) for m in matrices])
    domains = recs[0].result["domains"]
    finals = np.array([r.result["final"] for r in recs], dtype=np.float64)
    row["per_domain"] = dict(zip(domains, map(float, finals.mean(axis=0))))
    if len(recs) > 1:
        half = _over_seeds_each(finals).tolist()
    else:
        half = _episode_ci(recs[0], "final_ci95", len(domains))
    row["per_domain_ci95"] = dict(zip(domains, map(float, half)))
    row["per_domain_each"] = dict(zip(domains, finals.T.tolist()))  # per seed, seed_list order
    shapes = {m.shape for m in matrices}
    if len(shapes) == 1:
        stack = np.stack(matrices)
        row["matrix"] = stack.mean(axis=0).tolist()
        row["matrix_each"] = stack.tolist()  # per seed, seed_list order; NaN: not evaluated
        row["matrix_ci95"] = (
            _over_seeds_each(stack).tolist() if len(recs) > 1
            else _episode_ci(recs[0], "ci95", stack.shape[1:])
        )  # fmt: skip
    row["seconds"] = float(np.mean([r.seconds for r in recs]))
    row["codes"] = sorted({code_label(r) for r in recs})
    row["data_sources"] = sorted({data_label(r) for r in recs})
    row["numeric_paths"] = sorted({numerics_label(r) for r in recs})
    row["ood_sources"] = sorted({ood_label(r) for r in recs})
    row["domain_orders"] = sorted({domain_order_label(r) for r in recs})
    # each seed's mean accuracy over its test episodes: what the seed rule pairs (paired_delta)
    row["seed_accuracy"] = {r.seed: float(np.mean(r.result["episode_acc"])) for r in recs}
    from .ood_table import ood_summary  # loaded here: it imports this module

    row["ood"] = ood_summary(recs)  # None: no run of the row records an OOD split
    return row


def aggregate_results(
    records: list[RunRecord],
    by: Sequence[str] = ("method",),
    *,
    pool_code: bool = False,
    vs: str | None = None,
) -> list[dict]:
    """One row per protocol (:func:`.protocols.group_protocols`): mean accuracy over seeds with
    a 95% CI, forgetting and BWT with theirs, per-domain means, and the paired Δ against ``vs``.

    Rows: runs that differ in anything but their seed (method, a preset setting, a strategy
    option, added plugins, the evaluation stream, whatever else
    :func:`~.folder.record_identity` counts, and the code unless ``pool_code``) are separate
    rows; a seed twice in one row is refused. ``by`` chooses the leading label columns and the
    order of the rows, never which runs are averaged: the settings that differ between the rows
    and are not in ``by`` follow as columns of their own (``"—"`` where a row lacks one), and
    ``code`` when rows differ in it or pool several (``pool_code``). Each key of ``by`` must be
    a setting some record has (refused with "did you mean" otherwise).

    Values: with several seeds the accuracy CI is over seeds (Student t); with one seed it is
    the episode CI of that run, marked ``ci_over="episodes"``. ``forgetting`` and ``bwt`` are
    the means over seeds of each run's average forgetting and backward transfer, recomputed from
    its accuracy matrix by :mod:`avalanche_sets.metrics.stats` (the last domain excluded; NaN
    for a one-domain stream), with their Student-t half-widths over seeds
    (``forgetting_ci95``, ``bwt_ci95``; NaN for one seed). ``matrix`` / ``matrix_ci95``: the
    accuracy matrix averaged over seeds and its half-widths; ``matrix_each`` /
    ``per_domain_each``: each seed's matrix and final accuracies, in ``seed_list`` order (for
    :func:`.row_plots.write_row_plots`, which draws each seed of a two-seed row).

    ``vs``: a method; every row gets ``delta``, its :func:`paired_delta` against the row of
    ``vs`` made in the same setting (the identity less :data:`~.protocols.ARM_FIELDS`, and the
    same code unless ``pool_code``) on every setting both rows read
    (:func:`~.protocols.settings_agree`: a memory method's row at ``mem_size=20`` pairs with
    MSKM's row, which reads no memory size) as ``{"vs", "delta", "ci95", "per_seed",
    "seeds_ci95", "resolved"}`` (:class:`PairedDelta`), ``{"vs", "reference": True}`` for a row
    of ``vs`` itself, or None when no row of ``vs`` shares its setting. Each row also holds
    ``protocol_settings`` (its :func:`.protocols.protocol_settings`), ``data_sources`` and
    ``numeric_paths`` (its runs' distinct :func:`.protocols.data_label` and
    :func:`.protocols.numerics_label`), ``ood_sources`` and ``domain_orders``
    (:func:`.protocols.ood_label`, :func:`.protocols.domain_order_label`): :func:`table_protocol`
    reads them; ``ood``: its runs' OOD split over seeds (:func:`.ood_table.ood_summary`;
    ``None``: no run holds one); ``seed_accuracy`` (``{seed: mean accuracy over its test
    episodes}``) and ``paired_setting`` (its :func:`.protocols.protocol_setting`): what the
    seed rule pairs when a table bolds a best row (:mod:`.grouped_table`).

    Raises:
        ValueError: a ``by`` key no record has, a ``vs`` method no record has (both with "did
            you mean"), a seed twice in one protocol, or two rows of ``vs`` in one setting.
    """
    by = list(by)
    groups = group_protocols(records, pool_code=pool_code)
    settings = [protocol_settings(g[0]) for g in groups]
    check_setting_names(by, settings, flag="--by")
    if vs is not None:
        methods = sorted({r.method for r in records})
        if vs not in methods:
            raise ValueError(
                f"--vs {vs!r}: no run record is of this method{did_you_mean(vs, methods)}; the "
                f"methods are {', '.join(methods)}"
            )
    codes = [sorted({code_label(r) for r in g}) for g in groups]
    names = list(dict.fromkeys(n for s in settings for n in s))
    differing = [n for n in names if n not in by and len({s.get(n, "—") for s in settings}) > 1]
    show_code = "code" not in by and (
        len({tuple(c) for c in codes}) > 1 or any(len(c) > 1 for c in codes)
    )
    rows, arms = [], []
    for group, setting, code in zip(groups, settings, codes):
        row = {k: ", ".join(code) if k == "code" else setting.get(k, "—") for k in by}
        row.update({k: setting[k] if k in setting else "—" for k in differing})
        if show_code:
            row["code"] = ", ".join(code)
        arm = protocol_setting(group[0], pool_code=pool_code)
        row.update(_summary(group), protocol_settings=setting, paired_setting=arm)
        rows.append(row)
        arms.append((group, arm))
    if vs is not None:
        _add_deltas(rows, arms, vs)
    labels = label_keys(rows) if rows else []
    order = sorted(range(len(rows)), key=lambda i: [_sort_key(rows[i][k]) for k in labels])
    return [rows[i] for i in order]


def _sort_key(text: str) -> tuple:
    """Numbers in numeric order (``n_shot`` 5 before 10), then text."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def _add_deltas(rows: list[dict], arms: list[tuple[list[RunRecord], dict]], vs: str) -> None:
    """A row's reference: the row of ``vs`` whose setting agrees with the row's on every setting
    both read (:func:`~.protocols.settings_agree`); more than one is refused."""
    for row, (group, setting) in zip(rows, arms):
        refs = [
            (r, g)
            for r, (g, s) in zip(rows, arms)
            if g[0].method == vs and settings_agree(s, setting)
        ]
        if len(refs) > 1:
            raise ValueError(
                f"--vs {vs}: {len(refs)} rows of {vs} share one setting with the row of "
                f"{group[0].method} (they agree with it on every setting both read and "
                "differ in their strategy options, plugins, code of one's own or tag, or in a "
                f"setting {group[0].method} does not read), so its reference is ambiguous; "
                f"fix: table the run folders of one {vs} configuration only, or --vs a method "
                "that reads those settings"
            )
        if group[0].method == vs:
            row["delta"] = {"vs": vs, "reference": True}
        elif not refs:
            row["delta"] = None
        else:
            got = paired_delta(group, refs[0][1])
            row["delta"] = None if got is None else {
                "vs": vs, "delta": got.delta, "ci95": got.ci95, "per_seed": got.per_seed,
                "seeds_ci95": got.seeds_ci95, "resolved": got.resolved,
            }  # fmt: skip


def _pts(v: float, ci: float = math.nan) -> str:
    if math.isnan(v):
        return "n/a"
    return f"{100 * v:.2f}" + ("" if math.isnan(ci) else f" ± {100 * ci:.2f}")


_labels = label_keys


def _domains(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(d for r in rows for d in r["per_domain"]))


def _delta_cell(delta: dict | None) -> str:
    if delta is None:
        return "—"
    if delta.get("reference"):
        return "(reference)"
    return delta_text(delta["delta"], delta["ci95"], delta["per_seed"], delta["seeds_ci95"])


def row_label(row: dict, labels: Sequence[str]) -> str:
    """A row as a legend names it: its first label bare, the others ``key=value``
    (``order, gamma=0.05``; a setting the row lacks is left out)."""
    first, *rest = labels
    return ", ".join([str(row[first]), *(f"{k}={row[k]}" for k in rest if row[k] != "—")])


def table_protocol(rows: list[dict]) -> dict:
    """What every row of a table shares, and what tells them apart: ``settings`` (the
    :func:`.protocols.shared_settings` of the rows, less those shown as columns and the data's
    hash, which ``data`` names), ``columns`` (the settings the rows differ in or are labelled
    by), ``data`` (:func:`.protocols.data_label` of every run), ``ood_sources``
    (:func:`.protocols.ood_label`), ``domain_order`` (:func:`.protocols.domain_order_label`),
    ``numerics`` (:func:`.protocols.numerics_label`) and ``code``
    (:func:`.protocols.code_label`), each a sorted list of the distinct values."""
    labels = _labels(rows)

    def every(field: str) -> list[str]:
        return sorted({v for r in rows for v in r[field]})

    return {
        "settings": shared_settings([r["protocol_settings"] for r in rows],
                                    skip=[*labels, "data"]),  # fmt: skip
        "columns": labels, "data": every("data_sources"),
        "ood_sources": every("ood_sources"), "domain_order": every("domain_orders"),
        "numerics": every("numeric_paths"), "code": every("codes"),
    }  # fmt: skip


#: the settings a protocol line names first (the episode and the stream); the rest follow
_FIRST = ("source", "n_way", "n_shot", "n_query", "n_unlabeled", "n_ood", "mem_size",
          "tasks_per_domain")  # fmt: skip


def protocol_lines(rows: list[dict]) -> list[str]:
    """The protocol of :func:`table_protocol` in words, one line each for the shared settings,
    the data, the OOD sources, the domain order, the numeric path and the code (the end of a
    table's footer, a picture's caption, the CSV's ``.json`` companion)."""
    p = table_protocol(rows)
    first = sorted(p["settings"], key=lambda k: _FIRST.index(k) if k in _FIRST else len(_FIRST))
    settings = ", ".join(f"{k} {p['settings'][k]}" for k in first) or "none"
    differ = " (runs differ)"
    lines = [
        f"Protocol (every row): {settings}.",
        f"Data{differ * (len(p['data']) > 1)}: {'; '.join(p['data'])}.",
        f"OOD sources{differ * (len(p['ood_sources']) > 1)}: {'; '.join(p['ood_sources'])}.",
        f"Domain order{differ * (len(p['domain_order']) > 1)}: {'; '.join(p['domain_order'])}.",
        f"Numerics{differ * (len(p['numerics']) > 1)}: {'; '.join(p['numerics'])}.",
    ]
    codes = p["code"]
    if any(len(r["codes"]) > 1 for r in rows):
        lines.append(
            "Code: rows pool runs of different code (--pool-code): the code column names "
            f"each row's versions ({', '.join(codes)})."
        )
    elif len(codes) > 1:
        lines.append(f"Code: the rows were made by different code ({', '.join(codes)}; code "
                     "column), never pooled.")  # fmt: skip
    else:
        lines.append(f"Code: every run was made by {codes[0]}.")
    return lines


def table_footer(rows: list[dict]) -> list[str]:
    """What every number of :func:`write_table` is: the ± of each column (over seeds, with
    their count; over test episodes for one seed), the Δ, its pairing and its seed-level
    interval (resolved or not), forgetting and BWT, the protocol every row shares
    (:func:`protocol_lines`) and the code that made the rows."""
    ns = sorted({r["seeds"] for r in rows if r["ci_over"] == "seeds"})
    lines = []
    if ns:
        n = f"n = {ns[0]}" if len(ns) == 1 else "n = each row's seeds"
        lines.append(f"± (accuracy, forgetting, BWT): the 95% Student-t interval over seeds ({n}).")
    if any(r["ci_over"] == "episodes" for r in rows):
        lines.append(
            "\\* one seed: the accuracy's ± is the 95% interval over its test episodes, not "
            "over seeds; forgetting and BWT have no interval."
        )
    deltas = [r["delta"] for r in rows if r.get("delta") and not r["delta"].get("reference")]
    vs = next((r["delta"]["vs"] for r in rows if r.get("delta")), None)
    if "delta" in rows[0]:
        seeds = sorted({s for d in deltas for s in d["per_seed"]})
        each = {tuple(d["per_seed"]) for d in deltas}
        over = (
            f"seeds {', '.join(map(str, seeds))}" if len(each) == 1
            else "the seeds both rows ran"
        )  # fmt: skip
        lines.append(
            f"Δ vs {vs} (points): the row's accuracy minus {vs}'s in the same setting (every "
            "setting both rows read; the method, its options, plugins, code of one's own and tag "
            f"may differ), paired per seed on the same test episodes over "
            f"{over}: the mean of the per-seed differences (in parentheses), ± the 95% interval "
            "over test episodes (`stats.combine_paired`), which leaves out the variation between "
            "training seeds. [seeds ± h]: the paired 95% Student-t interval over the seeds both "
            f"rows ran (`stats.paired_over_seeds`); {RESOLVED_MARK}: resolved, i.e. at least "
            f"{stats.MIN_SEEDS_TO_RESOLVE} seeds and that interval excludes 0. — : no run of "
            f"{vs} in that setting."
        )
        if any(len(d["per_seed"]) < stats.MIN_SEEDS_TO_RESOLVE for d in deltas):
            lines.append(
                f"{FEW_SEEDS_MARK} fewer than {stats.MIN_SEEDS_TO_RESOLVE} seeds paired: no "
                "seed-level claim can be made (with 2 seeds t = 12.7), whatever the episode "
                "interval says."
            )
    lines.append(
        "Forgetting: per domain, its best accuracy from its own training on minus its final "
        "one; BWT: final minus just-trained accuracy; both averaged over the domains before the "
        "last (which has no later row), then over seeds."
    )
    return lines + protocol_lines(rows)


def write_table(
    rows: list[dict],
    out: str | Path | None = None,
    *,
    metric: str = "accuracy",
    labels: Mapping[str, str] | None = None,
) -> str:
    """Markdown table (accuracy % ± 95% CI, forgetting and BWT ± theirs, the Δ when the rows
    have one, per-domain final accuracy, seeds) with :func:`table_footer`; also, when ``out``
    is given, ``out``.md (the same), ``out``.csv (one line per row, plain: any CSV reader takes
    it as it is) and ``out``.json, the CSV's companion: ``{"csv", "protocol":
    table_protocol(rows), "footer": table_footer(rows), "rows": companion_rows(rows, labels)}``.

    ``labels``: ``{method or row name: name}`` (:mod:`.row_names`, ``--label``): a first
    ``label`` column holds each row's name in the Markdown and the CSV; none without labels.

    ``metric``: ``"accuracy"``, or a measure of the OOD split (``"ood_auroc"``,
    ``"ood_precision"``, ``"ood_recall"``: :func:`.ood_table.write_ood_table`).

    Raises:
        ValueError: another ``metric`` (:func:`.table_metrics.check_table_metric`).
    """
    if metric != "accuracy":
        from .ood_table import write_ood_table

        return write_ood_table(rows, metric, out, labels=labels)
    if not rows:
        return ""
    keys, domains = _labels(rows), _domains(rows)
    named = label_column(rows, labels)
    with_delta = "delta" in rows[0]
    vs = next((r["delta"]["vs"] for r in rows if r.get("delta")), None)
    head = [*named, *keys, "accuracy (%)", *([f"Δ vs {vs} (pts)"] if with_delta else []),
            "forgetting (pts)", "BWT (pts)", *domains, "seeds", "s/run"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows):
        ci = "n/a" if math.isnan(r["ci95"]) else f"{100 * r['ci95']:.2f}"
        cells = [
            *(names[i] for names in named.values()),
            *(str(r[k]) for k in keys),
            f"{100 * r['accuracy']:.2f} ± {ci}" + ("" if r["ci_over"] == "seeds" else "*"),
            *([_delta_cell(r["delta"])] if with_delta else []),
            _pts(r["forgetting"], r["forgetting_ci95"]),
            _pts(r["bwt"], r["bwt_ci95"]),
            *(f"{100 * r['per_domain'][d]:.1f}" if d in r["per_domain"] else "—"
              for d in domains),
            ", ".join(map(str, r["seed_list"])),
            f"{r['seconds']:.0f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines + [""] + [f"{line}  " for line in table_footer(rows)]).rstrip()
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text + "\n")
        _write_csv(rows, keys, domains, out.with_suffix(".csv"), named)
        companion = {
            "csv": out.with_suffix(".csv").name,
            "protocol": table_protocol(rows),
            "footer": table_footer(rows),
            "rows": companion_rows(rows, labels),
        }
        out.with_suffix(".json").write_text(json.dumps(companion, indent=2) + "\n")
    return text


def _write_csv(rows: list[dict], keys: list[str], domains: list[str], path: Path,
               named: dict[str, list[str]]) -> None:  # fmt: skip
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*named, *keys, "accuracy", "ci95", "ci_over",
                    "delta", "delta_ci95", "delta_seeds",
                    "delta_per_seed", "delta_seeds_ci95", "delta_resolved",
                    "forgetting", "forgetting_ci95", "bwt", "bwt_ci95", *domains, "seeds",
                    "seed_list", "seconds", "codes"])  # fmt: skip
        for i, r in enumerate(rows):
            dl = r.get("delta") or {}
            each = dl.get("per_seed", {})
            w.writerow([
                *(names[i] for names in named.values()), *(r[k] for k in keys),
                r["accuracy"], r["ci95"], r["ci_over"],
                dl.get("delta", ""), dl.get("ci95", ""), " ".join(map(str, each)),
                " ".join(map(str, each.values())), dl.get("seeds_ci95", ""),
                dl.get("resolved", ""),
                r["forgetting"], r["forgetting_ci95"], r["bwt"], r["bwt_ci95"],
                *(r["per_domain"].get(d, "") for d in domains), r["seeds"],
                " ".join(map(str, r["seed_list"])), r["seconds"], " ".join(r["codes"]),
            ])  # fmt: skip
