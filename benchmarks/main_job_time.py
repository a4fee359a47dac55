"""Wall time of the main job: the demo run and the quick-start example, end to end.

* ``avalanche-sets run --preset quick`` (ORDER, synthetic benchmark, two threads) into a fresh
  output folder, so nothing is skipped or resumed;
* ``python examples/quick_start.py`` in a scratch folder.

Each is a fresh process (start-up, data, training, evaluation, plots included), ``--repeats``
times, alternating. The load averages before and after are recorded: on a shared machine the
times are upper bounds of what a quiet one takes. Targets on a quiet 2-core machine: the demo
≤ 75 s, quick_start ≤ 2 min.

    python -m benchmarks.main_job_time [--repeats 1] [--precision auto]

Writes ``benchmarks/results/main_job_time/``: ``results.json``, ``README.md``, ``main_job.png``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import (
    ROOT,
    header_md,
    out_dir,
    package_env,
    provenance,
    save_figure,
    write_json,
)

TARGETS_S = {"avalanche-sets run --preset quick": 75, "python examples/quick_start.py": 120}


def jobs(precision: str) -> dict[str, list[str]]:
    return {
        "avalanche-sets run --preset quick": [
            "-m", "avalanche_sets", "run", "--preset", "quick", "--seeds", "0",
            "--set", f"precision={precision}", "--out", "{scratch}/runs",
        ],
        "python examples/quick_start.py": [str(ROOT / "examples" / "quick_start.py")],
    }  # fmt: skip


def timed(args: list[str]) -> tuple[float, float, float]:
    scratch = Path(tempfile.mkdtemp(prefix="main_job_"))
    env = package_env()
    load = os.getloadavg()[0]
    cpu = _children_cpu()
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *(a.replace("{scratch}", str(scratch)) for a in args)],
        env=env, cwd=scratch, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - t
    cpu = _children_cpu() - cpu
    shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"failed: {args}\n{done.stderr[-3000:]}")
    return seconds, (load + os.getloadavg()[0]) / 2, cpu


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.main_job_time",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    args = ap.parse_args()
    load_start = os.getloadavg()
    times: dict[str, list[tuple[float, float, float]]] = {k: [] for k in jobs(args.precision)}
    for _ in range(args.repeats):
        for name, cmd in jobs(args.precision).items():
            times[name].append(timed(cmd))
            wall, load, cpu = times[name][-1]
            print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU (load {load:.1f})", flush=True)
    prov = provenance(seeds=[0])
    prov["load_average_1_5_15"] = {"start": load_start, "end": os.getloadavg()}
    rows = [
        {
            "job": k,
            "median_s": statistics.median(t for t, _, _ in v),
            "all_s": [t for t, _, _ in v],
            "cpu_s": [c for _, _, c in v],
            "mean_1min_load_during": [lo for _, lo, _ in v],
        }
        for k, v in times.items()
    ]
    out = out_dir("main_job_time")
    write_json(out / "results.json", {**prov, "precision": args.precision, "rows": rows})
    load = prov["load_average_1_5_15"]
    targets = TARGETS_S
    busy = max(load["start"][0], load["end"][0]) > (os.cpu_count() or 1)
    md = header_md("Main job wall time: the demo run and quick_start", prov)
    md += (
        f"- precision: {args.precision}; repeats: {args.repeats}\n"
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load['start'])} at the "
        f"start, {tuple(round(x, 2) for x in load['end'])} at the end"
        + (
            f": a 1-minute load above the {os.cpu_count()} cores, so the jobs got only part of "
            "the machine and these are upper bounds of the times on a quiet one\n\n"
            if busy
            else f": at most the {os.cpu_count()} cores, a quiet machine\n\n"
        )
        + "CPU s = user + system CPU seconds of the job's process (all its threads; under "
        "contention this includes OpenMP threads spinning while their partner waits for a core)."
        "\n\n| job | median wall s | CPU s | target on a quiet machine (s) | 1-min load during |\n"
        "|---|---:|---:|---:|---|\n"
    )
    md += "".join(
        f"| `{r['job']}` | {r['median_s']:.0f} | "
        + ", ".join(f"{c:.0f}" for c in r["cpu_s"])
        + f" | {targets[r['job']]} | "
        + ", ".join(f"{x:.1f}" for x in r["mean_1min_load_during"])
        + " |\n"
        for r in rows
    )
    (out / "README.md").write_text(md)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.barh(
        range(len(rows)),
        [r["median_s"] for r in rows],
        label=f"measured ({'loaded' if busy else 'quiet'} machine)",
    )
    ax.scatter([targets[r["job"]] for r in rows], range(len(rows)), color="red", marker="|",
               s=400, label="target (quiet machine)")  # fmt: skip
    ax.set_yticks(range(len(rows)), [r["job"] for r in rows], fontsize=8)
    ax.set_xlabel("seconds, end to end")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "main_job.png", dpi=120)
    print(md)


if __name__ == "__main__":
    main()
