"""Does ``precision="auto"`` (bf16 backbone) change the accuracy more than float-order noise does?

For each data source (sets-mini packs, synthetic), shot (1, 5) and method (MSKM, ORDER), the
``cpu`` preset is run three times with the same seed, all with this code:

* ``fp32`` — ``precision="fp32"``, channels-last: the reference;
* ``auto`` — ``precision="auto"``: bf16 autocast of the backbone on a CPU whose oneDNN runs it
  natively (the default of every preset);
* ``fp32-nchw`` — the **noise control**: ``precision="fp32"`` with ``channels_last=False``. The
  same network, the same fp32 arithmetic, the same data and seed; only the convolutions'
  memory layout differs, so oneDNN sums in another order and the last bits of some results
  differ. Training amplifies any such difference (a different rounding early on is a
  different trajectory later), so this run measures how far a change that is *mathematically
  nothing* moves the accuracy.

Each variant is compared with ``fp32`` on the *same* test episodes with
:func:`avalanche_sets.runs.report.paired_difference` (mean per-episode Δ and its 95% CI). That CI
only covers the sampling of test episodes, not the divergence of training; so "the CI of Δ
covers 0" is no test of equivalence by itself — the control says what size of Δ any numerical
change produces. bf16 is called *no worse than float-order noise* when its |Δ| over the cells
is not larger than the control's (two-sided Wilcoxon signed-rank test over the cells, 5%).

Cells run in an order that keeps a partial result balanced: the first four cover each method,
source and shot twice (a half fraction of the 2×2×2 design), the last four complete it; within a
cell fp32, auto, control. ``--check-seeds 1`` repeats the first ``--check-cells`` cells with
another seed (another training run and other test episodes) once the seed-0 cells are done.

Runs go through the run layer (:func:`avalanche_sets.runs.experiment.run_experiment`) into
``--runs`` (default ``benchmarks/results/precision_equivalence/runs``, not the Table 2 runs):
finished runs are not run again, a killed invocation resumes from the runs' checkpoints, and
``--aggregate-only`` writes the result from what has finished, listing what is missing.
``--recheck`` re-runs the first cell's fp32 run in a scratch folder: same seed, same numbers?

    python -m benchmarks.precision_equivalence --root ../shared/data/sets-mini [--check-seeds 1]

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

import numpy as np

from benchmarks._common import RESULTS, SHARED_PACKS, header_md, provenance, save_figure, write_json

SOURCES = ("packs", "synthetic")
#: Variant -> preset overrides. The first is the reference of every comparison.
VARIANTS: dict[str, dict] = {
    "fp32": {"precision": "fp32"},
    "auto": {"precision": "auto"},
    "fp32-nchw": {"precision": "fp32", "channels_last": False},
}
REFERENCE, CANDIDATE, CONTROL = "fp32", "auto", "fp32-nchw"
#: (source, shot, method): a half fraction of the 2x2x2 design first, then its complement.
CELL_ORDER = (
    ("synthetic", 1, "mskm"),
    ("packs", 5, "mskm"),
    ("synthetic", 5, "order"),
    ("packs", 1, "order"),
    ("synthetic", 5, "mskm"),
    ("packs", 1, "mskm"),
    ("synthetic", 1, "order"),
    ("packs", 5, "order"),
)


def cells(args) -> list[tuple[str, int, str]]:
    return [
        c
        for c in CELL_ORDER
        if c[0] in args.sources and c[1] in args.shots and c[2] in args.methods
    ]


def planned(args) -> list[tuple[int, tuple[str, int, str]]]:
    """(seed, cell) in run order: every cell with the main seed, then the seed check."""
    main = [(args.seed, c) for c in cells(args)]
    check = [(s, c) for s in args.check_seeds for c in cells(args)[: args.check_cells]]
    return main + check


def preset_for(args, source: str, shot: int, variant: str) -> dict:
    from avalanche_sets.defaults import FOLDER_SOURCES
    from avalanche_sets.presets import resolve_preset

    root = args.root if source in FOLDER_SOURCES else None  # a generated source reads none
    return resolve_preset(
        "cpu", source=source, n_shot=shot, root=root, threads=1, **VARIANTS[variant]
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.precision_equivalence",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--root", default=str(SHARED_PACKS), help="packs folder (source=packs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--check-seeds",
        type=int,
        nargs="*",
        default=[],
        help="other seeds for the first --check-cells cells (seed-level check)",
    )
    ap.add_argument("--check-cells", type=int, default=2)
    ap.add_argument("--shots", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--methods", nargs="+", default=["mskm", "order"])
    ap.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    ap.add_argument(
        "--runs",
        default=str(RESULTS / "precision_equivalence" / "runs"),
        help="run folders (scratch; not the committed Table 2 runs)",
    )
    ap.add_argument("--out", default=str(RESULTS / "precision_equivalence"))
    ap.add_argument("--aggregate-only", action="store_true", help="run nothing, write the result")
    ap.add_argument(
        "--recheck", action="store_true",
        help="also re-run the first cell's fp32 run in a scratch folder and check that it "
        "gives the same per-episode accuracies (same seed, same numbers)",
    )  # fmt: skip
    args = ap.parse_args()  # fmt: skip

    import torch

    from avalanche_sets.runs.experiment import run_experiment
    from avalanche_sets.runs.folder import read_record, run_dir_name, run_precision

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    if run_precision(preset_for(args, "synthetic", 1, CANDIDATE)) != "bf16":
        print(
            "note: precision='auto' resolves to fp32 on this machine (no native bf16): the "
            "'auto' run of every cell is the fp32 run, so this comparison is trivial here",
            file=sys.stderr,
        )
    if not args.aggregate_only:
        for seed, (source, shot, method) in planned(args):
            for variant in VARIANTS:
                preset = preset_for(args, source, shot, variant)
                rec = run_experiment(
                    method, preset, seed=seed, out_root=args.runs, loggers=(), wait=True
                )
                print(
                    f"{rec['status']}: {method} {source} {shot}-shot seed {seed} {variant}: "
                    f"{100 * rec['result']['mean_accuracy']:.2f}% ({rec['seconds']:.0f} s)",
                    flush=True,
                )
    saved = out / "results.json"
    recheck = json.loads(saved.read_text()).get("recheck") if saved.is_file() else None
    if args.recheck:
        recheck = _recheck(args, run_experiment, run_dir_name, read_record, out)
    rows, missing = compare(args, run_dir_name, read_record)
    prov = provenance(seeds=sorted({args.seed, *args.check_seeds}))
    prov["recheck"] = recheck
    prov["load_average_1_5_15"] = {"start": load_start, "end": os.getloadavg()}
    prov["runs"] = _relative(Path(args.runs))
    report(rows, missing, summarise(rows, args.seed), prov, out)


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(RESULTS.parents[1]).as_posix()
    except ValueError:
        return str(path)


def _recheck(args, run_experiment, run_dir_name, read_record, out: Path) -> dict:
    """Re-run the first cell's fp32 run from scratch: does it give the same numbers?"""
    import shutil

    source, shot, method = cells(args)[0]
    preset = preset_for(args, source, shot, REFERENCE)
    scratch = out / "recheck_scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    rec = run_experiment(method, preset, seed=args.seed, out_root=scratch, loggers=())
    kept = read_record(Path(args.runs) / run_dir_name(method, preset, args.seed))
    shutil.rmtree(scratch)
    same = rec["result"]["episode_acc"] == kept["result"]["episode_acc"]
    print(f"recheck {method} {source} {shot}-shot fp32: identical = {same}", flush=True)
    return {
        "run": run_dir_name(method, preset, args.seed),
        "identical_episode_accuracies": same,
        "mean_accuracy_rerun": rec["result"]["mean_accuracy"],
        "mean_accuracy_kept": kept["result"]["mean_accuracy"],
    }


