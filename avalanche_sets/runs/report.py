"""Tables and plots from run folders: one run's ``table.md`` and heatmap, and aggregates.

* :func:`run_table` / :func:`write_run_report` — what one finished run folder shows
  (``table.md``: per-domain accuracy ± 95% CI, forgetting, BWT; ``accuracy_matrix.png``),
  always recomputed from the record's accuracy matrix;
* :func:`find_results` / :func:`aggregate_results` / :func:`write_table` — run folders
  aggregated into tables with 95% confidence intervals (``avalanche-sets table``,
  ``benchmarks/reproduce.py``).

Every derived number comes from :mod:`avalanche_sets.metrics.stats`.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..metrics import plot_accuracy_matrix, stats
from ..training.runner import RunResult
from .folder import MATRIX_PLOT, RESULT_FILE, TABLE_FILE, atomic_write, read_record

__all__ = [
    "run_table",
    "write_run_report",
    "write_heatmap",
    "refresh_run_table",
    "find_results",
    "aggregate_results",
    "write_table",
    "seed_ci95",
    "paired_difference",
]


# ------------------------------------------------------------------------ one run
def run_table(record: dict) -> str:
    """The ``table.md`` of a finished run, recomputed from its record's accuracy matrix.

    Per-domain accuracy ± 95% CI, forgetting and BWT as :meth:`~.training.RunResult.table`
    writes them (one definition, :mod:`avalanche_sets.metrics.stats`), whatever the format of
    the ``result.json`` the record was read from.
    """
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


def write_run_report(folder: str | Path, record: dict) -> None:
    """Write a run folder's ``table.md`` and ``accuracy_matrix.png`` from its record."""
    folder = Path(folder)
    atomic_write(folder / TABLE_FILE, run_table(record), single_writer=True)
    write_heatmap(folder, record)


def write_heatmap(folder: str | Path, record: dict) -> Path:
    """Write a run folder's ``accuracy_matrix.png`` from its record (``avalanche-sets heatmap``
    draws it again for a run whose picture was not kept)."""
    folder = Path(folder)
    res = record["result"]
    return plot_accuracy_matrix(
        [[100 * v for v in row] for row in res["matrix"]],
        res["domains"],
        folder / MATRIX_PLOT,
        title=f"{record['method']}, seed {record['seed']}: test accuracy (%) after each "
        "training domain",
    )


def refresh_run_table(record: dict) -> bool:
    """Rewrite the ``table.md`` of the run folder a record was read from (its ``_path``, as
    :func:`find_results` sets it) when it differs from :func:`run_table`; True if it did.

    The record itself is left as it was (a run written before the current definition of
    forgetting, format 2, gets today's table)."""
    path = Path(record["_path"]) / TABLE_FILE
    text = run_table(record)
    if path.is_file() and path.read_text() == text:
        return False
    atomic_write(path, text)
    return True


# ------------------------------------------------------------------------ many runs
def find_results(folders: Iterable[str | Path]) -> list[dict]:
    """All finished run records under the given folders (recursively).

    Each record is a run folder's ``result.json`` merged with its ``run.json`` (see
    :func:`avalanche_sets.runs.folder.read_record`) plus ``"_path"``, the folder; a folder
    written in a format this version cannot read raises
    :class:`~avalanche_sets.runs.folder.ResultsVersionError` naming it.
    """
    records = []
    for folder in folders:
        for path in sorted(Path(folder).rglob(RESULT_FILE)):
            rec = read_record(path.parent)
            rec["_path"] = str(path.parent)
            records.append(rec)
    return records


def seed_ci95(values: Sequence[float]) -> float:
    """Half-width of the 95% CI of the mean over seeds (Student t): :func:`.stats.seed_ci95`."""
    return stats.seed_ci95(values)


def paired_difference(a: dict, b: dict) -> tuple[float, float]:
    """Mean accuracy difference ``a − b`` over the *same* test episodes, with its 95% CI.

    Runs with the same benchmark seed evaluate identical episodes, so the per-episode
    differences are paired: their CI excludes the spread between domains and episodes that
    both methods share, which dominates the unpaired CI of a single seed
    (:func:`.stats.paired_difference`).
    """
    if a["seed"] != b["seed"]:
        raise ValueError("paired differences need runs of the same seed and test episodes")
    return stats.paired_difference(a["result"]["episode_acc"], b["result"]["episode_acc"])


def _matrix(rec: dict):
    matrix = rec["result"].get("matrix")
    if matrix is None:
        where = rec.get("_path", f"{rec.get('method')} seed {rec.get('seed')}")
        raise ValueError(f"run record {where} has no accuracy matrix: forgetting is undefined")
    return matrix


