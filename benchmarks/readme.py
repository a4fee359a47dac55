"""The numbers and pictures of the README and the documentation site, from committed results.

Every block of README.md and of the pages under ``docs/`` between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->`` comes from ``benchmarks/results/`` (a block may sit on several pages; its
links are written relative to each page of the site, and absolute in README.md, which is also
the package index's long description: :func:`absolute_url`): the demo (``demo/``: its accuracy, heatmap, episode picture and run
time), the install time (``install/``), the test suite's size and time (``test_suite/``) and
the main tables (``main_tables.py``), the main job's wall time (``main_job_time/``) and the
command line's start-up time (``startup_time/``), and, for the Python scripts page,
the Python run's time by thread count (``python_threads/``) and the table of what
``OrderStrategy()`` and each preset build (read off the code: ``strategy_defaults.py``). ``tests/benchmarks/test_readme_numbers.py`` fails when a
page and those files disagree, and when the demo's record is older than the code it ran.

    python -m benchmarks.readme update           # rewrite every page's blocks   (make readme)
    python -m benchmarks.readme check            # exit 1 if a block is stale
    python -m benchmarks.readme record-demo      # run `make demo`'s command, keep its result
    python -m benchmarks.readme record-tests     # run the test suite, keep its count and time
    python -m benchmarks.readme record-install   # a fresh install into a temporary venv, timed
    python -m benchmarks.readme record-screenshots    # the site as the browser test sees it
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from benchmarks import _methods, baseline_tuning, paper_rows
from benchmarks._code import code_md
from benchmarks._common import (
    RESULTS,
    ROOT,
    compress_png,
    header_md,
    provenance,
    read_block,
    splice_block,
    write_json,
)
from benchmarks.main_tables import readme_blocks

README = ROOT / "README.md"
DOCS = ROOT / "docs"
DEMO = RESULTS / "demo"
INSTALL = RESULTS / "install"
TESTS = RESULTS / "test_suite"
MAIN_JOB = RESULTS / "main_job_time"  # benchmarks/main_job_time.py
SCREENSHOTS = RESULTS / "docs_site"  # record-screenshots
STARTUP = RESULTS / "startup_time"  # benchmarks/startup_time.py
FORGETTING = RESULTS / "forgetting_converged"  # benchmarks/forgetting.py
GPU_STEP = RESULTS / "gpu_step"  # scripts/gpu_check.sh: benchmarks/gpu_step.py on a GPU
PAPER_SCALE = RESULTS / "paper_scale"  # scripts/gpu_check.sh: benchmarks/paper_scale.py --short
DEMO_ARGS = ["run", "--preset", "quick", "--out", "runs"]  # the Makefile's `demo`
DEMO_FILES = ("result.json", "run.json", "table.md", "accuracy_matrix.png")


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def _machine(prov: dict) -> str:
    m = prov["machine"]
    load, nice = prov.get("load_average"), prov.get("nice")
    busy = f", load average {load:.1f} at the start" if load is not None else ""
    busy += f", under nice {nice}" if nice else ""
    if load is not None and load > m["cores"]:
        busy += ": a busy shared machine, a quiet one is faster"
    return f"{m['cpu']} ({m['cores']} cores{busy})"


def _summary(folder: Path, name: str = "summary.json") -> dict | None:
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else None


def _not_measured(what: str, target: str) -> str:
    return f"*{what} has not been measured on this version yet: `make {target}` does it.*\n"


# ------------------------------------------------------------------------------ blocks
def demo_block() -> str:
    from avalanche_sets.runs.record import read_record

    summary = _summary(DEMO)
    if summary is None:
        return _not_measured("The demo", "demo-result")
    rec = read_record(DEMO)
    res = rec.result
    num = rec.numerics or {}
    arithmetic = ", ".join(
        text
        for text in (
            num.get("precision"),
            num.get("threads") and f"{num['threads']} torch threads",
            num.get("device") and f"on {num['device']}",
        )
        if text
    )
    return (
        f"The demo's result (seed {rec.seed}, recorded in "
        f"[`benchmarks/results/demo/`](benchmarks/results/demo/README.md) by `make demo-result` "
        f"on {summary['date'][:10]}, {_machine(summary)}): final mean accuracy "
        f"**{100 * res['mean_accuracy']:.2f} ± {100 * res['mean_ci95']:.2f}%** (95% CI over "
        f"test episodes); the run took {_minutes(rec.seconds)}, the whole command "
        f"{_minutes(summary['wall_seconds'])} (imports and the episode picture included). "
        f"The figure is that machine's ({arithmetic}): the demo's `auto` precision is bf16 "
        "where the CPU has native bf16 and fp32 elsewhere, and another CPU or thread count "
        "sums in another order, so other machines give other last digits.\n\n"
        + code_md([rec], what="runs")
        + "\n"
        "![accuracy matrix of the demo](benchmarks/results/demo/accuracy_matrix.png)\n\n"
        "<details><summary>One training episode per domain (the picture the demo saves)"
        "</summary>\n\n![one episode per domain](benchmarks/results/demo/episodes.png)\n\n"
        "</details>\n"
    )


def install_block() -> str:
    s = _summary(INSTALL)
    if s is None:
        return _not_measured("A fresh install", "install-result")
    text = (
        f"A fresh install (`{s['command']}`, an empty virtual environment, torch from the local "
        f"wheels) took **{_minutes(s['wall_seconds'])}** on {s['date'][:10]}, {_machine(s)} "
        "([result](benchmarks/results/install/README.md)).\n"
    )
    return text


def tests_block() -> str:
    s = _summary(TESTS)
    if s is None:
        return _not_measured("The test suite", "test-result")
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items())
    return (
        f"The full suite (`{s['command']}`): {counts} in **{_minutes(s['wall_seconds'])}** on "
        f"{s['date'][:10]}, {_machine(s)} ([result](benchmarks/results/test_suite/README.md)).\n"
    )


def _load_words(res: dict) -> str:
    load = res["load_average_1_5_15"]["start"][0]
    m = res["machine"]
    quiet = "a busy shared machine, a quiet one is faster" if load > m["cores"] else "quiet"
    return f"{m['cpu']} ({m['cores']} cores, 1-min load {load:.1f} at the start: {quiet})"


def main_job_block() -> str:
    from benchmarks.main_job_time import TARGETS_S as targets

    res = _summary(MAIN_JOB, "results.json")
    if res is None:
        return _not_measured("The main job", "main-job (python -m benchmarks.main_job_time)")
    rows = "".join(
        f"| `{r['job']}` | **{_minutes(r['median_s'])}** | {_minutes(min(r['cpu_s']))} | "
        f"{_minutes(targets[r['job']])} | {'yes' if r['median_s'] <= targets[r['job']] else 'no'} |\n"
        for r in res["rows"]
    )
    return (
        f"Measured by [`benchmarks/main_job_time.py`](benchmarks/main_job_time.py) on "
        f"{res['date'][:10]}, {_load_words(res)}, `precision={res['precision']}`, each job a "
        "fresh process (start-up, data, training, evaluation and plots included; median of "
        f"{len(res['rows'][0]['all_s'])} run(s); "
        "[result](benchmarks/results/main_job_time/README.md)):\n\n"
        "| job | wall | CPU | target | met |\n|---|---:|---:|---:|---|\n" + rows
    )


def startup_block() -> str:
    res = _summary(STARTUP, "results.json")
    if res is None:
        return _not_measured("The start-up time", "startup (python -m benchmarks.startup_time)")
    med = {r["command"]: r["median_s"] for r in res["rows"]}
    ref = next(v for k, v in med.items() if k.startswith("reference"))
    cli = ", ".join(f"`{k}` {v:.2f} s" for k, v in med.items() if not k.startswith("reference"))
    return (
        f"Start-up ([`benchmarks/startup_time.py`](benchmarks/startup_time.py), medians of "
        f"{res['repeats']} fresh processes on {res['date'][:10]}, {_load_words(res)}; "
        f"[result](benchmarks/results/startup_time/README.md)): {cli}; importing torch, "
        f"Avalanche and the package's public names takes {ref:.1f} s.\n"
    )


def forgetting_block() -> str:
    res = _summary(FORGETTING, "results.json")
    if res is None:
        return _not_measured("Forgetting in the converged regime", "forgetting")
    from benchmarks.forgetting import find_runs, markdown_rows, upper_bound_md

    missing = ", ".join(res["missing"]) or "nothing"
    runs = RESULTS / "runs"

    return (
        f"From [`benchmarks/forgetting.py`](benchmarks/forgetting.py) on {res['date'][:10]} "
        f"(seeds {res['seeds']}; [result](benchmarks/results/forgetting_converged/README.md)); "
        "accuracy in %, forgetting and BWT in points, ± a Student-t 95% CI over seeds:\n\n"
        "| method | shot | seeds | accuracy (%) | forgetting (pts) | BWT (pts) |\n"
        "|---|---:|---|---:|---:|---:|\n"
        + markdown_rows(res["rows"])
        + upper_bound_md(res.get("upper_bound") or [])
        + f"\nNot run yet: {missing}.\n\n"
        + code_md(
            rec
            for row in res["rows"]
            for rec in find_runs(runs, row["method"], row["n_shot"], res["suffix"])
            if rec.seed in row["seeds"]
        )
    )


def _order_row(res: dict, R: int, data: str) -> dict:
    return next(r for r in res["rows"] if (r["method"], r["R"], r["data"]) == ("order", R, data))


#: ORDER's replayed tasks per iteration at the ``paper`` preset (``replay_batch``), embedded
#: by the backbone like the meta-batch's own.
ORDER_REPLAYED = 2


def busy_from_record(row: dict) -> tuple[float, float]:
    """Device-busy ms per iteration of a ``gpu_step`` row recorded before ``busy_ms_per_it``
    (its ``gpu_busy`` was the busy time over the profiled pass's wall time, annotation ranges
    counted): ``(low, high)``, computed from the record. ``high`` is ``gpu_busy`` × the pass's
    wall time / its iterations (the annotation ranges' time included); ``low`` subtracts the
    listed annotation rows (``name#...``) of the heaviest-kernels listing, which may still
    leave the work between the steps (the next meta-batch's gather) in."""
    p = row["profile"]
    high = row["gpu_busy"] * p["wall_ms"] / p["iterations"]
    notes = sum(k["ms"] for k in p["top_kernels"] if "#" in k["name"]) / p["iterations"]
    return high - notes, high


def order_tflops(row: dict, meta_batch: int = 2) -> tuple[float, str]:
    """ORDER's backbone TFLOP/s and how it was had: measured (a record that counted the
    backbone's images), or recomputed from a record that counted only the meta-batch's
    ``meta_batch`` episodes: × (meta_batch + replayed) / meta_batch."""
    if row.get("backbone_images_per_it") is not None:
        return row["tflops"], "measured"
    return row["tflops"] * (meta_batch + ORDER_REPLAYED) / meta_batch, "recomputed from the record"


def whole_run_from_record(order: dict) -> tuple[float, float]:
    """Minutes of a whole run from a ``paper_scale --short`` record without the gaps between
    iterations (its ``whole_run`` scaled the median step): ``(low, high)``, computed from the
    record like :func:`~benchmarks.paper_scale.whole_run_cost`, each domain's missing
    iterations at its mean step after the first ``SETTLE`` (``low``: no data path) plus, for
    ``high``, the domain's training time outside its steps per iteration (the data path and the
    pass's set-up: an upper bound of the data path)."""
    from benchmarks.paper_scale import SETTLE

    whole = order["whole_run"]
    full = whole["full_iterations_per_domain"]
    low = high = 0.0
    for d in order["domains"]:
        its = d["iterations"]
        mean = statistics.mean(its[SETTLE:] if len(its) > SETTLE else its)
        outside = (d["train_s"] - sum(its)) / len(its)
        low += d["train_s"] + (full - len(its)) * mean
        high += d["train_s"] + (full - len(its)) * (mean + outside)
    rest = whole["evaluation_s"] + whole["checkpoint_s"]
    return (low + rest) / 60, (high + rest) / 60


def gpu_block() -> str:
    """What one GPU measured (``gpu_step``'s eager and compiled records, ``paper_scale
    --short``'s), against the GPU targets (docs/guide/gpu.md): measured, computed and
    recomputed from a record apart."""
    eager = _summary(GPU_STEP, "step_eager.json")
    compiled = _summary(GPU_STEP, "step_compile.json")
    paper = _summary(PAPER_SCALE, "paper_short.json")
    if eager is None or compiled is None or paper is None:
        return _not_measured("The GPU path", "a GPU run of scripts/gpu_check.sh")
    gpu, prov = eager["gpu"], eager["provenance"]
    e_dev, e_host = _order_row(eager, 50, "device"), _order_row(eager, 50, "host")
    c_dev = _order_row(compiled, 50, "device")
    ratio = {(r["variant"], r["data"]): r["order_over_mskm"] for r in eager["ratios"] + compiled["ratios"] if r["R"] == 50}  # fmt: skip
    launches = sum(
        h["calls"] for h in e_dev["profile"]["top_host_ops"] if h["name"].startswith("cudaLaunchKernel")
    ) / e_dev["profile"]["iterations"]  # fmt: skip
    order = paper["methods"]["order"]
    whole = order["whole_run"]

    def met(ok: bool) -> str:
        return "yes" if ok else "**no**"

    if "gpu_busy_share" in eager:  # busy ms inside the steps over the timed step: measured
        b = max((e_dev, e_host, c_dev), key=lambda r: r["gpu_busy"] or 0.0)
        busy = (f"{b['gpu_busy']:.1%} ({b['busy_ms_per_it']:.1f} ms busy per iteration of a "
                f"{b['ms']:.1f} ms median step)", met(b["gpu_busy"] >= 0.70))  # fmt: skip
    else:
        low, high = busy_from_record(e_dev)
        busy = (f"{low / e_dev['ms']:.0%}–{high / e_dev['ms']:.0%}: {low:.1f}–{high:.1f} ms "
                f"busy per iteration of the {e_dev['ms']:.1f} ms median step, **computed from "
                "the record**", met(low / e_dev["ms"] >= 0.70))  # fmt: skip
    if order["domains"] and "gaps" in order["domains"][0]:
        run = (f"{whole['minutes']:.1f} min", met(whole["complete"] and whole["minutes"] <= 20))
        run_how = "whole 6-domain ORDER `paper` run, **computed**"
    else:
        low_m, high_m = whole_run_from_record(order)
        run = (f"{low_m:.1f}–{high_m:.1f} min", met(whole["complete"] and high_m <= 20))
        run_how = "whole 6-domain ORDER `paper` run, **computed from the record**"
    rows = [
        ("ORDER ms per iteration, R = 50 (median, measured)", f"{e_dev['ms']:.1f} eager, "
         f"{c_dev['ms']:.1f} compiled (host data: {e_host['ms']:.1f})", "≤ 15",
         met(min(e_dev["ms"], e_host["ms"], c_dev["ms"]) <= 15)),
        ("ORDER / MSKM, R = 50 (measured)", f"{ratio['eager', 'device']:.2f} eager, "
         f"{ratio['compile', 'device']:.2f} compiled (host data: {ratio['eager', 'host']:.2f})",
         "≤ 2.1", met(min(ratio.values()) <= 2.1)),
        ("GPU busy share of ORDER's step, R = 50", busy[0], "≥ 70%", busy[1]),
        (run_how, run[0], "≤ 20 min", run[1]),
    ]  # fmt: skip
    table = "".join(f"| {a} | {b} | {c} | {d} |\n" for a, b, c, d in rows)
    tflops, how = order_tflops(e_dev)
    parts = e_dev["order_parts_ms"]
    mi = parts["MIRegularizationPlugin.loss_term"] + parts.get(
        "MIRegularizationPlugin.after_forward", 0.0
    )
    return (
        f"Measured on an **{gpu['name']}** (driver {gpu['driver']}, CUDA {gpu['cuda']}, torch "
        f"{gpu['torch']}) on {prov['date'][:10]} by "
        "[`scripts/gpu_check.sh`](scripts/gpu_check.sh), code "
        f"`{prov['code']['commit'][:7]}` and `{paper['provenance']['code']['commit'][:7]}` "
        "([step records](benchmarks/results/gpu_step/README.md), "
        "[paper run](benchmarks/results/paper_scale/README.md)); the `paper` preset on the "
        "synthetic source at 84 px, episodes drawn on the GPU:\n\n"
        "| | on the GPU | target | met |\n|---|---|---|---|\n" + table + "\n"
        f"In ORDER's step (R = 50, eager) the backbone runs at {tflops:.1f} TFLOP/s ({how}: "
        f"its {2 + ORDER_REPLAYED} episodes per iteration, replayed ones included), the host "
        f"launches about {launches:,.0f} kernels and synchronises "
        f"{e_dev['syncs_per_it']:.0f} times per iteration (measured), and the MI regulariser "
        f"(its networks' fit and its term) takes {mi:.1f} ms (measured). "
        + _whole_run_md(paper, order, whole)
    )


def _whole_run_md(paper: dict, order: dict, whole: dict) -> str:
    n = paper["short_iterations_per_domain"]
    if order["domains"] and "gaps" in order["domains"][0]:
        return (
            f"The whole run is computed from {n} measured iterations per domain on all "
            f"{len(order['domains'])} domains (each domain's mean cycle, a step and the data "
            f"path before it) and the {len(order['evaluations'])} measured evaluations: "
            f"training {whole['training_s'] / 60:.1f} min + evaluation "
            f"{whole['evaluation_s'] / 60:.1f} min + {whole['checkpoints']} checkpoints "
            f"{whole['checkpoint_s'] / 60:.1f} min.\n"
        )
    return (
        f"The whole run is computed from the record's {n} measured iterations per domain on all "
        f"{len(order['domains'])} domains and its {len(order['evaluations'])} measured "
        "evaluations: each domain's missing iterations at its mean step (the first 5 left out: "
        "the warm-up), plus at most the domain's time outside its steps per iteration (the data "
        "path between iterations, which the record did not keep apart from the pass's set-up); "
        f"the record's own {whole['minutes']:.1f} min scaled the median step and left the data "
        "path out.\n"
    )


def _option_values(options) -> str:
    return ", ".join(f"`{k}={v!r}`" for k, v in options.items())


def methods_block() -> str:
    """The methods page's table: per built-in method (:mod:`benchmarks._methods`), its strategy
    class and the options it fixes, its family and the paper's rows it fills
    (:mod:`benchmarks.paper_rows`), what it is, and its tuned values with the record that chose
    them (:mod:`benchmarks.baseline_tuning`)."""
    lines = [
        "| method | strategy | family | what it is | paper rows | tuned options |",
        "|---|---|---|---|---|---|",
    ]
    record = baseline_tuning.RECORD.relative_to(ROOT).as_posix()
    for name in _methods.names():
        if name not in paper_rows.FAMILY:
            raise ValueError(
                f"method {name!r} has no family; fix: add it to FAMILY in benchmarks/paper_rows.py"
            )
        options = _methods.fixed(name)
        fixed = f"({', '.join(f'{k}={v!r}' for k, v in options.items())})" if options else ""
        strategy = f"[`{_methods.class_label(name)}{fixed}`]({_methods.strategy_path(name)})"
        rows = paper_rows.ROWS.get(name, ())
        filled = ", ".join(f"{r.table} (row {r.position})" for r in rows) or "—"
        tuned = "—"
        if name in baseline_tuning.GRIDS:
            tuned = f"{_option_values(_methods.tuned(name))} ([chosen]({record}))"
        lines.append(
            f"| `{name}` | {strategy} | {paper_rows.FAMILY[name]} | {_methods.summary(name)} "
            f"| {filled} | {tuned} |"
        )
    return "\n".join(lines) + "\n"


_LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:)([^)#\s]+)")  # a relative Markdown link target
_IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".svg")


def project_urls() -> dict[str, str]:
    """pyproject.toml's ``[project.urls]``: where the repository and the documentation live."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]


def absolute_url(target: str, urls: dict[str, str] | None = None) -> str:
    """A link target relative to the repository root as the absolute address README.md uses:
    a page of ``docs/`` on the documentation site (``docs/guide/cli.md`` → ``<site>guide/cli/``),
    a folder as the repository's tree, an image as its raw file (the package index shows it),
    any other file as the repository's page of it (all on the ``main`` branch)."""
    urls = project_urls() if urls is None else urls
    path, hash_, anchor = target.partition("#")
    if path.startswith("docs/") and path.endswith(".md"):
        page = f"/{path.removeprefix('docs/').removesuffix('.md')}"  # use_directory_urls
        url = urls["Documentation"] + (page.removesuffix("/index") + "/").removeprefix("/")
    else:
        kind = "tree" if path.endswith("/") else "raw" if path.endswith(_IMAGES) else "blob"
        url = f"{urls['Repository']}/{kind}/main/{path}"
    return url + hash_ + anchor


def relink(block: str, base: Path) -> str:
    """``block``, written with links relative to the repository root, for a page in ``base``:
    relative to it on the site, absolute (:func:`absolute_url`) in README.md (``base`` the
    root)."""
    if base == ROOT:
        urls = project_urls()
        return _LINK.sub(lambda m: m.group(1) + absolute_url(m.group(2), urls), block)
    return _LINK.sub(lambda m: m.group(1) + os.path.relpath(ROOT / m.group(2), base), block)


def _generated() -> dict[str, str]:
    """Marker -> its text, from the committed result files, links relative to the root."""
    from benchmarks.paper_table import figures_block
    from benchmarks.python_threads import threads_block  # torch: only when the blocks are made
    from benchmarks.strategy_defaults import defaults_block

    return {
        "demo-result": demo_block(),
        "install-result": install_block(),
        "test-suite-result": tests_block(),
        "main-job-time": main_job_block(),
        "startup-time": startup_block(),
        "forgetting-converged": forgetting_block(),
        "gpu-measured": gpu_block(),
        "strategy-defaults": defaults_block(),
        "python-threads": threads_block(),
        "methods-table": methods_block(),
        "paper-figures": figures_block(base=ROOT),
        **readme_blocks(),
    }


def blocks(base: Path = ROOT) -> dict[str, str]:
    """Marker -> its text, generated from the committed result files, with links relative to
    the folder ``base`` (the page's)."""
    return {marker: relink(block, base) for marker, block in _generated().items()}


def pages() -> list[Path]:
    """The files that carry generated blocks: README.md and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def markers_in(text: str) -> list[str]:
    return re.findall(r"<!-- ([\w-]+):start -->", text)


def render(
    text: str, base: Path = ROOT, *, where: Path = README, generated: dict | None = None
) -> str:
    """``text`` (the page ``where``, in the folder ``base``) with every block it carries
    regenerated; ``generated`` is :func:`_generated`'s output when the caller has it."""
    generated = _generated() if generated is None else generated
    for marker in markers_in(text):
        if marker not in generated:
            raise ValueError(f"{where} carries the block {marker!r}, which nothing generates")
        text = splice_block(text, marker, relink(generated[marker], base), where=where)
    return text


def stale_blocks(
    text: str, base: Path = ROOT, *, where: Path = README, generated: dict | None = None
) -> list[str]:
    """Markers whose block in ``text`` (a page in ``base``) differs from the result files."""
    fresh = render(text, base, where=where, generated=generated)
    return [m for m in markers_in(text) if read_block(text, m) != read_block(fresh, m)]


def stale_pages() -> dict[str, list[str]]:
    """Page (relative to the repository) -> its stale markers, for every page with one."""
    generated, out = _generated(), {}
    for page in pages():
        text = page.read_text(encoding="utf-8")
        stale = stale_blocks(text, page.parent, where=page, generated=generated)
        if stale:
            out[str(page.relative_to(ROOT))] = stale
    return out


def update_pages() -> list[Path]:
    """Rewrite every page's blocks from the result files; the pages that changed."""
    generated, changed = _generated(), []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text, page.parent, where=page, generated=generated)
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


# ---------------------------------------------------------------------------- recording
def _record(folder: Path, summary: dict, title: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "summary.json", summary)
    (folder / "README.md").write_text(header_md(title, summary) + body)
    print(f"wrote {folder}")


def _prov() -> dict:
    # how busy the machine was: timings on a shared machine are only comparable with these
    return {**provenance(seeds=None), "load_average": os.getloadavg()[0], "nice": os.nice(0)}


#: runs the command line as ``python -m avalanche_sets`` does, and writes the files of the
#: package's modules that the process imported to ``argv[1]`` when it exits
_DEMO_BOOT = (
    "import atexit, json, sys\n"
    "out = sys.argv.pop(1)\n"
    "def dump():\n"
    "    files = {getattr(m, '__file__', None) for m in list(sys.modules.values())}\n"
    "    json.dump(sorted(f for f in files if f), open(out, 'w'))\n"
    "atexit.register(dump)\n"
    "from avalanche_sets.cli import main\n"
    "sys.exit(main())\n"
)


def file_sha256(rel: str) -> str:
    """SHA-256 of the repository file ``rel`` (of ``"<missing>"`` when it is gone)."""
    path = ROOT / rel
    return hashlib.sha256(path.read_bytes() if path.is_file() else b"<missing>").hexdigest()


def demo_staleness() -> str | None:
    """Why the demo's record is older than the code it ran (None when it is not): the package
    modules the recorded demo imported, each hashed when it was recorded and now."""
    summary = _summary(DEMO)
    if summary is None:
        return "there is no demo record"
    code = summary.get("code")
    if not code:
        return "the demo record does not say which code it ran"
    changed = [rel for rel, sha in code.items() if file_sha256(rel) != sha]
    if changed:
        return (
            f"the code the demo ran changed since it was recorded on {summary['date'][:10]}: "
            f"{', '.join(changed)}"
        )
    return None


def record_demo() -> None:
    """Run `make demo`'s command in a temporary folder and keep its run folder's files, with
    the fingerprint of the package modules it imported."""
    prov = _prov()
    with tempfile.TemporaryDirectory() as tmp:
        imported = Path(tmp, "imported.json")
        start = time.perf_counter()
        cmd = [sys.executable, "-c", _DEMO_BOOT, str(imported), *DEMO_ARGS]
        subprocess.run(cmd, cwd=tmp, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - start
        package = ROOT / "avalanche_sets"
        files = sorted(
            Path(f).resolve().relative_to(ROOT).as_posix()
            for f in json.loads(imported.read_text())
            if package in Path(f).resolve().parents
        )
        (run,) = [p.parent for p in Path(tmp, "runs").rglob("result.json")]
        DEMO.mkdir(parents=True, exist_ok=True)
        for name in DEMO_FILES:
            shutil.copy(run / name, DEMO / name)
        shutil.copy(Path(tmp, "runs", "episodes.png"), DEMO / "episodes.png")
    for picture in ("accuracy_matrix.png", "episodes.png"):  # pages show them: keep them small
        compress_png(DEMO / picture)
    table = (DEMO / "table.md").read_text()
    summary = {
        **prov,
        "seeds": [json.loads((DEMO / "result.json").read_text())["seed"]],
        "demo_command": "avalanche-sets " + " ".join(DEMO_ARGS),
        "wall_seconds": wall,
        "run_folder": str(run.relative_to(tmp)),
        "code": {rel: file_sha256(rel) for rel in files},  # module -> its SHA-256
    }
    _record(
        DEMO, summary, "The demo (`make demo`)",
        f"`{summary['demo_command']}` took {_minutes(wall)} (the run "
        f"{_minutes(json.loads((DEMO / 'run.json').read_text())['seconds'])}); its run folder "
        f"was `{summary['run_folder']}`. It ran the {len(files)} modules of the package listed "
        "in `summary.json` (`code`); the documentation's test fails when one of them changes "
        "and the demo is not recorded again (`make demo-result`).\n\n"
        f"{table}\n"
        "![accuracy matrix](accuracy_matrix.png)\n\n![one episode per domain](episodes.png)\n",
    )  # fmt: skip


_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")


def record_tests(pytest_args: list[str]) -> int:
    """Run the test suite once and keep its counts and wall time (`make test-result`)."""
    prov = _prov()
    cmd = ["python", "-m", "pytest", "-q", "-p", "no:randomly", *pytest_args]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *cmd[1:]], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {kind: int(n) for n, kind in _COUNT.findall(last)}
    if not counts:
        sys.exit(f"error: no pytest summary line in its output:\n{done.stdout[-2000:]}")
    summary = {**prov, "command": " ".join(cmd), "counts": counts, "wall_seconds": wall,
               "summary_line": last, "exit_code": done.returncode}  # fmt: skip
    _record(TESTS, summary, "The test suite", f"`{last}` ({_minutes(wall)} wall clock)\n")
    return done.returncode


def record_install() -> int:
    """Time scripts/install.sh into a new, empty virtual environment (`make install-result`)."""
    prov = _prov()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "VENV": str(Path(tmp) / "venv")}
        start = time.perf_counter()
        done = subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, env=env)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: scripts/install.sh failed (exit {done.returncode}); nothing recorded")
    summary = {**prov, "command": "VENV=<empty folder> bash scripts/install.sh",
               "wall_seconds": wall}  # fmt: skip
    _record(INSTALL, summary, "A fresh install", f"{_minutes(wall)} wall clock.\n")
    return 0


