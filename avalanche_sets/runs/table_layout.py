"""``avalanche-sets table``'s options for a paper: ``--label``, ``--format``, ``--columns``,
``--caption-inside``, and the command itself (kept out of :mod:`avalanche_sets.cli`).
Standard library only at import: the command line builds its parser from here before anything
heavy loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_layout_arguments", "check_layout", "run_table"]


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """``--label``, ``--format``, ``--columns`` and ``--caption-inside`` of ``table``."""
    parser.add_argument(
        "--label", action="append", metavar="KEY=NAME",
        help="name rows for a reader: KEY a method (e.g. order=ORDER, "
        "energy_order:EnergyOrder=Energy) or a row's default name, NAME what the tables and "
        "legends call it (no '='); repeatable; a grouped table lists labelled rows first, in "
        "this order. Default: the method, plus the settings that tell its rows apart (no hashes)",
    )  # fmt: skip
    parser.add_argument(
        "--format", default="markdown", choices=("markdown", "latex"),
        help="print the table as Markdown (default) or as LaTeX (booktabs) in a paper's shape: "
        "one line per method, mean ± interval, bold where resolved over seeds; with --out also "
        "OUT.tex",
    )  # fmt: skip
    parser.add_argument(
        "--columns", metavar="SETTING",
        help="one column per value of SETTING (a setting the rows differ in), e.g. --columns "
        "n_shot for 1-shot and 5-shot side by side, as the paper's Table 2",
    )  # fmt: skip
    parser.add_argument(
        "--caption-inside", action="store_true",
        help="also draw each picture's title and caption into it (default: beside it, in "
        "OUT_stream.md / OUT_final.md, for a paper that sets its own caption); needs --out",
    )  # fmt: skip


def check_layout(args: argparse.Namespace) -> dict[str, str]:
    """The ``--label`` mapping, with the options that need ``--out`` checked, before any record
    is read.

    Raises:
        ValueError: a malformed ``--label`` (:func:`.row_names.parse_labels`), or
            ``--caption-inside`` without ``--out``.
    """
    from .row_names import parse_labels

    if args.caption_inside and not args.out:
        raise ValueError("--caption-inside draws into the pictures --out writes: add --out OUT")
    return parse_labels(args.label)


def run_table(args: argparse.Namespace, records: list, formats: tuple[str, ...],
              metric: str) -> str:  # fmt: skip
    """The ``table`` command on ``records``: prints the table asked for, writes ``--out``'s
    files, returns what was written (the line the command prints last, or "")."""
    from .grouped_table import grouped_table
    from .report import aggregate_results, write_table
    from .row_plots import write_row_plots

    labels = check_layout(args)
    by = [k.strip() for k in args.by.split(",")]
    rows = aggregate_results(records, by=by, pool_code=args.pool_code, vs=args.vs)
    grouped = args.format == "latex" or args.columns
    if grouped:  # first: a bad --columns or --label is refused before any file is written
        shaped = grouped_table(rows, args.columns, fmt=args.format, metric=metric, labels=labels)
    text = write_table(rows, args.out, metric=metric, labels=labels)
    written: list[Path] = []
    if args.out:
        written = [*map(Path(args.out).with_suffix, (".md", ".csv", ".json"))]
    if grouped:
        text = shaped
        if args.out:
            suffix = ".tex" if args.format == "latex" else f"_{args.columns}.md"
            path = Path(args.out).with_name(Path(args.out).name + suffix)
            path.write_text(text + "\n")
            written.append(path)
    print(text)
    if args.out and metric == "accuracy":  # the pictures draw the accuracy only
        written += write_row_plots(rows, args.out, formats=formats, labels=labels,
                                   caption_inside=args.caption_inside)  # fmt: skip
    return "\nwrote " + ", ".join(map(str, written)) if written else ""
