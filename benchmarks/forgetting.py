"""Forgetting over the stream, per method: average forgetting, BWT and where it is seen.

Reads finished run folders (``result.json``) of one regime — by default the ``converged``
preset's sets-mini runs, ``<runs>/<method>/packs-o1-5w<K>s-R50-seed<s>-tasks_per_domain1400-bf16``
— and, per shot and method, reports over the seeds found:

* the mean final accuracy, the **average forgetting** and the **backward transfer** (the single
  definitions of :mod:`avalanche_sets.metrics.stats`: forgetting excludes the last domain), each
  as mean ± Student-t 95% CI over seeds (a single seed is marked, with no CI);
* ``stream_<K>shot.png``: one panel per domain, that domain's test accuracy after each training
  stage from its own onwards, one line per method (seed mean) — where forgetting is seen;
  ``stream_<K>shot_others.png`` the same for the other baselines, Semi-Seq and ORDER dashed;
* ``heatmaps_<K>shot.png``: every method's accuracy matrix (seed mean) side by side.

Nothing is run: this only reads. Missing methods are listed, never silently dropped.

    python -m benchmarks.forgetting                       # the converged regime, 1- and 5-shot
    python -m benchmarks.forgetting --suffix "" --out benchmarks/results/forgetting_cpu  # cpu runs

Writes ``<out>/results.json`` (command, date, machine, seeds, every row), ``README.md`` and the
plots.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from avalanche_sets.metrics.stats import (
    average_accuracy,
    average_forgetting,
    backward_transfer,
    seed_ci95,
)
from avalanche_sets.runs.record import RunRecord, read_record
from benchmarks import _methods, paper_rows
from benchmarks._common import RESULTS, ROOT, header_md, provenance, save_figure, write_json
from benchmarks.paper_rows import FAMILY, ORDER, reference_method

_STREAM_TABLES = ("table2", "table3")  # the paper's tables of the whole stream
#: The methods of the paper's stream tables (:data:`benchmarks.paper_rows.ROWS`), in the
#: library's listing order: ORDER's first.
METHODS = [m for m in _methods.names() if any(paper_rows.row(m, t) for t in _STREAM_TABLES)]
#: Trained on the stationary mixture of the domains: the upper bounds.
JOINT = [m for m in METHODS if FAMILY[m] == "joint"]
#: The rows of the main stream plot: ORDER and its variants, the upper bounds and each stream
#: table's reference row (MSKM, Semi-Seq); the other baselines get a plot of their own.
MAIN_METHODS = [
    m
    for m in METHODS
    if FAMILY[m] in ("order", "joint")
    or any((r := paper_rows.row(m, t)) and r.reference for t in _STREAM_TABLES)
]
OTHER_METHODS = [m for m in METHODS if m not in MAIN_METHODS]
#: Drawn beside the other baselines in their own stream plot, so each line has a reference:
#: the continual table's reference row (Semi-Seq) and ORDER.
REFERENCES = [reference_method("table3"), ORDER]


def find_runs(runs: Path, method: str, shot: int, suffix: str) -> list[RunRecord]:
    """The finished records of ``method`` at ``shot`` whose folder ends in ``suffix``, by seed."""
    found = []
    for path in sorted((runs / method).glob(f"packs-o1-5w{shot}s-R50-seed*{suffix}/result.json")):
        seed_part = path.parent.name.split("-seed", 1)[1]
        if suffix and not seed_part.endswith(suffix):
            continue
        if not seed_part[: len(seed_part) - len(suffix)].isdigit():
            continue  # another setting between the seed and the suffix: another regime
        found.append(read_record(path.parent))
    return sorted(found, key=lambda rec: rec.seed)


def summarise(records: list[RunRecord]) -> dict:
    """Seed-level mean ± 95% CI of accuracy, forgetting and BWT (points), and the mean matrix."""
    mats = [np.asarray(r.result["matrix"], dtype=np.float64) * 100 for r in records]
    per_seed = {
        "accuracy": [average_accuracy(m) for m in mats],
        "forgetting": [average_forgetting(m) for m in mats],
        "bwt": [backward_transfer(m) for m in mats],
    }
    row = {"seeds": [r.seed for r in records], "domains": records[0].result["domains"]}
    for key, values in per_seed.items():
        defined = [v for v in values if np.isfinite(v)]  # Joint: nothing to forget (NaN)
        row[key] = float(np.mean(defined)) if defined else float("nan")
        row[f"{key}_ci95"] = seed_ci95(defined) if len(defined) > 1 else None
        row[f"{key}_per_seed"] = values
    row["matrix"] = np.mean(mats, axis=0).tolist()
    return row


def upper_bound_rows(table: list[dict], reference: str = REFERENCES[0]) -> list[dict]:
    """Is Joint the upper bound? Per shot and Joint variant: its mean accuracy minus
    ``reference``'s on every seed both have (points), and whether it is ≥ on all of them."""
    by = {(r["method"], r["n_shot"]): r for r in table}
    rows = []
    for (method, shot), row in by.items():
        ref = by.get((reference, shot))
        if method not in JOINT or ref is None:
            continue
        ours = dict(zip(row["seeds"], row["accuracy_per_seed"]))
        theirs = dict(zip(ref["seeds"], ref["accuracy_per_seed"]))
        seeds = sorted(set(ours) & set(theirs))
        deltas = [ours[s] - theirs[s] for s in seeds]
        rows.append({"method": method, "n_shot": shot, "reference": reference, "seeds": seeds,
                     "delta_per_seed": deltas, "holds": bool(deltas) and min(deltas) >= 0})  # fmt: skip
    return rows


