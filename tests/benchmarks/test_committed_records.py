"""The committed run records: each reads, names the library code that made it by its package
hash and carries no migration key; the ORDER guide's bf16 records that predate its objective are
read by no table; a reproduced table reads the committed runs of its data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from avalanche_sets.runs.folder import record_identity
from avalanche_sets.runs.record import read_record

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CODE_KEYS = {"version", "commit", "dirty", "package", "torch", "avalanche"}


def _records() -> list[Path]:
    records = sorted(RESULTS.rglob("result.json"))
    if not records:
        pytest.skip("no committed records")
    return records


def test_every_committed_record_reads_and_names_its_package_hash():
    for path in _records():
        rec = read_record(path.parent)
        body = json.loads(path.read_text())
        assert set(body["code"]) == CODE_KEYS, path  # no "recovered", a package hash
        assert re.fullmatch(r"[0-9a-f]{64}", body["code"]["package"]), path
        assert re.fullmatch(r"[0-9a-f]{40}", body["code"]["commit"]), path
        assert "recovered" not in rec.made_by, path  # nor in run.json's copy
        assert {"numerics", "data"} <= set(body), path
        record_identity(rec)  # every record has an identity


def _read_by_a_table() -> set[Path]:
    read = set()
    for summary in RESULTS.glob("*/summary.json"):
        body = json.loads(summary.read_text())
        runs = body.get("runs") if isinstance(body, dict) else None
        if isinstance(runs, list):
            read |= {(RESULTS / r).resolve() for r in runs if isinstance(r, str)}
    return read


def test_the_bf16_order_records_the_order_guide_names_are_read_by_no_table():
    """docs/guide/order.md: four short-regime bf16 ORDER records were made with the averaged
    objective, and no table reads them (every other committed ORDER run with the OT term that a
    table reads uses today's)."""
    old_ot = {RESULTS / f"runs/order/{s}-o1-5w{k}s-R50-seed0-bf16" for s in ("packs", "synthetic")
              for k in (1, 5)}  # fmt: skip
    if not all((folder / "result.json").is_file() for folder in old_ot):
        pytest.skip("no committed records")
    read = _read_by_a_table()
    assert read, "no table names its runs"
    assert not {f.resolve() for f in old_ot} & read
    text = (ROOT / "docs" / "guide" / "order.md").read_text()
    assert "benchmarks/results/runs/order/{packs,synthetic}-o1-5w{1,5}s-R50-seed0-bf16" in text
    assert not re.search(r"`[0-9a-f]{7}`", text), "the guide states today's code, no commits"


def test_a_reproduced_table_reads_runs_of_its_data_and_records_that_name_none():
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs.folder import run_identity
    from benchmarks.reproduce import grid_key

    preset = resolve_preset("cpu", n_shot=1, root="/somewhere")
    asked = run_identity("mskm", preset, data="sha256:aa")
    key = grid_key(asked, "sha256:aa")
    unnamed = {**asked, "data": None}
    assert key is not None and grid_key(unnamed, "sha256:aa") == key  # the committed records
    assert grid_key({**asked, "data": "sha256:bb"}, "sha256:aa") is None  # other data: not
    assert grid_key({**asked, "preset": {**asked["preset"], "threads": 2}}, "sha256:aa") != key


@pytest.mark.parametrize("table", ["table2", "table3", "table2_synthetic", "table3_synthetic"])
def test_a_tables_share_of_joint_reads_the_joint_runs_of_its_own_data(table):
    """The "ORDER as a percentage of Joint" section of a reproduced table: its Joint column is
    the mean over seeds of the Joint runs on the table's data (not another source's)."""
    readme = RESULTS / table / "README.md"
    if not readme.is_file():
        pytest.skip("no committed table")
    source = "synthetic" if table.endswith("_synthetic") else "packs"
    section = readme.read_text().split("## ORDER as a percentage of Joint", 1)[1]
    for shot in (1, 5):
        runs = [RESULTS / f"runs/joint/{source}-o1-5w{shot}s-R50-seed{s}" for s in (0, 1, 2)]
        accs = [read_record(r).mean_accuracy for r in runs if r.is_dir()]
        row = re.search(rf"^\| {shot} \| ([^|]+) \|", section, re.MULTILINE)
        assert row is not None and accs, (table, shot)
        assert row.group(1).strip() == f"{100 * sum(accs) / len(accs):.2f}%", (table, shot)
