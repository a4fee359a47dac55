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

from _common import RESULTS, ROOT, artefact_name, splice_block
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


def readme_blocks() -> dict[str, str]:
    """README marker -> the main tables of that data source, from the committed summaries."""
    blocks = {}
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
    return blocks


def main() -> None:
    blocks = readme_blocks()
    text = "\n".join(blocks.values())
    (RESULTS / "main_tables.md").write_text(text)
    print(text)
    if "--update-readme" in sys.argv:
        readme = ROOT / "README.md"
        s = readme.read_text()
        for marker, block in blocks.items():
            s = splice_block(s, marker, block, where=readme)
            print(f"updated {readme} ({marker})")
        readme.write_text(s)


if __name__ == "__main__":
    main()