def upper_bound_md(rows: list[dict]) -> str:
    """The question and one line per Joint variant and shot: ≥ Semi-Seq on every seed or
    not, with the Δs (``""`` for no rows); this script's README and the README block share it."""
    if not rows:
        return ""
    return "\nIs Joint the upper bound (its accuracy minus Semi-Seq's, same seed)?\n\n" + "".join(
        f"- {r['method']} {r['n_shot']}-shot − {r['reference']}, per seed {r['seeds']}: "
        + ", ".join(f"{d:+.2f}" for d in r["delta_per_seed"])
        + f" points: {'≥ on every seed' if r['holds'] else '**not** ≥ on every seed'}\n"
        for r in rows
    )


def seed_cell(row: dict, key: str) -> str:
    """One number of a :func:`summarise` row as a table cell: ``mean ± CI`` over seeds,
    ``mean (1 seed)``, or ``n/a`` where it is undefined (Joint's forgetting and BWT)."""
    if not np.isfinite(row[key]):
        return "n/a"  # e.g. Joint: one row, nothing to forget
    ci = row[f"{key}_ci95"]
    return f"{row[key]:.2f} ± {ci:.2f}" if ci is not None else f"{row[key]:.2f} (1 seed)"


def markdown_rows(rows: list[dict]) -> str:
    """The table's rows (method, shot, seeds, accuracy, forgetting, BWT), also the README's."""
    return "".join(
        f"| {r['method']} | {r['n_shot']} | {r['seeds']} | {seed_cell(r, 'accuracy')} | "
        f"{seed_cell(r, 'forgetting')} | {seed_cell(r, 'bwt')} |\n"
        for r in rows
    )


