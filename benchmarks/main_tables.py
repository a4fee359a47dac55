"""Side-by-side main tables: our Table 2 / Table 3 numbers next to the paper's.

Reads ``benchmarks/results/table{2,3}/summary.json`` (written by ``reproduce.py``) and writes
``benchmarks/results/main_tables.md`` — the tables the README shows.

    python benchmarks/main_tables.py [--update-readme]   # also replace the README's copy
"""

from __future__ import annotations

import json
import math
import sys

from _common import RESULTS
from reproduce import PAPER, _canonical

from avalanche_sets.reporting import find_results, paired_difference

# Paired comparison reference per table: the method every other one is compared with.
REFERENCE = {"table2": "mskm", "table3": "semi-seq"}


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    ci = "n/a" if math.isnan(row["ci95"]) else f"{100 * row['ci95']:.2f}"
    star = "" if row["ci_over"] == "seeds" else "*"
    return f"{100 * row['accuracy']:.2f} ± {ci}{star}"


def _paired(records: list[dict], method: str, ref: str, shot: int) -> str:
    """Paired difference to ``ref`` (same seed, same test episodes): mean over seeds, with the
    per-seed values in brackets when there are several seeds.

    The ± is the episode-level 95% CI of the mean over seeds, ``sqrt(Σ c_s²) / k`` for per-seed
    half-widths ``c_s``: it covers the test episodes drawn, not the variation between training
    seeds, which the bracketed per-seed values show.
    """
    pairs = {}
    for r in records:
        if r["method"] != method or r["preset"]["n_shot"] != shot:
            continue
        for q in records:
            if (
                q["method"] == ref
                and q["seed"] == r["seed"]
                and _canonical(q["preset"]) == _canonical(r["preset"])
            ):
                pairs[r["seed"]] = paired_difference(r, q)
    if not pairs or method == ref:
        return "—"
    k = len(pairs)
    d = sum(p[0] for p in pairs.values()) / k
    ci = math.sqrt(sum(p[1] ** 2 for p in pairs.values())) / k
    each = (
        "" if k == 1 else " (" + ", ".join(f"{100 * pairs[s][0]:+.1f}" for s in sorted(pairs)) + ")"
    )
    return f"{100 * d:+.2f} ± {100 * ci:.2f}{each}"


def main() -> None:
    records = find_results([RESULTS / "runs"])
    md = []
    for table in ("table2", "table3"):
        path = RESULTS / table / "summary.json"
        if not path.is_file():
            continue
        summary = json.loads(path.read_text())
        rows = {(r["method"], int(r["n_shot"])): r for r in summary["rows"]}
        seeds = summary["seeds"]
        md.append(
            f"**{table.replace('table', 'Table ')}** (ours: sets-mini packs, `cpu` preset, "
            f"seeds {seeds}; paper: its datasets, 84 px, 5 seeds)\n"
        )
        ref = REFERENCE[table]
        md.append(
            f"| method | ours 1-shot | Δ vs {ref}, paired (1-shot) | ours 5-shot | "
            f"Δ vs {ref}, paired (5-shot) | paper 1-shot | paper 5-shot |"
        )
        md.append("|---|---:|---:|---:|---:|---:|---:|")
        paper = PAPER[table]
        for method in [*paper, *sorted({m for m, _ in rows} - set(paper))]:
            if method in paper:
                a, ca, b, cb = paper[method]
                p1, p5 = f"{a:.2f} ± {ca:.2f}", f"{b:.2f} ± {cb:.2f}"
            else:
                p1 = p5 = "—"
            md.append(
                f"| {method} | {_cell(rows.get((method, 1)))} | "
                f"{_paired(records, method, ref, 1)} | {_cell(rows.get((method, 5)))} | "
                f"{_paired(records, method, ref, 5)} | {p1} | {p5} |"
            )
        md.append("")
    md.append(
        "Accuracy: mean over seeds ± the Student-t 95% CI over seeds (wide with 2–3 seeds: "
        "t = 12.7 for 2, 4.3 for 3); \\* one seed: the ± is the 95% CI over all test episodes of "
        "all domains (it includes the spread between domains). The paired Δ compares two "
        "methods on the same test episodes (same seed): the mean over seeds of the mean "
        "per-episode difference, the per-seed values in brackets, and ± the episode-level 95% "
        "CI of that mean. That ± does not include the variation between training seeds; a Δ "
        "whose interval excludes 0 *and* whose per-seed values agree in sign is one these runs "
        "resolve."
    )
    text = "\n".join(md) + "\n"
    (RESULTS / "main_tables.md").write_text(text)
    print(text)
    if "--update-readme" in sys.argv:
        _splice_into_readme(text)


def _splice_into_readme(text: str) -> None:
    """Replace the README's tables between the main-tables markers with ``text``."""
    readme = RESULTS.parents[1] / "README.md"
    s = readme.read_text()
    begin, end = "<!-- main-tables:start -->\n", "<!-- main-tables:end -->"
    if begin not in s or end not in s:
        sys.exit(f"error: {readme} has no {begin.strip()} ... {end} markers")
    a, b = s.index(begin) + len(begin), s.index(end)
    readme.write_text(s[:a] + text.strip() + "\n" + s[b:])
    print(f"updated {readme}")


if __name__ == "__main__":
    main()
