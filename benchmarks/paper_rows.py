"""The paper's tables as ``benchmarks/`` lays out every method in them: the rows a method fills,
with the paper's numbers, and the group of methods it belongs to.

This is the lab's knowledge, not the library's: the library says what a method *is* (its class,
options and tuned values, read through :mod:`benchmarks._methods`); which row of which of the
paper's tables its runs fill, what the paper reported there and which row every other row of a
table is compared with is said here, once, keyed by method name. ``reproduce.py`` takes an
artefact's methods from it (:func:`table_methods`), :mod:`benchmarks._paper` the paper's numbers
and each table's reference row, ``forgetting.py`` the stream tables' methods and the methods
page (``benchmarks/readme.py``) each method's rows and family.

A built-in method that fills a row of a table is added to :data:`ROWS` (and to :data:`FAMILY`);
a test keeps both keyed by the built-in methods and each table's rows numbered 1, 2, ... with at
most one reference.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COLUMNS",
    "FAMILIES",
    "FAMILY",
    "JOINT",
    "JOINT_MATCHED",
    "ORDER",
    "ROWS",
    "PaperRow",
    "reference_method",
    "row",
    "table_methods",
    "tables",
]


@dataclass(frozen=True)
class PaperRow:
    """A row of one of the paper's tables that a method's runs fill.

    Attributes:
        table: the artefact of ``benchmarks/reproduce.py`` (``"table2"``, ``"table3"``,
            ``"order2"``, ``"ablation_mi"`` ...).
        position: the row's place in that table (1 is the first row).
        paper: the paper's numbers in the table's columns (:data:`COLUMNS`), each
            ``(mean %, 95% CI)``; empty for a row the paper does not have (one of ours).
        reference: whether this row is the one every other row of the table is compared with
            (paired Δ on the same test episodes).
    """

    table: str
    position: int
    paper: tuple[tuple[float, float], ...] = ()
    reference: bool = False


_BY_SHOT = ("1-shot", "5-shot")
_BY_R = ("5-shot, R = 50", "5-shot, R = 250")  # component and fine-grained ablations

#: The columns of the paper's numbers in each method table (a row's :attr:`PaperRow.paper`).
COLUMNS: dict[str, tuple[str, ...]] = {
    "table2": _BY_SHOT,
    "table3": _BY_SHOT,
    "order2": _BY_SHOT,
    "order3": _BY_SHOT,
    # The paper's rows: MI × OT switches; its "neither" row has Semi-ER's numbers, its "MI, no
    # OT" row is ORDER without OT (with replay).
    "ablation_components": _BY_R,
    # U_id+U_ood without MI (Semi-ER's numbers), U_id only, U_id + I_id, everything. The paper
    # does not say whether its middle rows use OT; ours keep replay and OT on, so they differ
    # from ORDER only in the MI terms.
    "ablation_mi": _BY_R,
}

#: method -> the rows of the paper's tables its runs fill (a method in none is left out).
ROWS: dict[str, tuple[PaperRow, ...]] = {
    "order": (
        PaperRow("table2", 7, ((41.25, 0.64), (53.96, 0.71))),
        PaperRow("table3", 9, ((41.25, 0.64), (53.96, 0.71))),
        PaperRow("order2", 15, ((42.49, 0.57), (55.37, 0.71))),
        PaperRow("order3", 15, ((43.36, 0.61), (56.89, 0.58))),
        PaperRow("ablation_components", 5, ((53.96, 0.71), (51.87, 0.68))),
        PaperRow("ablation_mi", 5, ((53.96, 0.71), (51.87, 0.68))),
        PaperRow("ood_sensitivity", 4),
        PaperRow("memory_size", 3),
        PaperRow("lambda_beta", 1),
    ),
    "order-mi-only": (
        PaperRow("table2", 6, ((36.93, 0.90), (48.85, 0.53))),
        PaperRow("order2", 6),
        PaperRow("order3", 6),
        PaperRow("ablation_mi", 8),
    ),
    "order-ot-only": (
        PaperRow("table3", 8, ((39.21, 0.61), (51.72, 0.61))),
        PaperRow("order2", 14),
        PaperRow("order3", 14),
        PaperRow("ablation_components", 3, ((51.72, 0.61), (48.57, 0.80))),
        PaperRow("ablation_mi", 2, ((51.67, 0.85), (48.36, 0.82))),
    ),
    "order-mi-id-only": (PaperRow("ablation_mi", 3, ((52.87, 0.89), (49.98, 0.70))),),
    "order-mi-ood-only": (PaperRow("ablation_mi", 4),),
    "order-no-ot": (PaperRow("ablation_components", 4, ((52.63, 0.77), (50.23, 0.62))),),
    "order-ood-filter-only": (PaperRow("ablation_mi", 7),),
    "order-ot-support-only": (PaperRow("ablation_components", 2, ((51.18, 0.82), (47.69, 0.87))),),
    "protonet": (
        PaperRow("table2", 1, ((31.96, 0.93), (42.62, 0.73))),
        PaperRow("order2", 1, ((27.91, 0.95), (39.12, 0.76))),
        PaperRow("order3", 1, ((28.55, 1.03), (40.41, 0.97))),
    ),
    "anil": (
        PaperRow("table2", 2, ((30.58, 0.81), (42.24, 0.86))),
        PaperRow("order2", 2, ((27.25, 0.82), (38.58, 0.65))),
        PaperRow("order3", 2, ((28.24, 1.15), (39.97, 0.83))),
    ),
    "mskm": (
        PaperRow("table2", 3, ((33.79, 1.05), (45.41, 0.58)), reference=True),
        PaperRow("order2", 3, ((30.15, 0.89), (41.02, 0.75)), reference=True),
        PaperRow("order3", 3, ((31.17, 0.96), (41.46, 0.69)), reference=True),
        PaperRow("ablation_mi", 6),
        PaperRow("ood_sensitivity", 1, reference=True),
    ),
    "lst": (
        PaperRow("table2", 4, ((34.81, 0.81), (46.09, 0.69))),
        PaperRow("order2", 4, ((32.51, 0.71), (41.78, 0.85))),
        PaperRow("order3", 4, ((31.61, 0.81), (41.31, 0.80))),
        PaperRow("ood_sensitivity", 3),
    ),
    "tpn": (
        PaperRow("table2", 5, ((34.52, 0.83), (46.23, 0.60))),
        PaperRow("order2", 5, ((31.81, 0.72), (42.81, 0.62))),
        PaperRow("order3", 5, ((32.80, 0.71), (42.83, 0.71))),
        PaperRow("ood_sensitivity", 2),
    ),
    "semi-seq": (
        PaperRow("table3", 1, ((33.79, 1.05), (45.41, 0.58)), reference=True),
        PaperRow("order2", 7),
        PaperRow("order3", 7),
    ),
    "semi-er": (
        PaperRow("table3", 2, ((37.62, 0.97), (50.35, 0.76))),
        PaperRow("order2", 8, ((39.05, 0.91), (51.28, 0.78))),
        PaperRow("order3", 8, ((38.87, 0.76), (52.75, 0.82))),
        PaperRow("ablation_components", 1, ((50.35, 0.76), (46.25, 0.91)), reference=True),
        PaperRow("ablation_mi", 1, ((50.35, 0.76), (46.25, 0.91)), reference=True),
        PaperRow("memory_size", 1),
    ),
    "semi-agem": (
        PaperRow("table3", 3, ((36.97, 1.16), (50.29, 0.69))),
        PaperRow("order2", 9, ((39.48, 0.97), (51.51, 0.83))),
        PaperRow("order3", 9, ((39.29, 0.73), (52.97, 0.94))),
    ),
    "semi-gem": (
        PaperRow("table3", 4),
        PaperRow("order2", 10),
        PaperRow("order3", 10),
    ),
    "semi-mer": (
        PaperRow("table3", 5, ((37.90, 0.83), (50.46, 0.74))),
        PaperRow("order2", 11, ((39.65, 0.82), (51.42, 0.68))),
        PaperRow("order3", 11, ((39.41, 0.68), (53.08, 0.87))),
    ),
    "semi-gpm": (
        PaperRow("table3", 6, ((36.53, 0.81), (49.78, 0.65))),
        PaperRow("order2", 12, ((38.89, 0.85), (51.03, 0.71))),
        PaperRow("order3", 12, ((39.09, 0.81), (52.83, 0.76))),
    ),
    "semi-der": (
        PaperRow("table3", 7, ((36.78, 0.89), (50.07, 0.61))),
        PaperRow("order2", 13, ((39.81, 0.73), (51.68, 0.62))),
        PaperRow("order3", 13, ((39.46, 0.77), (53.37, 0.73))),
        PaperRow("memory_size", 2),
    ),
    "joint": (PaperRow("table3", 10, ((49.91, 0.79), (61.78, 0.75))),),
    "joint-matched": (PaperRow("table3", 11),),
}

#: The groups of methods the paper compares (the methods page's "family" column):
#:
#: * ``"order"``: ORDER and its ablations;
#: * ``"meta"``: the meta-learning baselines (Table 2);
#: * ``"continual"``: the continual baselines, MSKM plus a mechanism against forgetting (Table 3);
#: * ``"joint"``: trained on the stationary mixture of the domains, the upper bounds.
FAMILIES: tuple[str, ...] = ("order", "meta", "continual", "joint")

#: method -> its group (:data:`FAMILIES`), for every built-in method.
FAMILY: dict[str, str] = {
    "order": "order",
    "order-mi-only": "order",
    "order-ot-only": "order",
    "order-mi-id-only": "order",
    "order-mi-ood-only": "order",
    "order-no-ot": "order",
    "order-ood-filter-only": "order",
    "order-ot-support-only": "order",
    "protonet": "meta",
    "anil": "meta",
    "mskm": "meta",
    "lst": "meta",
    "tpn": "meta",
    "semi-seq": "continual",
    "semi-er": "continual",
    "semi-agem": "continual",
    "semi-gem": "continual",
    "semi-mer": "continual",
    "semi-gpm": "continual",
    "semi-der": "continual",
    "joint": "joint",
    "joint-matched": "joint",
}

#: ORDER itself, every part on: the method the paper proposes.
ORDER = "order"
#: The upper bound: MSKM trained on the stationary mixture of the domains.
JOINT = "joint"
#: The upper bound trained on ORDER's work per step (``B + R`` tasks per iteration).
JOINT_MATCHED = "joint-matched"


def row(method: str, table: str) -> PaperRow | None:
    """The row ``method`` fills in artefact ``table``, if any."""
    return next((r for r in ROWS.get(method, ()) if r.table == table), None)


def tables() -> list[str]:
    """Every artefact some method fills a row of, in the order they first appear."""
    return list(dict.fromkeys(r.table for rows in ROWS.values() for r in rows))


def table_methods(table: str) -> list[str]:
    """The methods that fill rows of artefact ``table``, in the rows' order."""
    rows = [(r.position, m) for m in ROWS if (r := row(m, table)) is not None]
    return [m for _, m in sorted(rows)]


def reference_method(table: str) -> str:
    """The method whose row of artefact ``table`` every other row is compared with.

    Raises:
        ValueError: a table with no reference row, or several.
    """
    found = [m for m in ROWS if (r := row(m, table)) is not None and r.reference]
    if len(found) != 1:
        raise ValueError(
            f"artefact {table!r} has {len(found)} reference rows {found}; fix: exactly one of "
            "its rows in benchmarks/paper_rows.py says reference=True"
        )
    return found[0]
