"""A whole ``paper``-preset run of ORDER and of MSKM, timed end to end with evaluation.

The paper's protocol (84 px, 5 blocks of 64 filters, 6,000 iterations of meta-batch 2 per
domain, Q = 15, 600 test episodes) on the synthetic source at 84 px, which needs no download;
seed 0. Each run goes through the library's own run path (``run_experiment``: a run folder
under ``<out>/runs``, checkpoints every 500 iterations, so an interrupted benchmark resumes
where it stopped), and the report gives its wall time (training and evaluation, resumed
segments added), the final mean accuracy with its 95 % interval, and the machine and GPU.

    python -m benchmarks.paper_scale                       # on a GPU: results/paper_scale
    python -m benchmarks.paper_scale --device cpu --out /tmp/ps --set image_size=16 \\
        --set n_blocks=2 --set width=8 --set tasks_per_domain=4 --set n_test_episodes=2 \\
        --set n_val_episodes=2 --set "domains=['shapes','strokes']"   # smoke test

``--short N`` fits a lease instead: ORDER (or ``--methods``) trains only ``N`` iterations per
domain on every domain, with the real evaluation after each domain (all test episodes of every
domain), and no run folder; ``<out>/<stem>.json`` (``--stem``, default ``paper_short``) is
rewritten after every domain's training and every evaluation with each iteration's and each
evaluation's seconds, and the whole run's cost **computed** from them: per domain, the measured
training wall time plus the missing iterations at that domain's mean cycle (a step and the data
path before it: the wall time of the pass, after its first :data:`SETTLE` iterations), plus
the measured evaluations (a short run evaluates exactly as often and as much as a whole one)
and one checkpoint's measured save time times the checkpoints the CLI writes at
``--checkpoint-every``.

    python -m benchmarks.paper_scale --short 200 --out $OUT --methods order   # on a GPU

Target on one H100 (docs/guide/gpu.md): a whole 6-domain ORDER run ≤ 20 minutes including
evaluation.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from benchmarks._common import RESULTS, header_md, provenance, save_figure, write_json
from benchmarks._gpu import (
    StepClock,
    device_clock,
    gpu_arguments,
    gpu_info,
    gpu_line,
    results_folder,
    write_json_atomic,
)

__all__ = ["main", "mean_cycle", "run_all", "short_run", "whole_run_cost"]

METHODS = ("order", "mskm")
TARGET_MINUTES = 20.0
#: The first iterations of a domain left out of its mean cycle (the process's warm-up: cuDNN's
#: autotuner, the allocator); they stay in the domain's measured training time.
SETTLE = 5


def mean_cycle(iterations: list[float], gaps: list[float]) -> float:
    """Seconds per training iteration of a pass, the data path between iterations included:
    the mean of (the gap before iteration ``i`` + iteration ``i``) over ``i >= SETTLE`` (over
    every iteration when the pass is shorter). ``gaps[j]`` is the wall time between iteration
    ``j`` and ``j + 1`` (:class:`~benchmarks._gpu.StepClock`)."""
    first = SETTLE if len(iterations) > SETTLE else 0
    its = iterations[first:]
    between = gaps[max(first - 1, 0) :] if first else gaps
    # with first = 0 there is one gap fewer than iterations: spread the gaps over them all
    return (sum(its) + sum(between)) / len(its)


def run_all(args) -> list[dict]:
    preset = resolve_preset("paper", source="synthetic", device=args.device, **args.set)
    rows = []
    for method in args.methods:
        print(
            f"[paper_scale] {method}: {preset.tasks_per_domain} tasks per domain",
            file=sys.stderr,
        )
        rec = run_experiment(
            method, preset, seed=args.seed, out_root=args.out / "runs",
            loggers=("progress",), checkpoint_every=args.checkpoint_every,
        )  # fmt: skip
        res = rec.result
        rows.append(
            {
                "method": method,
                "seed": args.seed,
                "minutes": rec.seconds / 60,
                "resumes": len(rec.provenance.resumes or ()),
                "mean_accuracy": res["mean_accuracy"],
                "mean_ci95": res["mean_ci95"],
                "final": res["final"],
                "domains": res["domains"],
                "status": rec.status,
            }
        )
    return rows


def whole_run_cost(
    domains: list[dict],
    evaluations: list[dict],
    *,
    full_iterations: int,
    checkpoint_s: float | None,
    checkpoint_every: int,
) -> dict:
    """The seconds a whole run would take, computed from a short run's measured parts.

    ``domains``: per domain trained so far, ``iterations`` (the seconds of each) and
    ``train_s`` (the wall time of its training, set-up included); ``evaluations``: the
    seconds of each evaluation so far (one after every domain, on every domain's test set, as
    in a whole run), and ``gaps`` (the wall time between its iterations). A domain's whole
    training is its measured wall time plus the iterations the short run left out at its mean
    cycle (:func:`mean_cycle`: the pass's wall time per iteration, the data path included; a
    median of the steps alone would leave out both the slow iterations and the data path).
    Domains or evaluations not reached yet are counted like the mean of those measured
    (``complete`` is then false).
    """
    n_domains = max(len(domains), 1)
    if not domains or not any(d["iterations"] for d in domains):
        return {"complete": False, "seconds": None}
    train = []
    for d in domains:
        its = d["iterations"]
        missing = max(full_iterations - len(its), 0)
        train.append(d["train_s"] + missing * mean_cycle(its, d.get("gaps", [])))
    expected = domains[0].get("of", n_domains)
    train_s = sum(train) + statistics.mean(train) * (expected - len(train))
    evals = [e["seconds"] for e in evaluations]
    eval_s = sum(evals) + statistics.mean(evals) * (expected - len(evals)) if evals else 0.0
    n_ckpt = expected * (math.ceil(full_iterations / checkpoint_every) if checkpoint_every else 0)
    n_ckpt += expected  # after every domain's evaluation
    ckpt_s = (checkpoint_s or 0.0) * n_ckpt
    return {
        "label": "computed",
        "complete": len(domains) == expected and len(evaluations) == expected,
        "full_iterations_per_domain": full_iterations,
        "per_iteration": f"mean cycle (step + data path), first {SETTLE} of each domain left out",
        "training_s": train_s,
        "evaluation_s": eval_s,
        "checkpoints": n_ckpt,
        "checkpoint_s": ckpt_s,
        "seconds": train_s + eval_s + ckpt_s,
        "minutes": (train_s + eval_s + ckpt_s) / 60,
    }


def short_run(args) -> dict:
    """A shortened ``paper`` run per method (``--short`` iterations per domain, the real
    evaluation), its summary rewritten to ``<out>/<stem>.json`` as it goes."""
    from avalanche.training.plugins import EvaluationPlugin

    from avalanche_sets.methods import build_strategy
    from avalanche_sets.runs.experiment import build_benchmark
    from avalanche_sets.training import save_checkpoint
    from avalanche_sets.training.runner import episode_accuracies, set_up_process

    full = resolve_preset("paper", source="synthetic", device=args.device, **args.set)
    full_iterations = math.ceil(full.tasks_per_domain / full.meta_batch)
    preset = full.replace(tasks_per_domain=args.short * full.meta_batch)
    clock = device_clock(args.device)
    path = args.out / f"{args.stem}.json"
    summary = {
        "provenance": provenance(seeds=[args.seed]),
        "gpu": gpu_info(args.device),
        "preset_overrides": {"source": "synthetic", **args.set},
        "short_iterations_per_domain": args.short,
        "full_iterations_per_domain": full_iterations,
        "methods": {},
    }
    for method in args.methods:
        rec = {"setup_s": None, "domains": [], "evaluations": [], "checkpoint_s": None}
        summary["methods"][method] = rec

        def save(stage: str, rec=rec, method=method) -> None:
            rec["stage"] = stage
            rec["whole_run"] = whole_run_cost(
                rec["domains"], rec["evaluations"], full_iterations=full_iterations,
                checkpoint_s=rec["checkpoint_s"], checkpoint_every=args.checkpoint_every,
            )  # fmt: skip
            write_json_atomic(path, summary)
            print(f"[paper_scale] {method}: {stage}", file=sys.stderr)

        t0 = clock()
        bench = build_benchmark(preset, seed=args.seed)
        torch.manual_seed(args.seed)
        step = StepClock(clock)
        strategy = build_strategy(
            method, preset, seed=args.seed, evaluator=EvaluationPlugin(), plugins=[step]
        )
        strategy.plugins.insert(0, step.head())
        set_up_process(strategy.device)  # as run_sets sets a run's process up
        rec["setup_s"] = clock() - t0
        n = len(bench.train_stream)
        for e, exp in enumerate(bench.train_stream):
            step.t.clear()
            t0 = clock()
            strategy.train(exp, eval_streams=[])
            rec["domains"].append({"domain": bench.domain_names[e], "of": n,
                                   "train_s": clock() - t0,
                                   "iterations": list(step.t["iteration"]),
                                   "gaps": list(step.t["gap"])})  # fmt: skip
            save(f"trained domain {e + 1}/{n}")
            t0 = clock()
            accs = episode_accuracies(strategy, bench.test_stream)
            rec["evaluations"].append({
                "after_domain": e + 1, "seconds": clock() - t0,
                "episodes": int(sum(len(a) for a in accs)),
                "mean_accuracy": float(sum(a.mean() for a in accs) / len(accs)),
            })  # fmt: skip
            if e == 0:  # one checkpoint's cost (the memory is smallest here: a lower bound)
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = clock()
                    save_checkpoint(Path(tmp) / "c.pt", strategy,
                                    position={"experience": e + 1, "iteration": 0})  # fmt: skip
                    rec["checkpoint_s"] = clock() - t0
            save(f"evaluated after domain {e + 1}/{n}")
        save("done")
    return summary


def short_report(summary: dict) -> str:
    """A few Markdown lines: each method's computed whole-run minutes."""
    md = gpu_line(summary["gpu"])
    md += (
        f"- {summary['short_iterations_per_domain']} of "
        f"{summary['full_iterations_per_domain']} iterations per domain trained; "
        "the whole run is **computed** from the measured parts\n"
    )
    for method, rec in summary["methods"].items():
        w = rec["whole_run"]
        if w.get("seconds") is None:
            md += f"- {method}: nothing measured yet ({rec.get('stage')})\n"
            continue
        cycles = [mean_cycle(d["iterations"], d.get("gaps", [])) for d in rec["domains"]]
        md += (
            f"- {method}: mean cycle per domain (step + data path) "
            f"{[round(1e3 * c, 1) for c in cycles]} ms, "
            f"evaluations {[round(e['seconds'], 1) for e in rec['evaluations']]} s; whole run "
            f"(computed{'' if w['complete'] else ', from a run cut short'}): "
            f"{w['minutes']:.1f} min = training {w['training_s'] / 60:.1f} + evaluation "
            f"{w['evaluation_s'] / 60:.1f} + {w['checkpoints']} checkpoints "
            f"{w['checkpoint_s'] / 60:.1f}\n"
        )
    if summary["gpu"] is not None and "order" in summary["methods"]:
        w = summary["methods"]["order"]["whole_run"]
        if w.get("minutes") is not None:
            met = "met" if w["minutes"] <= TARGET_MINUTES else "not met"
            md += f"- target ≤ {TARGET_MINUTES:.0f} minutes for ORDER (computed): {met}\n"
    return md


