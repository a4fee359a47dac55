"""Seconds per training iteration of MSKM and ORDER by precision and memory layout.

Variants of the backbone (everything else identical, same seed, same episodes):

* ``fp32 contiguous`` — plain NCHW fp32,
* ``fp32 channels-last`` — the presets' layout before the ``precision`` setting existed,
* ``bf16 contiguous`` — NCHW, bf16 autocast of the backbone,
* ``bf16 channels-last`` — what ``precision="auto"`` runs on a CPU with native bf16,
* ``compile`` — ``torch.compile`` (default mode) of the fp32 contiguous backbone,

each with a run's kept-memory allocator (the default, ``training/allocator.py``), and
the two channels-last variants also with glibc's allocator as it comes (what runs used before)
in a second process run in lockstep with the first (alternating rounds).

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

Times are CPU seconds of the iteration's process (``time.process_time``: user + system, so page
faults count), medians over rounds; wall times are kept in ``results.json``. Every row also
carries its profile in CPU seconds (``parts_cpu_s``): the forward (backbone, heads and the
``after_encode`` plugins), the autograd backward, and each of ORDER's plugin callbacks (the
MI and OT terms are built by their ``loss_term``, in the criterion). The README shows it for the default variant,
with ORDER's excess over its backbone floor: ORDER − (1 + B/2) × MSKM, the floor being the
backbone work of 2 + B tasks instead of 2.

    python -m benchmarks.step_speed [--rounds 3] [--warm 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import keep_freed_memory, silent_evaluator
from benchmarks._common import header_md, out_dir, provenance, save_figure, write_json
from benchmarks._timing import IterationClock, instrument, train_range

VARIANTS = {
    # name -> (channels_last, precision, compile)
    "fp32 contiguous": (False, "fp32", False),
    "fp32 channels-last": (True, "fp32", False),
    "bf16 contiguous": (False, "bf16", False),
    "bf16 channels-last": (True, "bf16", False),
    "compile": (False, "fp32", True),
}
# The "system" allocator process (today's malloc behaviour) runs these only.
SYSTEM_VARIANTS = {k: VARIANTS[k] for k in ("fp32 channels-last", "bf16 channels-last")}
BASELINE, DEFAULT = ("fp32 channels-last", "system"), ("bf16 channels-last", "kept")


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
    bb = strategy.model.backbone
    # the episodes where the backbone's weights are (a host-gathered batch with a GPU model)
    device = next(bb.parameters()).device
    batch = collate_episodes([exp.dataset[it * n + i] for i in range(n)])[0].to(device)
    images = [batch.support_x, batch.query_x, batch.unlabeled_x]
    counter = FlopCounterMode(display=False)
    with counter:
        out = embed_episodes(bb, images)
        sum(o.sum() for o in out).backward()
    strategy.model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def _configs(args, variants) -> list[tuple]:
    return [
        (r, method, b, v)
        for r in args.ood
        for v in variants
        for method, b in [("mskm", None), *[("order", b) for b in args.replay_batch]]
    ]


def worker(allocator: str, args, conn) -> None:
    """Build and warm every configuration of one allocator, then run one round per token."""
    if allocator == "system":
        os.environ["AVALANCHE_SETS_MALLOC"] = "system"  # keep_freed_memory() is then a no-op
    keep_freed_memory()  # as a run does
    torch.set_num_threads(1)
    rounds, warm = args.rounds, args.warm
    variants = VARIANTS if allocator == "kept" else SYSTEM_VARIANTS
    strategies, benches = {}, {}
    for r, method, b, variant in _configs(args, variants):
        if r not in benches:
            preset = resolve_preset(
                "cpu", source="synthetic", n_ood=r, threads=1,
                tasks_per_domain=2 * (warm + rounds + 2),
            )  # fmt: skip
            benches[r] = (preset, build_benchmark(preset, seed=0).train_stream[0])
        preset = benches[r][0]
        cl, precision, comp = VARIANTS[variant]
        clock = IterationClock()
        over = {"replay_batch": b} if b else {}
        s = build_strategy(
            method,
            preset.replace(precision=precision),
            seed=0,
            evaluator=silent_evaluator(),
            plugins=[clock],
            **over,
        )
        set_variant(s, cl, comp)
        s.plugins.insert(0, clock.head())  # the iteration starts before ORDER's replay plugin
        sink: dict = defaultdict(list)
        for plugin in getattr(s, "order_plugins", []):
            instrument(plugin, sink, timer=time.process_time)
        clock.parts = sink
        strategies[(r, method, b, variant)] = (s, clock)
    from avalanche_sets.training.allocator import allocator_mode

    assert allocator_mode() == allocator, (allocator_mode(), allocator)
    # Warm-up: fills ORDER's memory, compiles, and warms every allocator.
    for key, (s, clock) in strategies.items():
        train_range(s, benches[key[0]][1], 0, warm)
        for timings in (clock.t, clock.cpu_t, clock.parts):
            timings.clear()
        clock.cpu.clear()
    conn.send("ready")
    for k in range(rounds):
        conn.recv()
        for key, (s, _) in strategies.items():
            train_range(s, benches[key[0]][1], warm + k, warm + k + 1)
        conn.send("done")
    flops = {}
    for r in args.ood:
        for method, b in [("mskm", None), *[("order", b) for b in args.replay_batch]]:
            s, _ = strategies[(r, method, b, next(iter(variants)))]
            per_task = backbone_flops(s, benches[r][1], 0) / s.train_mb_size
            flops[(r, method, b)] = per_task * (s.train_mb_size + (b or 0))
    rows = []
    for (r, method, b, variant), (_s, clock) in strategies.items():
        wall = clock.t["iteration"]
        times = clock.cpu
        med = statistics.median(times)
        rows.append(
            {
                "R": r,
                "method": method,
                "B": b,
                "variant": variant,
                "allocator": allocator,
                "s_per_it": med,
                "s_per_it_all": times,
                "wall_s_per_it": statistics.median(wall),
                "wall_s_per_it_all": wall,
                "forward_s": statistics.median(clock.t["forward (incl. after_encode)"]),
                "backward_s": statistics.median(clock.t["backward"]),
                "parts_cpu_s": {
                    k: statistics.median(v) for k, v in {**clock.cpu_t, **clock.parts}.items()
                },
                "backbone_gflop": flops[(r, method, b)] / 1e9,
                "gflops": flops[(r, method, b)] / 1e9 / med,
            }
        )
    conn.send(rows)


def run(args) -> list[dict]:
    """Two processes in lockstep — glibc's allocator as it comes ("system", today's) and the
    template's kept memory ("kept", the default now) — alternating rounds, so both see the same
    machine load; inside each, every configuration runs one iteration per round."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs, conns = {}, {}
    for allocator in ("system", "kept"):
        here, there = ctx.Pipe()
        procs[allocator] = ctx.Process(target=worker, args=(allocator, args, there))
        conns[allocator] = here
        procs[allocator].start()
    for allocator, c in conns.items():
        assert c.recv() == "ready"
        print(f"{allocator}: built and warmed up", flush=True)
    for k in range(args.rounds):
        for c in conns.values():
            c.send("go")
            assert c.recv() == "done"
        print(f"round {k + 1}/{args.rounds} done, load {os.getloadavg()}", flush=True)
    rows = [row for c in conns.values() for row in c.recv()]
    for p in procs.values():
        p.join()
    return rows


