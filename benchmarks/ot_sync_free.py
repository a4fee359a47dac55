"""The sync-free Sinkhorn of ORDER's OT term (``solver="sinkhorn"``, ``tol=None``) against the
exact plan, at the paper's shapes: what sweeps and ε its defaults need.

A replayed meta-batch gives the OT loss 2 tasks x (5 support + 100 unlabeled) rows of 256-d
features, about 70% of the unlabeled rows valid (``U_id``), the rest masked. Two feature
sources:

* ``gaussian``: stored features of 5 class clusters per task (centres N(0, 1) per coordinate,
  spread 0.5, then a ReLU), current = stored + N(0, 0.5²) per coordinate (a drift as
  large as the clusters' spread, so the exact plan is not the identity);
* ``backbone``: the paper backbone (:class:`~avalanche_sets.models.ConvBackbone`, 5 blocks of
  64 filters at 84 px, 256-d, random init, eval mode) on smooth random images (6x6 uniform
  noise upsampled bilinearly); stored = its embeddings, current = the embeddings after every
  weight moved by 20% of its own scale (Gaussian noise), as training moves a network between
  storage and replay.

For each (ε, annealing stages, sweeps at ε) the loss and its gradient w.r.t. the current
features are compared with the exact plan's (``solver="exact"``): relative value gap and
relative L2 error of the gradient, worst over the seeds; time per call on one CPU thread
(median). The aten ops per sweep are counted with a dispatch mode (each is one kernel launch
on a GPU).

    python -m benchmarks.ot_sync_free [--seeds 0 1 2] [--reps 3]

Writes ``benchmarks/results/ot_sync_free/{results.json,results.md}``.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from avalanche_sets.functional.ot import ot_loss, sinkhorn_log
from avalanche_sets.models.backbone import ConvBackbone
from benchmarks._common import header_md, out_dir, provenance, write_json

TASKS, SUPPORT, UNLABELED, ID_SHARE = 2, 5, 100, 0.7
EPSILONS = (0.01, 0.05, 0.2)
SWEEPS = (10, 50, 200)
STAGES = (0, 12)


def _mask(g: torch.Generator) -> torch.Tensor:
    mask = torch.ones(TASKS, SUPPORT + UNLABELED, dtype=torch.bool)
    mask[:, SUPPORT:] = torch.rand(TASKS, UNLABELED, generator=g) < ID_SHARE
    return mask.flatten()


def gaussian(seed: int):
    g = torch.Generator().manual_seed(seed)
    rows, d = SUPPORT + UNLABELED, 256
    centres = torch.randn(TASKS, 5, d, generator=g)
    labels = torch.randint(0, 5, (TASKS, rows), generator=g)
    stored = (centres.gather(1, labels[..., None].expand(-1, -1, d))
              + 0.5 * torch.randn(TASKS, rows, d, generator=g)).relu()  # fmt: skip
    current = stored + 0.5 * torch.randn(TASKS, rows, d, generator=g)
    return current.flatten(0, 1), stored.flatten(0, 1), _mask(g)


def backbone(seed: int):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = ConvBackbone(n_blocks=5, width=64, image_size=84).eval()
    n = TASKS * (SUPPORT + UNLABELED)
    images = F.interpolate(torch.rand(n, 3, 6, 6, generator=g), size=84, mode="bilinear")
    with torch.no_grad():
        stored = net(images)
        for p in net.parameters():
            p.add_(0.2 * p.abs().mean() * torch.randn(p.shape, generator=g))
        current = net(images)
    return current, stored, _mask(g)


SOURCES = {"gaussian": gaussian, "backbone": backbone}


def loss_and_grad(current, stored, mask, **kw):
    x = current.clone().requires_grad_(True)
    value = ot_loss(x, stored, mask=mask, max_points=250, refuse_non_finite=False, **kw)
    (grad,) = torch.autograd.grad(value, x)
    return float(value.detach()), grad


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def ops_per_sweep(n: int = 210) -> tuple[float, dict]:
    """aten ops of one sweep: the difference between 110 and 10 sweeps, divided by 100."""
    c = torch.rand(n, n, dtype=torch.float64)
    a = torch.full((n,), 1.0 / n, dtype=torch.float64)
    counts = []
    for sweeps in (10, 110):
        with _CountOps() as mode:
            sinkhorn_log(c, a, a, eps=0.05, n_iter=sweeps, tol=None)
        counts.append(mode.ops)
    diff = counts[1] - counts[0]
    return sum(diff.values()) / 100, {k: v / 100 for k, v in diff.items()}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ot_sync_free", description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for source, make in SOURCES.items():
        for seed in args.seeds:
            current, stored, mask = make(seed)
            v_ex, g_ex = loss_and_grad(current, stored, mask, solver="exact")
            t_ex = []
            for _ in range(args.reps):
                t = time.perf_counter()
                loss_and_grad(current, stored, mask, solver="exact")
                t_ex.append(time.perf_counter() - t)
            cost = ((current - stored) ** 2).sum(1)
            rows.append({"source": source, "seed": seed, "solver": "exact", "value": v_ex,
                         "seconds": statistics.median(t_ex),
                         "diag_cost_mean": float(cost[mask].mean())})  # fmt: skip
            for eps in EPSILONS:
                for stages in STAGES:
                    for sweeps in SWEEPS:
                        kw = dict(solver="sinkhorn", eps=eps, n_iter=sweeps, tol=None)

                        def run(kw=kw, stages=stages, points=(current, stored, mask)):
                            import avalanche_sets.functional.ot as ot_mod

                            orig = ot_mod.sinkhorn_log
                            ot_mod.sinkhorn_log = lambda *a, **k: orig(*a, **k, eps_stages=stages)
                            try:
                                return loss_and_grad(*points, **kw)
                            finally:
                                ot_mod.sinkhorn_log = orig

                        value, grad = run()
                        times = []
                        for _ in range(args.reps):
                            t = time.perf_counter()
                            run()
                            times.append(time.perf_counter() - t)
                        rows.append({
                            "source": source, "seed": seed, "solver": "sinkhorn", "eps": eps,
                            "stages": stages, "sweeps": sweeps, "value": value,
                            "value_gap": abs(value - v_ex) / v_ex,
                            "grad_error": float((grad - g_ex).norm() / g_ex.norm()),
                            "seconds": statistics.median(times),
                        })  # fmt: skip
                        r = rows[-1]
                        print(f"{source:8} seed={seed} eps={eps:<5} stages={stages:<2} "
                              f"sweeps={sweeps:<4} gap {r['value_gap']:.2e} grad "
                              f"{r['grad_error']:.2e} {1e3 * r['seconds']:.1f} ms", flush=True)  # fmt: skip
    total, by_op = ops_per_sweep()
    prov = provenance(seeds=args.seeds)
    out = out_dir("ot_sync_free")
    write_json(out / "results.json", {"provenance": prov, "ops_per_sweep": total,
                                      "ops_per_sweep_by_name": by_op, "rows": rows})  # fmt: skip
    md = header_md("Sync-free Sinkhorn vs the exact plan at ORDER's paper shapes", prov)
    exact = {s: [r for r in rows if r["solver"] == "exact" and r["source"] == s] for s in SOURCES}
    md += (
        f"{TASKS} tasks x ({SUPPORT} + {UNLABELED}) rows of 256-d features, ~{ID_SHARE:.0%} of "
        "the unlabeled rows valid; loss and gradient w.r.t. the current features against the "
        "exact plan's (worst seed); ms: one CPU thread, loss + backward, median.\n\n"
        f"aten ops per sweep: {total:g} ({', '.join(f'{k} {v:g}' for k, v in by_op.items())}).\n\n"
    )
    for s in SOURCES:
        md += (f"- {s}: exact loss {statistics.median(r['value'] for r in exact[s]):.4g}, "
               f"mean squared drift of a valid row "
               f"{statistics.median(r['diag_cost_mean'] for r in exact[s]):.4g}, exact "
               f"{1e3 * statistics.median(r['seconds'] for r in exact[s]):.1f} ms\n")  # fmt: skip
    md += ("\n| features | eps | stages | sweeps | value gap | gradient error | ms |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n")  # fmt: skip
    for s in SOURCES:
        for eps in EPSILONS:
            for stages in STAGES:
                for sweeps in SWEEPS:
                    rs = [r for r in rows if r["solver"] == "sinkhorn" and r["source"] == s
                          and r["eps"] == eps and r["stages"] == stages and r["sweeps"] == sweeps]  # fmt: skip
                    md += (f"| {s} | {eps} | {stages} | {sweeps} | "
                           f"{max(r['value_gap'] for r in rs):.2e} | "
                           f"{max(r['grad_error'] for r in rs):.2e} | "
                           f"{1e3 * statistics.median(r['seconds'] for r in rs):.1f} |\n")  # fmt: skip
    (out / "results.md").write_text(md)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
