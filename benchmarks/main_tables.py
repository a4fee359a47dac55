"""Side-by-side main tables: our Table 2 / Table 3 numbers next to the paper's.

Reads ``benchmarks/results/table{2,3}/summary.json`` (written by ``reproduce.py``) and writes
``benchmarks/results/main_tables.md`` — the tables the README shows.

    python benchmarks/main_tables.py
"""

from __future__ import annotations

import json
import math

from _common import RESULTS
from reproduce import PAPER


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    ci = "n/a" if math.isnan(row["ci95"]) else f"{100 * row['ci95']:.2f}"
    star = "" if row["ci_over"] == "seeds" else "*"
    return f"{100 * row['accuracy']:.2f} ± {ci}{star}"


def main() -> None:
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
        md.append("| method | ours 1-shot | ours 5-shot | paper 1-shot | paper 5-shot |")
        md.append("|---|---:|---:|---:|---:|")
        for method, (a, ca, b, cb) in PAPER[table].items():
            md.append(
                f"| {method} | {_cell(rows.get((method, 1)))} | "
                f"{_cell(rows.get((method, 5)))} | {a:.2f} ± {ca:.2f} | {b:.2f} ± {cb:.2f} |"
            )
        extra = sorted({m for m, _ in rows} - set(PAPER[table]))
        for method in extra:
            md.append(
                f"| {method} | {_cell(rows.get((method, 1)))} | "
                f"{_cell(rows.get((method, 5)))} | — | — |"
            )
        md.append("")
    md.append(
        "\\* one seed: the ± is the 95% CI over all test episodes of all domains (it "
        "includes the spread between domains), not over seeds."
    )
    text = "\n".join(md) + "\n"
    (RESULTS / "main_tables.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
