"""What ``avalanche-sets table`` tabulates (``--metric``): the accuracy, or a measure of the OOD
split of the unlabeled images (:attr:`~.record.RunRecord.ood_split`). Standard library only:
the command line builds its parser from here before anything heavy loads.
"""

from __future__ import annotations

import argparse

from .record import OOD_METRICS

__all__ = ["TABLE_METRICS", "add_metric_argument", "check_table_metric", "table_metric"]

TABLE_METRICS = ("accuracy", *(f"ood_{m}" for m in OOD_METRICS))
"""What ``table --metric`` tabulates: the accuracy (with forgetting, BWT, the Δ, the pictures)
or one measure of the OOD split (:data:`~.record.OOD_METRICS`)."""


def check_table_metric(metric: str, vs: str | None = None) -> str:
    """``metric`` once it is one of :data:`TABLE_METRICS` (and, for an OOD measure, no ``vs``:
    the paired Δ compares accuracies on the same test episodes).

    Raises:
        ValueError: another name (with the choices), or ``vs`` with an OOD measure (the fix).
    """
    if metric not in TABLE_METRICS:
        raise ValueError(f"--metric {metric!r}: choose one of {', '.join(TABLE_METRICS)}")
    if metric != "accuracy" and vs is not None:
        raise ValueError(
            f"--vs {vs} gives the paired Δ of the accuracy; --metric {metric} has none: drop "
            "--vs, or table --metric accuracy"
        )
    return metric


def add_metric_argument(parser: argparse.ArgumentParser) -> None:
    """``--metric`` of ``table`` (:data:`TABLE_METRICS`)."""
    parser.add_argument(
        "--metric", default="accuracy", choices=TABLE_METRICS,
        help="what the table shows: the accuracy (default; with forgetting, BWT, --vs, the "
        "pictures) or a measure of the OOD split of the unlabeled images at the final "
        "evaluation, against the oracle: AUROC of its score, precision or recall of the images "
        "it kept as in-distribution (result.json's ood_split; '—' for runs without a split; "
        "--out writes the table, no pictures)",
    )  # fmt: skip


def table_metric(args: argparse.Namespace) -> str:
    """The ``--metric`` of parsed ``table`` arguments, checked with their ``--vs``
    (:func:`check_table_metric`), before any record is read."""
    return check_table_metric(args.metric, args.vs)
