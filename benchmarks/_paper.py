"""The paper's numbers for every artefact, and our runs laid out next to them.

Each artefact has a *view*: which row and column of its table a run belongs to (method,
shot, R, memory size, λ, β), and a *reference*: the run every other one is compared with on
the same test episodes (same seed), e.g. MSKM in Table 2 or ORDER's default λ, β in the
λ × β grid. :func:`comparison_md` writes one markdown table with, per column, our mean ± CI,
the paired Δ to the reference (per-seed values in brackets) and the paper's number.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from avalanche_sets.runs.folder import record_identity
from avalanche_sets.runs.record import RunRecord
from avalanche_sets.runs.report import aggregate_results, delta_text
from avalanche_sets.runs.report import paired_delta as report_paired_delta
from benchmarks.forgetting import seed_cell, summarise
from benchmarks.paper_rows import (
    COLUMNS,
    JOINT,
    JOINT_MATCHED,
    ORDER,
    reference_method,
    row,
    table_methods,
)


def _paper_rows(table: str) -> dict[str, dict[str, tuple[float, float]]]:
    """The paper's numbers of a method table (:data:`benchmarks.paper_rows.ROWS`): row ->
    column -> (mean %, 95% CI)."""
    out = {}
    for name in table_methods(table):
        paper = row(name, table).paper
        if paper:
            out[name] = dict(zip(COLUMNS[table], paper, strict=True))
    return out


_HYPER = {  # λ × β, 5-shot, ORDER (the paper's grid search; its table does not say which split)
    1e-4: (52.86, 0.79, 53.28, 0.75, 53.49, 0.67, 52.65, 0.79),
    1e-5: (52.61, 0.85, 53.96, 0.71, 53.60, 0.82, 52.73, 0.93),
    1e-6: (51.85, 0.58, 52.06, 0.49, 52.15, 0.70, 52.03, 0.67),
}  # fmt: skip
_BETAS = (0.001, 0.003, 0.005, 0.01)


def num(x: float) -> str:
    """Short label of a number: 1e-4 rather than 0.0001 or 1e-04."""
    return f"{x:.0e}".replace("e-0", "e-") if 0 < abs(x) < 1e-3 else f"{x:g}"


# artefact -> {row label -> {column label -> (mean %, 95% CI)}}
PAPER: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    **{table: _paper_rows(table) for table in COLUMNS},
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


def _field(rec: RunRecord, name: str):
    """A run's value of a setting or strategy option: an option its record leaves out (equal to
    the method's default) is the default the run ran with."""
    if name == "method":
        return rec.method
    over = rec.strategy_overrides
    if name in over or name in rec.preset:
        return over.get(name, rec.preset.get(name))
    from avalanche_sets.methods import default_options  # imports the strategy class
    from avalanche_sets.presets import RunConfig

    return default_options(rec.method, RunConfig.of(rec.preset)).get(name)


def view(artefact: str, rec: RunRecord) -> tuple[tuple, str, tuple, str]:
    """(row sort key, row label, column sort key, column label) of a run in an artefact."""
    shot = int(rec.preset["n_shot"])
    if artefact == "memory_size":
        mem = int(rec.preset["mem_size"])
        return (rec.method, mem), f"{rec.method}, memory {mem}", (shot,), f"{shot}-shot"
    if artefact == "lambda_beta":
        lam, beta = _field(rec, "lam"), _field(rec, "beta")
        return (-lam,), f"λ = {num(lam)}", (shot, beta), f"{shot}-shot, β = {num(beta)}"
    if artefact in ("ablation_components", "ablation_mi", "ood_sensitivity"):
        r = int(rec.preset["n_ood"])
        return (rec.method,), rec.method, (shot, r), f"{shot}-shot, R = {r}"
    return (rec.method,), rec.method, (shot,), f"{shot}-shot"


# The run each other run is compared with: the fields it has; every other field (method,
# preset, strategy options, seed, evaluation stream) must equal the compared run's.
# A method table's reference is the row :data:`benchmarks.paper_rows.ROWS` marks
# (``PaperRow.reference``).
REFERENCE: dict[str, dict] = {
    **{table: {"method": reference_method(table)} for table in (*COLUMNS, "ood_sensitivity")},
    "memory_size": {"mem_size": 200},
    "lambda_beta": {"lam": 1e-5, "beta": 0.003},
}


def identity(rec: RunRecord, drop=()) -> tuple[dict, dict]:
    """What a run computes (:func:`record_identity`), less the fields in ``drop``: its settings
    (the preset settings it read, its method and evaluation stream) and its strategy options
    (those other than their defaults)."""
    ident = record_identity(rec)
    settings = {**ident["preset"], "method": ident["method"], "eval_stream": ident["eval_stream"]}
    options = ident["strategy_overrides"]
    return (
        {k: v for k, v in settings.items() if k not in drop},
        {k: v for k, v in options.items() if k not in drop},
    )


def _agree(a: tuple[dict, dict], b: tuple[dict, dict]) -> bool:
    """Two :func:`identity` values are one setting: the same options, and the same value of
    every setting both runs read (a setting one of them does not read is no difference)."""
    return a[1] == b[1] and all(a[0][k] == b[0][k] for k in a[0].keys() & b[0].keys())