def report(summary: dict, out) -> None:
    rows, prov = summary["rows"], summary["provenance"]
    md = header_md("A whole paper-preset run on a GPU", prov)
    md += gpu_line(summary["gpu"])
    md += f"- preset: `paper` on the synthetic source, overrides {summary['preset_overrides']}\n\n"
    md += "| method | seed | wall minutes (training + evaluation) | resumed | mean accuracy (95 % CI) |\n"
    md += "|---|---|---|---|---|\n"
    for r in rows:
        md += (
            f"| {r['method']} | {r['seed']} | {r['minutes']:.1f} | {r['resumes']} | "
            f"{100 * r['mean_accuracy']:.2f} ± {100 * r['mean_ci95']:.2f} |\n"
        )
    order = next((r for r in rows if r["method"] == "order"), None)
    if summary["gpu"] is None:
        md += "\nNo GPU: the target (a whole ORDER run ≤ 20 minutes on one H100) is not judged.\n"
    elif order is not None:
        met = order["minutes"] <= TARGET_MINUTES
        md += (
            f"\nTarget: a whole ORDER run ≤ {TARGET_MINUTES:.0f} minutes including evaluation: "
            f"{order['minutes']:.1f} minutes, {'met' if met else 'not met'}.\n"
        )
    md += "\n![final accuracy per domain](paper_scale.png)\n"
    (out / "README.md").write_text(md)
    _plot(rows, out)


