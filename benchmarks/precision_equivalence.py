"""Does ``precision="auto"`` (bf16 backbone) change the accuracy? Paired per-episode Δ vs fp32.

For each data source (sets-mini packs, synthetic), shot (1, 5) and method (MSKM, ORDER), the
``cpu`` preset is run twice with the same seed — ``precision="fp32"`` and ``precision="auto"``
(bf16 on a CPU whose oneDNN runs it natively) — and the two runs are compared on the *same* test
episodes with :func:`avalanche_sets.reporting.paired_difference` (mean per-episode Δ and its 95%
CI). The precision is equivalent where the CI covers 0.

Runs go through the run layer (:func:`avalanche_sets.experiment.run_experiment`) into
``benchmarks/results/runs/``: finished runs are not run again (the fp32 ones are the committed
Table 2 runs, recorded in fp32), a killed invocation resumes from its checkpoints, and
``--aggregate-only`` writes the result from what has finished, listing what is missing.

    python benchmarks/precision_equivalence.py --root ../shared/data/sets-mini [--seed 0]

Writes ``benchmarks/results/precision_equivalence/``: ``results.csv``, ``results.json``
(command, date, machine, seeds, load averages), ``README.md`` and ``paired_delta.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

from _common import RESULTS, SHARED_PACKS, header_md, provenance, write_json

SOURCES = ("packs", "synthetic")


def cells(args) -> list[tuple[str, int, str]]:
    return [(src, shot, m) for shot in args.shots for src in args.sources for m in args.methods]


def preset_for(args, source: str, shot: int, precision: str) -> dict:
    from avalanche_sets.presets import resolve_preset

    return resolve_preset(
        "cpu", source=source, n_shot=shot, root=args.root, precision=precision, threads=1
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", default=str(SHARED_PACKS), help="packs folder (source=packs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shots", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--methods", nargs="+", default=["mskm", "order"])
    ap.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    ap.add_argument("--runs", default=str(RESULTS / "runs"), help="run folders (shared)")
    ap.add_argument("--out", default=str(RESULTS / "precision_equivalence"))
    ap.add_argument("--aggregate-only", action="store_true", help="run nothing, write the result")
    ap.add_argument(
        "--recheck", action="store_true",
        help="also re-run the first cell's fp32 run in a scratch folder and check that this "
        "code reproduces the reused fp32 run exactly (same per-episode accuracies)",
    )  # fmt: skip
    args = ap.parse_args()

    import torch

    from avalanche_sets.experiment import run_dir_name, run_experiment, run_precision
    from avalanche_sets.run_folder import read_record

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    if run_precision(preset_for(args, "synthetic", 1, "auto")) != "bf16":
        print(
            "note: precision='auto' resolves to fp32 on this machine (no native bf16): both "
            "runs of every pair are the same fp32 run, so this comparison is trivial here",
            file=sys.stderr,
        )
    if not args.aggregate_only:
        # fp32 first: it is usually committed already (then skipped at once)
        for source, shot, method in cells(args):
            for precision in ("fp32", "auto"):
                preset = preset_for(args, source, shot, precision)
                rec = run_experiment(
                    method, preset, seed=args.seed, out_root=args.runs, loggers=(), wait=True
                )
                print(
                    f"{rec['status']}: {method} {source} {shot}-shot {run_precision(preset)}: "
                    f"{100 * rec['result']['mean_accuracy']:.2f}% ({rec['seconds']:.0f} s)",
                    flush=True,
                )
    recheck = None
    if args.recheck:
        recheck = _recheck(args, run_experiment, run_dir_name, read_record, out)
    saved = out / "results.json"
    if recheck is None and saved.is_file():  # keep an earlier invocation's recheck
        recheck = json.loads(saved.read_text()).get("recheck")
    rows, missing = compare(args, run_dir_name, read_record)
    prov = provenance(seeds=[args.seed])
    prov["recheck"] = recheck
    prov["load_average_1_5_15"] = {"start": load_start, "end": os.getloadavg()}
    report(rows, missing, prov, out)


def _recheck(args, run_experiment, run_dir_name, read_record, out: Path) -> dict:
    """Re-run the first cell in fp32 from scratch: does this code give the reused run's numbers?"""
    import shutil

    source, shot, method = cells(args)[0]
    preset = preset_for(args, source, shot, "fp32")
    scratch = out / "recheck_scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    rec = run_experiment(method, preset, seed=args.seed, out_root=scratch, loggers=())
    reused = read_record(Path(args.runs) / run_dir_name(method, preset, args.seed))
    shutil.rmtree(scratch)
    same = rec["result"]["episode_acc"] == reused["result"]["episode_acc"]
    print(f"recheck {method} {source} {shot}-shot fp32: identical = {same}", flush=True)
    return {
        "run": run_dir_name(method, preset, args.seed),
        "identical_episode_accuracies": same,
        "mean_accuracy_rerun": rec["result"]["mean_accuracy"],
        "mean_accuracy_reused": reused["result"]["mean_accuracy"],
    }


