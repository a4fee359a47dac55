"""``benchmarks/results`` holds run records, not per-run pictures; every committed picture is
shown by a page of the README or the documentation site and is stored small; a run's heatmap is
drawn again from its ``result.json`` by one command."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from avalanche_sets.cli import main
from avalanche_sets.runs.record import read_record
from avalanche_sets.runs.report import write_heatmap

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
LIMIT_BYTES = 20_000_000  # the committed benchmarks/results, in bytes (issue: below 20 MB)
A_RUN = RESULTS / "runs" / "mskm" / "packs-o1-5w5s-R50-seed0-tasks_per_domain1400-bf16"


def _committed() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: what is committed is unknown")
    out = subprocess.run(
        ["git", "ls-files", "-z", "benchmarks/results"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / f for f in out.split("\0") if f and (ROOT / f).is_file()]


def _pictures() -> list[Path]:
    return [p for p in _committed() if p.suffix.lower() in {".png", ".jpg", ".svg"}]


def test_the_committed_results_are_below_20_mb():
    total = sum(p.stat().st_size for p in _committed())
    assert total < LIMIT_BYTES, f"benchmarks/results holds {total / 1e6:.1f} MB"


def test_no_run_picture_is_committed():
    runs = [p for p in _pictures() if "runs" in p.relative_to(RESULTS).parts]
    assert not runs, f"per-run pictures are derivable (avalanche-sets heatmap): {runs[:3]}"


def test_every_committed_picture_is_shown_by_a_page():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    shown = hooks._repository_files(pages)
    unshown = [str(p.relative_to(ROOT)) for p in _pictures() if p not in shown]
    assert not unshown, f"committed pictures no page shows (show or remove them): {unshown}"


def test_every_committed_picture_is_a_palette_png():
    wide = []
    for p in _pictures():
        with Image.open(p) as im:
            if im.mode != "P":
                wide.append(f"{p.relative_to(ROOT)} ({im.mode})")
    assert not wide, f"not compressed (benchmarks/_common.py compress_png): {wide}"


def test_heatmap_redraws_a_run_picture_from_its_record(tmp_path, capsys):
    for name in ("one", "two"):
        shutil.copytree(A_RUN, tmp_path / name / A_RUN.name)
        (tmp_path / name / A_RUN.name / "accuracy_matrix.png").unlink(missing_ok=True)
    assert main(["heatmap", str(tmp_path / "one")]) == 0
    drawn = tmp_path / "one" / A_RUN.name / "accuracy_matrix.png"
    assert f"wrote {drawn}" in capsys.readouterr().out
    with Image.open(drawn) as im:
        assert im.size[0] > 400 and im.size[1] > 300
    # the same picture the run itself draws from the same record
    other = tmp_path / "two" / A_RUN.name
    write_heatmap(other, read_record(other))
    assert drawn.read_bytes() == (other / "accuracy_matrix.png").read_bytes()
    # and a folder without runs is an error that says so
    assert main(["heatmap", str(tmp_path / "empty")]) == 2