def compare(args, run_dir_name, read_record) -> tuple[list[dict], list[str]]:
    """One row per (seed, cell, variant ≠ fp32) whose run and fp32 run have both finished."""
    from avalanche_sets.runs.folder import run_precision
    from avalanche_sets.runs.report import paired_difference

    rows, missing = [], []
    for seed, (source, shot, method) in planned(args):
        recs = {}
        for variant in VARIANTS:
            preset = preset_for(args, source, shot, variant)
            folder = Path(args.runs) / run_dir_name(method, preset, seed)
            if (folder / "result.json").is_file():
                recs[variant] = read_record(folder)
                recs[variant]["_folder"] = folder.relative_to(Path(args.runs)).as_posix()
            else:
                missing.append(f"{method} {source} {shot}-shot seed {seed} {variant}")
        ref = recs.get(REFERENCE)
        if ref is None:
            continue
        for variant, rec in recs.items():
            if variant == REFERENCE:
                continue
            delta, ci = paired_difference(rec, ref)
            d = np.subtract(rec["result"]["episode_acc"], ref["result"]["episode_acc"])
            rows.append(
                {
                    "seed": seed,
                    "source": source,
                    "n_shot": shot,
                    "method": method,
                    "variant": variant,
                    "computes_in": run_precision(rec["preset"]),
                    "channels_last": rec["preset"].get("channels_last", True),
                    "acc_fp32": ref["result"]["mean_accuracy"],
                    "acc_variant": rec["result"]["mean_accuracy"],
                    "delta": delta,
                    "ci95": ci,
                    "ci_covers_0": abs(delta) <= ci,
                    # how much the per-episode accuracies moved, whatever the sign
                    "episode_rms_change": float(np.sqrt(np.mean(d**2))),
                    "episodes_changed": float(np.mean(d != 0)),
                    "identical": bool(np.all(d == 0)),
                    "episodes": int(d.size),
                    "seconds_fp32": ref.get("seconds"),
                    "seconds_variant": rec.get("seconds"),
                    "run_fp32": ref["_folder"],
                    "run_variant": rec["_folder"],
                }
            )
    return rows, missing