def _labels() -> list[tuple[str, str]]:
    return [*((v, "system") for v in SYSTEM_VARIANTS), *((v, "kept") for v in VARIANTS)]


def _label(variant: str, allocator: str) -> str:
    return f"{variant}, {allocator} malloc"


def summarise(rows: list[dict], replay_batches: list[int]) -> dict:
    def t(r, m, b, va):
        return next(x["s_per_it"] for x in rows
                    if (x["R"], x["method"], x["B"], x["variant"], x["allocator"])
                    == (r, m, b, *va))  # fmt: skip

    def per_round(r, m, b, va):
        return next(x["s_per_it_all"] for x in rows
                    if (x["R"], x["method"], x["B"], x["variant"], x["allocator"])
                    == (r, m, b, *va))  # fmt: skip

    out = {"mskm_speedup_vs_today": {}, "order_over_mskm": {}, "order_over_mskm_by_round": {},
           "order_excess_over_floor_ms": {}}  # fmt: skip
    for r in sorted({x["R"] for x in rows}):
        for va in _labels():
            out["mskm_speedup_vs_today"][f"R={r} {_label(*va)}"] = t(r, "mskm", None, BASELINE) / t(
                r, "mskm", None, va
            )
            for b in replay_batches:
                key = f"R={r} B={b} {_label(*va)}"
                mskm, order = t(r, "mskm", None, va), t(r, "order", b, va)
                out["order_over_mskm"][key] = order / mskm
                # the same ratio paired within each round (both saw that round's load)
                ratios = [o / m for o, m in zip(per_round(r, "order", b, va),
                                                per_round(r, "mskm", None, va))]  # fmt: skip
                q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
                out["order_over_mskm_by_round"][key] = {
                    "median": statistics.median(ratios), "q1": q[0], "q3": q[2],
                }  # fmt: skip
                out["order_excess_over_floor_ms"][key] = 1000 * (order - (1 + b / 2) * mskm)
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
        "- s / it = median **CPU seconds** (user + system, page faults included) of the "
        "iteration's process, one thread: on a machine shared with other jobs the wall time "
        "mostly measures waiting for a core (it is in `results.json` as `wall_s_per_it`)\n"
        f"- rounds: {prov['rounds']} interleaved (medians), warm-up {prov['warm']} iterations; "
        "two processes in lockstep: `system malloc` = glibc as it comes (what every run used "
        "before), `kept malloc` = the template's `keep_freed_memory()` (the default now)\n"
        f"- fp32 peak of one core: {mhz / 1000:.2f} GHz × 2 FMA pipes × 16 lanes × 2 = "
        f"{peak:.0f} GFLOP/s (bf16 native: {2 * peak:.0f}); GFLOP/s below = backbone conv/linear "
        "FLOPs (forward + backward) per iteration / median iteration time\n"
        f"- today = {_label(*BASELINE)}; the default now = {_label(*DEFAULT)} "
        "(`precision='auto'` on this machine)\n\n"
    )
    md += (
        "| R | method | B | variant | s / it | vs today | backbone GFLOP / it | "
        "GFLOP/s | % of fp32 peak |\n|---:|---|---:|---|---:|---:|---:|---:|---:|\n"
    )
    base = {
        (x["R"], x["method"], x["B"]): x["s_per_it"]
        for x in rows
        if (x["variant"], x["allocator"]) == BASELINE
    }
    for x in rows:
        md += (
            f"| {x['R']} | {x['method']} | {x['B'] or '—'} | {_label(x['variant'], x['allocator'])}"
            f" | {x['s_per_it']:.3f} | {base[(x['R'], x['method'], x['B'])] / x['s_per_it']:.2f}× "
            f"| {x['backbone_gflop']:.1f} | {x['gflops']:.1f} | {100 * x['gflops'] / peak:.0f}% |\n"
        )
    by_round = summary.get("order_over_mskm_by_round", {})
    excess = summary.get("order_excess_over_floor_ms", {})
    md += (
        "\nORDER / MSKM, same variant, same rounds (ratio of the medians; the median and "
        "quartiles of the per-round ratios; ORDER's CPU ms above its backbone floor "
        "(1 + B/2) × MSKM):\n\n| setting | ratio | per round: median (q1–q3) | floor | "
        "ORDER − floor (ms) |\n|---|---:|---:|---:|---:|\n"
    )
    for k, v in summary["order_over_mskm"].items():
        b = int(k.split("B=")[1].split()[0])
        rr = by_round.get(k)
        md += (
            f"| {k} | {v:.2f} | "
            + (f"{rr['median']:.2f} ({rr['q1']:.2f}–{rr['q3']:.2f})" if rr else "—")
            + f" | {1 + b / 2:.1f} | "
            + (f"{excess[k]:+.1f}" if k in excess else "—")
            + " |\n"
        )
    md += _profile_md(rows)
    md += "\nMSKM speed-up over today:\n\n| setting | speed-up |\n|---|---:|\n"
    md += "".join(f"| {k} | {v:.2f}× |\n" for k, v in summary["mskm_speedup_vs_today"].items())
    (out / "README.md").write_text(md)
    _plot(rows, out / "step_speed.png")
    print(md)