def compare(args, run_dir_name, read_record) -> tuple[list[dict], list[str]]:
    """One row per (source, shot, method) whose fp32 and auto runs have both finished."""
    from avalanche_sets.experiment import run_precision
    from avalanche_sets.reporting import paired_difference

    rows, missing = [], []
    for source, shot, method in cells(args):
        recs = {}
        for precision in ("fp32", "auto"):
            preset = preset_for(args, source, shot, precision)
            folder = Path(args.runs) / run_dir_name(method, preset, args.seed)
            if (folder / "result.json").is_file():
                recs[precision] = read_record(folder)
                recs[precision]["_folder"] = folder.relative_to(Path(args.runs)).as_posix()
            else:
                missing.append(f"{method} {source} {shot}-shot {run_precision(preset)}")
        if len(recs) < 2:
            continue
        a, f = recs["auto"], recs["fp32"]
        delta, ci = paired_difference(a, f)
        rows.append(
            {
                "source": source,
                "n_shot": shot,
                "method": method,
                "auto_resolves_to": a["preset"].get("precision", "fp32"),
                "acc_fp32": f["result"]["mean_accuracy"],
                "acc_auto": a["result"]["mean_accuracy"],
                "delta": delta,
                "ci95": ci,
                "within_ci": abs(delta) <= ci,
                "episodes": len(a["result"]["episode_acc"]),
                "seconds_fp32": f.get("seconds"),
                "seconds_auto": a.get("seconds"),
                "run_fp32": f["_folder"],
                "run_auto": a["_folder"],
            }
        )
    return rows, missing


def report(rows: list[dict], missing: list[str], prov: dict, out: Path) -> None:
    write_json(out / "results.json", {**prov, "rows": rows, "missing": missing})
    if rows:
        with open(out / "results.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    load = prov["load_average_1_5_15"]
    md = header_md("Accuracy of precision='auto' (bf16 backbone) vs 'fp32', cpu preset", prov)
    md += (
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load['start'])} at the "
        f"start, {tuple(round(x, 2) for x in load['end'])} at the end (a shared machine: the "
        "run times below are not speed measurements; `benchmarks/step_speed.py` is)\n\n"
        "Paired Δ = mean over the test episodes of (accuracy with `auto` − accuracy with "
        "`fp32`), both runs with the same seed and therefore the same test episodes (all "
        "domains' final test episodes); ± its 95% CI over episodes "
        "(`avalanche_sets.reporting.paired_difference`). Equivalent where the CI covers 0.\n\n"
    )
    rc = prov.get("recheck")
    if rc:
        md += (
            f"fp32 runs reused from earlier code: re-running `{rc['run']}` with this code gives "
            + ("identical per-episode accuracies.\n\n" if rc["identical_episode_accuracies"]
               else f"**different** numbers ({100 * rc['mean_accuracy_rerun']:.2f}% vs "
               f"{100 * rc['mean_accuracy_reused']:.2f}%).\n\n")
        )  # fmt: skip
    if missing:
        md += f"**Not finished ({len(missing)} runs):** " + "; ".join(missing) + ".\n\n"
    md += (
        "| source | shot | method | auto = | fp32 acc (%) | auto acc (%) | paired Δ (points) "
        "| CI covers 0 | fp32 s | auto s |\n|---|---:|---|---|---:|---:|---:|---|---:|---:|\n"
    )
    for r in rows:
        md += (
            f"| {r['source']} | {r['n_shot']} | {r['method']} | {r['auto_resolves_to']} | "
            f"{100 * r['acc_fp32']:.2f} | {100 * r['acc_auto']:.2f} | "
            f"{100 * r['delta']:+.2f} ± {100 * r['ci95']:.2f} | "
            f"{'yes' if r['within_ci'] else '**no**'} | {r['seconds_fp32'] or 0:.0f} | "
            f"{r['seconds_auto'] or 0:.0f} |\n"
        )
    n_ok = sum(r["within_ci"] for r in rows)
    md += f"\n{n_ok} of {len(rows)} paired Δ have a 95% CI that covers 0.\n"
    md += "\nRun folders (under `benchmarks/results/runs/`):\n\n" + "".join(
        f"- {r['run_fp32']} vs {r['run_auto']}\n" for r in rows
    )
    (out / "README.md").write_text(md)
    _plot(rows, out / "paired_delta.png")
    print(md)


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(rows) + 2), 3.6))
    if rows:
        x = range(len(rows))
        ax.errorbar(
            list(x), [100 * r["delta"] for r in rows], yerr=[100 * r["ci95"] for r in rows],
            fmt="o", capsize=4,
        )  # fmt: skip
        ax.set_xticks(
            list(x), [f"{r['method']}\n{r['source']}\n{r['n_shot']}-shot" for r in rows],
            fontsize=7,
        )  # fmt: skip
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylabel("paired Δ auto − fp32 (points)")
    ax.set_title("bf16 backbone vs fp32: per-episode paired Δ ± 95% CI (cpu preset)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
