"""The batched, fixed-shape step against the per-episode one: the same runs before and after.

ORDER's and the continual baselines' step now computes every episode of a meta-batch at once
(masked MI bounds and fit, soft k-means and MSKM refinement, masked OT points). The maths is
the same; the float32 sums run in another order, so a run's numbers change in the last bits
and, through training, further. This compares the quick preset's runs of two code versions
(``--before`` and ``--after``: run folders as ``avalanche-sets run --out`` writes them) on the
same test episodes:

* per method and seed, the paired difference of the final model's per-episode accuracies
  (``after − before``, same episodes) with its 95% interval
  (:func:`~avalanche_sets.metrics.stats.paired_difference`), and whether it excludes 0;
* per method, the paired difference over seeds (:func:`~avalanche_sets.metrics.stats.paired_over_seeds`);
* whether each method's ``result.json`` is bit-identical: its ``result`` block, and the whole
  file less its ``code`` (the commit and package hash, which differ by design).

    avalanche-sets run --method order --preset quick --seeds 0 1 2 --set precision=fp32 \\
        --set threads=1 --out BEFORE            # on the code before, likewise AFTER
    python -m benchmarks.batched_step_ab --before BEFORE --after AFTER \\
        --before-commit e00148e --after-commit 5fc3f5a

Writes ``benchmarks/results/batched_step_ab/``: ``ab.json``, ``ab.md`` and ``ab.png``
(``--out``, ``--stem``; ``--title`` says what the two code versions differ in, for any other
pair of versions). ``--differing threads`` compares two runs of one code that differ in a setting
only: how far a last-bit change of the same maths moves a trained model.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from avalanche_sets.metrics.stats import paired_difference, paired_over_seeds
from benchmarks._common import RESULTS, header_md, provenance, save_figure, write_json

__all__ = ["compare", "main"]


def _runs(root: Path) -> dict[tuple[str, int], dict]:
    """Every ``result.json`` under ``root`` by (method, seed)."""
    out = {}
    for path in sorted(root.glob("*/*/result.json")):
        record = json.loads(path.read_text())
        out[(record["method"], int(record["seed"]))] = record
    return out


def _but_code(record: dict) -> dict:
    """A ``result.json`` less its ``code`` (the commit and package hash that differ by design)."""
    return {k: v for k, v in record.items() if k != "code"}


def compare(before: Path, after: Path, *, differing: tuple[str, ...] = ()) -> dict:
    """The paired comparison of the runs both folders hold (see the module docstring);
    ``differing``: preset settings the two sides may differ in (a control pair of runs of one
    code, e.g. ``threads``); every other setting and the data must be the same."""
    a, b = _runs(before), _runs(after)
    both = sorted(set(a) & set(b))
    if not both:
        raise SystemExit(f"no run is in both {before} and {after}")
    rows, methods = [], {}
    for method, seed in both:
        old, new = a[(method, seed)], b[(method, seed)]
        keep = lambda p: {k: v for k, v in p.items() if k not in differing}  # noqa: E731
        if keep(old["preset"]) != keep(new["preset"]) or old["data"] != new["data"]:
            raise SystemExit(f"{method} seed {seed}: the two runs differ in preset or data")
        delta, ci = paired_difference(new["result"]["episode_acc"], old["result"]["episode_acc"])
        rows.append({
            "method": method, "seed": seed,
            "before": old["result"]["mean_accuracy"], "after": new["result"]["mean_accuracy"],
            "delta": delta, "ci95": ci, "excludes_0": abs(delta) > ci,
            "bit_identical": old["result"] == new["result"],
            "identical_but_code": _but_code(old) == _but_code(new),
        })  # fmt: skip
        methods.setdefault(method, ({}, {}))
        methods[method][0][seed] = new["result"]["mean_accuracy"]
        methods[method][1][seed] = old["result"]["mean_accuracy"]
    over_seeds = {}
    for method, (new, old) in methods.items():
        p = paired_over_seeds(new, old)
        over_seeds[method] = {
            "delta": p.delta, "ci95": p.ci95, "seeds": list(p.seeds), "resolved": p.resolved,
        }  # fmt: skip
    return {"rows": rows, "over_seeds": over_seeds}


TITLE = "The batched step against the per-episode step (quick preset)"


def _markdown(summary: dict, prov: dict, commits: tuple[str, str], title: str = TITLE) -> str:
    md = header_md(title, prov)
    md += f"\nBefore: code `{commits[0]}`; after: code `{commits[1]}`.\n\n"
    md += "| method | seed | before | after | Δ (after − before, same episodes) | 95% CI | excludes 0 | result bit-identical | result.json identical but `code` |\n"
    md += "|---|---:|---:|---:|---:|---:|---|---|---|\n"
    for r in summary["rows"]:
        md += (
            f"| {r['method']} | {r['seed']} | {100 * r['before']:.2f} | {100 * r['after']:.2f} "
            f"| {100 * r['delta']:+.2f} | ± {100 * r['ci95']:.2f} | "
            f"{'**yes**' if r['excludes_0'] else 'no'} | {'yes' if r['bit_identical'] else 'no'} "
            f"| {'yes' if r.get('identical_but_code') else 'no'} |\n"
        )
    md += (
        "\nOver seeds (paired by seed, Student-t):\n\n| method | Δ | 95% CI | seeds | resolved |\n"
    )
    md += "|---|---:|---:|---|---|\n"
    for m, o in summary["over_seeds"].items():
        ci = "n/a" if o["ci95"] != o["ci95"] else f"± {100 * o['ci95']:.2f}"
        md += f"| {m} | {100 * o['delta']:+.2f} | {ci} | {o['seeds']} | {o['resolved']} |\n"
    return md


def _plot(summary: dict, path: Path, title: str = TITLE) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(rows) + 1.2))
    for i, r in enumerate(rows):
        color = "tab:red" if r["excludes_0"] else "tab:blue"
        ax.errorbar(100 * r["delta"], i, xerr=100 * r["ci95"], fmt="o", color=color, capsize=3)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(range(len(rows)), [f"{r['method']} seed {r['seed']}" for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("accuracy after − before (points), same test episodes, 95% CI")
    ax.set_title(textwrap.fill(title, 60), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="run folders of the code before")
    ap.add_argument("--after", type=Path, required=True, help="run folders of the code after")
    ap.add_argument("--before-commit", required=True)
    ap.add_argument("--after-commit", required=True)
    ap.add_argument("--out", type=Path, default=RESULTS / "batched_step_ab")
    ap.add_argument("--stem", default="ab", help="file names: STEM.json, STEM.md, STEM.png")
    ap.add_argument("--title", default=TITLE, help="what the two code versions differ in")
    ap.add_argument(
        "--differing", nargs="*", default=[], metavar="SETTING",
        help="preset settings the two sides may differ in (a control pair of one code)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    summary = compare(args.before, args.after, differing=tuple(args.differing))
    seeds = sorted({r["seed"] for r in summary["rows"]})
    prov = provenance(seeds=seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"provenance": prov, "commits": [args.before_commit, args.after_commit],
              "differing": args.differing, **summary}  # fmt: skip
    write_json(args.out / f"{args.stem}.json", record)
    md = _markdown(summary, prov, (args.before_commit, args.after_commit), args.title)
    if args.differing:
        md += f"\nThe two sides differ in {args.differing} only.\n"
    (args.out / f"{args.stem}.md").write_text(md)
    _plot(summary, args.out / f"{args.stem}.png", args.title)
    print(md)
    return summary


if __name__ == "__main__":
    main()
