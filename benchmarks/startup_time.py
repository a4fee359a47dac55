"""Wall time of the command line's start: ``avalanche-sets --help`` and ``presets cpu``.

Each command runs as a fresh process (``python -m avalanche_sets ...``, this checkout first on
``PYTHONPATH``), ``--repeats`` times, interleaved with a reference process that imports what the
command line used to load before it could parse (torch, Avalanche and the package's public
names). Medians; the load averages are recorded since the machine may be shared.

    python -m benchmarks.startup_time [--repeats 5]

Writes ``benchmarks/results/startup_time/``: ``results.json``, ``README.md``, ``startup.png``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from benchmarks._common import header_md, out_dir, package_env, provenance, save_figure, write_json

COMMANDS = {
    "avalanche-sets --help": ["-m", "avalanche_sets", "--help"],
    "avalanche-sets presets cpu": ["-m", "avalanche_sets", "presets", "cpu"],
    "reference: import torch, avalanche and avalanche_sets' public names": [
        "-c",
        "import torch, avalanche.training, avalanche_sets; avalanche_sets.run_sets",
    ],
}


def timed(args: list[str]) -> float:
    env = package_env()
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.startup_time", description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    load_start = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for cmd in COMMANDS.values():  # warm the file cache
        timed(cmd)
    for _ in range(args.repeats):
        for name, cmd in COMMANDS.items():
            times[name].append(timed(cmd))
    rows = [{"command": k, "median_s": statistics.median(v), "all_s": v} for k, v in times.items()]
    prov = provenance()
    prov["load_average_1_5_15"] = {"start": load_start, "end": os.getloadavg()}
    out = out_dir("startup_time")
    write_json(out / "results.json", {**prov, "repeats": args.repeats, "rows": rows})
    load = prov["load_average_1_5_15"]
    md = header_md("Command-line start-up time", prov)
    md += (
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load['start'])} at the "
        f"start, {tuple(round(x, 2) for x in load['end'])} at the end\n"
        f"- {args.repeats} interleaved repeats, medians; target < 1.5 s\n\n"
        "| command | median s | all runs (s) |\n|---|---:|---|\n"
    )
    md += "".join(
        f"| `{r['command']}` | {r['median_s']:.2f} | "
        + ", ".join(f"{t:.2f}" for t in r["all_s"])
        + " |\n"
        for r in rows
    )
    (out / "README.md").write_text(md)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 2.8))
    ax.barh(range(len(rows)), [r["median_s"] for r in rows])
    ax.set_yticks(range(len(rows)), [r["command"][:48] for r in rows], fontsize=7)
    ax.axvline(1.5, color="red", lw=0.8, label="target 1.5 s")
    ax.set_xlabel("seconds (median, fresh process)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "startup.png", dpi=120)
    print(md)


if __name__ == "__main__":
    main()