def summarise(rows: list[dict], seed: int) -> dict:
    """Per variant (main seed): how large the Δ are, and bf16 against the control by cell."""
    out: dict = {"by_variant": {}, "bf16_vs_control": None}
    main = [r for r in rows if r["seed"] == seed]
    for variant in VARIANTS:
        sel = [r for r in main if r["variant"] == variant]
        if not sel:
            continue
        absd = np.abs([100 * r["delta"] for r in sel])
        out["by_variant"][variant] = {
            "cells": len(sel),
            "ci_excludes_0": sum(not r["ci_covers_0"] for r in sel),
            "mean_abs_delta_points": float(absd.mean()),
            "median_abs_delta_points": float(np.median(absd)),
            "max_abs_delta_points": float(absd.max()),
            "mean_delta_points": float(np.mean([100 * r["delta"] for r in sel])),
            "mean_episode_rms_change_points": float(
                np.mean([100 * r["episode_rms_change"] for r in sel])
            ),
            "identical_runs": sum(r["identical"] for r in sel),
        }
    key = lambda r: (r["seed"], r["source"], r["n_shot"], r["method"])  # noqa: E731
    cand = {key(r): r for r in rows if r["variant"] == CANDIDATE}
    ctrl = {key(r): r for r in rows if r["variant"] == CONTROL}
    both = [k for k in cand if k in ctrl]
    out["bf16_vs_control"] = _versus(cand, ctrl, [k for k in both if k[0] == seed])
    if any(k[0] != seed for k in both):  # the seed check adds (seed, cell) pairs
        out["bf16_vs_control_all_seeds"] = _versus(cand, ctrl, both)
    return out


def _versus(cand: dict, ctrl: dict, keys: list) -> dict | None:
    """bf16's |Δ| and per-episode RMS change against the control's over the (seed, cell)s."""
    if not keys:
        return None
    a = np.array([abs(cand[k]["delta"]) for k in keys]) * 100
    c = np.array([abs(ctrl[k]["delta"]) for k in keys]) * 100
    ra = np.array([cand[k]["episode_rms_change"] for k in keys]) * 100
    rc = np.array([ctrl[k]["episode_rms_change"] for k in keys]) * 100
    # The control's Δ over the cells sample the spread that a numerically different training
    # run has: its root mean square is the yardstick of a "large" Δ.
    noise = float(np.sqrt(np.mean(c**2)))
    res = {
        "cells": len(keys),
        "control_rms_delta": noise,
        "bf16_beyond_2_control_rms": int((a > 2 * noise).sum()),
        "control_beyond_its_ci": int(sum(not ctrl[k]["ci_covers_0"] for k in keys)),
        "bf16_beyond_its_ci": int(sum(not cand[k]["ci_covers_0"] for k in keys)),
        "bf16_abs_delta_larger": int((a > c).sum()),
        "mean_delta_bf16": float(np.mean([100 * cand[k]["delta"] for k in keys])),
        "mean_delta_control": float(np.mean([100 * ctrl[k]["delta"] for k in keys])),
        "mean_abs_delta_bf16": float(a.mean()),
        "mean_abs_delta_control": float(c.mean()),
        "bf16_rms_change_larger": int((ra > rc).sum()),
        "mean_rms_change_bf16": float(ra.mean()),
        "mean_rms_change_control": float(rc.mean()),
        "wilcoxon_p_abs_delta": None,
        "wilcoxon_p_rms_change": None,
    }
    if len(keys) >= 5:
        from scipy.stats import wilcoxon

        res["wilcoxon_p_abs_delta"] = float(wilcoxon(a, c).pvalue)
        res["wilcoxon_p_rms_change"] = float(wilcoxon(ra, rc).pvalue)
    return res