def _mean(values: list[float]) -> float:
    """Mean over seeds; NaN when a seed's value is undefined (say, a one-domain stream)."""
    return float(np.mean(values))


def _key(rec: dict, field: str):
    if field in rec:
        return rec[field]
    if field in rec.get("strategy_overrides", {}):
        return rec["strategy_overrides"][field]
    return rec["preset"].get(field)


def aggregate_results(records: list[dict], by: Sequence[str] = ("method",)) -> list[dict]:
    """One row per group: mean accuracy over seeds with a 95% CI, per-domain means, forgetting.

    With several seeds the CI is over seeds (Student t); with one seed it is the episode CI of
    that run (pooled over all test episodes), marked ``ci_over="episodes"``. ``forgetting``
    and ``bwt`` are the means over seeds of each run's average forgetting and backward
    transfer, recomputed from its accuracy matrix by :mod:`avalanche_sets.metrics.stats`
    (the last domain excluded; NaN for a one-domain stream).
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        groups[tuple(str(_key(rec, f)) for f in by)].append(rec)
    rows = []
    for key, recs in sorted(groups.items()):
        accs = [r["result"]["mean_accuracy"] for r in recs]
        row = dict(zip(by, key))
        row["seeds"] = len(recs)
        row["accuracy"] = float(np.mean(accs))
        if len(recs) > 1:
            row["ci95"], row["ci_over"] = stats.seed_ci95(accs), "seeds"
        else:
            row["ci95"] = stats.ci95(recs[0]["result"]["episode_acc"])
            row["ci_over"] = "episodes"
        # recomputed from each stored matrix: one definition whatever the record's format
        row["forgetting"] = _mean([stats.average_forgetting(_matrix(r)) for r in recs])
        row["bwt"] = _mean([stats.backward_transfer(_matrix(r)) for r in recs])
        domains = recs[0]["result"]["domains"]
        finals = np.mean([r["result"]["final"] for r in recs], axis=0)
        row["per_domain"] = dict(zip(domains, map(float, finals)))
        row["seconds"] = float(np.mean([r["seconds"] for r in recs]))
        rows.append(row)
    return rows


# the fields of an aggregated row that are values, not the keys it is grouped by
_VALUE_FIELDS = (
    "seeds",
    "accuracy",
    "ci95",
    "ci_over",
    "forgetting",
    "bwt",
    "per_domain",
    "seconds",
)


def _pts(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{100 * v:.2f}"


def write_table(rows: list[dict], out: str | Path | None = None) -> str:
    """Markdown table (accuracy % ± 95% CI); also ``out``.md / ``out``.csv when given."""
    if not rows:
        return ""
    keys = [k for k in rows[0] if k not in _VALUE_FIELDS]
    domains = list(rows[0]["per_domain"])
    head = [*keys, "accuracy (%)", "forgetting (pts)", "BWT (pts)", *domains, "seeds", "s/run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ci = "n/a" if math.isnan(r["ci95"]) else f"{100 * r['ci95']:.2f}"
        cells = [
            *(str(r[k]) for k in keys),
            f"{100 * r['accuracy']:.2f} ± {ci}" + ("" if r["ci_over"] == "seeds" else "*"),
            _pts(r["forgetting"]),
            _pts(r["bwt"]),
            *(f"{100 * r['per_domain'].get(d, float('nan')):.1f}" for d in domains),
            str(r["seeds"]),
            f"{r['seconds']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        "\nForgetting: per domain, its best accuracy from its own training on minus its final "
        "one; BWT: final minus just-trained accuracy; both averaged over the domains before the "
        "last (which has no later row), then over seeds."
    )
    if any(r["ci_over"] == "episodes" for r in rows):
        lines.append("\n\\* one seed: 95% CI over test episodes, not over seeds.")
    text = "\n".join(lines)
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text + "\n")
        with open(out.with_suffix(".csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(
                [
                    *keys,
                    "accuracy",
                    "ci95",
                    "ci_over",
                    "forgetting",
                    "bwt",
                    *domains,
                    "seeds",
                    "seconds",
                ]
            )
            for r in rows:
                w.writerow(
                    [
                        *(r[k] for k in keys),
                        r["accuracy"],
                        r["ci95"],
                        r["ci_over"],
                        r["forgetting"],
                        r["bwt"],
                        *(r["per_domain"].get(d) for d in domains),
                        r["seeds"],
                        r["seconds"],
                    ]
                )
    return text
