"""Side-by-side main tables: our Table 2 / Table 3 numbers next to the paper's.

Reads ``benchmarks/results/table{2,3}/summary.json`` — written by ``reproduce.py``, it names the
run folders that make up each table — and, when present, ``table{2,3}_synthetic/summary.json``
(``reproduce.py --source synthetic``) and ``table{2,3}_converged/summary.json`` (``--preset
converged --out benchmarks/results/table{2,3}_converged``). Writes ``benchmarks/results/main_tables.md``, the tables
the README shows: the packs' and the synthetic benchmark's, each in its own README block, each
table followed by the commits of the runs it reads (:func:`benchmarks._code.code_md`).
Also writes ``benchmarks/results/main_tables_pairs.md``: the converged regime's paired Δs
between rows that no table column carries (:data:`PROSE_PAIRS`), the numbers the README's
prose on that regime quotes.

    python -m benchmarks.main_tables    # the two files above
    python -m benchmarks.readme update  # then the README's and the site's copies (make readme)

The pages' copies are :mod:`benchmarks.readme`'s to write: it reads :func:`readme_blocks` here,
and this module does not import it back.
"""

from __future__ import annotations

import json

from avalanche_sets.runs.record import read_record
from benchmarks._code import code_md
from benchmarks._common import RESULTS
from benchmarks._paper import FOOTNOTE, comparison_md, pairs_md, share_of_joint_md
from benchmarks.reproduce import ARTEFACTS

#: the packs the sets-mini tables ran on, linked to what they are, where they come from, under
#: which terms, and why a clone cannot rebuild them (docs/guide/data.md; a repository-relative
#: link, which benchmarks.readme relinks for each page)
SETS_MINI = (
    "[sets-mini packs](docs/guide/data.md#the-sets-mini-packs-the-results-data) of "
    "Tiny-ImageNet, GTSRB, icons and font glyphs (partly research-use only; not distributed)"
)

# results folder of Table 2/3 (``<table><suffix>``, as ``reproduce.py`` names it) -> (title
# suffix, what the data is, the preset, README marker)
SOURCES = [
    ("", ("", SETS_MINI, "cpu", "main-tables")),
    ("_synthetic", (", synthetic benchmark", "the offline synthetic benchmark", "cpu",
                    "main-tables-synthetic")),
    ("_converged", (", converged regime", SETS_MINI, "converged", "main-tables-converged")),
]  # fmt: skip


#: converged-regime pairs ``a − b`` the README's prose compares beyond the tables' Δ columns
#: (those are each row against MSKM / Semi-Seq)
PROSE_PAIRS = [
    ("joint", "semi-seq"), ("joint", "order"), ("joint-matched", "joint"),
    ("order", "semi-er"), ("order", "order-ot-only"), ("semi-er", "semi-agem"),
    ("mskm", "protonet"), ("order-mi-only", "mskm"),
    ("semi-der", "order"), ("semi-der", "semi-er"), ("semi-mer", "order"), ("semi-gem", "order"),
    ("anil", "protonet"),
]  # fmt: skip


def converged_pairs_md() -> str | None:
    """:data:`PROSE_PAIRS` over the runs of the converged Tables 2 and 3 (None before any)."""
    records = {}
    for table in ("table2", "table3"):
        path = RESULTS / f"{table}_converged" / "summary.json"
        if path.is_file():
            for run in json.loads(path.read_text())["runs"]:
                records[run] = read_record(RESULTS / run)
    if not records:
        return None
    shots = sorted({int(r.preset["n_shot"]) for r in records.values()}, reverse=True)
    return (
        "# Paired differences between rows, converged regime\n\n"
        "Mean over the seeds both rows ran of each seed's paired per-episode difference (points; "
        "± the episode-level 95% CI, `combine_paired`; per-seed values in parentheses; in "
        "square brackets the paired 95% Student-t interval over the seeds, "
        "`paired_over_seeds`: ✓ resolved, i.e. 3 seeds or more and that interval excludes 0, "
        "† fewer than 3 seeds), from the runs of `table2_converged` and `table3_converged`. "
        "Written by `python -m benchmarks.main_tables`.\n\n"
        + pairs_md(list(records.values()), PROSE_PAIRS, shots)
    )


def readme_blocks() -> dict[str, str]:
    """README marker -> the main tables of that data source, from the committed summaries."""
    blocks = {}
    for suffix, (title, data, preset, marker) in SOURCES:
        md, every = [], []
        for table in ("table2", "table3"):
            path = RESULTS / f"{table}{suffix}" / "summary.json"
            if not path.is_file():
                continue
            summary = json.loads(path.read_text())
            records = [read_record(RESULTS / run) for run in summary["runs"]]
            every += records
            md.append(
                f"**{table.replace('table', 'Table ')}{title}** (ours: {data}, `{preset}` preset, "
                f"seeds {summary['seeds']}; paper: its datasets, 84 px, 5 seeds)\n"
            )
            md.append(comparison_md(table, records, row_order=ARTEFACTS[table][0]) + "\n")
            md.append(code_md(records))
        if md:
            shots = sorted({int(r.preset["n_shot"]) for r in every})
            share = share_of_joint_md(every, shots)
            md.append(f"**ORDER as a percentage of Joint{title}**\n\n{share}\n")
            blocks[marker] = "\n".join([*md, FOOTNOTE]) + "\n"
    return blocks


def main() -> None:
    blocks = readme_blocks()
    text = "\n".join(blocks.values())
    # main_tables.md lies in benchmarks/results/: the blocks' repository-relative links from there
    (RESULTS / "main_tables.md").write_text(text.replace("](docs/", "](../../docs/"))
    pairs = converged_pairs_md()
    if pairs is not None:
        (RESULTS / "main_tables_pairs.md").write_text(pairs)
    print(text)


if __name__ == "__main__":
    main()
