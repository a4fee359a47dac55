"""The paper's numbers for every artefact, and our runs laid out next to them.

Each artefact has a *view*: which row and column of its table a run belongs to (method,
shot, R, memory size, λ, β), and a *reference*: the run every other one is compared with on
the same test episodes (same seed), e.g. MSKM in Table 2 or ORDER's default λ, β in the
λ × β grid. :func:`comparison_md` writes one markdown table with, per column, our mean ± CI,
the paired Δ to the reference (per-seed values in brackets) and the paper's number.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence

from avalanche_sets.metrics.stats import combine_paired
from avalanche_sets.runs.folder import record_identity
from avalanche_sets.runs.report import aggregate_results, delta_text, paired_difference
from avalanche_sets.runs.report import paired_delta as report_paired_delta
from benchmarks.forgetting import seed_cell, summarise

_T2 = {
    "protonet": ((31.96, 0.93), (42.62, 0.73)),
    "anil": ((30.58, 0.81), (42.24, 0.86)),
    "mskm": ((33.79, 1.05), (45.41, 0.58)),
    "lst": ((34.81, 0.81), (46.09, 0.69)),
    "tpn": ((34.52, 0.83), (46.23, 0.60)),
    "order-mi-only": ((36.93, 0.90), (48.85, 0.53)),
    "order": ((41.25, 0.64), (53.96, 0.71)),
}
_T3 = {
    "semi-seq": ((33.79, 1.05), (45.41, 0.58)),
    "semi-er": ((37.62, 0.97), (50.35, 0.76)),
    "semi-agem": ((36.97, 1.16), (50.29, 0.69)),
    "semi-mer": ((37.90, 0.83), (50.46, 0.74)),
    "semi-gpm": ((36.53, 0.81), (49.78, 0.65)),
    "semi-der": ((36.78, 0.89), (50.07, 0.61)),
    "order-ot-only": ((39.21, 0.61), (51.72, 0.61)),
    "order": ((41.25, 0.64), (53.96, 0.71)),
    "joint": ((49.91, 0.79), (61.78, 0.75)),
}
_O2 = {
    "protonet": ((27.91, 0.95), (39.12, 0.76)),
    "anil": ((27.25, 0.82), (38.58, 0.65)),
    "mskm": ((30.15, 0.89), (41.02, 0.75)),
    "lst": ((32.51, 0.71), (41.78, 0.85)),
    "tpn": ((31.81, 0.72), (42.81, 0.62)),
    "semi-er": ((39.05, 0.91), (51.28, 0.78)),
    "semi-agem": ((39.48, 0.97), (51.51, 0.83)),
    "semi-mer": ((39.65, 0.82), (51.42, 0.68)),
    "semi-gpm": ((38.89, 0.85), (51.03, 0.71)),
    "semi-der": ((39.81, 0.73), (51.68, 0.62)),
    "order": ((42.49, 0.57), (55.37, 0.71)),
}
_O3 = {
    "protonet": ((28.55, 1.03), (40.41, 0.97)),
    "anil": ((28.24, 1.15), (39.97, 0.83)),
    "mskm": ((31.17, 0.96), (41.46, 0.69)),
    "lst": ((31.61, 0.81), (41.31, 0.80)),
    "tpn": ((32.80, 0.71), (42.83, 0.71)),
    "semi-er": ((38.87, 0.76), (52.75, 0.82)),
    "semi-agem": ((39.29, 0.73), (52.97, 0.94)),
    "semi-mer": ((39.41, 0.68), (53.08, 0.87)),
    "semi-gpm": ((39.09, 0.81), (52.83, 0.76)),
    "semi-der": ((39.46, 0.77), (53.37, 0.73)),
    "order": ((43.36, 0.61), (56.89, 0.58)),
}
# Component ablation (5-shot, R = 50 and 250). The paper's rows are MI × OT switches; its
# "neither" row has Semi-ER's numbers, its "MI, no OT" row is ORDER without OT (with replay).
_ABL = {
    "semi-er": ((50.35, 0.76), (46.25, 0.91)),
    "order-ot-support-only": ((51.18, 0.82), (47.69, 0.87)),
    "order-ot-only": ((51.72, 0.61), (48.57, 0.80)),
    "order-no-ot": ((52.63, 0.77), (50.23, 0.62)),
    "order": ((53.96, 0.71), (51.87, 0.68)),
}
# Fine-grained ablation (5-shot, R = 50 and 250): U_id+U_ood without MI (Semi-ER's numbers),
# U_id only, U_id + I_id, everything. The paper does not say whether its middle rows use OT;
# ours keep replay and OT on, so they differ from ORDER only in the MI terms.
_ABL_MI = {
    "semi-er": ((50.35, 0.76), (46.25, 0.91)),
    "order-ot-only": ((51.67, 0.85), (48.36, 0.82)),
    "order-mi-id-only": ((52.87, 0.89), (49.98, 0.70)),
    "order": ((53.96, 0.71), (51.87, 0.68)),
}
_HYPER = {  # λ × β, 5-shot, ORDER (the paper's grid search; its table does not say which split)
    1e-4: (52.86, 0.79, 53.28, 0.75, 53.49, 0.67, 52.65, 0.79),
    1e-5: (52.61, 0.85, 53.96, 0.71, 53.60, 0.82, 52.73, 0.93),
    1e-6: (51.85, 0.58, 52.06, 0.49, 52.15, 0.70, 52.03, 0.67),
}  # fmt: skip
_BETAS = (0.001, 0.003, 0.005, 0.01)


def num(x: float) -> str:
    """Short label of a number: 1e-4 rather than 0.0001 or 1e-04."""
    return f"{x:.0e}".replace("e-0", "e-") if 0 < abs(x) < 1e-3 else f"{x:g}"


def _by_shot(table: dict) -> dict:
    return {m: {"1-shot": a, "5-shot": b} for m, (a, b) in table.items()}


def _by_r(table: dict) -> dict:
    return {m: {"5-shot, R = 50": a, "5-shot, R = 250": b} for m, (a, b) in table.items()}


# artefact -> {row label -> {column label -> (mean %, 95% CI)}}
PAPER: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "table2": _by_shot(_T2),
    "table3": _by_shot(_T3),
    "order2": _by_shot(_O2),
    "order3": _by_shot(_O3),
    "ablation_components": _by_r(_ABL),
    "ablation_mi": _by_r(_ABL_MI),
    "memory_size": {
        f"order, memory {m}": {"1-shot": a, "5-shot": b}
        for m, a, b in (
            (50, (40.11, 0.73), (52.75, 0.77)),
            (100, (40.79, 0.58), (53.28, 0.65)),
            (200, (41.25, 0.64), (53.96, 0.71)),
        )
    },  # fmt: skip
    "lambda_beta": {
        f"λ = {num(lam)}": {
            f"5-shot, β = {num(b)}": (v[2 * i], v[2 * i + 1]) for i, b in enumerate(_BETAS)
        }
        for lam, v in _HYPER.items()
    },
}


def _field(rec: dict, name: str):
    if name == "method":
        return rec["method"]
    return rec.get("strategy_overrides", {}).get(name, rec["preset"].get(name))


def view(artefact: str, rec: dict) -> tuple[tuple, str, tuple, str]:
    """(row sort key, row label, column sort key, column label) of a run in an artefact."""
    shot = int(rec["preset"]["n_shot"])
    if artefact == "memory_size":
        mem = int(rec["preset"]["mem_size"])
        return (rec["method"], mem), f"{rec['method']}, memory {mem}", (shot,), f"{shot}-shot"
    if artefact == "lambda_beta":
        lam, beta = _field(rec, "lam"), _field(rec, "beta")
        return (-lam,), f"λ = {num(lam)}", (shot, beta), f"{shot}-shot, β = {num(beta)}"
    if artefact in ("ablation_components", "ablation_mi", "ood_sensitivity"):
        r = int(rec["preset"]["n_ood"])
        return (rec["method"],), rec["method"], (shot, r), f"{shot}-shot, R = {r}"
    return (rec["method"],), rec["method"], (shot,), f"{shot}-shot"


# The run each other run is compared with: the fields it has; every other field (method,
# preset, strategy options, seed, evaluation stream) must equal the compared run's.
REFERENCE: dict[str, dict] = {
    "table2": {"method": "mskm"},
    "table3": {"method": "semi-seq"},
    "order2": {"method": "mskm"},
    "order3": {"method": "mskm"},
    "ablation_components": {"method": "semi-er"},
    "ablation_mi": {"method": "semi-er"},
    "ood_sensitivity": {"method": "mskm"},
    "memory_size": {"mem_size": 200},
    "lambda_beta": {"lam": 1e-5, "beta": 0.003},
}


def identity(rec: dict, drop=()) -> str:
    """What a run computes (:func:`record_identity`, flattened), less the fields in ``drop``."""
    ident = record_identity(rec)
    d = {**ident["preset"], **ident["strategy_overrides"]}
    d["method"], d["eval_stream"] = ident["method"], ident["eval_stream"]
    return json.dumps({k: v for k, v in sorted(d.items()) if k not in drop})


def reference_of(artefact: str, rec: dict, records: list[dict]) -> dict | None:
    """The reference run paired with ``rec`` (same seed, same test episodes), if finished."""
    fixed = REFERENCE[artefact]
    want = identity(rec, drop=fixed)
    for q in records:
        if (
            q["seed"] == rec["seed"]
            and all(_field(q, k) == v for k, v in fixed.items())
            and identity(q, drop=fixed) == want
        ):
            return q
    return None


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    ci = "n/a" if math.isnan(row["ci95"]) else f"{100 * row['ci95']:.2f}"
    return f"{100 * row['accuracy']:.2f} ± {ci}" + ("" if row["ci_over"] == "seeds" else "*")


def paired_delta(artefact: str, recs: list[dict], records: list[dict]):
    """Paired Δ of ``recs`` (one cell, any seeds) to the reference, or None if none is paired.

    Returns ``(mean over seeds, ± sqrt(Σ c_s²)/k, {seed: Δ_s})`` for per-seed episode CIs c_s
    (:func:`avalanche_sets.runs.report.paired_delta`, as ``avalanche-sets table --vs``): the ±
    covers the test episodes drawn, not the training seeds (the per-seed Δ_s show those).
    """
    refs = [q for r in recs
            if (q := reference_of(artefact, r, records)) is not None and q is not r]  # fmt: skip
    return report_paired_delta(recs, refs)


def _paired(artefact: str, recs: list[dict], records: list[dict]) -> str:
    got = paired_delta(artefact, recs, records)
    return "—" if got is None else delta_text(*got)


def pairs_md(records: list[dict], pairs: Sequence[tuple[str, str]], shots: Sequence[int]) -> str:
    """Markdown: for every ``(a, b)`` and shot, the paired Δ ``a − b`` over the seeds both ran
    (:func:`~avalanche_sets.metrics.stats.combine_paired` of each seed's paired difference on
    the same test episodes, as the tables' Δ columns), with the per-seed values and the seeds."""
    by = {(r["method"], int(r["preset"]["n_shot"]), r["seed"]): r for r in records}
    lines = ["| a − b | " + " | ".join(f"{k}-shot" for k in shots) + " |",
             "|---|" + "---:|" * len(shots)]  # fmt: skip
    for a, b in pairs:
        cells = []
        for k in shots:
            each = {s: paired_difference(by[(a, k, s)], by[(b, k, s)])
                    for (m, kk, s) in sorted(by) if m == a and kk == k and (b, k, s) in by}  # fmt: skip
            if not each:
                cells.append("—")
                continue
            d, ci = combine_paired(list(each.values()))
            cells.append(
                f"{delta_text(d, ci, {s: v[0] for s, v in each.items()})}, seeds {list(each)}"
            )
        lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# the artefacts whose runs are a stream of several domains: their tables carry forgetting
WITH_FORGETTING = {"table2", "table3", "order2", "order3"}


def forgetting_cell(recs: list[dict]) -> str:
    """Average forgetting (points) of one cell's runs, as ``forgetting.py`` reports it: each
    seed's :func:`avalanche_sets.metrics.stats.average_forgetting`, then the mean over seeds ±
    the Student-t 95% CI; ``n/a`` where nothing can be forgotten (Joint's one-row matrix)."""
    return seed_cell(summarise(recs), "forgetting")


def comparison_md(artefact: str, records: list[dict], row_order=()) -> str:
    """Markdown: one row per row label; per column ours, the paired Δ (and, for the stream
    tables of :data:`WITH_FORGETTING`, the average forgetting), and the paper's."""
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    rows, cols = {}, {}
    for rec in records:
        rkey, rlab, ckey, clab = view(artefact, rec)
        cells[rlab, clab].append(rec)
        rows[rlab], cols[clab] = rkey, ckey
    paper = PAPER.get(artefact, {})
    rank = {m: i for i, m in enumerate(row_order)}

    def row_sort(label: str):
        if label not in rows:  # a row only the paper has: in the paper's order, after ours
            return (rank.get(label, len(rank)), 1, [label])
        return (rank.get(rows[label][0], len(rank)), 0, list(rows[label]))

    row_labels = sorted(set(rows) | set(paper), key=row_sort)
    col_labels = sorted(cols, key=cols.get)
    paper_cols = [c for c in col_labels if any(c in v for v in paper.values())]
    ref = ", ".join(
        str(v) if k == "method" else f"{k} = {num(v) if isinstance(v, float) else v}"
        for k, v in REFERENCE[artefact].items()
    )
    head = [{"memory_size": "method, memory", "lambda_beta": "λ"}.get(artefact, "method")]
    forgets = artefact in WITH_FORGETTING
    for c in col_labels:
        head += [f"ours {c}", f"Δ vs {ref}, paired ({c})"]
        head += [f"forgetting, pts ({c})"] if forgets else []
    head += [f"paper {c}" for c in paper_cols]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for rl in row_labels:
        line = [rl]
        for c in col_labels:
            recs = cells.get((rl, c), [])
            agg = aggregate_results(recs, by=("method",), pool_code=True)[0] if recs else None
            line += [_cell(agg), _paired(artefact, recs, records) if recs else "—"]
            line += [forgetting_cell(recs) if recs else "—"] if forgets else []
        for c in paper_cols:
            p = paper.get(rl, {}).get(c)
            line.append("—" if p is None else f"{p[0]:.2f} ± {p[1]:.2f}")
        lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines)