def reference_of(artefact: str, rec: RunRecord, records: list[RunRecord]) -> RunRecord | None:
    """The reference run paired with ``rec`` (same seed, same test episodes), if finished: the
    one made in its setting (:func:`_agree`; an MSKM run, which reads no memory size, is the
    reference of ORDER's runs at any memory size)."""
    fixed = REFERENCE[artefact]
    want = identity(rec, drop=fixed)
    for q in records:
        if (
            q.seed == rec.seed
            and all(_field(q, k) == v for k, v in fixed.items())
            and _agree(identity(q, drop=fixed), want)
        ):
            return q
    return None


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    ci = "n/a" if math.isnan(row["ci95"]) else f"{100 * row['ci95']:.2f}"
    return f"{100 * row['accuracy']:.2f} ± {ci}" + ("" if row["ci_over"] == "seeds" else "*")


def paired_delta(artefact: str, recs: list[RunRecord], records: list[RunRecord]):
    """Paired Δ of ``recs`` (one cell, any seeds) to the reference, or None if none is paired.

    Returns :class:`avalanche_sets.runs.report.PairedDelta` (as ``avalanche-sets table --vs``):
    the mean over seeds of each seed's paired difference, ± its interval over test episodes,
    the per-seed values, and the paired interval over seeds that alone may call it resolved.
    """
    refs = [q for r in recs
            if (q := reference_of(artefact, r, records)) is not None and q is not r]  # fmt: skip
    return report_paired_delta(recs, refs)


def _paired(artefact: str, recs: list[RunRecord], records: list[RunRecord]) -> str:
    got = paired_delta(artefact, recs, records)
    return "—" if got is None else delta_text(*got)


def pairs_md(
    records: list[RunRecord], pairs: Sequence[tuple[str, str]], shots: Sequence[int]
) -> str:
    """Markdown: for every ``(a, b)`` and shot, the paired Δ ``a − b`` over the seeds both ran
    (:func:`avalanche_sets.runs.report.paired_delta`, as the tables' Δ columns: its interval
    over test episodes, the per-seed values and its paired interval over seeds), with the
    seeds."""
    lines = ["| a − b | " + " | ".join(f"{k}-shot" for k in shots) + " |",
             "|---|" + "---:|" * len(shots)]  # fmt: skip
    for a, b in pairs:
        cells = []
        for k in shots:
            got = report_paired_delta(
                *([r for r in records if r.method == m and int(r.preset["n_shot"]) == k]
                  for m in (a, b))
            )  # fmt: skip
            if got is None:
                cells.append("—")
                continue
            cells.append(f"{delta_text(*got)}, seeds {list(got.per_seed)}")
        lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# the artefacts whose runs are a stream of several domains: their tables carry forgetting
WITH_FORGETTING = {"table2", "table3", "order2", "order3"}


def forgetting_cell(recs: list[RunRecord]) -> str:
    """Average forgetting (points) of one cell's runs, as ``forgetting.py`` reports it: each
    seed's :func:`avalanche_sets.metrics.stats.average_forgetting`, then the mean over seeds ±
    the Student-t 95% CI; ``n/a`` where nothing can be forgotten (Joint's one-row matrix)."""
    return seed_cell(summarise(recs), "forgetting")


def comparison_md(artefact: str, records: list[RunRecord], row_order=()) -> str:
    """Markdown: one row per row label; per column ours, the paired Δ (and, for the stream
    tables of :data:`WITH_FORGETTING`, the average forgetting), and the paper's."""
    cells: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
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
    "per-episode difference, ± the episode-level 95% CI of that mean, the per-seed values in "
    "parentheses, and in square brackets the paired 95% Student-t interval over the seeds "
    "(t over the per-seed differences, k − 1 degrees of freedom: `stats.paired_over_seeds`). "
    "The episode-level ± leaves out the variation between training seeds, so it resolves "
    "nothing between methods; a Δ is *resolved* (✓) when at least 3 seeds were paired and "
    "its interval over seeds excludes 0; † marks fewer than 3 seeds, from which no "
    "seed-level claim can be made. Forgetting (stream tables): each seed's average "
    "forgetting (Chaudhry et al. "
    "2018: per domain before the last, its best accuracy from its own turn on minus its final "
    "one, averaged), mean over seeds ± the Student-t 95% CI over seeds; n/a for Joint, which "
    "trains once on the mixture."
)


#: The methods :func:`share_of_joint_md` compares: ORDER, Joint and the compute-matched Joint.
SHARE_OF_JOINT: tuple[str, str, str] = (ORDER, JOINT, JOINT_MATCHED)


def share_of_joint_md(records: list[RunRecord], shots) -> str:
    """Markdown: ORDER's accuracy as a percentage of Joint's (and of the compute-matched
    Joint's), per shot, over the seeds both have, next to the paper's (its Table 3: ORDER's
    mean over Joint's). ``records``: runs of the :data:`SHARE_OF_JOINT` methods of one preset
    (other methods are ignored)."""
    acc: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for r in records:
        acc[r.method, int(r.preset["n_shot"])][r.seed] = r.result["mean_accuracy"]
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

    order, joint_method, matched_method = SHARE_OF_JOINT
    paper_t3 = PAPER["table3"]
    for shot in sorted(shots):
        col = {1: "1-shot", 5: "5-shot"}.get(shot)
        paper = (
            "—"
            if col is None
            else f"{100 * paper_t3[order][col][0] / paper_t3[joint_method][col][0]:.1f}%"
        )
        order_joint, joint = share(order, joint_method, shot)
        order_matched, matched = share(order, matched_method, shot)
        joint_matched, _ = share(joint_method, matched_method, shot)
        cells = ["—" if v is None else f"{100 * v:.2f}%" for v in (joint, matched)]
        lines.append(
            f"| {shot} | {cells[0]} | {order_joint} | {cells[1]} | {order_matched} "
            f"| {joint_matched} | {paper} |"
        )
    return "\n".join(lines)
