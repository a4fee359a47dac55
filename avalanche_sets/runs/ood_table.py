"""The OOD split in a table: ``avalanche-sets table --metric ood_auroc`` (or ``ood_precision``,
``ood_recall``).

A run of a learner that splits its unlabeled images records how well it did at the final
evaluation (:attr:`~.record.RunRecord.ood_split`: per domain and pooled over the stream,
against the oracle). :func:`ood_summary` makes a table row's values of it — the mean over
seeds of each run's pooled value, with its 95% Student-t interval over seeds, as the accuracy
has — and :func:`write_ood_table` writes the table. A row whose runs hold no split shows "—"
(never 0), and the footer says why. Reading and tabling needs numpy alone.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..metrics import stats
from .record import OOD_METRICS, RunRecord
from .report import _domains, _labels, protocol_lines, table_protocol
from .row_names import companion_rows, label_column
from .table_metrics import check_table_metric

__all__ = ["ood_summary", "ood_footer", "write_ood_table"]

_TITLES = {"auroc": "OOD AUROC", "precision": "ID precision", "recall": "ID recall"}
_MEANS = {
    "auroc": "area under the ROC curve of minus the split's OOD score (ORDER's: the distance to "
    "the nearest prototype; a detector of one's own: its own) with the in-distribution "
    "unlabeled images as positives",
    "precision": "of the unlabeled images the split kept as in-distribution, the share that "
    "are in-distribution",
    "recall": "of the in-distribution unlabeled images, the share the split kept",
}


def ood_summary(recs: Sequence[RunRecord]) -> dict | None:
    """One table row's OOD split, from its runs (one per seed): ``None`` when none of them
    holds one; else, per measure of :data:`~.record.OOD_METRICS`, ``{"value", "ci95",
    "per_domain", "each"}``, and ``seed_list``: the seeds whose runs hold a split.

    ``value``: the mean over those seeds of each run's pooled value (NaN where a run's is
    undefined); ``ci95``: its 95% Student-t half-width over seeds (NaN for one seed, or an
    undefined value); ``per_domain``: ``{domain: mean over seeds}``; ``each``: each seed's
    pooled value, in ``seed_list`` order."""
    have = [r for r in recs if r.ood_split is not None]
    if not have:
        return None
    out: dict = {"seed_list": [r.seed for r in have]}
    domains = have[0].ood_split["domains"]
    for m in OOD_METRICS:
        each = np.array([r.ood_value(m) for r in have], dtype=np.float64)
        defined = not np.isnan(each).any() and len(each) > 1
        per = np.array(
            [[math.nan if v is None else v for v in r.ood_split[m]] for r in have],
            dtype=np.float64,
        )
        out[m] = {
            "value": float(each.mean()),
            "ci95": stats.seed_ci95(each) if defined else math.nan,
            "per_domain": dict(zip(domains, map(float, per.mean(axis=0)))),
            "each": each.tolist(),
        }
    return out


def _cell(v: float, ci: float = math.nan) -> str:
    if math.isnan(v):
        return "n/a"
    return f"{100 * v:.2f}" + ("" if math.isnan(ci) else f" ± {100 * ci:.2f}")


def ood_footer(rows: list[dict], measure: str) -> list[str]:
    """What every number of :func:`write_ood_table` of ``measure`` is, and what "—" means."""
    with_split = [r["ood"] for r in rows if r.get("ood")]
    ns = sorted({len(o["seed_list"]) for o in with_split})
    lines = [
        f"{_TITLES[measure]} (%): {_MEANS[measure]}; over every unlabeled image of the final "
        "evaluation's episodes (the evaluated stream, every domain) pooled, and per domain in "
        "the domain columns; the ground truth is the episodes' OOD flag, read for this measure "
        "only (no learner reads it).",
    ]
    if any(n > 1 for n in ns):
        n = f"n = {ns[-1]}" if len(ns) == 1 else "n = each row's seeds"
        lines.append(f"±: the 95% Student-t interval over seeds ({n}); a row of one seed has none.")
    elif ns:
        lines.append("One seed per row: no interval (the measure is pooled over images).")
    if len(with_split) < len(rows):
        lines.append(
            "—: the row's runs record no OOD split: the method splits no unlabeled images, or "
            "its records were written before result.json held the split (re-run them); never "
            "shown as 0."
        )
    lines.append("n/a: undefined in a seed (no image kept as ID, no ID image, or one class only).")
    return lines + protocol_lines(rows)


def write_ood_table(
    rows: list[dict],
    metric: str,
    out: str | Path | None = None,
    *,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Markdown table of one OOD split measure (``metric``: ``ood_auroc``, ``ood_precision``
    or ``ood_recall``) of :func:`~.report.aggregate_results`'s rows: its value % ± 95% interval
    over seeds, per domain, the seeds it is over; with :func:`ood_footer`. When ``out`` is
    given, also ``out``.md (the same), ``out``.csv and ``out``.json (``{"csv", "metric",
    "protocol", "footer", "rows"}``). ``labels``: as :func:`~.report.write_table`'s (a first
    ``label`` column)."""
    measure = check_table_metric(metric).removeprefix("ood_")
    if measure not in OOD_METRICS:
        raise ValueError(f"write_ood_table: {metric!r} is no OOD measure; use write_table")
    if not rows:
        return ""
    keys, domains = _labels(rows), _domains(rows)
    named = label_column(rows, labels)
    head = [*named, *keys, f"{_TITLES[measure]} (%)", *domains, "seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows):
        ood = r.get("ood")
        got = ood[measure] if ood else None
        cells = [
            *(names[i] for names in named.values()),
            *(str(r[k]) for k in keys),
            "—" if got is None else _cell(got["value"], got["ci95"]),
            *("—" if got is None or d not in got["per_domain"]
              else _cell(got["per_domain"][d]) for d in domains),
            "—" if got is None else ", ".join(map(str, ood["seed_list"])),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    footer = ood_footer(rows, measure)
    text = "\n".join(lines + [""] + [f"{line}  " for line in footer]).rstrip()
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text + "\n")
        shown = [{"label": n, **r} for r, n in zip(rows, named["label"])] if named else rows
        _write_csv(shown, [*named, *keys], domains, measure, out.with_suffix(".csv"))
        companion = {"csv": out.with_suffix(".csv").name, "metric": metric,
                     "protocol": table_protocol(rows), "footer": footer,
                     "rows": companion_rows(rows, labels)}  # fmt: skip
        out.with_suffix(".json").write_text(json.dumps(companion, indent=2) + "\n")
    return text


def _write_csv(rows: list[dict], keys: list[str], domains: list[str], measure: str,
               path: Path) -> None:  # fmt: skip
    """One line per row: an empty cell where the row has no split (never 0)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*keys, measure, "ci95", *domains, "seeds", "seed_list"])
        for r in rows:
            got = r["ood"][measure] if r.get("ood") else None
            if got is None:
                w.writerow([*(r[k] for k in keys), "", "", *("" for _ in domains), 0, ""])
                continue
            w.writerow([
                *(r[k] for k in keys), got["value"], got["ci95"],
                *(got["per_domain"].get(d, "") for d in domains),
                len(r["ood"]["seed_list"]), " ".join(map(str, r["ood"]["seed_list"])),
            ])  # fmt: skip
