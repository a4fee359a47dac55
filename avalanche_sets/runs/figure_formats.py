"""The file formats of a table's pictures (``table --out OUT --formats png pdf svg``, and
:func:`.row_plots.write_row_plots`'s ``formats``), checked before any record is read.

PNG is always written (the documentation and the markdown captions show it); PDF and SVG are
vector copies of the same figure, caption included, for a paper. Standard library only: the
command line builds its parser from here before anything heavy loads.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

__all__ = ["FORMATS", "add_figure_arguments", "check_formats", "figure_formats"]

#: the formats a picture can be written in; ``png`` is always among those written
FORMATS = ("png", "pdf", "svg")


def check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """``formats`` as written: ``png`` first, then the others asked for, each once, in
    :data:`FORMATS` order.

    Raises:
        ValueError: a format not in :data:`FORMATS` (named, with the choices), or ``formats``
            given as one string (``"pdf"`` would read as three letters).
    """
    if isinstance(formats, str):
        raise ValueError(f"formats must be a list of names, e.g. ['png', 'pdf'], not {formats!r}")
    formats = list(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(
            f"unknown figure format(s) {', '.join(map(repr, unknown))}: choose among "
            f"{', '.join(FORMATS)} (e.g. --formats png pdf; PNG is always written)"
        )
    return tuple(f for f in FORMATS if f == "png" or f in formats)


def add_figure_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--formats`` of ``avalanche-sets table``."""
    parser.add_argument(
        "--out", metavar="OUT",
        help="also write OUT.md, OUT.csv and the rows' pictures with their data and captions: "
        "OUT_stream.png/.csv/.md (each domain's accuracy along the stream) and "
        "OUT_final.png/.csv/.md (final accuracy per domain)",
    )  # fmt: skip
    parser.add_argument(
        "--formats", nargs="+", metavar="FMT",
        help=f"the pictures' formats, among {', '.join(FORMATS)} (PNG is always written; "
        "pdf and svg are vector copies for a paper), e.g. --formats png pdf; needs --out",
    )  # fmt: skip


def figure_formats(args: argparse.Namespace) -> tuple[str, ...]:
    """The formats ``table`` writes its pictures in (:func:`check_formats` of ``--formats``).

    Raises:
        ValueError: an unknown format, or ``--formats`` without ``--out`` (no picture to write).
    """
    if args.formats is not None and not args.out:
        raise ValueError(
            "--formats names the formats of the pictures --out writes: add --out OUT (e.g. "
            f"--out results/table --formats {' '.join(args.formats)})"
        )
    return check_formats(args.formats or ["png"])