def stream_groups(rows: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """The stream plots of one shot, by file-name suffix: ``""`` for the main rows and
    ``"_others"`` for the other baselines with :data:`REFERENCES` beside them (one plot of
    fourteen lines is unreadable). A group is drawn only when it has a method of its own."""
    main = {m: r for m, r in rows.items() if m not in OTHER_METHODS}
    others = {m: r for m, r in rows.items() if m in OTHER_METHODS}
    groups = {"": main} if main else {}
    if others:
        groups["_others"] = {**{m: rows[m] for m in REFERENCES if m in rows}, **others}
    return groups


def plot_stream(rows: dict[str, dict], shot: int, out: Path, references=()) -> None:
    """One panel per domain; the methods in ``references`` are drawn dashed (context lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    domains = next(iter(rows.values()))["domains"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), squeeze=False)
    for j, (ax, dom) in enumerate(zip(axes.flat, domains)):
        stages = list(range(j, len(domains)))
        for method, row in rows.items():
            m = np.asarray(row["matrix"])
            if m.shape[0] < len(domains):  # Joint: one row, trained on every domain at once
                ax.plot([len(domains)], m[-1:, j], marker="*", markersize=12, ls="", label=method)
            else:
                style = dict(ls="--", alpha=0.7) if method in references else {}
                ax.plot([s + 1 for s in stages], m[stages, j], marker="o", label=method, **style)
        ax.set_title(f"{dom} (trained at stage {j + 1})")
        ax.set_xlabel("after training domain #")
        ax.set_ylabel("test accuracy (%)")
        ax.set_xticks(range(1, len(domains) + 1))
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    sets = {tuple(row["seeds"]) for row in rows.values()}
    seeds = (
        f"seed mean over {list(sets.pop())}"
        if len(sets) == 1
        else "seed means; seeds per method in the table"
    )
    fig.suptitle(
        f"{shot}-shot: each domain's accuracy from its own training to the end of the stream "
        f"({seeds}); a falling line is forgetting"
    )
    fig.tight_layout()
    save_figure(fig, out, dpi=110)
    plt.close(fig)


def _short(name: str) -> str:
    """A tick label: ``tinyimagenet_animals`` → ``tiny_animals`` (both parts stay readable)."""
    head, _, tail = name.partition("_")
    return name if len(name) <= 12 or not tail else f"{head[:4]}_{tail.split('_')[-1]}"


def plot_heatmaps(rows: dict[str, dict], shot: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    cols = min(n, 3)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.6 * nrows), squeeze=False,
                             layout="constrained")  # fmt: skip
    for ax in axes.flat[n:]:
        ax.axis("off")
    domains = [_short(d) for d in next(iter(rows.values()))["domains"]]
    for ax, (method, row) in zip(axes.flat, rows.items()):
        m = np.asarray(row["matrix"])
        im = ax.imshow(m, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        for (i, j), v in np.ndenumerate(m):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8,
                        color="white" if v < 60 else "black")  # fmt: skip
        forgot = row["forgetting"]
        forgot = f"{forgot:.1f} pts" if np.isfinite(forgot) else "n/a (one row)"
        ax.set_title(f"{method}\nmean {row['accuracy']:.1f}%, forgetting {forgot}", fontsize=10)
        ax.set_xlabel("evaluated domain")
        ax.set_ylabel("after training domain #")
        ax.set_xticks(range(m.shape[1]), domains, rotation=35, ha="right", fontsize=7)
        ax.set_yticks(range(m.shape[0]), [str(i + 1) for i in range(m.shape[0])])
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="test accuracy (%)")
    fig.suptitle(f"{shot}-shot accuracy matrices (seed mean)")
    save_figure(fig, out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.forgetting", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--runs", default=str(RESULTS / "runs"))
    ap.add_argument("--suffix", default="-tasks_per_domain1400-bf16",
                    help="what follows -seed<s> in the folder name (the regime)")  # fmt: skip
    ap.add_argument("--shots", type=int, nargs="+", default=[5, 1])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--out", default=str(RESULTS / "forgetting_converged"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table, missing, all_seeds = [], [], set()
    for shot in args.shots:
        rows = {}
        for method in args.methods:
            records = find_runs(Path(args.runs), method, shot, args.suffix)
            if not records:
                missing.append(f"{method} {shot}-shot")
                continue
            rows[method] = summarise(records)
            all_seeds.update(rows[method]["seeds"])
            table.append({"method": method, "n_shot": shot, **rows[method]})
        for name, group in stream_groups(rows).items():
            refs = REFERENCES if name else ()
            plot_stream(group, shot, out / f"stream_{shot}shot{name}.png", references=refs)
        if rows:
            plot_heatmaps(rows, shot, out / f"heatmaps_{shot}shot.png")
    prov = provenance(seeds=sorted(all_seeds))
    bound = upper_bound_rows(table)
    write_json(out / "results.json", {**prov, "suffix": args.suffix, "rows": table,
                                      "missing": missing, "upper_bound": bound})  # fmt: skip
    md = header_md("Forgetting over the stream, per method", prov)
    md += (
        f"Runs: `{os.path.relpath(args.runs, ROOT)}/<method>/packs-o1-5w<K>s-R50-seed<s>{args.suffix}`. Accuracy = mean "
        "final test accuracy over the domains (%); forgetting = mean over the domains before the "
        "last of (best accuracy before the final row − final accuracy), in points, positive = "
        "forgotten; BWT = mean of (final − just-trained) accuracy, negative = forgotten "
        "(`avalanche_sets.metrics.stats`). ± = Student-t 95% CI over seeds.\n\n"
        "| method | shot | seeds | accuracy (%) | forgetting (pts) | BWT (pts) |\n"
        "|---|---:|---|---:|---:|---:|\n" + markdown_rows(table)
    )
    md += upper_bound_md(bound)
    if missing:
        md += "\nNot run (yet): " + ", ".join(missing) + ".\n"
    for shot in args.shots:
        for name, alt in (("", "stream"), ("_others", "stream, other baselines")):
            if (out / f"stream_{shot}shot{name}.png").is_file():
                md += f"\n![{shot}-shot {alt}](stream_{shot}shot{name}.png)\n"
        if (out / f"heatmaps_{shot}shot.png").is_file():
            md += f"\n![{shot}-shot accuracy matrices](heatmaps_{shot}shot.png)\n"
    (out / "README.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
