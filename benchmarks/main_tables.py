"""Side-by-side main tables: our Table 2 / Table 3 numbers next to the paper's.

Reads ``benchmarks/results/table{2,3}/summary.json`` — written by ``reproduce.py``, it names the
run folders that make up each table — and, when present, ``table{2,3}_synthetic/summary.json``
(``reproduce.py --source synthetic``). Writes ``benchmarks/results/main_tables.md``, the tables
the README shows: the packs' and the synthetic benchmark's, each in its own README block.

    python benchmarks/main_tables.py [--update-readme]   # also replace the README's copy
"""

from __future__ import annotations

import json
import sys

from _common import RESULTS, artefact_name
from _paper import FOOTNOTE, comparison_md
from reproduce import ARTEFACTS

from avalanche_sets.run_folder import read_record

# data source (``reproduce.py --source``; None: the preset's packs) -> (title suffix, what the
# data is, README marker)
SOURCES = [
    (None, ("", "sets-mini packs", "main-tables")),
    ("synthetic", (", synthetic benchmark", "the offline synthetic benchmark",
                   "main-tables-synthetic")),
]  # fmt: skip


def main() -> None:
    blocks = {}  # README marker -> the tables of that data
    for source, (title, data, marker) in SOURCES:
        md = []
        for table in ("table2", "table3"):
            path = RESULTS / artefact_name(table, source) / "summary.json"
            if not path.is_file():
                continue
            summary = json.loads(path.read_text())
            records = [read_record(RESULTS / run) for run in summary["runs"]]
            md.append(
                f"**{table.replace('table', 'Table ')}{title}** (ours: {data}, `cpu` preset, "
                f"seeds {summary['seeds']}; paper: its datasets, 84 px, 5 seeds)\n"
            )
            md.append(comparison_md(table, records, row_order=ARTEFACTS[table][0]) + "\n")
        if md:
            blocks[marker] = "\n".join([*md, FOOTNOTE]) + "\n"
    text = "\n".join(blocks.values())
    (RESULTS / "main_tables.md").write_text(text)
    print(text)
    if "--update-readme" in sys.argv:
        for marker, block in blocks.items():
            _splice_into_readme(block, marker)


def _splice_into_readme(text: str, marker: str) -> None:
    """Replace the README's tables between the ``<marker>:start/end`` comments with ``text``."""
    readme = RESULTS.parents[1] / "README.md"
    s = readme.read_text()
    begin, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    if begin not in s or end not in s:
        sys.exit(f"error: {readme} has no {begin.strip()} ... {end} markers")
    a, b = s.index(begin) + len(begin), s.index(end)
    readme.write_text(s[:a] + text.strip() + "\n" + s[b:])
    print(f"updated {readme} ({marker})")


if __name__ == "__main__":
    main()
