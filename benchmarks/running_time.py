"""The paper's running-time table: seconds for 200 training iterations of MSKM, TPN, LST and
ORDER, 5-way 5-shot, with R = 250 and R = 50 OOD images per episode.

Our setting is the ``cpu`` preset of the committed tables (32 px, 4 blocks of 32 filters,
meta-batch 2, Q = 5, Z = 10, one thread) on the sets-mini packs when ``../shared`` has them
(else the synthetic benchmark, same image size). ORDER's memory is warmed up first so that
replay and OT are active. The methods' iterations are interleaved in rounds of 2 so that
machine noise hits them alike; we report the median iteration time × 200 and the ratio to
MSKM, next to the paper's seconds and ratios (its GPU, 84 px, 5-block backbone).

    python -m benchmarks.running_time [--iters 40] [--warm 10] [--ood 250 50]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import silent_evaluator
from benchmarks._common import SHARED_PACKS, header_md, out_dir, provenance, save_figure, write_json
from benchmarks._timing import IterationClock, train_range

METHODS = ("mskm", "tpn", "lst", "order")
# The paper's Table "Running time (seconds)": 200 iterations, 5-shot, R = 250 and R = 50.
PAPER_SECONDS = {
    250: {"mskm": 85, "tpn": 149, "lst": 137, "order": 122},
    50: {"mskm": 43, "tpn": 86, "lst": 79, "order": 71},
}


def time_methods(
    methods: tuple[str, ...], n_ood: int, iters: int, warm: int, source: str
) -> dict[str, list[float]]:
    """Per-iteration wall times (seconds) of each method, measured in interleaved rounds."""
    setting = {"root": str(SHARED_PACKS)} if source == "packs" else {"source": "synthetic"}
    meta_batch = resolve_preset("cpu").meta_batch
    preset = resolve_preset(
        "cpu", n_shot=5, n_ood=n_ood, threads=1, tasks_per_domain=meta_batch * (warm + iters),
        **setting,
    )  # fmt: skip
    exp = build_benchmark(preset, seed=0).train_stream[0]
    runs = {}
    for method in methods:
        clock = IterationClock()
        strategy = build_strategy(
            method, preset, seed=0, evaluator=silent_evaluator(), plugins=[clock]
        )
        # Warm-up: fills ORDER's memory (replay and OT active) and every allocator.
        train_range(strategy, exp, 0, warm)
        clock.t.clear()
        runs[method] = (strategy, clock)
    for it in range(warm, warm + iters, 2):
        for strategy, _ in runs.values():
            train_range(strategy, exp, it, it + 2)
    times = {m: list(clock.t["iteration"]) for m, (_, clock) in runs.items()}
    short = {m: len(ts) for m, ts in times.items() if len(ts) != iters}
    if short:  # a silently shorter sample would bias the medians
        raise RuntimeError(f"expected {iters} timed iterations per method, got {short}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.running_time",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--iters", type=int, default=40, help="timed iterations per method (even)")
    ap.add_argument("--warm", type=int, default=10, help="untimed warm-up iterations")
    ap.add_argument("--ood", type=int, nargs="+", default=[250, 50], help="values of R")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument(
        "--source", choices=("packs", "synthetic"),
        default="packs" if SHARED_PACKS.is_dir() else "synthetic",
    )  # fmt: skip
    ap.add_argument("--report-only", action="store_true", help="rebuild README/plot from JSON")
    args = ap.parse_args()
    if args.iters < 2 or args.iters % 2:
        ap.error(f"--iters must be an even number >= 2 (rounds of 2), got {args.iters}")
    if "mskm" not in args.methods:
        ap.error("--methods must include mskm: ratios are taken against it")
    out = out_dir("running_time")
    if args.report_only:
        saved = json.loads((out / "results.json").read_text())
        report(saved, out)
        return
    torch.set_num_threads(1)
    rows = []
    for r in args.ood:
        times = time_methods(tuple(args.methods), r, args.iters, args.warm, args.source)
        for method, ts in times.items():
            med = statistics.median(ts)
            rows.append({"R": r, "method": method, "median_s_per_iter": med,
                         "iqr_s": _iqr(ts), "iterations": len(ts)})  # fmt: skip
            print(f"R={r} {method}: {med:.3f} s/it, {200 * med:.0f} s per 200 it", flush=True)
    saved = {**provenance(seeds=[0]), "source": args.source, "iters": args.iters,
             "warm": args.warm, "rows": rows}  # fmt: skip
    write_json(out / "results.json", saved)
    report(saved, out)


def _iqr(ts: list[float]) -> float:
    q = statistics.quantiles(ts, n=4)
    return q[2] - q[0]


def report(saved: dict, out) -> None:
    rows = saved["rows"]
    prov = {k: saved[k] for k in ("command", "date", "machine", "seeds")}
    title = (
        f"Running time: 200 training iterations, 5-way 5-shot, `cpu` preset "
        f"({saved['source']} data, median of {saved['iters']} iterations)"
    )
    md = header_md(title, prov)
    md += (
        "| R | method | ours: s / 200 it | ours: ratio to MSKM | paper: s / 200 it | "
        "paper: ratio to MSKM |\n|---:|---|---:|---:|---:|---:|\n"
    )
    base = {r["R"]: r["median_s_per_iter"] for r in rows if r["method"] == "mskm"}
    for r in rows:
        ours = 200 * r["median_s_per_iter"]
        paper = PAPER_SECONDS.get(r["R"], {}).get(r["method"])
        pbase = PAPER_SECONDS.get(r["R"], {}).get("mskm")
        md += (
            f"| {r['R']} | {r['method']} | {ours:.0f} (IQR {200 * r['iqr_s']:.0f}) | "
            f"{r['median_s_per_iter'] / base[r['R']]:.2f} | "
            f"{paper if paper is not None else '—'} | "
            f"{f'{paper / pbase:.2f}' if paper is not None else '—'} |\n"
        )
    md += (
        "\nOurs: one CPU thread, median iteration time × 200 (IQR × 200 in brackets); the "
        "paper: its GPU, 84 px, 5-block backbone. Compare the ratios, not the seconds.\n"
    )
    (out / "README.md").write_text(md)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = sorted({r["R"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    width = 0.8 / len(methods)
    for k, m in enumerate(methods):
        xs = [i + (k - (len(methods) - 1) / 2) * width for i in range(len(rs))]
        ours = [
            next(r["median_s_per_iter"] for r in rows if r["R"] == R and r["method"] == m) / base[R]
            for R in rs
        ]
        axes[0].bar(xs, [200 * o * base[R] for o, R in zip(ours, rs)], width, label=m)
        axes[1].bar(xs, ours, width, label=m)
        paper = [(x, PAPER_SECONDS[R][m] / PAPER_SECONDS[R]["mskm"])
                 for x, R in zip(xs, rs) if R in PAPER_SECONDS]  # fmt: skip
        if paper:
            axes[1].scatter(*zip(*paper), color="black", marker="_", s=200, zorder=3)
    for ax in axes:
        ax.set_xticks(range(len(rs)), [f"R = {r}" for r in rs])
    axes[0].set_ylabel("seconds / 200 iterations (1 CPU thread)")
    axes[1].set_ylabel("time relative to MSKM")
    axes[1].set_title("bars: ours; black ticks: the paper", fontsize=9)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "running_time.png", dpi=120)
    print(md)


if __name__ == "__main__":
    main()
