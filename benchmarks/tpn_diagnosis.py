"""Issue 11 §2: why TPN plateaus below ProtoNet on ``gtsrb`` 5-shot — the embedding or the
propagation?

TPN is trained end to end through label propagation, ProtoNet through prototype distances; on
``gtsrb`` (5-shot, R = 50) TPN's validation curve, with the paper's α = 0.99, levels off about 11
points below ProtoNet's (``baseline_checks/long_curves``). This probe separates the two parts. It
trains ProtoNet, TPN with α = 0.99 and TPN with today's default α = 0.9
on the domain alone exactly as the single-domain checks do (the ``cpu`` preset's episode and
backbone, fp32, seed 0, the same training episodes), then classifies the same 100 validation
episodes with both *heads* on every *backbone*:

* **prototypes** — the nearest support mean (ProtoNet's head);
* **propagation** — TPN's closed form ``F* = (I − αS)^{-1} Y`` on the kNN graph (k = 20) of the
  episode's support, query and unlabeled images (OOD included), with TPN's own learned σ on
  TPN's backbone, or one σ for every image set to the median pairwise RMS distance of the
  episode (``σ = median``; what a TPN with a constant σ would start from) on either backbone;
  α = 0.99 (TPN's), 0.9 and 0.5; and without the unlabeled images.

If propagation on ProtoNet's backbone matches its prototypes, the propagation is not what holds
TPN back and its embedding is; if prototypes on TPN's backbone fall as low as TPN, the same.

    python -m benchmarks.tpn_diagnosis            # ~4 CPU minutes
    python -m benchmarks.tpn_diagnosis --iters 80 --episodes 10   # a quick look

Writes ``benchmarks/results/baseline_checks/tpn_diagnosis/`` (``results.json``, ``README.md``,
``heads.png``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from avalanche_sets.baselines.tpn import (
    gaussian_affinity,
    knn_sparsify,
    label_propagation,
    normalize_graph,
)
from avalanche_sets.data.episodes import collate_episodes
from avalanche_sets.functional.distance import squared_euclidean
from avalanche_sets.metrics.stats import ci95, paired_difference
from avalanche_sets.models.backbone import embed_episodes
from benchmarks._common import RESULTS, SHARED_PACKS, header_md, provenance, save_figure, write_json
from benchmarks.baseline_checks import base_preset
from benchmarks.learning_curves import CurveSpec, build_learner, curve_preset, domain_experiences

OUT = RESULTS / "baseline_checks" / "tpn_diagnosis"
ALPHAS = (0.99, 0.9, 0.5)
REFERENCE = ("protonet", "prototypes")
#: ProtoNet, TPN with the paper's α (its default until this probe) and TPN as it is now (α 0.9)
METHODS = ("protonet", "tpn:alpha=0.99", "tpn")


def _prototype_logits(s: torch.Tensor, sy: torch.Tensor, q: torch.Tensor, n_way: int):
    protos = torch.stack([s[sy == c].mean(0) for c in range(n_way)])
    return -squared_euclidean(q, protos)


def _propagation_logits(s, sy, q, u, n_way, *, sigma, alpha: float, k: int = 20):
    emb = torch.cat([s, q, u]) if u is not None else torch.cat([s, q])
    if not isinstance(sigma, torch.Tensor):  # one σ for all: the median pairwise RMS distance
        d = (squared_euclidean(emb, emb) / emb.shape[-1]).clamp_min(0).sqrt()
        sigma = torch.full((len(emb),), float(d[d > 0].median()))
    graph = normalize_graph(knn_sparsify(gaussian_affinity(emb, sigma), k))
    y = torch.zeros(len(emb), n_way)
    y[torch.arange(len(s)), sy] = 1.0
    return label_propagation(graph, y, alpha)[len(s) : len(s) + len(q)]


@torch.no_grad()
def head_accuracies(strategy, episodes) -> dict[str, list[float]]:
    """Per-episode accuracy of every head on ``strategy``'s trained backbone (eval mode)."""
    model = strategy.model
    model.eval()
    own_sigma = getattr(model, "sigma", None)
    acc: dict[str, list[float]] = {}
    for ep in episodes:
        batch = collate_episodes([ep])[0].without_oracle()
        s, q, u = (
            t[0].float()
            for t in embed_episodes(
                model.backbone, [batch.support_x, batch.query_x, batch.unlabeled_x]
            )
        )
        sy, qy, n_way = batch.support_y[0].long(), batch.query_y[0].long(), batch.n_way
        logits = {"prototypes": _prototype_logits(s, sy, q, n_way)}
        for alpha in ALPHAS:
            logits[f"propagation, σ = median, α = {alpha}"] = _propagation_logits(
                s, sy, q, u, n_way, sigma=None, alpha=alpha
            )
        logits["propagation, σ = median, α = 0.99, no unlabeled"] = _propagation_logits(
            s, sy, q, None, n_way, sigma=None, alpha=0.99
        )
        if own_sigma is not None:  # TPN: its own learned σ and α, as it classifies
            emb = torch.cat([s, q, u])
            logits["propagation, learned σ, its own α (TPN itself)"] = _propagation_logits(
                s, sy, q, u, n_way, sigma=own_sigma(emb), alpha=model.alpha
            )
        for name, lg in logits.items():
            acc.setdefault(name, []).append(float((lg.argmax(-1) == qy).float().mean()))
    return acc


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = list(dict.fromkeys(r["head"] for r in rows))
    backbones = list(dict.fromkeys(r["backbone"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(backbones)
    for i, bb in enumerate(backbones):
        xs, ys, es = [], [], []
        for j, head in enumerate(heads):
            r = next((r for r in rows if r["backbone"] == bb and r["head"] == head), None)
            if r is not None:
                xs.append(j + (i - (len(backbones) - 1) / 2) * width)
                ys.append(r["accuracy"])
                es.append(r["ci95"])
        ax.bar(xs, ys, width, yerr=es, capsize=3, label=f"{bb}'s trained backbone")
    ax.set_xticks(range(len(heads)), [h.replace(", ", ",\n", 1) for h in heads], fontsize=7)
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title("gtsrb, 5-shot, R = 50: each head on each learner's backbone (same episodes)")
    ax.legend(fontsize=8)
    ax.set_ylim(0, 100)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.tpn_diagnosis", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--domain", default="gtsrb")
    ap.add_argument("--shot", type=int, default=5)
    ap.add_argument("--iters", type=int, default=640, help="training iterations per learner")
    ap.add_argument("--episodes", type=int, default=100, help="validation episodes")
    ap.add_argument("--root", default=str(SHARED_PACKS))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    prov = provenance(seeds=[0])
    prov["load_average_start"] = list(os.getloadavg())
    base = base_preset("packs", root=args.root)
    acc: dict[tuple[str, str], list[float]] = {}
    seconds = {}
    for method in METHODS:
        spec = CurveSpec(method, args.domain, args.shot, 0, "ood")
        preset = curve_preset(base, spec, iters=args.iters, val_episodes=args.episodes)
        train_exp, val_exp = domain_experiences(preset, seed=0, eval_seed=0)
        start = time.process_time()
        strategy = build_learner(method, preset, seed=0)
        strategy.train(train_exp, eval_streams=[])
        episodes = [val_exp.dataset[i] for i in range(len(val_exp.dataset))]
        for head, values in head_accuracies(strategy, episodes).items():
            acc[method, head] = values
        seconds[method] = time.process_time() - start
        print(f"{method}: trained and evaluated in {seconds[method]:.0f} CPU s", flush=True)
    ref = np.asarray(acc[REFERENCE])
    rows = []
    for (backbone, head), values in acc.items():
        a = np.asarray(values)
        delta, delta_ci = paired_difference(a, ref)
        rows.append({
            "backbone": backbone, "head": head, "accuracy": 100 * float(a.mean()),
            "ci95": 100 * ci95(a), "delta_vs_protonet": 100 * delta,
            "delta_ci95": 100 * delta_ci, "episode_acc": values,
        })  # fmt: skip
    write_json(out / "results.json", {**prov, "domain": args.domain, "shot": args.shot,
                                      "iters": args.iters, "cpu_seconds": seconds,
                                      "rows": rows})  # fmt: skip
    md = header_md(f"TPN diagnosis: heads × backbones on {args.domain}, {args.shot}-shot", prov)
    md += (
        f"Both learners trained {args.iters} iterations on `{args.domain}` alone (`cpu` "
        "preset episode and backbone, fp32, seed 0, R = 50); the same "
        f"{len(ref)} validation episodes for every cell. Δ: paired per episode against "
        "ProtoNet's own head on its own backbone, ± 95% CI over episodes.\n\n"
        "| backbone trained by | head | accuracy (%) | Δ vs ProtoNet (points) |\n"
        "|---|---|---:|---:|\n"
    )
    for r in rows:
        md += (
            f"| {r['backbone']} | {r['head']} | {r['accuracy']:.1f} ± {r['ci95']:.1f} | "
            f"{r['delta_vs_protonet']:+.1f} ± {r['delta_ci95']:.1f} |\n"
        )
    md += "\n![heads × backbones](heads.png)\n"
    (out / "README.md").write_text(md)
    _plot(rows, out / "heads.png")
    print(md)


if __name__ == "__main__":
    main()
