"""Issue 11 §2, part 1: every meta-learning baseline checked against its own paper on ONE domain.

The plan (:data:`PLAN`) is one sets-mini domain and one synthetic domain, each method trained
on that domain alone until its validation curve plateaus, all of them evaluated on the same
fixed validation episodes (``benchmarks/learning_curves.py`` computes the curves, the paired
Δ and the checks table; this driver only says *which* curves, in which order, and writes them
all into one folder so that one table holds every check):

* Ren et al. 2018 — ProtoNet, soft k-means and masked soft k-means (MSKM) with clean unlabeled
  data (R = 0) and with the preset's R = 50 distractors;
* Liu et al. 2019 (TPN ≥ ProtoNet), Li et al. 2019 (LST ≥ MSKM), Raghu et al. 2020 (ANIL within
  a few points of ProtoNet) — with distractors, the SETS protocol;
* :data:`DIAGNOSIS` — the curves that explain the contradicted checks (TPN without distractors,
  ANIL and LST with their former inner-loop step).

Everything in fp32 (the precision of the committed stream runs these checks explain); the
``cpu`` preset's episode shape and backbone otherwise. ``--every 40``: the first point after
training is the ``cpu`` preset's whole budget per domain (40 iterations), so each curve also
says how far a method gets in the stream's regime.

Examples::

    # 5-shot: both domains and the diagnosis curves (resumable: rerun to continue)
    python -m benchmarks.baseline_checks --shots 5
    # then 1-shot, the sets-mini domain only
    python -m benchmarks.baseline_checks --shots 1 --sources packs
    # only rebuild the tables and plots from the stored curves
    python -m benchmarks.baseline_checks --report-only

Writes ``benchmarks/results/baseline_checks/single_domain/`` (``curves/*.json``, ``points.csv``,
``summary.json``, ``README.md``, ``checks.md``/``checks.csv``, ``curves_<shot>shot.png``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from avalanche_sets.presets import RunConfig
from benchmarks._common import RESULTS, SHARED_PACKS, provenance
from benchmarks.learning_curves import (
    CurveSpec,
    check_methods,
    curve_preset,
    eval_iterations,
    run_specs,
    write_report,
)

__all__ = ["Stage", "PLAN", "DIAGNOSIS", "TPN_DEPARTURES", "OUT", "plan_specs", "base_preset"]

OUT = RESULTS / "baseline_checks" / "single_domain"
REN = ("protonet", "soft-kmeans", "mskm")
OTHERS = ("tpn", "lst", "anil")


@dataclass(frozen=True)
class Stage:
    """Curves of ``methods`` × ``variants`` on one domain of one source."""

    source: str
    domain: str
    methods: tuple[str, ...]
    variants: tuple[str, ...]
    shots: tuple[int, ...] | None = None  # None: every shot the command line asks for


#: TPN's departures from its authors' code (TPN-pytorch), one at a time and all together: the
#: authors' self-loops in the graph (W_ii = 1, kept in the top-k), their loss over the support
#: and query rows, their raw σ (g's output, not exp of it).
TPN_DEPARTURES = (
    "tpn:alpha=0.99,self_loops=True",
    "tpn:alpha=0.99,support_loss=True",
    "tpn:alpha=0.99,sigma_mode=raw",
    "tpn:alpha=0.99,self_loops=True,support_loss=True,sigma_mode=raw",
)

#: The diagnosis of the checks that contradicted their papers on gtsrb: TPN without distractors
#: (are the OOD images what holds it back?), and ANIL / LST with their former inner-loop step
#: 0.1 (ten times LST's and MAML's 0.01, the default since these checks; LST collapsed with it)
#: — see the documentation's verification pages (docs/verification/).
DIAGNOSIS: tuple[Stage, ...] = (
    Stage("packs", "gtsrb", ("tpn",), ("clean",)),
    Stage("packs", "gtsrb", ("lst:inner_lr=0.1", "anil:inner_lr=0.1"), ("ood",)),
    # (measured with the paper's α = 0.99, TPN's default until the α curves below)
    Stage("packs", "gtsrb", TPN_DEPARTURES, ("ood",), shots=(5,)),
    # ANIL with MAML's 5 inner steps, its default until the long curves showed 20 keep pace
    Stage("packs", "gtsrb", ("anil:inner_steps=5",), ("ood",)),
    Stage("synthetic", "gratings", ("anil:inner_steps=5",), ("ood",)),
    # TPN with the paper's α = 0.99, its default until benchmarks/tpn_diagnosis.py showed the
    # propagation at 0.99, not the embedding, costing it 9 points on gtsrb (now α = 0.9)
    Stage("packs", "gtsrb", ("tpn:alpha=0.99",), ("ood", "clean")),
    Stage("synthetic", "gratings", ("tpn:alpha=0.99",), ("ood",)),
)

#: In priority order: the sets-mini domain, then the synthetic one, then the diagnosis.
PLAN: tuple[Stage, ...] = (
    Stage("packs", "gtsrb", REN, ("clean", "ood")),
    Stage("packs", "gtsrb", OTHERS, ("ood",)),
    Stage("synthetic", "gratings", REN, ("clean", "ood")),
    Stage("synthetic", "gratings", OTHERS, ("ood",)),
    *DIAGNOSIS,
)


def base_preset(source: str, *, root: str | os.PathLike = SHARED_PACKS) -> RunConfig:
    """The ``cpu`` preset for one source, in fp32, one thread per curve."""
    from avalanche_sets.presets import resolve_preset

    extra = {"root": str(root)} if source == "packs" else {}
    return resolve_preset("cpu", source=source, precision="fp32", threads=1, **extra)


def plan_specs(
    plan: Sequence[Stage], *, shots: Sequence[int], seeds: Sequence[int]
) -> list[tuple[str, CurveSpec]]:
    """``(source, spec)`` of every curve of the plan, shot by shot, in plan order."""
    return [
        (st.source, CurveSpec(m, st.domain, k, s, v))
        for k in shots
        for st in plan
        if st.shots is None or k in st.shots
        for v in st.variants
        for s in seeds
        for m in st.methods
    ]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.baseline_checks",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--shots", nargs="+", type=int, default=[5])
    ap.add_argument("--sources", nargs="+", choices=("packs", "synthetic"),
                    default=["packs", "synthetic"], help="the plan's stages of these sources")  # fmt: skip
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--iters", type=int, default=640)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--val-episodes", type=int, default=100)
    ap.add_argument("--root", default=str(SHARED_PACKS), help="folder of the sets-mini packs")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    prov = provenance(seeds=args.seeds)
    if not args.report_only:
        eval_iterations(args.iters, args.every)
        bases = {src: base_preset(src, root=args.root) for src in args.sources}
        plan = [st for st in PLAN if st.source in args.sources]
        specs = plan_specs(plan, shots=args.shots, seeds=args.seeds)
        for src, spec in specs:  # every method and preset checked before anything is trained
            check_methods([spec.method], bases[src])
            curve_preset(bases[src], spec, iters=args.iters, val_episodes=args.val_episodes)
        prov["load_average_start"] = list(os.getloadavg())
        for src in dict.fromkeys(src for src, _ in specs):  # one source at a time, plan order
            run_specs(
                [spec for s, spec in specs if s == src], bases[src], iters=args.iters,
                every=args.every, val_episodes=args.val_episodes, out=out, jobs=args.jobs,
            )  # fmt: skip
    write_report(out, prov=prov)
    print(f"report written to {out}")


if __name__ == "__main__":
    main()
