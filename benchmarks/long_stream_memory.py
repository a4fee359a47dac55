"""Resident memory over a long stream: it must stay flat (issue: long streams).

A tiny ORDER (the full method: OOD split, MI, replay, OT) runs over a stream of at least 20,000
tasks spread over the six synthetic domains, with the evaluator real runs use
(``avalanche_sets.runs.experiment.evaluator``: Avalanche's accuracy, loss, forgetting, BWT and
timing metrics plus the episode metrics, text and CSV loggers), an evaluation of the test
stream after every domain (as ``run_sets`` does) and a checkpoint every 50 iterations (as
``run_experiment`` does). Every ``--every`` iterations, and after every evaluation, it samples
the resident set size (``/proc/self/statm``), the reservoir's ``memory_bytes()``, the number of
tasks seen, the evaluator's stored metric values and the objects the garbage collector tracks.

Tiny model, so that 20,000 tasks fit in about 10 minutes on one busy core: 16 px images, two
conv blocks of 8 filters (128-d embeddings), 5-way 1-shot, Q = 2 and Z = 2 per class, R = 6
OOD images (31 images an episode), meta-batch 2 plus 2 replayed tasks, memory of M = 200 tasks
(the paper's), 10 test episodes per domain.

**Warm-up** ends with the first evaluation, i.e. after the first domain's
``ceil(tasks / 6)`` tasks and its evaluation of all six domains; by then the reservoir is full
(M = 200 tasks, filled after 200 tasks) and every code path (replay, OT, MI, evaluation,
checkpointing, logging) has run at least once. The RSS sampled right after that evaluation is
the reference; the run passes when the largest RSS sampled afterwards exceeds it by less than
5%. Writes ``benchmarks/results/long_stream_memory/``: ``samples.csv``, ``summary.json``,
``README.md`` and ``rss_over_time.png``.

    python -m benchmarks.long_stream_memory [--tasks 20000] [--method order] [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.metrics.memory import MemoryProbe, find_memory, rss_mib
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.runs.experiment import evaluator as _evaluator
from avalanche_sets.training import run_sets
from benchmarks._common import RESULTS, header_md, provenance, save_figure, write_json

LIMIT_PCT = 5.0
N_DOMAINS = 6
COLUMNS = (
    "iteration",
    "tasks_seen",
    "rss_mib",
    "malloc_in_use_mib",
    "malloc_free_mib",
    "reservoir_bytes",
    "reservoir_len",
    "metric_values",
    "gc_objects",
    "seconds",
    "event",
    "experience",
    "evaluations",
)


def tiny_preset(tasks: int, *, mem_size: int) -> dict:
    """The ``quick`` preset shrunk to a tiny model and episode; ``tasks`` over six domains."""
    return resolve_preset(
        "quick",
        image_size=16,
        n_blocks=2,
        width=8,
        n_way=5,
        n_shot=1,
        n_query=2,
        n_unlabeled=2,
        n_ood=6,
        tasks_per_domain=math.ceil(tasks / N_DOMAINS),
        meta_batch=2,
        n_val_episodes=10,
        n_test_episodes=10,
        eval_mb_size=10,
        mem_size=mem_size,
        replay_batch=2,
        threads=1,
    )


def analyse(samples: list[dict], mem_size: int) -> dict:
    """Warm-up boundary, RSS at its end, the largest RSS after it and the growth."""
    first_eval = next((i for i, s in enumerate(samples) if s["event"] == "eval"), None)
    if first_eval is None:
        raise RuntimeError("no evaluation ran: the stream is too short to have a warm-up")
    # Warm-up: the first evaluation has run and the reservoir is full (whichever comes last).
    warm = next(
        i
        for i, s in enumerate(samples)
        if i >= first_eval and (s["reservoir_len"] >= mem_size or s["reservoir_bytes"] == 0)
    )
    ref = samples[warm]
    after = samples[warm + 1 :]
    if not after:
        raise RuntimeError("no sample after the warm-up: lengthen the stream")
    peak = max(after, key=lambda s: s["rss_mib"])
    growth_mib = peak["rss_mib"] - ref["rss_mib"]
    growth_pct = 100.0 * growth_mib / ref["rss_mib"]
    t = np.array([s["tasks_seen"] for s in after], dtype=float)
    r = np.array([s["rss_mib"] for s in after], dtype=float)
    slope = float(np.polyfit(t, r, 1)[0] * 10_000) if np.ptp(t) > 0 else float("nan")
    res_after = [s["reservoir_bytes"] for s in after]
    train_after = [s for s in after if s["event"] == "train"]
    evals_after = [s for s in after if s["event"] == "eval"]
    return {
        "warmup": {
            "definition": (
                "ends at the first sample taken once the first evaluation has run (after the "
                "first domain's tasks and an evaluation of the test stream of all six domains) "
                f"and the reservoir is full ({mem_size} tasks); that sample's RSS is the "
                "reference"
            ),
            "tasks_seen": ref["tasks_seen"],
            "iteration": ref["iteration"],
            "rss_mib": ref["rss_mib"],
        },
        "max_rss_after_warmup_mib": peak["rss_mib"],
        "max_rss_after_warmup_at_tasks": peak["tasks_seen"],
        "final_rss_mib": samples[-1]["rss_mib"],
        "growth_mib": growth_mib,
        "growth_pct": growth_pct,
        "limit_pct": LIMIT_PCT,
        "passed": bool(growth_pct < LIMIT_PCT),
        "rss_slope_mib_per_10k_tasks_after_warmup": slope,
        "reservoir_bytes_after_warmup": {
            "min": int(min(res_after)),
            "max": int(max(res_after)),
        },
        "reservoir_len_after_warmup": sorted({s["reservoir_len"] for s in after}),
        "metric_values": {
            "at_warmup": ref["metric_values"],
            "final": samples[-1]["metric_values"],
            "evaluations_after_warmup": len(evals_after),
            "changed_during_training_iterations": _changed_within_experiences(train_after),
        },
        "malloc_in_use_mib": {
            "at_warmup": ref["malloc_in_use_mib"],
            "max_after": max(s["malloc_in_use_mib"] for s in after),
            "final": samples[-1]["malloc_in_use_mib"],
        },
        "malloc_free_mib": {
            "at_warmup": ref["malloc_free_mib"],
            "max_after": max(s["malloc_free_mib"] for s in after),
            "final": samples[-1]["malloc_free_mib"],
        },
        "gc_objects": {
            "at_warmup": ref["gc_objects"],
            "max_after": max(s["gc_objects"] for s in after),
            "final": samples[-1]["gc_objects"],
        },
    }


def _changed_within_experiences(train_samples: list[dict]) -> bool:
    """Whether the stored metric values changed between training samples of one experience."""
    by_exp: dict[int, set[int]] = {}
    for s in train_samples:
        by_exp.setdefault(s["experience"], set()).add(s["metric_values"])
    return any(len(v) > 1 for v in by_exp.values())


def plot(samples: list[dict], summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.array([s["tasks_seen"] for s in samples])
    rss = np.array([s["rss_mib"] for s in samples])
    res = np.array([s["reservoir_bytes"] for s in samples]) / 2**20
    ev = np.array([s["event"] == "eval" for s in samples])
    warm = summary["warmup"]
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    ax.plot(t, rss, lw=1, color="#4c72b0", label="RSS")
    ax.plot(t[ev], rss[ev], "o", ms=4, color="#4c72b0", mfc="white", label="after an evaluation")
    ax.axvline(warm["tasks_seen"], color="grey", ls=":", label="end of warm-up")
    ax.axhline(warm["rss_mib"], color="grey", lw=0.8)
    ax.axhline(
        warm["rss_mib"] * (1 + LIMIT_PCT / 100),
        color="crimson",
        ls="--",
        label=f"+{LIMIT_PCT:g}% of the RSS at warm-up",
    )
    ax.set_ylabel("resident memory (MiB)")
    ax.set_title(
        f"ORDER, {int(t[-1]):,} tasks: growth after warm-up {summary['growth_pct']:+.2f}% "
        f"({summary['growth_mib']:+.1f} MiB)"
    )
    ax.legend(loc="lower right", fontsize=8)
    ax2.plot(t, res, color="#55a868", label="reservoir (left)")
    ax2.set_ylabel("reservoir (MiB)")
    ax2.set_xlabel("tasks seen")
    ax2.set_ylim(0, max(res.max() * 1.3, 0.1))
    heap = np.array([s["malloc_in_use_mib"] for s in samples])
    free = np.array([s["malloc_free_mib"] for s in samples])
    lines = ax2.get_lines()
    if np.isfinite(heap).any():
        ax3 = ax2.twinx()
        ax3.plot(t, heap, color="#c44e52", label="C heap in use (right)")
        ax3.plot(t, free, color="#c44e52", ls=":", label="C heap free, kept (right)")
        ax3.set_ylabel("malloc (MiB)")
        ax3.set_ylim(0, np.nanmax(heap) * 1.3)
        lines = lines + ax3.get_lines()
    ax2.legend(lines, [ln.get_label() for ln in lines], loc="lower right", fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def readme(prov: dict, settings: dict, summary: dict, wall_s: float) -> str:
    w = summary["warmup"]
    md = header_md(f"Resident memory over a long stream ({settings['tasks']:,} tasks)", prov)
    md += (
        f"{settings['method']} on the synthetic benchmark, tiny model: "
        f"{settings['preset']['image_size']} px, {settings['preset']['n_blocks']} conv blocks "
        f"of {settings['preset']['width']} filters, {settings['preset']['n_way']}-way "
        f"{settings['preset']['n_shot']}-shot, Q = {settings['preset']['n_query']}, "
        f"Z = {settings['preset']['n_unlabeled']}, R = {settings['preset']['n_ood']}, "
        f"meta-batch {settings['preset']['meta_batch']} + {settings['preset']['replay_batch']} "
        f"replayed, memory M = {settings['preset']['mem_size']} tasks; "
        f"{settings['preset']['tasks_per_domain']:,} tasks per domain over 6 domains, the "
        f"real-run evaluator (Avalanche metrics + episode metrics; loggers: "
        f"{', '.join(settings['loggers']) or 'none'}), "
        f"{settings['preset']['n_test_episodes']} test episodes per domain after every domain, "
        f"a checkpoint every {settings['checkpoint_every']} iterations. RSS sampled every "
        f"{settings['every']} iterations and after every evaluation. Wall time "
        f"{wall_s / 60:.1f} min.\n\n"
        f"**Warm-up** {w['definition']}: {w['tasks_seen']:,} tasks.\n\n"
        "| | |\n|---|---:|\n"
        f"| RSS after imports (before the benchmark is built) | "
        f"{settings['rss_after_imports_mib']:.1f} MiB |\n"
        f"| RSS at the end of warm-up | {w['rss_mib']:.1f} MiB |\n"
        f"| max RSS after warm-up | {summary['max_rss_after_warmup_mib']:.1f} MiB (at "
        f"{summary['max_rss_after_warmup_at_tasks']:,} tasks) |\n"
        f"| final RSS | {summary['final_rss_mib']:.1f} MiB |\n"
        f"| growth after warm-up | **{summary['growth_mib']:+.1f} MiB = "
        f"{summary['growth_pct']:+.2f}%** (limit {LIMIT_PCT:g}%: "
        f"{'PASS' if summary['passed'] else 'FAIL'}) |\n"
        f"| RSS trend after warm-up (least squares) | "
        f"{summary['rss_slope_mib_per_10k_tasks_after_warmup']:+.2f} MiB per 10,000 tasks |\n"
        f"| reservoir after warm-up | {summary['reservoir_len_after_warmup']} tasks, "
        f"{summary['reservoir_bytes_after_warmup']['min'] / 2**20:.2f}–"
        f"{summary['reservoir_bytes_after_warmup']['max'] / 2**20:.2f} MiB |\n"
        f"| stored metric values (Avalanche `all_metric_results`) | "
        f"{summary['metric_values']['at_warmup']} at warm-up → "
        f"{summary['metric_values']['final']} at the end "
        f"({summary['metric_values']['evaluations_after_warmup']} evaluations later; "
        f"changed during training iterations: "
        f"{summary['metric_values']['changed_during_training_iterations']}) |\n"
        f"| C heap in use (glibc `mallinfo2`) | "
        f"{summary['malloc_in_use_mib']['at_warmup']:.1f} MiB at warm-up, max "
        f"{summary['malloc_in_use_mib']['max_after']:.1f} MiB after, "
        f"{summary['malloc_in_use_mib']['final']:.1f} MiB at the end |\n"
        f"| C heap free but kept by the allocator | "
        f"{summary['malloc_free_mib']['at_warmup']:.1f} MiB at warm-up, max "
        f"{summary['malloc_free_mib']['max_after']:.1f} MiB after |\n"
        f"| objects tracked by the gc | {summary['gc_objects']['at_warmup']:,} at warm-up, "
        f"max {summary['gc_objects']['max_after']:,} after |\n\n"
        "Most of the RSS is the libraries (torch, torchvision, Avalanche and its imports); the "
        "data (six 16 px synthetic domains and three OOD sources, uint8) are a few MiB, the "
        "reservoir holds uint8 episodes plus float32 features of `S ∪ U_id`, and the metrics "
        "keep one record per evaluation, none per training iteration. The reservoir's size "
        "varies slightly because the number of `U_id` features of a stored task does. "
        f"After warm-up the C heap in use moved by "
        f"{summary['malloc_in_use_mib']['max_after'] - summary['malloc_in_use_mib']['at_warmup']:+.1f}"
        f" MiB and the heap memory glibc keeps free for reuse by "
        f"{summary['malloc_free_mib']['max_after'] - summary['malloc_free_mib']['at_warmup']:+.1f}"
        " MiB: RSS that rises while the heap in use stays flat is allocator fragmentation "
        "(freed blocks not returned to the system), not data kept.\n\n"
        "![RSS over the stream](rss_over_time.png)\n\n"
        "Files: `samples.csv` (every sample), `summary.json` (these numbers and the "
        "settings). `tests/test_long_stream_memory.py` runs a short stream and checks the "
        "same structurally: nothing reachable from the strategy grows between iterations, "
        "the reservoir is bounded and stores uint8 images, episodes are drawn on demand.\n"
    )
    return md


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.long_stream_memory",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--tasks", type=int, default=20_000, help="training tasks (episodes) in all")
    ap.add_argument("--method", default="order", help="a method of avalanche_sets.methods")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem-size", type=int, default=200, help="memory capacity M in tasks")
    ap.add_argument("--every", type=int, default=50, help="iterations between RSS samples")
    ap.add_argument("--checkpoint-every", type=int, default=50, help="0: no checkpoints")
    ap.add_argument("--print-every", type=int, default=500, help="iterations between prints")
    ap.add_argument(
        "--loggers",
        default="text,csv",
        help="loggers of the evaluator, comma-separated (interactive draws a bar per iteration)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "long_stream_memory")
    args = ap.parse_args()

    rss_imports = rss_mib()
    loggers = tuple(x for x in args.loggers.split(",") if x)
    torch.set_num_threads(1)
    preset = tiny_preset(args.tasks, mem_size=args.mem_size)
    started = time.perf_counter()
    bench = build_benchmark(preset, seed=args.seed)
    total_iters = N_DOMAINS * math.ceil(preset.tasks_per_domain / preset.meta_batch)
    with tempfile.TemporaryDirectory(prefix="long_stream_memory_") as tmp:
        tmp = Path(tmp)
        strategy = build_strategy(
            args.method, preset, seed=args.seed, evaluator=_evaluator(loggers, tmp)
        )
        rss_built = rss_mib()

        def progress(s) -> None:
            if s.event == "eval" or s.iteration % args.print_every == 0:
                eta = s.seconds / s.iteration * (total_iters - s.iteration) if s.iteration else 0
                print(
                    f"[{s.event:>5}] it {s.iteration:>6}/{total_iters} tasks {s.tasks_seen:>6} "
                    f"RSS {s.rss_mib:7.1f} MiB  reservoir {s.memory_len:>3} tasks "
                    f"{s.memory_bytes / 2**20:5.2f} MiB  metric values {s.metric_values:>4}  "
                    f"{s.seconds:6.0f} s (ETA {eta:4.0f} s)",
                    flush=True,
                )

        probe = MemoryProbe(every=args.every, callback=progress)
        strategy.plugins.append(probe)
        result = run_sets(
            strategy,
            bench,
            checkpoint_path=tmp / "checkpoint.pt" if args.checkpoint_every else None,
            checkpoint_every=args.checkpoint_every or None,
            resume=False,
        )
        wall_s = time.perf_counter() - started
        memory = find_memory(strategy)
        stored_dtypes = sorted(
            {
                str(getattr(t, f).dtype)
                for t in getattr(memory, "tasks", [])
                for f in ("support_x", "query_x", "unlabeled_x")
            }
        )

    samples = []
    for s in probe.samples:
        d = s.to_dict()
        d["reservoir_bytes"], d["reservoir_len"] = d.pop("memory_bytes"), d.pop("memory_len")
        samples.append(d)
    mem_size = args.mem_size if memory is not None else 0
    summary = analyse(samples, mem_size)
    if memory is not None and hasattr(memory, "reservoir"):
        assert memory.reservoir.n_seen == probe.tasks_seen, "tasks seen disagree"
    settings = {
        "tasks": probe.tasks_seen,
        "tasks_requested": args.tasks,
        "iterations": probe.iterations,
        "method": args.method,
        "every": args.every,
        "checkpoint_every": args.checkpoint_every,
        "loggers": list(loggers),
        "preset": preset.as_dict(),
        "rss_after_imports_mib": rss_imports,
        "rss_after_building_mib": rss_built,
        "stored_image_dtypes": stored_dtypes,
        "final_mean_accuracy": result.mean_accuracy,
    }
    prov = provenance(seeds=[args.seed])
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(samples)
    write_json(out / "summary.json", {**prov, "wall_seconds": wall_s, **settings, **summary})
    plot(samples, summary, out / "rss_over_time.png")
    md = readme(prov, settings, summary, wall_s)
    (out / "README.md").write_text(md)
    print(md)
    if not summary["passed"]:
        raise SystemExit(f"RSS grew {summary['growth_pct']:.2f}% after warm-up (limit 5%)")


if __name__ == "__main__":
    main()
