"""Time one training iteration of ORDER and of plain MSKM side by side, and each plugin's share.

Setting: 5-way 5-shot, Q = 10, Z = 10, R = 50 and R = 250, 32 px, the ``cpu``
preset backbone, meta-batch 2, one thread. ORDER's memory is warmed up first so that replay and
OT are active. Iterations of the methods are interleaved in rounds so that machine noise hits
them alike; we report medians and the ratio ORDER / MSKM (the paper's own: 71 s / 43 s = 1.65
at R = 50).

    python -m benchmarks.iteration_time [--iters 30] [--replay-batch 2 1]

Superseded by ``benchmarks/step_speed.py`` (CPU seconds rather than wall time, the precision
and layout variants, the 1-shot ``cpu`` preset the runs use, ORDER's excess over its backbone
floor and a per-part profile); kept for the plugin shares of its 5-shot setting.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import silent_evaluator
from benchmarks._common import header_md, out_dir, provenance, save_figure, write_json
from benchmarks._timing import IterationClock, instrument, train_range


def run(n_ood: int, iters: int, replay_batch: int, warm: int) -> dict:
    preset = resolve_preset(
        "cpu", source="synthetic", n_shot=5, n_query=10, n_unlabeled=10, n_ood=n_ood,
        tasks_per_domain=2 * (warm + iters + 4), threads=1,
    )  # fmt: skip
    bench = build_benchmark(preset, seed=0)
    exp = bench.train_stream[0]
    strategies = {}
    for method in ("mskm", "order"):
        clock = IterationClock()
        over = {"replay_batch": replay_batch} if method == "order" else {}
        s = build_strategy(
            method, preset, seed=0, evaluator=silent_evaluator(), plugins=[clock], **over
        )
        strategies[method] = (s, clock, defaultdict(list))
        for p in getattr(s, "order_plugins", []):
            instrument(p, strategies[method][2])
    s_order = strategies["order"][0]
    n_total = len(exp.dataset) // preset.meta_batch
    # Warm up: fills ORDER's memory (so replay and OT are active) and both allocators.
    for s, clock, sink in strategies.values():
        train_range(s, exp, 0, warm)
        clock.t.clear()
        sink.clear()
    # Interleave rounds of 2 iterations.
    it = warm
    while it + 2 <= min(n_total, warm + iters):
        for s, _, _ in strategies.values():
            train_range(s, exp, it, it + 2)
        it += 2
    out = {}
    for method, (_s, clock, sink) in strategies.items():
        med = {k: statistics.median(v) for k, v in clock.t.items()}
        med.update({k: statistics.median(v) for k, v in sink.items()})
        out[method] = med
    out["ratio"] = out["order"]["iteration"] / out["mskm"]["iteration"]
    # per-iteration callbacks only (``before_training_exp`` runs once per pass)
    plug = sum(v for k, v in out["order"].items() if "Plugin." in k and not k.endswith("_exp"))
    out["order_plugin_share"] = plug / out["order"]["iteration"]
    ot = sum(v for k, v in out["order"].items() if k.startswith("OTFeatureLossPlugin"))
    out["ot_share"] = ot / out["order"]["iteration"]
    out["memory_tasks"] = len(s_order.order_plugins[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.iteration_time", description=__doc__)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--replay-batch", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--ood", type=int, nargs="+", default=[50, 250])
    ap.add_argument("--report-only", action="store_true", help="rebuild README/plot from JSON")
    args = ap.parse_args()
    out = out_dir("iteration_time")
    if args.report_only:
        saved = json.loads((out / "results.json").read_text())
        prov = {k: saved[k] for k in ("command", "date", "machine", "seeds")}
        rows = saved["rows"]
        for row in rows:  # shares recomputed from the stored medians
            row["order_plugin_share"] = (
                sum(v for k, v in row["order"].items() if "Plugin." in k)
                / row["order"]["iteration"]
            )
        report(rows, prov, out)
        return
    torch.set_num_threads(1)
    rows = []
    for r in args.ood:
        for b in args.replay_batch:
            res = run(r, args.iters, b, args.warm)
            rows.append({"R": r, "replay_batch": b, **res})
            print(
                f"R={r} B={b}: MSKM {res['mskm']['iteration']:.3f} s, ORDER "
                f"{res['order']['iteration']:.3f} s, ratio {res['ratio']:.2f}, OT share "
                f"{100 * res['ot_share']:.1f}%",
                flush=True,
            )
    prov = provenance(seeds=[0])
    write_json(out / "results.json", {**prov, "rows": rows, "iters": args.iters})
    report(rows, prov, out)


SUPERSEDED = (
    "**Superseded by [`step_speed`](../step_speed/README.md)** "
    "([`benchmarks/step_speed.py`](../../step_speed.py)): CPU seconds of the `cpu` preset's "
    "iteration for every precision and layout, ORDER / MSKM per round, ORDER's excess over its "
    "backbone floor and a profile by part. The wall times here were taken in fp32 with glibc's "
    "allocator as it came, before the `precision` setting and the kept memory.\n\n"
)


def report(rows: list[dict], prov: dict, out) -> None:
    md = header_md("Training-iteration time: ORDER vs MSKM (5-way 5-shot, Q=10, Z=10, 32 px)", prov)
    md += SUPERSEDED
    md += (
        "| R | replay tasks B | MSKM s/it | ORDER s/it | ratio | ORDER plugins share | "
        "OT share |\n|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    for row in rows:
        md += (
            f"| {row['R']} | {row['replay_batch']} | {row['mskm']['iteration']:.3f} | "
            f"{row['order']['iteration']:.3f} | {row['ratio']:.2f} | "
            f"{100 * row['order_plugin_share']:.1f}% | {100 * row['ot_share']:.2f}% |\n"
        )
    md += "\nMedian seconds per phase / plugin callback (ORDER):\n\n"
    for row in rows:
        md += (
            f"- R={row['R']}, B={row['replay_batch']}: "
            + ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in row["order"].items())
            + "\n"
        )
    (out / "README.md").write_text(md)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"R={r['R']}\nB={r['replay_batch']}" for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["mskm"]["iteration"] for r in rows], 0.4, label="MSKM")
    ax.bar([i + 0.2 for i in x], [r["order"]["iteration"] for r in rows], 0.4, label="ORDER")
    for i, r in enumerate(rows):
        ax.text(i + 0.2, r["order"]["iteration"], f"×{r['ratio']:.2f}", ha="center", va="bottom")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("seconds / iteration (1 thread)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out / "iteration_time.png", dpi=120)
    print(md)


if __name__ == "__main__":
    main()