FOOTNOTE = (
    "Accuracy: mean over seeds ± the Student-t 95% CI over seeds (wide with 2–3 seeds: "
    "t = 12.7 for 2, 4.3 for 3); \\* one seed: the ± is the 95% CI over all test episodes of "
    "all domains (it includes the spread between domains). The paired Δ compares two "
    "runs on the same test episodes (same seed): the mean over seeds of the mean "
    "per-episode difference, the per-seed values in brackets, and ± the episode-level 95% "
    "CI of that mean. That ± does not include the variation between training seeds; a Δ "
    "whose interval excludes 0 *and* whose per-seed values agree in sign is one these runs "
    "resolve. Forgetting (stream tables): each seed's average forgetting (Chaudhry et al. "
    "2018: per domain before the last, its best accuracy from its own turn on minus its final "
    "one, averaged), mean over seeds ± the Student-t 95% CI over seeds; n/a for Joint, which "
    "trains once on the mixture."
)


def share_of_joint_md(records: list[dict], shots) -> str:
    """Markdown: ORDER's accuracy as a percentage of Joint's (and of the compute-matched
    Joint's), per shot, over the seeds both have, next to the paper's (its Table 3: ORDER's
    mean over Joint's). ``records``: runs of ``order``, ``joint``, ``joint-matched`` of one
    preset (other methods are ignored)."""
    acc: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for r in records:
        acc[r["method"], int(r["preset"]["n_shot"])][r["seed"]] = r["result"]["mean_accuracy"]
    lines = [
        "| shot | Joint | ORDER % of Joint | compute-matched Joint | ORDER % of it | "
        "Joint % of compute-matched | paper: ORDER % of Joint |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def share(a: str, b: str, shot: int) -> tuple[str, float | None]:
        seeds = sorted(set(acc[a, shot]) & set(acc[b, shot]))
        if not seeds:
            return "—", None
        mean_a = sum(acc[a, shot][s] for s in seeds) / len(seeds)
        mean_b = sum(acc[b, shot][s] for s in seeds) / len(seeds)
        return f"{100 * mean_a / mean_b:.1f}% ({len(seeds)} seed{'s' * (len(seeds) > 1)})", mean_b

    for shot in sorted(shots):
        col = {1: 0, 5: 1}.get(shot)
        paper = "—" if col is None else f"{100 * _T3['order'][col][0] / _T3['joint'][col][0]:.1f}%"
        order_joint, joint = share("order", "joint", shot)
        order_matched, matched = share("order", "joint-matched", shot)
        joint_matched, _ = share("joint", "joint-matched", shot)
        cells = ["—" if v is None else f"{100 * v:.2f}%" for v in (joint, matched)]
        lines.append(
            f"| {shot} | {cells[0]} | {order_joint} | {cells[1]} | {order_matched} "
            f"| {joint_matched} | {paper} |"
        )
    return "\n".join(lines)