def verdict(summary: dict) -> str:
    res = summary.get("bf16_vs_control")
    if not res:
        return "No cell has both its bf16 and its control run yet: no verdict."
    ctrl = summary["by_variant"].get(CONTROL, {})
    if ctrl and ctrl["identical_runs"] == ctrl["cells"]:
        return (
            "**The control is void here**: every fp32-nchw run is bit-identical to its fp32 "
            "run (this CPU's kernels sum both layouts in the same order), so it measures no "
            "noise; no verdict."
        )
    p = res["wilcoxon_p_abs_delta"]
    sizes = (
        f"mean |Δ| {res['mean_abs_delta_bf16']:.2f} points with bf16 against "
        f"{res['mean_abs_delta_control']:.2f} with the float-order control; bf16's |Δ| is the "
        f"larger in {res['bf16_abs_delta_larger']} of {res['cells']} cells; the control's Δ "
        f"have an RMS of {res['control_rms_delta']:.2f} points, and "
        f"{res['bf16_beyond_2_control_rms']} of bf16's |Δ| exceed twice that; the 95% CI over "
        f"episodes excludes 0 for {res['bf16_beyond_its_ci']} bf16 and "
        f"{res['control_beyond_its_ci']} control Δ"
    )
    if p is None:
        return f"Too few cells for the test ({res['cells']}, need 5): {sizes}."
    if p >= 0.05:
        return (
            f"**bf16 moves the accuracy no more than float-order noise does**: {sizes} "
            f"(Wilcoxon signed-rank p = {p:.2f}); the per-episode changes are "
            f"{res['mean_rms_change_bf16']:.1f} against {res['mean_rms_change_control']:.1f} "
            f"points RMS (p = {res['wilcoxon_p_rms_change']:.2f})."
        )
    larger = res["mean_abs_delta_bf16"] > res["mean_abs_delta_control"]
    return (
        f"**bf16 moves the accuracy {'more' if larger else 'less'} than float-order noise "
        f"does**: {sizes} (Wilcoxon signed-rank p = {p:.3f})."
    )


def seed_check(summary: dict) -> str:
    res = summary.get("bf16_vs_control_all_seeds")
    if not res:
        return ""
    p = res["wilcoxon_p_abs_delta"]
    return (
        f"With the seed check's runs too ({res['cells']} (seed, cell) pairs): mean |Δ| "
        f"{res['mean_abs_delta_bf16']:.2f} points with bf16 against "
        f"{res['mean_abs_delta_control']:.2f} with the control, bf16's the larger in "
        f"{res['bf16_abs_delta_larger']} of {res['cells']}"
        + (f" (Wilcoxon p = {p:.2f})" if p is not None else "")
        + f"; mean signed Δ {res['mean_delta_bf16']:+.2f} against "
        f"{res['mean_delta_control']:+.2f}; the control's Δ have an RMS of "
        f"{res['control_rms_delta']:.2f} points and {res['bf16_beyond_2_control_rms']} of bf16's "
        f"|Δ| exceed twice that; the CI excludes 0 for {res['bf16_beyond_its_ci']} bf16 and "
        f"{res['control_beyond_its_ci']} control Δ; RMS change {res['mean_rms_change_bf16']:.1f} "
        f"against {res['mean_rms_change_control']:.1f} points (bf16's the larger in "
        f"{res['bf16_rms_change_larger']} of {res['cells']}).\n\n"
    )


