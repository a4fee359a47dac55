"""Measure what one run of a preset costs, per method, to choose the ``cpu`` preset's size.

Times training iterations and evaluation episodes of each method on the preset's benchmark
(one thread), then extrapolates one full run: 6 domains × iterations + 6 evaluations of every
domain's test episodes (the accuracy matrix). The ``cpu`` preset's goal: at most ≈ 4 minutes per
run on one core for the slowest Table 2/3 method.

Times are **CPU seconds** of the process (``time.process_time``; torch runs one thread), so a
shared machine slows the run but not the measured cost; the load averages are recorded.

    python -m benchmarks.preset_cost --preset cpu --root ../shared/data/sets-mini \
        --methods order mskm protonet anil tpn lst semi-er semi-mer
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets.defaults import FOLDER_SOURCES
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import PRESETS, resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import keep_freed_memory
from benchmarks._common import SHARED_PACKS, header_md, out_dir, provenance, write_json


class _Times(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.train, self.eval = [], []

    def before_training_iteration(self, s, **kw):
        self._t = time.process_time()

    def after_training_iteration(self, s, **kw):
        self.train.append(time.process_time() - self._t)

    def before_eval_iteration(self, s, **kw):
        self._e = time.process_time()

    def after_eval_iteration(self, s, **kw):
        self.eval.append((time.process_time() - self._e) / len(s.mb_x))


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.preset_cost", description=__doc__)
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--root", default=str(SHARED_PACKS))
    ap.add_argument("--methods", nargs="+", default=["order", "mskm"])
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--n-shot", type=int, nargs="+", default=[1, 5])
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    keep_freed_memory()  # the process as a run sets it up
    for shot in args.n_shot:
        reads_root = PRESETS[args.preset]["source"] in FOLDER_SOURCES  # synthetic reads none
        preset = resolve_preset(args.preset, root=args.root if reads_root else None, n_shot=shot)
        full_iters = preset["tasks_per_domain"] // preset["meta_batch"]
        n_test = preset["n_test_episodes"]
        bench = build_benchmark(
            {**preset, "tasks_per_domain": 2 * (args.iters + 8), "n_test_episodes": 20}, seed=0
        )
        for method in args.methods:
            timer = _Times()
            s = build_strategy(method, preset, seed=0, plugins=[timer])
            s.train(bench.train_stream[0], eval_streams=[])  # warm memory on domain 0
            timer.train.clear()
            s.train(bench.train_stream[1], eval_streams=[])
            s.eval(bench.test_stream[:2])
            it = statistics.median(timer.train)
            ep = statistics.median(timer.eval)
            n_dom = len(bench.train_stream)
            interim = preset.get("interim_test_episodes") or n_test
            total = n_dom * full_iters * it + (n_dom * (n_dom - 1) * interim + n_dom * n_test) * ep
            rows.append(
                {
                    "method": method,
                    "n_shot": shot,
                    "s_per_iteration": it,
                    "s_per_eval_episode": ep,
                    "iterations_per_domain": full_iters,
                    "test_episodes": n_test,
                    "estimated_run_s": total,
                }
            )
            print(
                f"{method:<12} {shot}-shot: {it:.3f} s/it, {1000 * ep:.1f} ms/eval episode -> "
                f"run ≈ {total / 60:.1f} min",
                flush=True,
            )
    prov = {**provenance(seeds=[0]), "load_average_1_5_15_end": os.getloadavg()}
    out = out_dir(f"preset_cost_{args.preset}")
    write_json(out / "results.json", {**prov, "preset": args.preset, "rows": rows})
    md = header_md(f"Cost of one `{args.preset}` run (1 thread, extrapolated)", prov)
    md += (
        "CPU seconds of one thread (`time.process_time`), so a busy machine does not inflate "
        f"them; 1-min load at the end: {prov['load_average_1_5_15_end'][0]:.1f}. Estimated run "
        "= domains × iterations × s/iteration + the accuracy matrix's evaluation episodes × "
        "s/episode.\n\n"
    )
    md += (
        "| method | shot | s / iteration | ms / eval episode | iterations/domain | "
        "test episodes | est. minutes / run |\n|---|---:|---:|---:|---:|---:|---:|\n"
    )
    for r in rows:
        md += (
            f"| {r['method']} | {r['n_shot']} | {r['s_per_iteration']:.3f} | "
            f"{1000 * r['s_per_eval_episode']:.1f} | {r['iterations_per_domain']} | "
            f"{r['test_episodes']} | {r['estimated_run_s'] / 60:.1f} |\n"
        )
    (out / "README.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
