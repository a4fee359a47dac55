"""Our log-domain Sinkhorn (``avalanche_sets.functional.ot.sinkhorn_log``) against POT's.

Why ORDER's ``solver="sinkhorn"`` does not call POT: on the same torch cost matrices (ORDER's
setting: squared distances of 64-d embeddings; 50, 120 (the order of what the ``cpu`` preset
feeds the OT loss: 2 replayed tasks x (5 or 25 support + about 50 detected-ID unlabeled
images)) or 250 (the cap G) points per side; uniform weights; ``eps`` 0.05 (ORDER's default) or 0.5, absolute), every
solver is timed (median of ``--reps`` calls taking turns with the other solvers, one thread)
and scored by

* ``marginal_l1``: ``|P 1 - a|_1 + |P^T 1 - b|_1`` (0 for a feasible plan);
* ``gap_to_reference``: relative difference of ``<P, C>`` to the converged entropic optimum
  (POT ``sinkhorn_epsilon_scaling`` run to ``stopThr=1e-10``);
* ``gap_to_exact``: relative difference of ``<P, C>`` to the unregularised LP (``ot.emd``).

Solvers: ours (eps-scaling warm start, then at most 200 sweeps: ORDER's default), POT
``ot.bregman.sinkhorn_log`` with 200 and 2,000 iterations (cold start; the log-domain solver
with a torch backend), POT ``ot.bregman.sinkhorn_epsilon_scaling`` with its defaults.

    python -m benchmarks.ot_sinkhorn [--reps 3] [--seeds 0 1]

Writes ``benchmarks/results/ot_sinkhorn/{results.json,results.md,ot_sinkhorn.png}``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import ot
import torch

from avalanche_sets.functional.distance import squared_euclidean
from avalanche_sets.functional.ot import sinkhorn_log
from benchmarks._common import header_md, out_dir, provenance, save_figure, write_json

SIZES = (50, 120, 250)
EPSILONS = (0.05, 0.5)
DIM = 64


def solvers(eps: float) -> dict:
    return {
        "ours (eps-scaling + 200)": lambda c, a, b: sinkhorn_log(c, a, b, eps=eps, n_iter=200),
        "POT sinkhorn_log 200": lambda c, a, b: ot.bregman.sinkhorn_log(
            a, b, c, eps, numItermax=200, stopThr=1e-9, warn=False
        ),
        "POT sinkhorn_log 2000": lambda c, a, b: ot.bregman.sinkhorn_log(
            a, b, c, eps, numItermax=2000, stopThr=1e-9, warn=False
        ),
        "POT sinkhorn_epsilon_scaling": lambda c, a, b: ot.bregman.sinkhorn_epsilon_scaling(
            a, b, c, eps, warn=False
        ),
    }


def problem(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g, dtype=torch.float64)
    y = torch.randn(n, DIM, generator=g, dtype=torch.float64) + 0.3
    a = torch.full((n,), 1.0 / n, dtype=torch.float64)
    return squared_euclidean(x, y, expand=True), a, a.clone()


def timed_interleaved(fns: dict, reps: int) -> dict:
    """``{name: (plan, median seconds)}``; the solvers take turns in every repetition, so a
    busy spell of the (shared) machine hits them all alike."""
    plans = {name: fn() for name, fn in fns.items()}  # warm-up, and the plan scored
    times: dict = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: (plans[name], statistics.median(times[name])) for name in fns}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ot_sinkhorn", description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for n in SIZES:
        for eps in EPSILONS:
            for seed in args.seeds:
                c, a, b = problem(n, seed)
                exact = float((ot.emd(a.numpy(), b.numpy(), c.numpy()) * c.numpy()).sum())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ref_plan = ot.bregman.sinkhorn_epsilon_scaling(
                        a, b, c, eps, numItermax=1000, stopThr=1e-10
                    )
                reference = float((ref_plan * c).sum())
                fns = {k: (lambda f=f, c=c, a=a, b=b: f(c, a, b)) for k, f in solvers(eps).items()}
                for name, (plan, secs) in timed_interleaved(fns, args.reps).items():
                    value = float((plan * c).sum())
                    rows.append(
                        {
                            "n": n,
                            "eps": eps,
                            "seed": seed,
                            "solver": name,
                            "seconds": secs,
                            "marginal_l1": float(
                                (plan.sum(1) - a).abs().sum() + (plan.sum(0) - b).abs().sum()
                            ),
                            "gap_to_reference": abs(value - reference) / reference,
                            "gap_to_exact": (value - exact) / exact,
                        }
                    )
                    r = rows[-1]
                    print(
                        f"n={n:<4} eps={eps:<5} seed={seed} {name:<30} {1e3 * secs:9.1f} ms  "
                        f"marg {r['marginal_l1']:.1e}  gap_ref {r['gap_to_reference']:.1e}",
                        flush=True,
                    )
    prov = provenance(seeds=args.seeds)
    out = out_dir("ot_sinkhorn")
    write_json(out / "results.json", {"provenance": prov, "rows": rows})

    md = header_md("Log-domain Sinkhorn: ours vs POT (torch backend, float64, one thread)", prov)
    md += (
        f"Squared-Euclidean costs of {DIM}-d Gaussian points (cost max ~250), uniform weights. "
        "Median seconds over the seeds (each the median of the repetitions); marginal error "
        "and gaps: worst seed.\n\n"
        "| n | eps | solver | ms | ms / ours | marginal L1 | gap to entropic optimum | "
        "gap to LP |\n|---:|---:|---|---:|---:|---:|---:|---:|\n"
    )
    summary = []
    for n in SIZES:
        for eps in EPSILONS:
            group = [r for r in rows if r["n"] == n and r["eps"] == eps]
            ours = statistics.median(r["seconds"] for r in group if r["solver"].startswith("ours"))
            for name in solvers(eps):
                rs = [r for r in group if r["solver"] == name]
                secs = statistics.median(r["seconds"] for r in rs)
                s = {
                    "n": n,
                    "eps": eps,
                    "solver": name,
                    "ms": 1e3 * secs,
                    "ratio": secs / ours,
                    "marginal_l1": max(r["marginal_l1"] for r in rs),
                    "gap_ref": max(r["gap_to_reference"] for r in rs),
                    "gap_exact": max(abs(r["gap_to_exact"]) for r in rs),
                }
                summary.append(s)
                md += (
                    f"| {n} | {eps} | {name} | {s['ms']:.1f} | {s['ratio']:.2f} | "
                    f"{s['marginal_l1']:.1e} | {s['gap_ref']:.1e} | {s['gap_exact']:.1e} |\n"
                )
    write_json(out / "summary.json", summary)
    (out / "results.md").write_text(md)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(EPSILONS), figsize=(5 * len(EPSILONS), 4), squeeze=False)
    for ax, eps in zip(axes[0], EPSILONS):
        for name in solvers(eps):
            pts = [s for s in summary if s["eps"] == eps and s["solver"] == name]
            ax.loglog(
                [s["ms"] for s in pts],
                [max(s["marginal_l1"], 1e-16) for s in pts],
                "o-",
                label=name,
            )
            for s in pts:
                ax.annotate(f"n={s['n']}", (s["ms"], max(s["marginal_l1"], 1e-16)), fontsize=7)
        ax.set_xlabel("milliseconds per solve (median)")
        ax.set_ylabel("marginal L1 error (worst seed)")
        ax.set_title(f"eps = {eps}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Log-domain Sinkhorn on torch tensors: ours vs POT")
    fig.tight_layout()
    save_figure(fig, out / "ot_sinkhorn.png", dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