def report(rows: list[dict], missing: list[str], summary: dict, prov: dict, out: Path) -> None:
    write_json(out / "results.json", {**prov, "rows": rows, "summary": summary, "missing": missing})
    if rows:
        with open(out / "results.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    load = prov["load_average_1_5_15"]
    md = header_md("Accuracy of precision='auto' (bf16 backbone) vs fp32, against a float-order "
                   "control (cpu preset)", prov)  # fmt: skip
    md += (
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load['start'])} at the "
        f"start, {tuple(round(x, 2) for x in load['end'])} at the end (a shared machine: the "
        "run times below are not speed measurements; `benchmarks/step_speed.py` is)\n"
        f"- run folders: `{prov['runs']}/` (all runs made by this code, none reused)\n\n"
        "Three runs per cell, same seed and therefore the same test episodes (all domains' final "
        "test episodes): `fp32` (the reference: fp32, channels-last), `auto` (bf16 autocast of "
        "the backbone, what `precision='auto'` is on this machine) and `fp32-nchw`, the "
        "**float-order control**: fp32 with `channels_last=False`, the same network and data, "
        "only summed in another order by the convolution kernels. Paired Δ = mean over the "
        "test episodes of (variant − fp32) ± its 95% CI over episodes "
        "(`avalanche_sets.runs.report.paired_difference`). That CI covers the choice of test "
        "episodes only, not the divergence of training that any numerical change sets off, "
        "which is what the control measures. RMS change = root mean square of the per-episode "
        "differences (how much the episodes moved, whatever the sign).\n\n"
    )
    md += verdict(summary) + "\n\n" + seed_check(summary)
    rc = prov.get("recheck")
    if rc:
        md += (
            f"Same seed, same numbers: re-running `{rc['run']}` from scratch gives "
            + ("identical per-episode accuracies.\n\n" if rc["identical_episode_accuracies"]
               else f"**different** numbers ({100 * rc['mean_accuracy_rerun']:.2f}% vs "
               f"{100 * rc['mean_accuracy_kept']:.2f}%).\n\n")
        )  # fmt: skip
    if missing:
        md += f"**Not finished ({len(missing)} runs):** " + "; ".join(missing) + ".\n\n"
    md += (
        "| seed | source | shot | method | variant | fp32 acc (%) | variant acc (%) | "
        "paired Δ (points) | CI covers 0 | RMS change (points) | episodes changed | "
        "fp32 s | variant s |\n|---:|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|\n"
    )
    for r in rows:
        name = f"{r['variant']} ({r['computes_in']})" if r["variant"] == CANDIDATE else r["variant"]
        md += (
            f"| {r['seed']} | {r['source']} | {r['n_shot']} | {r['method']} | {name} | "
            f"{100 * r['acc_fp32']:.2f} | {100 * r['acc_variant']:.2f} | "
            f"{100 * r['delta']:+.2f} ± {100 * r['ci95']:.2f} | "
            f"{'yes' if r['ci_covers_0'] else '**no**'} | {100 * r['episode_rms_change']:.1f} | "
            f"{100 * r['episodes_changed']:.0f}% | {r['seconds_fp32'] or 0:.0f} | "
            f"{r['seconds_variant'] or 0:.0f} |\n"
        )
    if summary["by_variant"]:
        md += (
            f"\nSummary over the cells of seed {prov['seeds'][0]}:\n\n| variant | cells | CI "
            "excludes 0 | mean Δ | mean \\|Δ\\| | median \\|Δ\\| | max \\|Δ\\| | mean RMS change "
            "| runs identical to fp32 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        )
        for v, s in summary["by_variant"].items():
            md += (
                f"| {v} | {s['cells']} | {s['ci_excludes_0']} | {s['mean_delta_points']:+.2f} | "
                f"{s['mean_abs_delta_points']:.2f} | {s['median_abs_delta_points']:.2f} | "
                f"{s['max_abs_delta_points']:.2f} | {s['mean_episode_rms_change_points']:.1f} | "
                f"{s['identical_runs']} |\n"
            )
    md += "\nRun folders:\n\n" + "".join(f"- {r['run_fp32']} vs {r['run_variant']}\n" for r in rows)
    (out / "README.md").write_text(md)
    _plot(rows, out / "paired_delta.png")
    print(md)


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells_ = list(dict.fromkeys((r["seed"], r["method"], r["source"], r["n_shot"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(cells_) + 2), 3.8))
    for i, (variant, colour) in enumerate(((CANDIDATE, "C0"), (CONTROL, "C1"))):
        pts = [(j, r) for j, c in enumerate(cells_) for r in rows
               if r["variant"] == variant and (r["seed"], r["method"], r["source"], r["n_shot"]) == c]  # fmt: skip
        if pts:
            ax.errorbar(
                [j + (i - 0.5) * 0.25 for j, _ in pts], [100 * r["delta"] for _, r in pts],
                yerr=[100 * r["ci95"] for _, r in pts], fmt="o", capsize=3, color=colour,
                label="bf16 (auto) − fp32" if variant == CANDIDATE
                else "float-order control (fp32 NCHW) − fp32",
            )  # fmt: skip
    ax.set_xticks(
        range(len(cells_)), [f"{m}\n{s}\n{k}-shot\nseed {sd}" for sd, m, s, k in cells_],
        fontsize=7,
    )  # fmt: skip
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlim(-0.6, len(cells_) - 0.4)
    ax.set_ylabel("paired Δ vs fp32 (points)")
    ax.legend(fontsize=7)
    ax.set_title("bf16 backbone and a float-order control vs fp32: paired Δ ± 95% CI "
                 "(cpu preset)", fontsize=9)  # fmt: skip
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
