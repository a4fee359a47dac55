"""The generated blocks of the README and the documentation pages agree with the committed
result files (`make readme`), and the demo's record is as new as the code it ran."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from benchmarks import _gpu, readme


def test_readme_and_docs_agree_with_the_result_files():
    stale = readme.stale_pages()
    assert stale == {}, (
        f"generated blocks {stale} differ from benchmarks/results/; run `make readme` "
        "(or `make demo-result` / `make test-result` / `make install-result` to re-measure)"
    )


def test_every_generated_block_is_on_a_page():
    on_pages = {}
    for page in readme.pages():
        text = page.read_text()
        for marker in readme.markers_in(text):
            assert readme.read_block(text, marker).strip(), (page, marker)
            on_pages.setdefault(marker, []).append(page)
    assert set(readme.blocks()) >= {
        "demo-result", "install-result", "test-suite-result", "main-tables",
    }  # fmt: skip
    assert set(on_pages) == set(readme.blocks()), "a block is generated but shown nowhere"
    # the front page carries the demo and the headline tables
    assert {"demo-result", "main-tables-converged"} <= set(
        readme.markers_in(readme.README.read_text())
    )


def test_a_block_on_a_docs_page_links_relative_to_that_page(tmp_path):
    block = readme.blocks(readme.DOCS / "results")["forgetting-converged"]
    links = re.findall(r"\]\(([^)#]+)\)", block)
    assert links and all(link.startswith("../../benchmarks/") for link in links), links
    for link in links:
        assert (readme.DOCS / "results" / link).resolve().is_file(), link


def test_the_demo_record_is_as_new_as_the_code_it_ran():
    why = readme.demo_staleness()
    assert why is None, f"{why}; run `make demo-result`"


def test_a_changed_module_makes_the_demo_record_stale(tmp_path, monkeypatch):
    files = list(json.loads((readme.DEMO / "summary.json").read_text())["code"])
    assert "avalanche_sets/order/strategy.py" in files  # the demo runs ORDER
    assert "avalanche_sets/cli.py" in files
    # a copy of those modules and a record of them, as record_demo writes it
    copy = tmp_path / "repo"
    for rel in files:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(readme.ROOT / rel, copy / rel)
    monkeypatch.setattr(readme, "ROOT", copy)
    code = {rel: readme.file_sha256(rel) for rel in files}
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "summary.json").write_text(
        json.dumps({"date": "2026-11-25T00:00:00+00:00", "code": code})
    )
    monkeypatch.setattr(readme, "DEMO", tmp_path / "demo")
    assert readme.demo_staleness() is None
    with (copy / "avalanche_sets/order/strategy.py").open("a") as f:
        f.write("# one more line\n")
    why = readme.demo_staleness()
    assert why is not None and why.endswith("avalanche_sets/order/strategy.py"), why
    (copy / "avalanche_sets/cli.py").unlink()  # a module gone is a change too
    assert "avalanche_sets/cli.py" in readme.demo_staleness()


def test_the_demo_block_quotes_the_demo_result(tmp_path, monkeypatch):
    from avalanche_sets.runs.record import read_record

    rec = read_record(readme.DEMO)
    block = readme.demo_block()
    quoted = re.search(r"\*\*([\d.]+) ± ([\d.]+)%\*\*", block)
    assert quoted is not None, block
    assert float(quoted.group(1)) == round(100 * rec.mean_accuracy, 2)
    assert float(quoted.group(2)) == round(100 * rec.result["mean_ci95"], 2)
    for picture in re.findall(r"\]\((benchmarks/results/demo/[^)]+\.png)\)", block):
        assert (readme.ROOT / picture).is_file(), picture

    # Another result (here: one point less) makes the committed README stale.
    other = tmp_path / "demo"
    shutil.copytree(readme.DEMO, other)
    result = json.loads((other / "result.json").read_text())
    result["result"]["mean_accuracy"] -= 0.01
    (other / "result.json").write_text(json.dumps(result))
    monkeypatch.setattr(readme, "DEMO", other)
    assert readme.stale_blocks(readme.README.read_text()) == ["demo-result"]
    assert readme.stale_pages() == {"README.md": ["demo-result"], "docs/index.md": ["demo-result"]}


def _stale_markers() -> set[str]:
    return {m for markers in readme.stale_pages().values() for m in markers}


SUMMARY = {
    "command": "python -m pytest -q -p no:randomly", "date": "2026-11-23T10:00:00+00:00",
    "machine": {"cpu": "Some CPU", "cores": 2, "torch": "2", "torch_threads": 1},
    "load_average": 3.0, "nice": 10, "wall_seconds": 754.4,
    "counts": {"passed": 600, "skipped": 8},
}  # fmt: skip


@pytest.mark.parametrize(
    ("folder", "marker", "quoted"),
    [("TESTS", "test-suite-result", ["600 passed, 8 skipped", "12 min 34 s"]),
     ("INSTALL", "install-result", ["12 min 34 s", "load average 3.0", "nice 10"])],
)  # fmt: skip
def test_install_and_test_blocks_quote_their_summaries(
    tmp_path, monkeypatch, folder, marker, quoted
):
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    monkeypatch.setattr(readme, folder, tmp_path)
    block = readme.blocks()[marker]
    assert all(q in block for q in quoted), block
    # the committed pages quote the committed summary, not this one
    assert marker in _stale_markers()
    (tmp_path / "summary.json").write_text(json.dumps({**SUMMARY, "wall_seconds": 60.0}))
    assert readme.blocks()[marker] != block and "1 min 0 s" in readme.blocks()[marker]


def test_a_missing_result_says_which_command_measures_it(tmp_path, monkeypatch):
    monkeypatch.setattr(readme, "INSTALL", tmp_path / "nothing")
    assert "`make install-result`" in readme.install_block()
    monkeypatch.setattr(readme, "DEMO", tmp_path / "nothing")
    assert "`make demo-result`" in readme.demo_block()


def test_main_job_and_startup_blocks_quote_their_results(tmp_path, monkeypatch):
    # the committed README quotes the committed timings ...
    for folder, marker in (("MAIN_JOB", "main-job-time"), ("STARTUP", "startup-time")):
        res = json.loads((getattr(readme, folder) / "results.json").read_text())
        if folder == "MAIN_JOB":
            demo = res["rows"][0]
            assert f"**{readme._minutes(demo['median_s'])}**" in readme.blocks()[marker]
            demo["median_s"] = 80.0  # over the 75 s target: quoted, and flagged as not met
        else:
            res["rows"][0]["median_s"] = 2.5
        other = tmp_path / folder
        other.mkdir()
        (other / "results.json").write_text(json.dumps(res))
        monkeypatch.setattr(readme, folder, other)
        # ... and another result makes exactly that block stale
        assert _stale_markers() == {marker}
        monkeypatch.undo()
    monkeypatch.setattr(readme, "MAIN_JOB", tmp_path / "MAIN_JOB")
    assert "| **1 min 20 s** |" in readme.main_job_block()
    assert "| 1 min 15 s | no |" in readme.main_job_block()
    monkeypatch.setattr(readme, "STARTUP", tmp_path / "STARTUP")
    assert "`avalanche-sets --help` 2.50 s" in readme.startup_block()


def test_the_gpu_block_quotes_the_gpu_records_and_labels_what_is_computed(tmp_path, monkeypatch):
    block = readme.blocks()["gpu-measured"]
    eager = json.loads((readme.GPU_STEP / "step_eager.json").read_text())
    paper = json.loads((readme.PAPER_SCALE / "paper_short.json").read_text())
    order = next(r for r in eager["rows"] if (r["method"], r["R"], r["data"]) == ("order", 50, "device"))  # fmt: skip
    assert eager["gpu"]["name"] in block and eager["gpu"]["driver"] in block
    assert f"{order['ms']:.1f} eager" in block
    # these records divided the busy time by the profiled pass's wall time and counted
    # annotation ranges: the block computes the step's share from the record, as an interval
    assert "gpu_busy_share" not in eager
    low, high = readme.busy_from_record(order)
    assert (low, high) == pytest.approx((17.10, 20.33), abs=0.01)
    assert f"{low:.1f}–{high:.1f} ms busy per iteration of the 49.9 ms median step" in block
    assert f"{order['gpu_busy']:.1%}" not in block
    # their TFLOP/s counted ORDER's 2 current episodes, not its 2 replayed ones too
    assert readme.order_tflops(order) == (pytest.approx(2 * order["tflops"]), "recomputed from the record")  # fmt: skip
    assert "8.1 TFLOP/s (recomputed from the record" in block
    # their whole run scaled the median step without the data path: recomputed, an interval
    old = paper["methods"]["order"]["whole_run"]["minutes"]
    assert readme.whole_run_from_record(paper["methods"]["order"]) == pytest.approx((32.09, 33.74), abs=0.01)  # fmt: skip
    assert "| 32.1–33.7 min |" in block and f"| {old:.1f} min |" not in block
    assert "run, **computed from the record** |" in block
    # a record that names its busy share's basis is quoted as measured, and judged
    step = tmp_path / "gpu_step"
    shutil.copytree(readme.GPU_STEP, step)
    monkeypatch.setattr(readme, "GPU_STEP", step)
    for name in ("step_eager.json", "step_compile.json"):
        res = json.loads((readme.GPU_STEP / name).read_text())
        res["gpu_busy_counts"], res["gpu_busy_share"] = _gpu.BUSY_COUNTS, _gpu.BUSY_SHARE
        for row in res["rows"]:
            row["gpu_busy"], row["busy_ms_per_it"] = 0.75, 0.75 * row["ms"]
        (step / name).write_text(json.dumps(res))
    assert "| 75.0% (37.4 ms busy per iteration of a 49.9 ms median step) | ≥ 70% | yes |" in (
        readme.gpu_block()
    )
    assert _stale_markers() == {"gpu-measured"}
    monkeypatch.setattr(readme, "PAPER_SCALE", tmp_path / "nothing")
    assert "has not been measured" in readme.gpu_block()
