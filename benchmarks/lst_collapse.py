"""Why did LST collapse on the cpu stream (seed 0, 1-shot)? The run again, with a probe inside.

Re-runs ``lst`` on the sets-mini stream exactly as the committed run
``benchmarks/results/runs/lst/packs-o1-5w1s-R50-seed0`` (``cpu`` preset, fp32, seed 0; the
accuracy matrix is compared with the committed one) and records, for every training iteration
and every evaluation batch, what LST's self-training does inside each episode. The learner never
sees the OOD ground truth; the probe reads it from the episode's oracle, beside the learner:

* per self-training stage: the share of the cherry-picked pseudo-labelled images that are OOD
  (and from which OOD source), the accuracy of the pseudo-labels of the picked in-distribution
  images, the mean soft weight (SWN) of the picked OOD and ID images;
* the size of the embeddings (mean norm of the support and unlabeled embeddings), the largest
  query logit of the final head, the query accuracy, the loss terms.

Examples::

    # the committed run again (inner lr 0.1, the default then), probed
    python -m benchmarks.lst_collapse --root ../shared/data/sets-mini
    # gtsrb alone, 5-shot: the collapse within one domain
    python -m benchmarks.lst_collapse --domain gtsrb --shot 5 --iters 400
    # the same stream with the inner-loop step LST's code uses (the default since)
    python -m benchmarks.lst_collapse --inner-lr 0.01 --out benchmarks/results/baseline_checks/lst_collapse/fixed

Writes ``benchmarks/results/baseline_checks/lst_collapse/``: ``iterations.csv`` (one row per
training iteration), ``phases.csv`` (per domain: training means and, after each domain, the
evaluation of every domain's test episodes), ``summary.json``, ``README.md``, ``probe.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from avalanche_sets.baselines.meta import weighted_cross_entropy
from benchmarks._common import RESULTS, SHARED_PACKS, grad_norm, provenance, save_figure, write_json

__all__ = ["LSTProbe", "OUT", "COMMITTED"]

OUT = RESULTS / "baseline_checks" / "lst_collapse"
COMMITTED = RESULTS / "runs" / "lst"


class LSTProbe:
    """Records what an :class:`~avalanche_sets.baselines.lst.LSTModel` does per episode.

    Wraps the model's ``episode_logits``, ``cherry_pick`` and ``soft_weights`` on the instance
    (the computation is unchanged: the wrappers only look at inputs and outputs) and reads the
    oracle of the current meta-batch, set by :meth:`set_batch` before each forward pass.
    """

    def __init__(self, model, ood_names: Sequence[str]) -> None:
        self.model = model
        self.ood_names = list(ood_names)
        self.oracle = None
        self.episode = -1
        self.stage = 0
        self.records: list[dict] = []  # one per episode (and stage entries inside)
        self._wrap()

    def set_batch(self, batch) -> None:
        self.oracle = batch.oracle
        self.episode = -1

    def _wrap(self) -> None:
        m = self.model
        logits_fn, pick_fn, weights_fn = m.episode_logits, m.cherry_pick, m.soft_weights

        def episode_logits(s, sy, q, u):
            self.episode += 1
            self.stage = 0
            rec = {
                "support_norm": float(s.detach().norm(dim=-1).mean()),
                "unlabeled_norm": float(u.detach().norm(dim=-1).mean()),
                "stages": [],
            }
            self.records.append(rec)
            out = logits_fn(s, sy, q, u)
            rec["max_logit"] = float(out.detach().abs().max())
            rec["pred"] = out.detach().argmax(-1).cpu()
            return out

        def cherry_pick(learner, u):
            idx, ry = pick_fn(learner, u)
            o, b = self.oracle, self.episode
            is_ood = o.unlabeled_is_ood[b][idx].cpu()
            cls = o.unlabeled_class[b][idx].cpu()
            ids = o.class_ids[b].cpu()
            source = o.unlabeled_source[b][idx].cpu()
            true = torch.tensor([int((ids == c).nonzero()[0]) if not ood and (ids == c).any()
                                 else -1 for c, ood in zip(cls, is_ood)])  # fmt: skip
            self.records[-1]["stages"].append(
                {"is_ood": is_ood, "source": source, "pseudo": ry.cpu(), "true": true}
            )
            return idx, ry

        def soft_weights(emb, pseudo, protos):
            w = weights_fn(emb, pseudo, protos)
            self.records[-1]["stages"][-1]["w"] = w.detach().cpu()
            return w

        adapt_fn = m.adapt

        def adapt(emb, y, **kw):
            learner = adapt_fn(emb, y, **kw)
            if self.records and kw.get("steps", None) != 0:
                with torch.no_grad():
                    w = kw.get("weights")
                    loss = weighted_cross_entropy(learner(emb.detach()), y, w)
                self.records[-1].setdefault("inner_loss", []).append(float(loss))
            return learner

        m.episode_logits, m.cherry_pick, m.soft_weights = episode_logits, cherry_pick, soft_weights
        m.adapt = adapt

    def take(self, query_y: torch.Tensor | None = None) -> dict:
        """Summary of the episodes recorded since the last call (means over episodes)."""
        recs, self.records = self.records, []
        out: dict[str, float] = {}
        if not recs:
            return out
        for k in ("support_norm", "unlabeled_norm", "max_logit"):
            out[k] = float(np.mean([r[k] for r in recs]))
        # the loss each inner loop ends at, on the data it adapted to (largest of the episode)
        inner = [max(r["inner_loss"]) for r in recs if r.get("inner_loss")]
        if inner:
            out["inner_loss_end_max"] = float(np.mean(inner))
        if query_y is not None:
            pred = torch.cat([r["pred"] for r in recs])
            out["query_acc"] = float((pred == query_y.cpu()).float().mean())
        n_stages = max(len(r["stages"]) for r in recs)
        for st in range(n_stages):
            parts = [r["stages"][st] for r in recs if len(r["stages"]) > st]
            is_ood = torch.cat([p["is_ood"] for p in parts])
            src = torch.cat([p["source"] for p in parts])
            pseudo = torch.cat([p["pseudo"] for p in parts])
            true = torch.cat([p["true"] for p in parts])
            w = torch.cat([p["w"] for p in parts])
            idm = ~is_ood
            out[f"s{st}_picked"] = float(len(is_ood) / len(parts))
            out[f"s{st}_ood_share"] = float(is_ood.float().mean())
            for i, name in enumerate(self.ood_names):
                out[f"s{st}_ood_{name}"] = float((src == i).float().mean())
            out[f"s{st}_pl_acc_id"] = float((pseudo[idm] == true[idm]).float().mean()) if idm.any() else float("nan")  # fmt: skip
            out[f"s{st}_pl_acc_all"] = float((pseudo == true).float().mean())
            out[f"s{st}_w_ood"] = float(w[is_ood].mean()) if is_ood.any() else float("nan")
            out[f"s{st}_w_id"] = float(w[idm].mean()) if idm.any() else float("nan")
        return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.lst_collapse", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--root", default=str(SHARED_PACKS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shot", type=int, default=1)
    ap.add_argument("--out", help=f"default {OUT}[/single_<domain>_<shot>shot]")
    ap.add_argument("--domain", help="train on this one domain alone (default: the stream)")
    ap.add_argument("--iters", type=int, default=400, help="with --domain: iterations")
    ap.add_argument("--inner-lr", type=float, default=0.1,
                    help="LST's inner-loop step (default 0.1: the committed runs' value, the "
                    "class default before these checks; 0.01 is the default now)")  # fmt: skip
    args = ap.parse_args(argv)
    from avalanche.core import SupervisedPlugin

    from avalanche_sets.methods import build_strategy
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs.experiment import build_benchmark
    from avalanche_sets.training import run_sets

    torch.set_num_threads(1)
    prov = provenance(seeds=[args.seed])
    single = {}
    if args.domain:  # one domain, no intermediate evaluation
        single = dict(domains=[args.domain], tasks_per_domain=args.iters * 2, n_test_episodes=50)
    preset = resolve_preset(
        "cpu", n_shot=args.shot, root=args.root, precision="fp32", threads=1, **single
    )
    bench = build_benchmark(preset, seed=args.seed)
    strategy = build_strategy("lst", preset, seed=args.seed, inner_lr=args.inner_lr)
    probe = LSTProbe(strategy.model, [d.name for d in bench.ood_sources])
    rows: list[dict] = []
    evals: list[dict] = []
    state = {"trained": -1}

    class _Plug(SupervisedPlugin):
        def before_forward(self, s, **kw):
            probe.set_batch(s.mb_x)

        def before_eval_forward(self, s, **kw):
            probe.set_batch(s.mb_x)

        def before_training_exp(self, s, **kw):
            state["trained"] = s.experience.current_experience

        def after_backward(self, s, **kw):
            state["grad_norm"] = grad_norm(s.model)

        def after_training_iteration(self, s, **kw):
            row = {"domain": s.experience.current_experience, "iteration": s.exp_iteration}
            row["grad_norm"] = state.get("grad_norm")
            row.update(probe.take(s.mb_y))
            row.update({f"loss_{k}": float(v) for k, v in s.loss_terms.items()})
            row["loss_total"] = float(s.loss.detach())
            rows.append(row)

        def after_eval_iteration(self, s, **kw):
            row = {"after_domain": state["trained"], "eval_domain": s.experience.current_experience}
            row.update(probe.take(s.mb_y))
            if not state.get("counterfactual"):
                evals.append(row)

    plug = _Plug()
    strategy.plugins.append(plug)
    result = run_sets(strategy, bench, interim_episodes=preset.interim_test_episodes)
    state["counterfactual"] = True  # the probe keeps following batches, records nothing more
    counterfactual = _counterfactual(strategy, bench)
    strategy.plugins.remove(plug)
    out = (
        Path(args.out)
        if args.out
        else (OUT / f"single_{args.domain}_{args.shot}shot" if args.domain else OUT)
    )
    out.mkdir(parents=True, exist_ok=True)
    domains = bench.domain_names
    phases = _phases(rows, evals, domains)
    for name, data in (("iterations.csv", rows), ("phases.csv", phases)):
        keys = list(dict.fromkeys(k for r in data for k in r))
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(data)
    committed = COMMITTED / f"packs-o1-5w{args.shot}s-R50-seed{args.seed}" / "result.json"
    old = None
    if committed.is_file() and not args.domain:
        old = json.loads(committed.read_text())["result"]["matrix"]
    summary = {
        **prov,
        "load_average": list(os.getloadavg()),
        "preset": f"cpu, fp32, LST inner lr {args.inner_lr:g}"
        + (f", {args.domain} alone, {args.iters} iterations" if args.domain else ""),
        "shot": args.shot,
        "domains": domains,
        "ood_sources": probe.ood_names,
        "matrix": result.matrix,
        "committed_matrix": old,
        "max_abs_difference_to_committed": None if old is None else float(
            np.max(np.abs(np.array(result.matrix) - np.array(old)))),
        "phases": phases,
        "counterfactual": counterfactual,
    }  # fmt: skip
    write_json(out / "summary.json", summary)
    _plot(rows, domains, probe.ood_names, out / "probe.png")
    _readme(out, summary)
    print(f"written to {out}")


def _counterfactual(strategy, bench) -> list[dict]:
    """The final model's test accuracy per domain, evaluated as trained and with one thing
    changed at evaluation only: BatchNorm normalising with the episode's own statistics (as in
    training) instead of the running averages, or a 10x smaller inner-loop step."""
    from torch import nn

    from avalanche_sets.training.runner import episode_accuracies

    model = strategy.model
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    base_lr = model.inner_lr
    out = []

    def evaluate(name: str) -> None:
        accs = episode_accuracies(strategy, bench.test_stream)
        out.append({"evaluation": name, "per_domain": [float(a.mean()) for a in accs],
                    "mean": float(np.mean([a.mean() for a in accs]))})  # fmt: skip

    evaluate(f"as trained (running BatchNorm statistics, inner lr {base_lr:g})")
    model.inner_lr = base_lr / 10
    evaluate(f"inner lr {base_lr / 10:g} at evaluation")
    model.inner_lr = base_lr
    saved = [(m.momentum, m.track_running_stats) for m in bns]
    originals = {id(m): m.train for m in bns}
    for m in bns:  # batch statistics, running averages left untouched
        m.track_running_stats = False
        m.train = lambda mode=True, m=m: nn.Module.train(m, True)  # stay in batch-stat mode
        nn.Module.train(m, True)
    try:
        evaluate("BatchNorm with the episode's own statistics at evaluation")
    finally:
        for m, (mom, track) in zip(bns, saved):
            m.momentum, m.track_running_stats = mom, track
            m.train = originals[id(m)]
            nn.Module.train(m, False)
    return out


def _phases(rows: list[dict], evals: list[dict], domains: list[str]) -> list[dict]:
    """Training means per domain, and per (after domain, evaluated domain) the eval means."""
    out = []
    by = defaultdict(list)
    for r in rows:
        by[("train", r["domain"], r["domain"])].append(r)
    for r in evals:
        by[("eval", r["after_domain"], r["eval_domain"])].append(r)
    for (phase, after, dom), rs in by.items():
        keys = [k for k in rs[0] if k not in ("domain", "iteration", "after_domain", "eval_domain")]
        row = {"phase": phase, "after_domain": domains[after], "domain": domains[dom]}
        row.update({k: float(np.nanmean([r.get(k, np.nan) for r in rs])) for k in keys})
        out.append(row)
    return out


def _plot(rows: list[dict], domains: list[str], ood: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(rows))
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)

    def smooth(v, k=5):
        v = np.asarray(v, dtype=float)
        return np.convolve(np.nan_to_num(v), np.ones(k) / k, mode="same")

    def col(k):
        return [r.get(k, np.nan) for r in rows]

    axes[0].plot(x, smooth(col("query_acc")), label="training query accuracy")
    axes[0].plot(x, smooth(col("s0_pl_acc_all")), label="stage-1 pseudo-label accuracy (all)")
    axes[0].plot(x, smooth(col("s1_pl_acc_all")), label="stage-2 pseudo-label accuracy (all)")
    axes[1].plot(x, smooth(col("s0_ood_share")), label="stage 1: OOD share of picked", color="k")
    for name in ood:
        axes[1].plot(x, smooth(col(f"s0_ood_{name}")), "--", label=f"  from {name}")
    axes[2].plot(x, smooth(col("s0_w_ood")), label="SWN weight, picked OOD")
    axes[2].plot(x, smooth(col("s0_w_id")), label="SWN weight, picked ID")
    axes[3].plot(x, smooth(col("support_norm")), label="mean ‖support embedding‖")
    axes[3].plot(x, smooth(col("max_logit")), label="max |query logit|")
    axes[3].plot(x, smooth(col("inner_loss_end_max")), label="loss at the end of the inner loops")
    axes[3].plot(x, smooth(col("grad_norm")), label="outer gradient norm")
    axes[3].set_yscale("log")
    n = max(r["iteration"] for r in rows) + 1
    for ax in axes:  # domain boundaries (none on a single domain)
        for d in range(1, len(domains)):
            ax.axvline(d * n, color="grey", lw=0.6)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    for d, name in enumerate(domains):
        axes[0].text(d * n + 1, 1.02, name, fontsize=7)
    axes[0].set_ylim(0, 1.1)
    axes[-1].set_xlabel("training iteration along the stream (5-iteration moving mean)")
    fig.suptitle("LST on the cpu stream: what its self-training picks (probe, oracle beside)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _readme(out: Path, s: dict) -> None:
    m = s["machine"]
    md = (
        "# LST's collapse on the cpu stream, probed\n\n"
        f"- command: `{s['command']}`\n- date: {s['date']}\n"
        f"- machine: {m['cpu']} ({m['cores']} cores), torch {m['torch']}, one thread, load "
        f"average {', '.join(f'{x:.1f}' for x in s['load_average'])}\n"
        f"- preset: {s['preset']}, {s['shot']}-shot, seeds {s['seeds']}\n"
        f"- largest |difference| to the committed run's accuracy matrix: "
        f"{s['max_abs_difference_to_committed']}\n\n"
        "Accuracy matrix (test episodes, %; row = after training domain):\n\n"
        "| after \\ on | "
        + " | ".join(s["domains"])
        + " |\n|---|"
        + "---:|" * len(s["domains"])
        + "\n"
    )
    for d, row in zip(s["domains"], s["matrix"]):
        md += f"| {d} | " + " | ".join(f"{100 * v:.1f}" for v in row) + " |\n"
    keys = ["query_acc", "s0_ood_share", *[f"s0_ood_{n}" for n in s["ood_sources"]],
            "s0_pl_acc_id", "s0_pl_acc_all", "s1_pl_acc_all", "s0_w_ood", "s0_w_id",
            "support_norm", "max_logit", "inner_loss_end_max", "grad_norm"]  # fmt: skip
    md += (
        "\nTraining, mean over the domain's iterations, and evaluation of each domain right "
        "after its own training (stage 1 = the first self-training stage):\n\n"
        "| phase | domain | " + " | ".join(keys) + " |\n|---|---|" + "---:|" * len(keys) + "\n"
    )
    for p in s["phases"]:
        if p["phase"] == "train" or p["after_domain"] == p["domain"]:
            md += f"| {p['phase']} | {p['domain']} | " + " | ".join(
                f"{p.get(k, float('nan')):.3g}" for k in keys) + " |\n"  # fmt: skip
    if s.get("counterfactual"):
        md += (
            "\nThe final model evaluated again on the same test episodes, one thing changed at "
            "evaluation only (accuracy %, per domain and mean):\n\n| evaluation | "
            + " | ".join(s["domains"])
            + " | mean |\n|---|"
            + "---:|" * (len(s["domains"]) + 1)
            + "\n"
        )
        for c in s["counterfactual"]:
            md += f"| {c['evaluation']} | " + " | ".join(
                f"{100 * v:.1f}" for v in c["per_domain"]) + f" | {100 * c['mean']:.1f} |\n"  # fmt: skip
    md += "\n![probe](probe.png)\n"
    (out / "README.md").write_text(md)


if __name__ == "__main__":
    main()