def _plot(rows: list[dict], out) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    for r in rows:
        ax.plot(range(len(r["final"])), [100 * a for a in r["final"]], marker="o",
                label=f"{r['method']} ({r['minutes']:.0f} min)")  # fmt: skip
    if rows:
        ax.set_xticks(range(len(rows[0]["domains"])))
        ax.set_xticklabels(rows[0]["domains"], fontsize=8)
    ax.set_ylabel("final accuracy (%)")
    ax.set_title("after the whole stream, per domain", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "paper_scale.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.paper_scale", description=__doc__.split("\n")[0]
    )
    gpu_arguments(ap)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint-every", type=int, default=500)
    ap.add_argument(
        "--short", type=int, default=None, metavar="N",
        help="a shortened run: N training iterations per domain, the real evaluation, the "
        "whole run's cost computed (no run folder)",
    )  # fmt: skip
    ap.add_argument("--stem", default="paper_short", help="--short: the result file's name")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    if args.short is not None and args.short < 1:
        raise SystemExit(f"--short must be a positive number of iterations, got {args.short}")
    if args.checkpoint_every < 0:
        raise SystemExit(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    args.out = results_folder(args, RESULTS / "paper_scale")
    if args.short is not None:
        print(short_report(short_run(args)))
        return
    rows = run_all(args)
    summary = {
        "provenance": provenance(seeds=[args.seed]),
        "gpu": gpu_info(args.device),
        "preset_overrides": {"source": "synthetic", **args.set},
        "rows": rows,
    }
    write_json(args.out / "paper_scale.json", summary)
    report(summary, args.out)
    print((args.out / "README.md").read_text())


if __name__ == "__main__":
    main()