def record_screenshots() -> int:
    """Run the site's browser tests, keeping their screenshots of the home and results pages."""
    prov = _prov()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/docs/test_site.py",
           "-k", "home_page or results_page"]  # fmt: skip
    env = {**os.environ, "AVALANCHE_SETS_SCREENSHOTS": str(SCREENSHOTS)}
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    if done.returncode != 0:
        sys.exit(f"error: the browser tests failed (exit {done.returncode}); nothing recorded")
    for shot in ("home.png", "results.png"):
        compress_png(SCREENSHOTS / shot)
    summary = {**prov, "command": " ".join(["python", *cmd[1:]]), "viewport": [1280, 900]}
    _record(
        SCREENSHOTS, summary, "The documentation site in headless Chromium",
        "Full-page screenshots taken by `tests/docs/test_site.py` (the strict build, served "
        "locally, opened in the system's Chromium by Playwright):\n\n"
        "![the home page](home.png)\n\n![the converged results page](results.png)\n",
    )  # fmt: skip
    return 0


def main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.readme", description=__doc__.splitlines()[0]
    )
    p.add_argument("what", choices=["update", "check", "record-demo", "record-tests",
                                    "record-install", "record-screenshots"])  # fmt: skip
    p.add_argument("pytest_args", nargs="*", help="record-tests: extra pytest arguments")
    args = p.parse_args()
    if args.what == "record-demo":
        record_demo()
        return 0
    if args.what == "record-tests":
        return record_tests(args.pytest_args)
    if args.what == "record-install":
        return record_install()
    if args.what == "record-screenshots":
        return record_screenshots()
    if args.what == "check":
        stale = stale_pages()
        if stale:
            print(f"stale generated blocks {stale}; run `make readme`", file=sys.stderr)
            return 1
        print("README.md and docs/ agree with benchmarks/results/")
        return 0
    changed = update_pages()
    for page in changed:
        print(f"updated {page.relative_to(ROOT)}")
    if not changed:
        print("README.md and docs/ were up to date")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FileNotFoundError, ValueError) as err:  # a missing result file, missing markers
        sys.exit(f"error: {err}")
