"""Committed records that predate the ``code`` key get it from the history of the repository
(``benchmarks/recover_code.py``), and every committed record names its code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from avalanche_sets.runs.folder import NOT_RECORDED, read_record, record_identity
from benchmarks.recover_code import recover, recovered_commit

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                         text=True, env=env)  # fmt: skip
    return out.stdout.strip()


def _record(matrix, root="/abs/sets-mini", **extra) -> dict:
    return {
        "format": 1, "method": "mskm", "seed": 0,
        "preset": {"source": "packs", "device": "cpu", "threads": 1, "root": root},
        "result": {"matrix": matrix, "final": matrix[-1], "mean_accuracy": 0.5},
        "machine": {"torch": "2.0.0", "torch_threads": 1}, **extra,
    }  # fmt: skip


def _commit(repo: Path, rel: str, body: dict | None, message: str) -> str:
    path = repo / rel
    if body is None:
        _git(repo, "rm", "-q", rel)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body, indent=2) + "\n")
        _git(repo, "add", rel)
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_the_commit_that_added_the_present_numbers_is_recovered(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "avalanche_sets").mkdir()
    (repo / "avalanche_sets" / "__init__.py").write_text('__version__ = "0.0.7"\n')
    _git(repo, "add", "avalanche_sets")
    rel = "benchmarks/results/runs/mskm/a/result.json"
    first = _commit(repo, rel, _record([[0.1]]), "made")
    _commit(repo, rel, _record([[0.1]], root="../sets-mini"), "a path made relative")
    assert recovered_commit(repo, rel) == first  # a rewrite of a setting: not the code
    rerun = _commit(repo, rel, _record([[0.2]]), "re-run")
    assert recovered_commit(repo, rel) == rerun  # other numbers: the commit that made them
    _commit(repo, rel, None, "deleted")
    readded = _commit(repo, rel, _record([[0.2]]), "re-added with the same numbers")
    assert recovered_commit(repo, rel) == readded  # older versions are another record's
    done = _commit(repo, "benchmarks/results/runs/b/result.json", {**_record([[0.3]]),
                   "code": {"commit": "x"}}, "a record that names its code")  # fmt: skip

    todo = recover(repo, repo / "benchmarks" / "results", write=True)
    assert [p.relative_to(repo).as_posix() for p in todo] == [rel]  # the new one is left alone
    body = json.loads((repo / rel).read_text())
    assert body["code"] == {"version": "0.0.7", "commit": readded, "dirty": None,
                            "recovered": True, "torch": "2.0.0", "avalanche": None}  # fmt: skip
    # only what the record proves: no precision recorded, no bf16 path, no data content
    assert body["numerics"] == {"precision": None, "device": "cpu", "threads": 1, "cpu_bf16": None}
    assert body["data"] == {"source": "packs", "root": "/abs/sets-mini", "content": None}
    assert list(body).index("code") < list(body).index("result")  # where a run writes it
    assert done and recover(repo, repo / "benchmarks" / "results", write=False) == []


def test_every_committed_record_names_its_code_and_reads():
    records = sorted(RESULTS.rglob("result.json"))
    if not records:
        pytest.skip("no committed records")
    for path in records:
        rec = read_record(path.parent)
        code = rec["code"]
        assert set(code) == {"version", "commit", "dirty", "recovered", "torch", "avalanche"}, path
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
