"""Reproduce one artefact of the paper: run its grid, aggregate, write tables and plots.

    python -m benchmarks.reproduce table2 --preset cpu --root ../shared/data/sets-mini \
        --seeds 0 1 2 --shots 1 5 --jobs 2

Artefacts: table2 (meta-learning baselines), table3 (continual baselines + joint),
ablation_components, ablation_mi, ood_sensitivity (R = 50..250), memory_size (50/100/200),
lambda_beta (λ × β grid on the *validation* classes), order2, order3 (domain orders of the
appendix). The running-time table is ``benchmarks/running_time.py`` (a timing, not a grid).

Runs go to ``benchmarks/results/runs/`` (one folder per method/setting/seed with its
``result.json`` and accuracy-matrix heatmap), shared by all artefacts: a run that two artefacts
need (e.g. ORDER in Tables 2 and 3) is done once; finished runs are skipped, interrupted ones
resume from their checkpoint. The aggregate goes to ``benchmarks/results/<artefact>/`` as
``table.md``/``table.csv``, ``summary.json`` (command, date, machine, seeds) and ``accuracy.png``;
each run's own ``table.md`` is rewritten from its ``result.json`` when it differs (a run
recorded before forgetting had its present definition).
``--methods`` / ``--values`` restrict the grid (a reduced grid says so in its README).
The thread count is part of a run's identity: runs made in parallel (``--jobs`` > 1, Ray) have
one thread each, and ``--aggregate-only`` reads the runs of the preset's own thread count (the
same for the ``cpu`` preset, which has one).
``--precision`` is fp32 by default, as the committed tables were run; ``--precision auto``
(bf16 where the CPU runs it natively) writes ``-bf16`` run folders and ``<artefact>_bf16``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks._common import (
    SHARED_PACKS,
    artefact_name,
    header_md,
    out_dir,
    provenance,
    save_figure,
    write_json,
)
from benchmarks._paper import (
    FOOTNOTE,
    PAPER,
    SHARE_OF_JOINT,
    comparison_md,
    paired_delta,
    reference_of,
    share_of_joint_md,
)
from benchmarks.paper_rows import table_methods

# artefact -> (methods, setting key swept (or None), values, strategy-overrides grid, stream);
# an artefact's methods are those that fill one of its rows (``benchmarks/paper_rows.py``), in
# the rows' order.
ARTEFACTS = {
    "table2": (table_methods("table2"), None, [None], [{}], "test"),
    "table3": (table_methods("table3"), None, [None], [{}], "test"),
    "order2": (table_methods("order2"), "order", [2], [{}], "test"),
    "order3": (table_methods("order3"), "order", [3], [{}], "test"),
    # The paper's rows: MI × OT switches, all with replay ("neither" = Semi-ER).
    "ablation_components": (
        table_methods("ablation_components"), "n_ood", [50, 250], [{}], "test",
    ),
    # U_id+U_ood without MI (Semi-ER), U_id only, + I_id, (+ I_ood only: ours), both terms;
    # then the same steps without replay and OT (ours): MSKM, the OOD filter, both MI terms.
    "ablation_mi": (table_methods("ablation_mi"), "n_ood", [50, 250], [{}], "test"),
    "ood_sensitivity": (table_methods("ood_sensitivity"), "n_ood", [50, 100, 150, 200, 250],
                        [{}], "test"),
    "memory_size": (table_methods("memory_size"), "mem_size", [50, 100, 200], [{}], "test"),
    "lambda_beta": (
        table_methods("lambda_beta"), None, [None],
        [{"lam": lam, "beta": beta} for lam in (1e-4, 1e-5, 1e-6)
         for beta in (0.01, 0.005, 0.003, 0.001)],
        "valid",
    ),
}  # fmt: skip


def _report(outcome) -> None:
    """One line per run as it ends (the sweep runs them in parallel)."""
    spec = outcome.spec
    if outcome.record is not None:
        over = spec.strategy_overrides or ""
        print(f"done {spec.method} seed {spec.seed} {over}: {100 * outcome.accuracy:.2f}% "
              f"({outcome.seconds:.0f} s)", flush=True)  # fmt: skip


def grid_key(identity: dict, data: str | None) -> str | None:
    """A run identity as a grid point's key, for a grid that reads data of content ``data``:
    ``None`` (no grid point) when the identity names other data. A record that names no data
    content (``None``: the committed records of the packs, whose runs did not record it)
    counts as this data's: the grid reads the runs of its folder, and ``main`` says how many."""
    if identity.get("data") not in (data, None):
        return None
    return json.dumps({k: v for k, v in identity.items() if k != "data"}, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.reproduce",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("artefact", choices=sorted(ARTEFACTS))
    ap.add_argument("--preset", default="cpu")
    ap.add_argument(
        "--root", help=f"packs folder of a source that reads one (default {SHARED_PACKS})"
    )
    ap.add_argument("--source", help="override the preset's source (e.g. synthetic)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--shots", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--methods", nargs="+", help="restrict to these methods (reduced grid)")
    ap.add_argument("--values", nargs="+", help="restrict the swept setting's values")
    ap.add_argument(
        "--precision", default="fp32", choices=["fp32", "auto", "bf16"],
        help="the backbone's precision (default fp32: the committed tables were run in fp32; "
        "'auto' runs bf16 where the CPU has it natively, into '-bf16' run folders)",
    )  # fmt: skip
    ap.add_argument("--jobs", type=int, default=2, help="parallel runs, one core each")
    ap.add_argument(
        "--ray-address",
        help="run the runs as Ray tasks instead (as `avalanche-sets sweep --ray-address`)",
    )
    ap.add_argument("--out", help="results folder (default benchmarks/results/<artefact>)")
    ap.add_argument(
        "--aggregate-only", action="store_true",
        help="run nothing: write the tables from the runs already finished",
    )  # fmt: skip
    args = ap.parse_args()

    from avalanche_sets.defaults import FOLDER_SOURCES
    from avalanche_sets.methods import default_options
    from avalanche_sets.presets import PRESETS, RunConfig, resolve_preset
    from avalanche_sets.runs.experiment import run_settings
    from avalanche_sets.runs.folder import (
        record_identity,
        run_data,
        run_identity,
        run_precision,
    )
    from avalanche_sets.runs.report import (
        aggregate_results,
        find_results,
        refresh_run_table,
        write_table,
    )
    from avalanche_sets.runs.sweep import RunSpec, run_sweep

    methods, key, values, overs, stream = ARTEFACTS[args.artefact]
    reduced = []
    if args.methods:
        unknown = set(args.methods) - set(methods)
        if unknown:
            sys.exit(f"error: {sorted(unknown)} not in {args.artefact}'s methods {methods}")
        reduced.append(f"methods {args.methods} of {methods}")
        methods = args.methods
    if args.values:
        reduced.append(f"{key} in {args.values} of {values}")
        values = [type(values[0])(v) for v in args.values]
    name = artefact_name(args.artefact, args.source)
    if run_precision(resolve_preset(args.preset, precision=args.precision)) == "bf16":
        name += "_bf16"  # never overwrite the committed fp32 tables
    out = Path(args.out) if args.out else out_dir(name)
    runs = out.parent / "runs"

    def preset_for(shot: int, value) -> RunConfig:
        """The preset of one grid point: this shot and this value of the swept setting."""
        setting = {"n_shot": shot, "precision": args.precision}
        if args.source:
            setting["source"] = args.source
        if setting.get("source", PRESETS[args.preset]["source"]) in FOLDER_SOURCES:
            setting["root"] = args.root or str(SHARED_PACKS)
        elif args.root is not None:  # refused: the synthetic source reads no folder
            setting["root"] = args.root
        if key is not None:
            setting[key] = value
        if not args.aggregate_only and (args.jobs > 1 or args.ray_address):
            setting["threads"] = 1  # as the sweep runs them beside each other: one thread each
        return resolve_preset(args.preset, **setting)

    specs = []
    for shot in [] if args.aggregate_only else args.shots:
        for value in values:
            preset = preset_for(shot, value)
            for method in methods:
                for over in overs:
                    for seed in args.seeds:
                        specs.append(RunSpec(method, preset, seed, str(runs), stream, over))
    at_once = f"on Ray ({args.ray_address})" if args.ray_address else f"{args.jobs} at a time"
    print(f"{args.artefact}: {len(specs)} runs, {at_once} -> {runs}", flush=True)
    # the command line's sweep: one failing run does not stop the others (listed below)
    outcomes = run_sweep(
        specs, jobs=args.jobs, ray_address=args.ray_address, keep_going=True, on_done=_report,
        progress=False,
    )  # fmt: skip
    failed = [o.error for o in outcomes if o.status == "failed"]
    for f in failed:
        print(f"FAILED {f}", file=sys.stderr)

    # The table covers every finished run of the named grid (--seeds x --shots x methods x
    # values), also those of earlier invocations, not only the runs just made; rows of one
    # table therefore share their seeds unless some runs are missing (listed below). Every grid
    # point reads the same data: a run of it is one on data of this content, or one whose
    # record names no content (said below).
    data = run_data(preset_for(args.shots[0], values[0]))["content"]

    def ident_key(identity: dict) -> str | None:
        return grid_key(identity, data)

    def asked(method: str, preset: RunConfig, over: dict | None = None) -> dict:
        """The identity a run of this grid point records (explicit defaults dropped, the
        settings the method does not read left out)."""
        where = run_settings(method, preset, eval_stream=stream, strategy_overrides=over)
        return run_identity(method, preset, **where)

    grid = {
        ident_key(asked(method, preset_for(shot, value), over)):
        f"{method} {shot}-shot" + (f" {key}={value}" if key else "") + (f" {over}" if over else "")
        for shot in args.shots for value in values for method in methods for over in overs
    }  # fmt: skip
    found = [r for r in find_results([runs]) if r.seed in args.seeds]
    records = [r for r in found if ident_key(record_identity(r)) in grid]
    if not records:
        sys.exit("error: no finished run")
    unnamed = sum(record_identity(r)["data"] is None for r in records)
    if data is not None and unnamed:
        print(f"{unnamed} run(s) name no data content: read as runs of {data}", flush=True)
    # Each run's table.md is rewritten from its record when it differs (the table is derived
    # from the record, which is left as it is).
    stale = [r for r in records if refresh_run_table(r)]
    if stale:
        print(f"rewrote table.md of {len(stale)} run(s) from their result.json", flush=True)
    seeds = sorted({r.seed for r in records})

    by = ["method", "n_shot"] + ([key] if key else []) + (list(overs[0]) if overs[0] else [])
    # one table may hold runs made by several commits: one row each protocol, the code named
    rows = aggregate_results(records, by=by, pool_code=True)
    for row in rows:  # a record leaves out an option at its default: the table names its value
        for k in list(overs[0] or ()):
            if row[k] == "—":
                defaults = default_options(row["method"], preset_for(args.shots[0], values[0]))
                row[k] = str(defaults.get(k, "—"))
    order = {m: i for i, m in enumerate(methods)}  # the paper's row order
    rows.sort(key=lambda r: (order.get(r["method"], len(order)), *(str(r[k]) for k in by[1:])))
    prov = provenance(seeds=seeds)
    source = f", {args.source} source" if args.source else ""  # ``data`` stays the content
    md = header_md(f"{args.artefact} ({args.preset} preset{source}, {stream} classes)", prov)
    done = {(ident_key(record_identity(r)), r.seed) for r in records}
    missing = [
        f"{label} seed {seed}" for k, label in grid.items() for seed in args.seeds
        if (k, seed) not in done
    ]  # fmt: skip
    if reduced:
        md += "**Reduced grid:** " + "; ".join(reduced) + ".\n\n"
    if missing:
        md += f"**Not run yet ({len(missing)} grid points):** " + "; ".join(missing) + ".\n\n"
    if failed:
        md += "**Failed runs (not in the table):** " + "; ".join(failed) + ".\n\n"
    md += "## Ours next to the paper's\n\n"
    if args.artefact in PAPER:
        md += "The paper: its datasets, 84 px, 6,000 iterations per domain, 5 seeds.\n\n"
    md += comparison_md(args.artefact, records, row_order=methods) + "\n\n" + FOOTNOTE + "\n\n"
    if args.artefact in ("table2", "table3"):
        # ORDER over Joint (and the compute-matched Joint), from the runs of this preset
        # whichever table ran them (Table 2 has no Joint row of its own)
        joint_keys = {
            ident_key(asked(m, preset_for(shot, None)))
            for shot in args.shots for m in SHARE_OF_JOINT
        }  # fmt: skip
        joint_recs = [r for r in found if ident_key(record_identity(r)) in joint_keys]
        first = preset_for(args.shots[0], None)
        md += "## ORDER as a percentage of Joint\n\n"
        md += (
            "Mean accuracy over the seeds both runs have. The compute-matched Joint trains on "
            "as many tasks per iteration as ORDER does with its replayed ones (B + R = "
            f"{first.meta_batch} + {first.replay_batch}), for as many iterations.\n\n"
        )
        md += share_of_joint_md(joint_recs, args.shots) + "\n\n"
    md += "## All numbers (per-domain final accuracy, forgetting, BWT, seconds per run)\n\n"
    md += write_table(rows, out / "table") + "\n"
    (out / "README.md").write_text(md)
    write_json(
        out / "summary.json",
        {
            **prov,
            "artefact": args.artefact,
            "preset": args.preset,
            "reduced": reduced,
            "missing": missing,
            "runs": sorted(str(r.folder.relative_to(out.parent)) for r in records),
            "rows": rows,
        },
    )
    _plot(rows, by, out / "accuracy.png", args.artefact, key, records)
    print(md)


def _plot(rows, by, path: Path, title: str, key: str | None, records: list) -> None:
    """Lines over the swept setting (R, memory size) with the paired Δ to the reference
    beside them, a heatmap for λ × β, bars otherwise."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    def pct(r):
        return 100 * r["accuracy"], 0.0 if np.isnan(r["ci95"]) else 100 * r["ci95"]

    shots = sorted({int(r["n_shot"]) for r in rows})
    if key in ("n_ood", "mem_size") and len({r[key] for r in rows}) > 1:
        from benchmarks._paper import REFERENCE

        fig, axes = plt.subplots(len(shots), 2, figsize=(10, 3.8 * len(shots)), squeeze=False)
        xlabel = {"n_ood": "R (OOD images per episode)", "mem_size": "memory size"}[key]
        ref = ", ".join(f"{k} {v}" for k, v in REFERENCE[title].items())
        for (ax, dax), shot in zip(axes, shots):
            for method in dict.fromkeys(r["method"] for r in rows):
                pts, deltas = [], []
                for r in rows:
                    if r["method"] != method or int(r["n_shot"]) != shot:
                        continue
                    pts.append((float(r[key]), *pct(r)))
                    cell = [q for q in records if q.method == method
                            and int(q.preset["n_shot"]) == shot
                            and str(q.preset[key]) == str(r[key])]  # fmt: skip
                    got = paired_delta(title, cell, records)
                    if got is not None:
                        deltas.append((float(r[key]), 100 * got[0], 100 * got[1]))
                    elif cell and reference_of(title, cell[0], records) is cell[0]:
                        deltas.append((float(r[key]), 0.0, 0.0))  # the reference itself
                for a, data in ((ax, pts), (dax, deltas)):
                    if data:
                        x, y, e = zip(*sorted(data))
                        a.errorbar(x, y, yerr=e, marker="o", capsize=3, label=method)
            ax.set_ylabel("mean test accuracy (%)")
            ax.set_title(f"{title}, {shot}-shot: mean ± 95% CI (episodes)", fontsize=10)
            dax.axhline(0, color="grey", lw=0.8)
            dax.set_ylabel(f"paired Δ vs {ref} (points)")
            dax.set_title(f"{shot}-shot: paired Δ ± 95% CI (same test episodes)", fontsize=10)
            for a in (ax, dax):
                a.set_xlabel(xlabel)
                a.legend(fontsize=7)
    elif title == "lambda_beta":
        fig, axes = plt.subplots(1, len(shots), figsize=(5 * len(shots), 3.6), squeeze=False)
        for ax, shot in zip(axes[0], shots):
            sub = [r for r in rows if int(r["n_shot"]) == shot]
            lams = sorted({float(r["lam"]) for r in sub}, reverse=True)
            betas = sorted({float(r["beta"]) for r in sub})
            grid = np.full((len(lams), len(betas)), np.nan)
            for r in sub:
                grid[lams.index(float(r["lam"])), betas.index(float(r["beta"]))] = pct(r)[0]
            im = ax.imshow(grid, cmap="viridis")
            for i in range(len(lams)):
                for j in range(len(betas)):
                    if not np.isnan(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", color="w")
            ax.set_xticks(range(len(betas)), [f"{b:g}" for b in betas])
            ax.set_yticks(range(len(lams)), [f"{v:.0e}" for v in lams])
            ax.set_xlabel("β (OT weight)")
            ax.set_ylabel("λ (MI weight)")
            spread = np.nanmax(grid) - np.nanmin(grid)
            ax.set_title(
                f"ORDER, {shot}-shot, validation accuracy (%)\n"
                f"(colours span only {spread:.2f} points)",
                fontsize=10,
            )
            fig.colorbar(im, ax=ax)
    else:
        labels = [" ".join(str(r[k]) for k in by) for r in rows]
        acc, ci = (np.array(v) for v in zip(*map(pct, rows)))
        fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(rows)), 4))
        colours = ["#c44e52" if str(r["method"]).startswith("order") else "#4c72b0" for r in rows]
        ax.bar(range(len(rows)), acc, yerr=ci, color=colours, capsize=3)
        ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("mean test accuracy over domains (%)")
        ax.set_title(f"{title}: mean ± 95% CI (ORDER variants in red)")
        lo = max(0.0, float((acc - ci).min()) - 5)
        ax.set_ylim(lo, min(100.0, float((acc + ci).max()) + 3))
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
