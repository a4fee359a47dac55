"""The paper's tables as benchmarks/ lays out the methods in them (benchmarks/paper_rows.py)."""

from collections import defaultdict

import pytest

from benchmarks import _methods, paper_rows, readme
from benchmarks._paper import PAPER, REFERENCE
from benchmarks.paper_rows import COLUMNS, FAMILIES, FAMILY, ROWS
from benchmarks.reproduce import ARTEFACTS


def test_every_built_in_method_fills_a_row_and_has_a_family():
    builtin = _methods.names()
    assert list(ROWS) == builtin, "every built-in method fills a row, listed in library order"
    assert all(ROWS.values())
    assert list(FAMILY) == builtin, "every built-in method has a family, in listing order"
    assert set(FAMILY.values()) <= set(FAMILIES)


def test_the_benchmark_tables_run_every_row_with_the_papers_numbers_and_reference():
    for name, rows in ROWS.items():
        for r in rows:
            assert name in ARTEFACTS[r.table][0], f"{r.table} does not run {name}"
            if r.paper:
                assert PAPER[r.table][name] == dict(zip(COLUMNS[r.table], r.paper, strict=True))
            else:
                assert name not in PAPER.get(r.table, {})
            if r.reference:
                assert REFERENCE[r.table] == {"method": name}


def test_each_table_numbers_its_rows_from_one_with_at_most_one_reference():
    by_table = defaultdict(list)
    for method, rows in ROWS.items():
        assert len({r.table for r in rows}) == len(rows), f"{method} fills a table twice"
        for r in rows:
            by_table[r.table].append(r)
            if r.paper:  # the paper's numbers, one per column of its table
                assert len(r.paper) == len(COLUMNS[r.table]), (method, r.table)
    assert set(COLUMNS) <= set(by_table)
    for table, rows in by_table.items():
        assert sorted(r.position for r in rows) == list(range(1, len(rows) + 1)), table
        assert sum(r.reference for r in rows) <= 1, table


def test_table_methods_and_references_read_the_rows():
    assert paper_rows.table_methods("table2") == [
        "protonet", "anil", "mskm", "lst", "tpn", "order-mi-only", "order",
    ]  # fmt: skip
    assert paper_rows.table_methods("table3")[0] == paper_rows.reference_method("table3")
    assert paper_rows.reference_method("ablation_mi") == "semi-er"
    assert paper_rows.row("order", "table2").paper == ((41.25, 0.64), (53.96, 0.71))
    assert paper_rows.row("order-no-ot", "table2") is None
    with pytest.raises(ValueError, match="'memory_size' has 0 reference rows"):
        paper_rows.reference_method("memory_size")  # compared by its settings instead


def test_the_named_methods_are_order_and_the_two_upper_bounds():
    assert FAMILY[paper_rows.ORDER] == "order" and _methods.fixed(paper_rows.ORDER) == {}
    assert FAMILY[paper_rows.JOINT] == FAMILY[paper_rows.JOINT_MATCHED] == "joint"
    assert paper_rows.JOINT != paper_rows.JOINT_MATCHED


def test_the_methods_page_shows_the_rows_families_and_tuned_values():
    lines = {
        line.split(" | ")[0].strip("| `"): line for line in readme.methods_block().splitlines()
    }
    assert set(_methods.names()) <= set(lines)
    mskm = lines["mskm"].split(" | ")
    assert mskm[2] == "meta" and mskm[4].startswith("table2 (row 3), order2 (row 3)")
    assert "[`OrderNoOT(use_ot=False)`](avalanche_sets/order/variants.py)" in lines["order-no-ot"]
    gpm = lines["semi-gpm"].split(" | ")[5]
    assert gpm.startswith("`threshold=0.9`, `lr=0.01` ([chosen](benchmarks/results/baseline")
    assert lines["semi-er"].endswith("| — |")  # untuned
