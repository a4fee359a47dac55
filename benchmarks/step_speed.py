"""Seconds per training iteration of MSKM and ORDER by precision and memory layout.

Variants of the backbone (everything else identical, same seed, same episodes):

* ``fp32 contiguous`` — plain NCHW fp32,
* ``fp32 channels-last`` — the presets' layout before the ``precision`` setting existed,
* ``bf16 contiguous`` — NCHW, bf16 autocast of the backbone,
* ``bf16 channels-last`` — what ``precision="auto"`` runs on a CPU with native bf16,
* ``compile`` — ``torch.compile`` (default mode) of the fp32 contiguous backbone.

× R ∈ {50, 250} OOD images per episode × B ∈ {1, 2} replayed tasks (ORDER; MSKM has no replay,
its row is the same for both B). The setting is the ``cpu`` preset (32 px, 4 blocks of 32
filters, 5-way 1-shot, Q = 5, Z = 10, meta-batch 2, one thread) on the synthetic benchmark.
All strategies are built first and trained in interleaved rounds of one iteration each, so that
machine noise hits every variant alike; we report medians over rounds. ORDER's memory is warmed
up first (replay and OT active).

Achieved GFLOP/s: the backbone's FLOPs of one iteration (forward + backward of every image of
the meta-batch, replayed tasks included; counted by ``torch.utils.flop_counter``: convolutions
and the linear maps, not BatchNorm/ReLU/pooling) divided by the median *iteration* time, so it
is a lower bound of the backbone's own rate. Peak fp32 of one core = clock × 2 FMA pipes × 16
fp32 lanes (AVX-512) × 2 FLOP per FMA (Zen 4/5 and recent Xeons); native bf16 (``vdpbf16ps``)
doubles it.

    python benchmarks/step_speed.py [--rounds 5] [--warm 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from _common import header_md, out_dir, provenance, write_json
from _timing import IterationClock, train_range

from avalanche_sets.experiment import build_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset

VARIANTS = {
    # name -> (channels_last, precision, compile)
    "fp32 contiguous": (False, "fp32", False),
    "fp32 channels-last": (True, "fp32", False),
    "bf16 contiguous": (False, "bf16", False),
    "bf16 channels-last": (True, "bf16", False),
    "compile": (False, "fp32", True),
}
BASELINE, DEFAULT = "fp32 channels-last", "bf16 channels-last"


def cpu_mhz() -> float:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1])
    except OSError:
        pass
    return float("nan")


def fp32_peak_gflops(mhz: float, cores: int = 1) -> float:
    """cores × GHz × 2 FMA pipes × 16 fp32 lanes (AVX-512) × 2 FLOP per FMA."""
    return cores * mhz / 1000 * 2 * 16 * 2


def set_variant(strategy, channels_last: bool, compile_: bool) -> None:
    """Switch the (untrained) backbone's layout; compile it. Parameters stay the same objects,
    so the optimiser built with the strategy still updates them."""
    bb = strategy.model.backbone
    bb.channels_last = channels_last
    bb.to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    if compile_:
        bb.features = torch.compile(bb.features)


def backbone_flops(strategy, exp, it: int) -> float:
    """FLOPs of the backbone's forward + backward over one iteration's images."""
    from torch.utils.flop_counter import FlopCounterMode

    from avalanche_sets.data import collate_episodes
    from avalanche_sets.models.backbone import embed_episodes

    n = strategy.train_mb_size
    batch = collate_episodes([exp.dataset[it * n + i] for i in range(n)])[0]
    bb = strategy.model.backbone
    images = [batch.support_x, batch.query_x, batch.unlabeled_x]
    counter = FlopCounterMode(display=False)
    with counter:
        out = embed_episodes(bb, images)
        sum(o.sum() for o in out).backward()
    strategy.model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def run(args) -> list[dict]:
    torch.set_num_threads(1)
    rounds, warm = args.rounds, args.warm
    rows = []
    strategies = {}  # (R, method, B, variant) -> (strategy, clock)
    benches = {}
    for r in args.ood:
        preset = resolve_preset(
            "cpu", source="synthetic", n_ood=r, threads=1, tasks_per_domain=2 * (warm + rounds + 2)
        )
        benches[r] = build_benchmark(preset, seed=0).train_stream[0]
        for variant, (cl, precision, comp) in VARIANTS.items():
            p = {**preset, "precision": precision}
            for method, b in [("mskm", None), *[("order", b) for b in args.replay_batch]]:
                clock = IterationClock()
                over = {"replay_batch": b} if b else {}
                s = build_strategy(method, p, seed=0, plugins=[clock], **over)
                set_variant(s, cl, comp)
                strategies[(r, method, b, variant)] = (s, clock)
    # Warm-up: fills ORDER's memory, compiles, and warms every allocator.
    for key, (s, clock) in strategies.items():
        t = time.perf_counter()
        train_range(s, benches[key[0]], 0, warm)
        clock.t.clear()
        print(f"warm {key}: {time.perf_counter() - t:.1f} s", flush=True)
    for k in range(rounds):
        for key, (s, _) in strategies.items():
            train_range(s, benches[key[0]], warm + k, warm + k + 1)
        print(f"round {k + 1}/{rounds} done, load {os.getloadavg()}", flush=True)
    # FLOPs per configuration (the variant does not change them)
    flops = {}
    for r in args.ood:
        for method, b in [("mskm", None), *[("order", b) for b in args.replay_batch]]:
            s, _ = strategies[(r, method, b, "fp32 contiguous")]
            per_task = backbone_flops(s, benches[r], 0) / s.train_mb_size
            n_tasks = s.train_mb_size + (b or 0)
            flops[(r, method, b)] = per_task * n_tasks
    for (r, method, b, variant), (_s, clock) in strategies.items():
        times = clock.t["iteration"]
        med = statistics.median(times)
        rows.append(
            {
                "R": r,
                "method": method,
                "B": b,
                "variant": variant,
                "s_per_it": med,
                "s_per_it_all": times,
                "forward_s": statistics.median(clock.t["forward (incl. after_encode)"]),
                "backward_s": statistics.median(clock.t["backward"]),
                "backbone_gflop": flops[(r, method, b)] / 1e9,
                "gflops": flops[(r, method, b)] / 1e9 / med,
            }
        )
    return rows


def summarise(rows: list[dict], replay_batches: list[int]) -> dict:
    def t(r, m, b, v):
        return next(x["s_per_it"] for x in rows if (x["R"], x["method"], x["B"], x["variant"])
                    == (r, m, b, v))  # fmt: skip

    out = {"speedup_vs_fp32_channels_last": {}, "order_over_mskm": {}}
    for r in sorted({x["R"] for x in rows}):
        for v in VARIANTS:
            out["speedup_vs_fp32_channels_last"][f"mskm R={r} {v}"] = t(
                r, "mskm", None, BASELINE
            ) / t(r, "mskm", None, v)
            for b in replay_batches:
                out["order_over_mskm"][f"R={r} B={b} {v}"] = t(r, "order", b, v) / t(
                    r, "mskm", None, v
                )
    return out


def report(rows: list[dict], summary: dict, prov: dict, out: Path) -> None:
    mhz = prov["cpu_mhz"]
    peak = fp32_peak_gflops(mhz)
    md = header_md("Training-iteration speed by precision and layout (cpu preset, 1 thread)", prov)
    md += (
        f"- native bf16 (oneDNN): {prov['bf16_native']}; load averages (1, 5, 15 min): "
        f"{tuple(round(x, 2) for x in prov['load_start'])} at the start, "
        f"{tuple(round(x, 2) for x in prov['load_end'])} at the end — a shared machine, so "
        "only the ratios of variants measured side by side (interleaved) are meaningful\n"
        f"- rounds: {prov['rounds']} interleaved (medians), warm-up {prov['warm']} iterations\n"
        f"- fp32 peak of one core: {mhz / 1000:.2f} GHz × 2 FMA pipes × 16 lanes × 2 = "
        f"{peak:.0f} GFLOP/s (bf16 native: {2 * peak:.0f}); GFLOP/s below = backbone conv/linear "
        "FLOPs (forward + backward) per iteration / median iteration time\n\n"
    )
    md += (
        "| R | method | B | variant | s / it | vs fp32 channels-last | backbone GFLOP / it | "
        "GFLOP/s | % of fp32 peak |\n|---:|---|---:|---|---:|---:|---:|---:|---:|\n"
    )
    base = {(x["R"], x["method"], x["B"]): x["s_per_it"] for x in rows if x["variant"] == BASELINE}
    for x in rows:
        md += (
            f"| {x['R']} | {x['method']} | {x['B'] or '—'} | {x['variant']} | "
            f"{x['s_per_it']:.3f} | {base[(x['R'], x['method'], x['B'])] / x['s_per_it']:.2f}× | "
            f"{x['backbone_gflop']:.1f} | {x['gflops']:.1f} | {100 * x['gflops'] / peak:.0f}% |\n"
        )
    md += "\nORDER / MSKM, same variant, same rounds:\n\n| setting | ratio |\n|---|---:|\n"
    md += "".join(f"| {k} | {v:.2f} |\n" for k, v in summary["order_over_mskm"].items())
    md += "\nMSKM speed-up over fp32 channels-last:\n\n| setting | speed-up |\n|---|---:|\n"
    md += "".join(
        f"| {k} | {v:.2f}× |\n" for k, v in summary["speedup_vs_fp32_channels_last"].items()
    )
    (out / "README.md").write_text(md)
    _plot(rows, out / "step_speed.png")
    print(md)


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys((x["R"], x["method"], x["B"]) for x in rows))
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(configs)), 4))
    width = 0.8 / len(VARIANTS)
    for i, v in enumerate(VARIANTS):
        ys = [
            next(
                x["s_per_it"]
                for x in rows
                if (x["R"], x["method"], x["B"]) == c and x["variant"] == v
            )  # fmt: skip
            for c in configs
        ]
        ax.bar([j + (i - len(VARIANTS) / 2 + 0.5) * width for j in range(len(configs))], ys,
               width, label=v)  # fmt: skip
    ax.set_xticks(
        range(len(configs)), [f"{m}\nR={r}" + (f" B={b}" if b else "") for r, m, b in configs],
        fontsize=8,
    )  # fmt: skip
    ax.set_ylabel("seconds / iteration (median, 1 thread)")
    ax.legend(fontsize=7)
    ax.set_title("Training iteration by backbone precision and layout (interleaved rounds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--ood", type=int, nargs="+", default=[50, 250])
    ap.add_argument("--replay-batch", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", help="results folder (default benchmarks/results/step_speed)")
    ap.add_argument("--report-only", action="store_true", help="rebuild README/plot from JSON")
    args = ap.parse_args()
    out = Path(args.out) if args.out else out_dir("step_speed")
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        saved = json.loads((out / "results.json").read_text())
        report(saved["rows"], saved["summary"], saved, out)
        return
    from avalanche_sets.models import bf16_supported

    load_start = os.getloadavg()
    rows = run(args)
    summary = summarise(rows, args.replay_batch)
    prov = provenance(seeds=[0])
    prov.update(
        load_start=load_start, load_end=os.getloadavg(), rounds=args.rounds, warm=args.warm,
        cpu_mhz=cpu_mhz(), bf16_native=bf16_supported(),
        fp32_peak_gflops_one_core=fp32_peak_gflops(cpu_mhz()),
    )  # fmt: skip
    write_json(out / "results.json", {**prov, "rows": rows, "summary": summary})
    report(rows, summary, prov, out)


if __name__ == "__main__":
    main()