#: Profile columns: (label, keys of ``parts_cpu_s`` summed).
_PARTS = (
    ("forward (backbone, heads, OOD split)", ("forward (incl. after_encode)",)),
    ("autograd backward", ("backward",)),
    ("replay: batch", ("FeatureReservoirReplayPlugin.before_training_iteration",)),
    ("of which OOD split", ("OODSplitPlugin.after_encode",)),
    # the MI networks step in after_forward, inside the forward (ORDER's plugins run first)
    ("of which MI fit", ("MIRegularizationPlugin.after_forward",)),
    ("MI: bounds", ("MIRegularizationPlugin.loss_term",)),
    ("OT", ("OTFeatureLossPlugin.loss_term",)),
    ("replay: store", ("FeatureReservoirReplayPlugin.after_training_iteration",)),
)


def _profile_md(rows: list[dict]) -> str:
    """The default variant's iteration in parts (CPU ms, medians over rounds)."""
    sel = [x for x in rows if (x["variant"], x["allocator"]) == DEFAULT and "parts_cpu_s" in x]
    if not sel:
        return ""
    md = (
        f"\nProfile of the default ({_label(*DEFAULT)}), CPU ms per iteration (medians over "
        "rounds, so the parts need not add up exactly; the MI networks' own optimisers step "
        "in after_forward, inside the forward; 'rest' = the iteration minus the columns outside the "
        "forward: the loss, the model's optimiser step, the finiteness checks, the loop):\n\n"
    )
    md += "| R | method | B | iteration | " + " | ".join(p[0] for p in _PARTS) + " | rest |\n"
    md += "|---:|---|---:|---:|" + "---:|" * (len(_PARTS) + 1) + "\n"
    for x in sel:
        parts = x["parts_cpu_s"]
        vals = [sum(parts.get(k, 0.0) for k in keys) for _, keys in _PARTS]
        outside = sum(v for (label, _), v in zip(_PARTS, vals) if not label.startswith("of which"))
        md += (
            f"| {x['R']} | {x['method']} | {x['B'] or '—'} | {1000 * x['s_per_it']:.1f} | "
            + " | ".join(f"{1000 * v:.1f}" for v in vals)
            + f" | {1000 * (x['s_per_it'] - outside):.1f} |\n"
        )
    return md


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys((x["R"], x["method"], x["B"]) for x in rows))
    labels = _labels()
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(configs)), 4.2))
    width = 0.85 / len(labels)
    for i, va in enumerate(labels):
        ys = [
            next(
                x["s_per_it"]
                for x in rows
                if (x["R"], x["method"], x["B"]) == c and (x["variant"], x["allocator"]) == va
            )  # fmt: skip
            for c in configs
        ]
        ax.bar([j + (i - len(labels) / 2 + 0.5) * width for j in range(len(configs))], ys,
               width, label=_label(*va))  # fmt: skip
    ax.set_xticks(
        range(len(configs)), [f"{m}\nR={r}" + (f" B={b}" if b else "") for r, m, b in configs],
        fontsize=8,
    )  # fmt: skip
    ax.set_ylabel("CPU seconds / iteration (median, 1 thread)")
    ax.legend(fontsize=6)
    ax.set_title("Training iteration by backbone precision, layout and allocator (interleaved)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.step_speed",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--rounds", type=int, default=3)
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
    rows.sort(key=lambda x: (x["R"], x["method"], x["B"] or 0, x["allocator"] != "system"))
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
