"""ANIL's and LST's inner loop on the long (converged) stream: probed, and a remedy chosen on the
validation stream.

In the converged regime ANIL collapses while it trains the fifth domain and LST forgets its
first domains (``benchmarks/results/table2_converged``). Both adapt a linear head by
``inner_steps`` steps of plain gradient descent with step ``inner_lr`` on the support
embeddings (:class:`~avalanche_sets.baselines.meta.ANILModel`). Gradient descent on a loss of
curvature ``λ`` is stable only while ``inner_lr · λ < 2``; for the cross-entropy of a linear head
near uniform predictions over ``N`` classes, ``λ ≈ λ_max(Ẽᵀ Ẽ / n) / N`` with ``Ẽ`` the
(weighted) embeddings with a bias column. Embeddings grow as training goes on, so a step that
is stable on the first domains can stop being so later.

Each variant below is one run of the stream (converged preset, seed 0), trained as in the
tables and scored on the **validation** classes, with a probe that records per training
iteration: the support embeddings' mean squared norm, the stability ratio
``ρ = inner_lr · λ`` of every inner loop (mean and max over the meta-batch), the inner loss
before and after adaptation (and the share of inner loops that end *above* where they
started), the outer (meta-)gradient norm and the training loss. The class default is the first
variant of each method; the chosen one is the variant with the highest mean validation accuracy
if its paired Δ to the default excludes 0 (95% CI), else the default — the rule of
``benchmarks/baseline_tuning.py`` (:func:`baseline_tuning.choose`).

Examples::

    python -m benchmarks.meta_stability --methods anil            # 3 runs, about 4 min each
    python -m benchmarks.meta_stability --methods lst             # 3 runs, about 10 min each
    python -m benchmarks.meta_stability --report-only

Runs (resumable per variant: a finished variant is read, not repeated) go to
``benchmarks/results/baseline_checks/meta_stability/runs/<method>/<variant>/`` (``record.json``,
``iterations.csv``); the report to ``benchmarks/results/baseline_checks/meta_stability/``
(``README.md``, ``summary.json``, ``chosen.json``, ``probe.png``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks._common import RESULTS, SHARED_PACKS, grad_norm, provenance, save_figure, write_json
from benchmarks.baseline_tuning import choose

__all__ = [
    "VARIANTS", "OUT", "stability_ratio", "InnerLoopProbe", "variant_name", "variant_folder",
    "run_variant",
]  # fmt: skip

OUT = RESULTS / "baseline_checks" / "meta_stability"

#: method -> variants; the first is the class default (spelled out), the others each change
#: one thing: no second derivatives through the inner loop, or a 3.3x smaller inner step.
VARIANTS: dict[str, list[dict]] = {
    m: [
        {"first_order": False, "inner_lr": 0.01},
        {"first_order": True, "inner_lr": 0.01},
        {"first_order": False, "inner_lr": 0.003},
    ]
    for m in ("anil", "lst")
}

#: the probe's per-iteration columns (iterations.csv)
COLUMNS = [
    "domain", "iteration", "sq_norm", "rho_mean", "rho_max", "inner_loss_before",
    "inner_loss_after", "inner_up_share", "meta_grad_norm", "loss",
]  # fmt: skip


def variant_name(options: dict) -> str:
    """Folder name of a variant: ``first_order-False_inner_lr-0.01``."""
    return "_".join(f"{k}-{v}" for k, v in sorted(options.items()))


def variant_folder(
    out: Path, method: str, options: dict, *, seed: int, eval_stream: str = "valid"
) -> Path:
    """Run folder of one variant under ``out``: ``runs/<method>/<variant>-<stream>-seed<seed>``."""
    return out / "runs" / method / f"{variant_name(options)}-{eval_stream}-seed{seed}"


def stability_ratio(
    emb: torch.Tensor, inner_lr: float, n_way: int, weights: torch.Tensor | None = None
) -> float:
    """``inner_lr · λ_max(Ẽᵀ W Ẽ / Σw) / n_way``: one gradient step's stability ratio.

    ``Ẽ`` is ``emb`` ``[n, d]`` with a column of ones (the head's bias), ``W`` the per-example
    weights (``None``: all 1). That is the largest curvature of the cross-entropy of a linear
    ``n_way``-class head at uniform predictions (the Hessian is ``(diag p − p pᵀ) ⊗ ẽ ẽᵀ``
    averaged over examples, and ``diag p − p pᵀ`` has largest eigenvalue ``1/N`` at ``p``
    uniform), times the step. Gradient descent is stable while it stays below 2.
    """
    e = emb.detach().float()
    e = torch.cat([e, torch.ones(len(e), 1)], dim=1)
    w = torch.ones(len(e)) if weights is None else weights.detach().float()
    scaled = e * (w / w.sum()).sqrt()[:, None]
    gram = scaled @ scaled.T
    return float(inner_lr * torch.linalg.eigvalsh(gram)[-1] / n_way)


class InnerLoopProbe:
    """Looks at every inner loop of an :class:`ANILModel` (or LST) during training.

    Wraps the model's ``adapt`` on the instance (the computation is unchanged: the wrapper only
    evaluates the loss before and after under ``no_grad``) and, as an Avalanche plugin
    (:meth:`plugin`), reads the meta-gradient norm after ``backward`` and writes one row per
    training iteration. Evaluation episodes are not recorded.
    """

    def __init__(self, model) -> None:
        from avalanche_sets.baselines.meta import weighted_cross_entropy

        self.model = model
        self.rows: list[dict] = []
        self._loops: list[tuple[float, float, float, float]] = []
        self._grad = float("nan")
        adapt = model.adapt

        def probed_adapt(emb, y, **kw):
            steps = model.current_inner_steps if kw.get("steps") is None else kw["steps"]
            record = model.training and steps > 0
            if record:
                w = kw.get("weights")
                with torch.no_grad():
                    start = kw["learner"] if kw.get("learner") is not None else model.clone_head()
                    before = float(weighted_cross_entropy(start(emb.detach()), y, w))
            learner = adapt(emb, y, **kw)
            if record:
                with torch.no_grad():
                    after = float(weighted_cross_entropy(learner(emb.detach()), y, w))
                sq = float(emb.detach().float().pow(2).sum(-1).mean())
                rho = stability_ratio(emb, model.inner_lr, model.n_way, w)
                self._loops.append((sq, rho, before, after))
            return learner

        model.adapt = probed_adapt

    def plugin(self):
        """The Avalanche plugin that closes one row per training iteration."""
        from avalanche.core import SupervisedPlugin

        probe = self

        class _Plugin(SupervisedPlugin):
            def after_backward(self, strategy, **kw):
                probe._grad = grad_norm(strategy.model)

            def after_training_iteration(self, strategy, **kw):
                probe.close_row(
                    strategy.experience.current_experience,
                    strategy.exp_iteration,
                    float(strategy.loss.detach()),
                )

            def before_eval(self, strategy, **kw):
                probe._loops.clear()

        return _Plugin()

    def close_row(self, domain: int, iteration: int, loss: float) -> None:
        loops = np.array(self._loops, dtype=float).reshape(-1, 4)
        self._loops.clear()
        self.rows.append(
            {
                "domain": domain,
                "iteration": iteration,
                "sq_norm": loops[:, 0].mean(),
                "rho_mean": loops[:, 1].mean(),
                "rho_max": loops[:, 1].max(),
                "inner_loss_before": loops[:, 2].mean(),
                "inner_loss_after": loops[:, 3].mean(),
                "inner_up_share": float((loops[:, 3] > loops[:, 2]).mean()),
                "meta_grad_norm": self._grad,
                "loss": loss,
            }
        )


def run_variant(
    method: str, options: dict, preset: dict, *, seed: int, out: Path, eval_stream: str = "valid"
) -> dict:
    """One probed run of ``method`` with ``options``; its record (read back when finished)."""
    from avalanche_sets.methods import build_strategy
    from avalanche_sets.runs.experiment import build_benchmark
    from avalanche_sets.runs.folder import portable_preset, run_precision
    from avalanche_sets.training import run_sets

    folder = variant_folder(out, method, options, seed=seed, eval_stream=eval_stream)
    if (folder / "record.json").is_file():
        return json.loads((folder / "record.json").read_text())
    torch.set_num_threads(preset.threads)
    bench = build_benchmark(preset, seed=seed)
    strategy = build_strategy(method, preset, seed=seed, **options)
    probe = InnerLoopProbe(strategy.model)
    strategy.plugins.append(probe.plugin())
    t0 = time.perf_counter()
    result = run_sets(
        strategy, bench, eval_stream=eval_stream, interim_episodes=preset.interim_test_episodes
    )
    seconds = time.perf_counter() - t0
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "iterations.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in probe.rows:
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})
    record = {
        "method": method, "seed": seed, "eval_stream": eval_stream, "options": options,
        # the precision as resolved here: what "auto" meant on this machine
        "preset": portable_preset(preset.replace(precision=run_precision(preset))), "domains": bench.domain_names, "seconds": seconds,
        "result": result.to_dict(), **provenance(seeds=[seed]),
    }  # fmt: skip
    write_json(folder / "record.json", record)
    print(
        f"done {method} {options}: {100 * result.mean_accuracy:.2f}% ({seconds:.0f} s)", flush=True
    )
    return record


def _iterations(folder: Path) -> dict[str, np.ndarray]:
    with open(folder / "iterations.csv") as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([float(r[k]) for r in rows]) for k in COLUMNS}


def _per_domain(it: dict[str, np.ndarray], n_domains: int) -> list[dict]:
    out = []
    for d in range(n_domains):
        m = it["domain"] == d
        out.append(
            {
                "sq_norm_median": float(np.median(it["sq_norm"][m])),
                "rho_max": float(it["rho_max"][m].max()),
                "inner_up_share": float(it["inner_up_share"][m].mean()),
                "meta_grad_max": float(it["meta_grad_norm"][m].max()),
                "meta_grad_median": float(np.median(it["meta_grad_norm"][m])),
                "loss_mean": float(it["loss"][m].mean()),
            }
        )
    return out


def report(out: Path, *, seed: int, eval_stream: str = "valid") -> dict:
    """Table, choice and plot from the finished variants under ``out/runs``."""
    from avalanche_sets.runs.report import paired_difference

    rows, curves, presets = [], {}, []
    for method, variants in VARIANTS.items():
        found = {}
        for opts in variants:
            folder = variant_folder(out, method, opts, seed=seed, eval_stream=eval_stream)
            if (folder / "record.json").is_file():
                found[variant_name(opts)] = (opts, json.loads((folder / "record.json").read_text()), folder)  # fmt: skip
        default = found.get(variant_name(variants[0]))
        for name, (opts, rec, folder) in found.items():
            it = _iterations(folder)
            presets.append(rec["preset"])
            curves[(method, name)] = it
            res = rec["result"]
            if default is None:
                d, c = float("nan"), float("nan")
            elif default[1] is rec:
                d, c = 0.0, 0.0
            else:
                d, c = (100 * x for x in paired_difference(rec, default[1]))
            rows.append(
                {
                    "method": method, "options": json.dumps(opts, sort_keys=True),
                    "default": opts == variants[0], "role": "grid",
                    "val_accuracy": 100 * res["mean_accuracy"], "val_ci95": 100 * res["mean_ci95"],
                    "delta_vs_default": d, "ci_vs_default": c,
                    "forgetting": None if res["average_forgetting"] is None else 100 * res["average_forgetting"],  # fmt: skip
                    "final_per_domain": [100 * a for a in res["final"]],
                    "seconds": rec["seconds"], "domains": rec["domains"],
                    "per_domain": _per_domain(it, len(rec["domains"])),
                }
            )  # fmt: skip
    if not rows:
        raise SystemExit(f"no finished variant under {out / 'runs'} yet")
    chosen = choose(rows)
    prov = provenance(seeds=[seed])
    summary = {
        **prov, "load_average": list(os.getloadavg()), "eval_stream": eval_stream,
        "selection": "highest mean validation accuracy, if its paired Δ to the class default "
        "excludes 0 (95% CI); else the class default",
        "preset": {k: presets[0][k] for k in ("n_shot", "tasks_per_domain", "meta_batch", "precision")},
        "chosen": chosen, "rows": rows,
    }  # fmt: skip
    write_json(out / "summary.json", summary)
    write_json(out / "chosen.json", {"converged": chosen})
    _plot(curves, rows, out / "probe.png")
    (out / "README.md").write_text(_markdown(summary))
    return summary


def _markdown(s: dict) -> str:
    m, p = s["machine"], s["preset"]
    rows = s["rows"]
    md = (
        "# ANIL's and LST's inner loop on the converged stream\n\n"
        f"- command: `{s['command']}`\n- date: {s['date']}\n"
        f"- machine: {m['cpu']} ({m['cores']} cores), torch {m['torch']}, one thread per run, "
        f"load average {', '.join(f'{x:.1f}' for x in s['load_average'])}\n"
        f"- preset: converged, {p['n_shot']}-shot, {p['tasks_per_domain'] // p['meta_batch']} "
        f"iterations per domain, {p['precision']}, seeds {s['seeds']}; scored on the "
        f"**{s['eval_stream']}** stream\n"
        f"- selection: {s['selection']}\n\n"
        "ρ = inner step × the inner loss's curvature at uniform predictions "
        "(`stability_ratio`); gradient descent is stable while ρ < 2. *up*: share of the "
        "training inner loops whose loss ends above where it started. Δ: paired per-episode "
        "difference to the class default on the same validation episodes (points, ± 95% CI).\n\n"
        "| method | options | validation accuracy | Δ vs default | forgetting | max ρ | "
        "up (last domain) | max meta-gradient norm (domain) | seconds | chosen |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    for r in rows:
        pd = r["per_domain"]
        worst = int(np.argmax([p["meta_grad_max"] for p in pd]))
        picked = "**yes**" if json.loads(r["options"]) == s["chosen"].get(r["method"]) else ""
        fg = "—" if r["forgetting"] is None else f"{r['forgetting']:.1f}"
        md += (
            f"| {r['method']} | `{r['options']}`{' (default)' if r['default'] else ''} | "
            f"{r['val_accuracy']:.2f} ± {r['val_ci95']:.2f} | "
            f"{r['delta_vs_default']:+.2f} ± {r['ci_vs_default']:.2f} | {fg} | "
            f"{max(p['rho_max'] for p in pd):.2f} | {100 * pd[-1]['inner_up_share']:.0f}% | "
            f"{pd[worst]['meta_grad_max']:.3g} ({worst + 1}) | {r['seconds']:.0f} | {picked} |\n"
        )
    md += "\nPer domain (median ‖e‖², max ρ, max meta-gradient norm; final validation accuracy %):\n\n"
    for r in rows:
        md += f"\n**{r['method']}** `{r['options']}`\n\n| | " + " | ".join(r["domains"]) + " |\n"
        md += "|---|" + "---:|" * len(r["domains"]) + "\n"
        pd = r["per_domain"]
        for label, vals in (
            ("median ‖e‖²", [f"{p['sq_norm_median']:.0f}" for p in pd]),
            ("max ρ", [f"{p['rho_max']:.2f}" for p in pd]),
            ("inner loops up", [f"{100 * p['inner_up_share']:.0f}%" for p in pd]),
            ("max meta-gradient", [f"{p['meta_grad_max']:.3g}" for p in pd]),
            ("final accuracy", [f"{a:.1f}" for a in r["final_per_domain"]]),
        ):
            md += f"| {label} | " + " | ".join(vals) + " |\n"
    md += f"\nChosen (`chosen.json`): `{json.dumps(s['chosen'])}`\n\n![probe](probe.png)\n"
    return md


def _plot(curves: dict, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(m for m, _ in curves))
    keys = [("meta_grad_norm", "meta-gradient norm", True), ("rho_max", "max ρ (stable < 2)", True),
            ("loss", "training query loss", False)]  # fmt: skip
    fig, axes = plt.subplots(len(keys), len(methods), figsize=(6 * len(methods), 8), squeeze=False)
    acc = {(r["method"], variant_name(json.loads(r["options"]))): r["val_accuracy"] for r in rows}
    for j, method in enumerate(methods):
        for (m, name), it in curves.items():
            if m != method:
                continue
            k = 25  # windows of 25 iterations: max for the spiky series, mean for the loss
            n = len(it["loss"]) // k * k
            x = np.arange(n // k) * k
            for i, (key, label, log) in enumerate(keys):
                v = it[key][:n].reshape(-1, k)
                v = v.mean(1) if key == "loss" else v.max(1)
                axes[i, j].plot(x, v, lw=1, label=f"{name} ({acc[(m, name)]:.1f}%)")
                axes[i, j].set_ylabel(label)
                if log:
                    axes[i, j].set_yscale("log")
            bounds = np.flatnonzero(np.diff(it["domain"])) + 1
        for i in range(len(keys)):
            for b in bounds:
                axes[i, j].axvline(b, color="grey", lw=0.6)
            axes[i, j].grid(alpha=0.3)
        axes[1, j].axhline(2, color="k", ls="--", lw=0.8)
        axes[0, j].set_title(f"{method}: probe per 25 training iterations")
        axes[0, j].legend(fontsize=7)
        axes[-1, j].set_xlabel("training iteration along the stream (grey: domain boundaries)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.meta_stability",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--methods", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--shot", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", default=str(SHARED_PACKS))
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not args.report_only:
        from avalanche_sets.methods import check_method
        from avalanche_sets.presets import resolve_preset

        preset = resolve_preset(
            "converged", n_shot=args.shot, root=args.root, precision=args.precision, threads=1
        )
        jobs = [(m, o) for m in args.methods for o in VARIANTS[m]]
        for m, o in jobs:  # every option checked before anything runs
            check_method(m, preset, o)
        for m, o in jobs:
            run_variant(m, o, preset, seed=args.seed, out=out)
    summary = report(out, seed=args.seed)
    print(json.dumps(summary["chosen"]))


if __name__ == "__main__":
    main()
