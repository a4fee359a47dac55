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

Target of the paper-scale issue (one H100): a whole 6-domain ORDER run ≤ 20 minutes including
evaluation.
"""

from __future__ import annotations

import argparse
import sys

from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from benchmarks._common import RESULTS, header_md, provenance, save_figure, write_json
from benchmarks._gpu import gpu_arguments, gpu_info, gpu_line, results_folder

METHODS = ("order", "mskm")
TARGET_MINUTES = 20.0


def run_all(args) -> list[dict]:
    preset = resolve_preset("paper", source="synthetic", device=args.device, **args.set)
    rows = []
    for method in args.methods:
        print(
            f"[paper_scale] {method}: {preset['tasks_per_domain']} tasks per domain",
            file=sys.stderr,
        )
        rec = run_experiment(
            method, preset, seed=args.seed, out_root=args.out / "runs",
            loggers=("progress",), checkpoint_every=args.checkpoint_every,
        )  # fmt: skip
        res = rec["result"]
        rows.append(
            {
                "method": method,
                "seed": args.seed,
                "minutes": rec["seconds"] / 60,
                "resumes": len(rec.get("resumes", [])),
                "mean_accuracy": res["mean_accuracy"],
                "mean_ci95": res["mean_ci95"],
                "final": res["final"],
                "domains": res["domains"],
                "status": rec["status"],
            }
        )
    return rows


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
    args = ap.parse_args(argv)
    args.out = results_folder(args, RESULTS / "paper_scale")
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
