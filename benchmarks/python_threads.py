"""Seconds per training iteration of a Python run by torch thread count: torch's default, 1, 2.

What a script that calls :func:`avalanche_sets.run_sets` runs at, depending on the threads it
leaves torch at. Two networks, each trained on the first domain of the ``quick`` preset's
stream (seed 0):

* ``build_strategy("order", "quick")`` — the quick start's strategy (the preset's width-32
  backbone in its ``auto`` precision);
* ``OrderStrategy()`` — the class's own defaults (a width-64 fp32 backbone).

One strategy per (network, thread count), all built first from the same seed; then rounds of
one iteration each, every strategy in turn with its thread count set just before its iteration,
so that the load of a shared machine hits every configuration alike. Wall and CPU seconds
(``time.process_time``: every thread of the process) are medians over the rounds after
``--warm`` warm-up iterations; the load averages at the start and the end say how busy the
machine was.

    python -m benchmarks.python_threads [--rounds 20] [--warm 3]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time

import torch

from avalanche_sets import OrderStrategy, build_benchmark, build_strategy
from benchmarks._common import RESULTS, header_md, out_dir, provenance, save_figure, write_json
from benchmarks._timing import train_range

RESULT = RESULTS / "python_threads"

NETWORKS = {
    'build_strategy("order", "quick")': lambda: build_strategy("order", "quick", seed=0),
    "OrderStrategy()": lambda: OrderStrategy(),
}


def thread_counts(default: int) -> dict[str, int]:
    """The configurations: torch's ``default`` (its count on this machine) and 1 and 2 threads."""
    return {f"default ({default})": default, "1": 1, "2": 2}


def measure(rounds: int, warm: int, default: int) -> list[dict]:
    """One row per (network, threads): the per-iteration wall and CPU seconds of ``rounds``
    interleaved rounds after ``warm`` warm-up iterations."""
    exp = build_benchmark("quick", seed=0).train_stream[0]
    needed = (warm + rounds) * 2  # meta-batch 2
    if len(exp.dataset) < needed:
        raise ValueError(f"the quick preset's domain has {len(exp.dataset)} tasks, {needed} needed")
    runs = {}
    for network, make in NETWORKS.items():
        for label, n in thread_counts(default).items():
            torch.manual_seed(0)
            runs[(network, label)] = {"strategy": make(), "threads": n, "wall": [], "cpu": []}
    for k in range(warm + rounds):
        for run in runs.values():
            torch.set_num_threads(run["threads"])
            wall, cpu = time.perf_counter(), time.process_time()
            train_range(run["strategy"], exp, k, k + 1)
            if k >= warm:
                run["wall"].append(time.perf_counter() - wall)
                run["cpu"].append(time.process_time() - cpu)
    return [
        {
            "network": network,
            "threads": label,
            "n_threads": run["threads"],
            "wall_s_per_it": statistics.median(run["wall"]),
            "cpu_s_per_it": statistics.median(run["cpu"]),
            "wall_s_all": run["wall"],
            "cpu_s_all": run["cpu"],
        }
        for (network, label), run in runs.items()
    ]


def plot(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    networks = list(dict.fromkeys(r["network"] for r in rows))
    fig, axes = plt.subplots(1, len(networks), figsize=(5 * len(networks), 3.6), sharey=True)
    for ax, network in zip(axes, networks):
        mine = [r for r in rows if r["network"] == network]
        ax.boxplot([r["wall_s_all"] for r in mine], tick_labels=[r["threads"] for r in mine])
        ax.set_title(network, fontsize=10)
        ax.set_xlabel("torch threads")
        ax.set_yscale("log")
    axes[0].set_ylabel("wall seconds per training iteration")
    fig.tight_layout()
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed iterations per config")
    parser.add_argument("--warm", type=int, default=3, help="untimed iterations first")
    args = parser.parse_args()
    default = torch.get_num_threads()  # torch's choice for this process: nothing changed it yet
    load_start = os.getloadavg()
    rows = measure(args.rounds, args.warm, default)
    load_end = os.getloadavg()
    out = out_dir("python_threads")
    prov = provenance(seeds=[0])
    summary = {
        **prov,
        "default_threads": default,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "rounds": args.rounds,
        "warm": args.warm,
        "load_average_start": load_start,
        "load_average_end": load_end,
        "rows": rows,
    }
    write_json(out / "results.json", summary)
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["network", "threads", "wall_s_per_it", "cpu_s_per_it"])
        for r in rows:
            writer.writerow(
                [
                    r["network"],
                    r["threads"],
                    f"{r['wall_s_per_it']:.4f}",
                    f"{r['cpu_s_per_it']:.4f}",
                ]
            )
    plot(rows, out / "python_threads.png")
    lines = [
        header_md("Python runs: seconds per iteration by torch thread count", prov),
        f"- torch's default here: {default} thread(s) (`OMP_NUM_THREADS`="
        f"{summary['omp_num_threads']!r}); {os.cpu_count()} CPU(s)",
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load_start)} at the start, "
        f"{tuple(round(x, 2) for x in load_end)} at the end",
        f"- {args.rounds} interleaved rounds after {args.warm} warm-up iterations, medians; "
        "the first domain of the `quick` preset's stream, seed 0",
        "",
        "| network | torch threads | wall s / iteration | CPU s / iteration |",
        "|---|---:|---:|---:|",
        *(
            f"| `{r['network']}` | {r['threads']} | {r['wall_s_per_it']:.3f} | "
            f"{r['cpu_s_per_it']:.3f} |"
            for r in rows
        ),
        "",
        "![seconds per iteration by thread count](python_threads.png)",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


def threads_block() -> str:
    """The documentation's summary of the committed measurement (``make readme``)."""
    path = RESULT / "results.json"
    if not path.is_file():
        return "Not measured yet: `python -m benchmarks.python_threads`.\n"
    res = json.loads(path.read_text())
    machine = res["machine"]
    load = ", ".join(f"{x:.1f}" for x in res["load_average_start"])
    load_end = ", ".join(f"{x:.1f}" for x in res["load_average_end"])
    lines = [
        f"On {res['date'][:10]}, {machine['cpu']} ({machine['cores']} cores; torch's default "
        f"{res['default_threads']} threads), a machine shared with other jobs (load averages "
        f"over 1, 5, 15 min: {load} at the start, {load_end} at the end), {res['rounds']} "
        "interleaved iterations on the `quick` preset's first domain, medians "
        "([result](benchmarks/results/python_threads/README.md)):",
        "",
        "| network | torch threads | wall s / iteration | CPU s / iteration |",
        "|---|---:|---:|---:|",
        *(
            f"| `{r['network']}` | {r['threads']} | {r['wall_s_per_it']:.3f} | "
            f"{r['cpu_s_per_it']:.3f} |"
            for r in res["rows"]
        ),
        "",
        "![seconds per iteration by thread count]"
        "(benchmarks/results/python_threads/python_threads.png)",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
