"""The committed run records: each names the code that made it and reads; the ORDER guide's
paragraph on which records predate the β scaling matches the records; a reproduced table reads
the committed runs of its data.

Records older than the ``code`` key were given it once from the repository's history (the
oldest commit holding the record with its present numbers, ``"recovered": true``) by
``benchmarks/recover_code.py``, a one-off migration found at commit ``e2279ac``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from avalanche_sets.runs.folder import NOT_RECORDED, read_record, record_identity

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_every_committed_record_names_its_code_and_reads():
    records = sorted(RESULTS.rglob("result.json"))
    if not records:
        pytest.skip("no committed records")
    for path in records:
        rec = read_record(path.parent)
        code = rec["code"]
        keys = {"version", "commit", "dirty", "recovered", "torch", "avalanche"}
        assert keys <= set(code) <= keys | {"package"}, path
        assert code["recovered"] is True or code["commit"] is not None, path
        assert {"numerics", "data"} <= set(rec), path
        record_identity(rec)  # every record has an identity


# The commit that changed ORDER's objective (beta once per meta-batch, task terms summed), and
# the merge that brought it to the main line: docs/guide/order.md's paragraph on which committed
# results use which scaling quotes them.
SCALING_CHANGE, SCALING_MERGE = "28d5f22", "e53e7c1"
WITHOUT_OT = {"order-mi-only", "order-no-ot", "order-ood-filter-only"}


def _contains(commit: str, ancestor: str) -> bool:
    args = ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", ancestor, commit]
    return subprocess.run(args, capture_output=True).returncode == 0


def test_the_order_guide_says_what_the_records_show_about_the_beta_scaling():
    import datetime as dt

    probe = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-t", SCALING_CHANGE],
                           capture_output=True, text=True)  # fmt: skip
    if probe.stdout.strip() != "commit":
        pytest.skip("the repository's history is not here (a shallow or exported copy)")
    merged = subprocess.run(["git", "-C", str(ROOT), "show", "-s", "--format=%cI", SCALING_MERGE],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    merged_at = dt.datetime.fromisoformat(merged)
    read_by_a_table = set()
    for summary in RESULTS.glob("*/summary.json"):
        body = json.loads(summary.read_text())
        runs = body.get("runs") if isinstance(body, dict) else None
        if isinstance(runs, list):
            read_by_a_table |= {(RESULTS / r).resolve() for r in runs if isinstance(r, str)}
    before = set()
    for path in sorted(RESULTS.rglob("result.json")):
        rec = read_record(path.parent)
        if not rec["method"].startswith("order"):
            continue
        start = dt.datetime.fromisoformat(rec["date"]) - dt.timedelta(seconds=rec["seconds"])
        new = _contains(rec["code"]["commit"], SCALING_CHANGE) and start > merged_at
        if not new:
            before.add(path.parent.relative_to(RESULTS).as_posix())
            if rec["method"] not in WITHOUT_OT:  # an OT run with the old scaling: read by none
                assert path.parent.resolve() not in read_by_a_table, path
    old_ot = {f"runs/order/{s}-o1-5w{k}s-R50-seed0-bf16" for s in ("packs", "synthetic")
              for k in (1, 5)}  # fmt: skip
    assert {b for b in before if b.split("/")[1] not in WITHOUT_OT} == old_ot
    assert len(before - old_ot) == 15
    text = (ROOT / "docs" / "guide" / "order.md").read_text()
    for quoted in (SCALING_CHANGE, SCALING_MERGE, "four short-regime bf16", "the 15 runs"):
        assert quoted in text


def test_a_reproduced_table_reads_runs_of_its_data_and_records_older_than_data_identity():
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs.folder import run_identity
    from benchmarks.reproduce import grid_key

    preset = resolve_preset("cpu", n_shot=1, root="/somewhere")
    asked = run_identity("mskm", preset, data="sha256:aa")
    key = grid_key(asked, "sha256:aa")
    old = {**asked, "data": NOT_RECORDED}
    assert key is not None and grid_key(old, "sha256:aa") == key  # the committed records
    assert grid_key({**asked, "data": "sha256:bb"}, "sha256:aa") is None  # other data: not
    assert grid_key({**asked, "preset": {**asked["preset"], "threads": 2}}, "sha256:aa") != key
