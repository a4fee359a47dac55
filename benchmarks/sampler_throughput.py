"""Episodes per second of the sampler and memory of the cached domains.

Setting: 5-way 5-shot, Q = 10, Z = 10, R = 50, 32 px, one thread. Target: >= 1,000 episodes/s.
Measures the synthetic domains and, when present, the real packs in ../shared/data/sets-mini.

    python -m benchmarks.sampler_throughput [--episodes 2000]
"""

from __future__ import annotations

import argparse
import time

import torch

from avalanche_sets.data import EpisodeConfig, EpisodeSampler, collate_episodes
from avalanche_sets.data.benchmark import load_source
from benchmarks._common import SHARED_PACKS, header_md, out_dir, provenance, save_figure, write_json

CONFIG = EpisodeConfig(n_way=5, n_shot=5, n_query=10, n_unlabeled=10, n_ood=50)


def measure(domains, oods, n: int) -> list[dict]:
    rows = []
    for dom in domains:
        sampler = EpisodeSampler(dom, oods, config=CONFIG, seed=0, small_classes="drop")
        sampler.sample(0)  # warm-up
        t = time.perf_counter()
        for i in range(n):
            sampler.sample(i)
        eps = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(0, n, 2):
            collate_episodes([sampler.sample(i), sampler.sample(i + 1)])
        eps_collated = n / (time.perf_counter() - t)
        rows.append(
            {
                "domain": dom.name,
                "episodes_per_s": eps,
                "episodes_per_s_with_collate": eps_collated,
                "domain_mib": dom.nbytes / 2**20,
            }
        )
        print(
            f"{dom.name:<24} {eps:8.0f} ep/s  ({eps_collated:6.0f} with collate)  "
            f"{dom.nbytes / 2**20:6.1f} MiB",
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.sampler_throughput", description=__doc__
    )
    ap.add_argument("--episodes", type=int, default=2000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {"config": CONFIG.__dict__, "sources": {}}
    sources = [("synthetic", {})]
    if (SHARED_PACKS / "gtsrb.npz").is_file():
        sources.append(("packs", {"root": SHARED_PACKS}))
    for name, kw in sources:
        t = time.perf_counter()
        ids, oods = load_source(name, **kw)
        load_s = time.perf_counter() - t
        rows = measure(ids, oods, args.episodes)
        results["sources"][name] = {
            "load_seconds": load_s,
            "domains": rows,
            "ood_mib": sum(d.nbytes for d in oods) / 2**20,
            "total_mib": sum(d.nbytes for d in [*ids, *oods]) / 2**20,
        }
    prov = provenance(seeds=[0])
    out = out_dir("sampler")
    write_json(out / "results.json", {**prov, **results})
    md = header_md("Sampler throughput (5-way 5-shot, Q=10, Z=10, R=50, 32 px, 1 thread)", prov)
    md += "| source | domain | episodes/s | episodes/s incl. collate | MiB |\n|---|---|---:|---:|---:|\n"
    for src, r in results["sources"].items():
        for row in r["domains"]:
            md += (
                f"| {src} | {row['domain']} | {row['episodes_per_s']:.0f} | "
                f"{row['episodes_per_s_with_collate']:.0f} | {row['domain_mib']:.1f} |\n"
            )
        md += f"| {src} | *all domains + OOD, in memory* | | | {r['total_mib']:.1f} |\n"
    (out / "README.md").write_text(md)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    names, vals = [], []
    for src, r in results["sources"].items():
        for row in r["domains"]:
            names.append(f"{src}\n{row['domain']}")
            vals.append(row["episodes_per_s"])
    ax.bar(range(len(vals)), vals, color="#4c72b0")
    ax.axhline(1000, color="crimson", ls="--", label="target 1,000 ep/s")
    ax.set_xticks(range(len(vals)), names, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("episodes / s (1 thread)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out / "throughput.png", dpi=120)
    print(md)


if __name__ == "__main__":
    main()
