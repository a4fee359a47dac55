"""Break ORDER on purpose and check that the wiring tests fail (issue 11 §1; docs/verification/index.md).

Each mutant is one small edit of the package — a fault of the authors' reference code (design
§3), a plausible slip (a detached tensor, a dropped weight, the wrong rows), or one of the three
defects fixed in issue 11 coming back. For every mutant the script copies the package, its
tests and documentation pages, README.md and pyproject.toml to a temporary folder (the working tree is never edited),
applies the edit there, runs the guarding tests and records which of them fail and why. A run
with no edit comes first: every test must pass on the intact code, otherwise nothing is
measured.

    python -m benchmarks.order_mutants            # all mutants (~30 min on 1 core)
    python -m benchmarks.order_mutants --only M02 M07

Writes ``benchmarks/results/order_mutants/``: ``results.json`` (provenance, one record per
mutant with the failing tests and their first error line), ``results.csv``, ``README.md``
(the table) and ``caught.png`` (mutants × tests).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks._common import ROOT, header_md, out_dir, provenance, save_figure, write_json

WIRING = "tests/order/test_wiring.py"
DEVICE = "tests/order/test_plugin_device.py"
CATALOGUE = "tests/test_input_validation.py"
TESTS = [WIRING, DEVICE, CATALOGUE]
#: The guarding tests of a mutant: the wiring tests, plus the device tests for the resume
#: defect's mutants and the bad-input catalogue for the refused head (to keep runs short).
EXTRA_TESTS = {"M33": [DEVICE], "M36": [DEVICE], "M37": [DEVICE], "M38": [DEVICE],
               "M35": [CATALOGUE]}  # fmt: skip

ORD, F = "avalanche_sets/order/", "avalanche_sets/functional/"
MI, OT, RP, SP, ST = (
    ORD + "mi_regularization.py",
    ORD + "ot_loss.py",
    ORD + "replay.py",
    ORD + "ood_split.py",
    ORD + "strategy.py",
)
SUM = "loss = sum(self._criterion(logits[b], labels[b]) for b in range(n_tasks))"
COST = "cost = squared_euclidean(current, stored, expand=True)"
MI_TERM = "return self.lam * reg"
FIT = "fit = estimator.fit_step(cat(0), cat(1), cat(2), cat(3))"
OT_ROWS = "for row, task in zip(replayed.rows, replayed.tasks):"
WEIGHT = "state.unlabeled_weight = split.is_id.to(state.unlabeled_weight.dtype)"
U_ID = "u_id = it.ood_split.is_id[b]"
RESTORE = '        self._restored = None if state["estimator"] is None else dict(state)'
OPTS = (
    "        self.opt_q = torch.optim.Adam(self.q.parameters(), lr=lr_q)\n"
    "        self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=lr_critic)"
)
MOVE = "        if device is not None:\n            self.q.to(device)\n            self.critic.to(device)\n"

# (id, kind, fault, file, original text, mutated text). Kinds: "§3" = the authors' code
# (design §3), "slip" = a plausible mistake, "defect" = an issue-11 defect coming back.
MUTANTS = [
    ("M01", "§3", "MI networks never trained (fit step dropped)", MI, FIT, 'fit = {"nll": 0.0}'),
    ("M02", "§3", "MI term's sign flipped: λ(I_id − I_ood)", MI,
     "regs.append(i_ood - i_id)", "regs.append(i_id - i_ood)"),
    ("M03", "§3", "MI term added with −λ", MI, MI_TERM, MI_TERM.replace("self.lam", "-self.lam")),
    ("M04", "§3", "critic trained to minimise I_id (inverted training sign)", F + "mi.py",
     "(-bound).backward()", "bound.backward()"),
    ("M05", "§3", "q_φ trained to minimise the likelihood (inverted training sign)", F + "mi.py",
     "loss = self.q.nll(p_ood.detach(), e_ood.detach())",
     "loss = -self.q.nll(p_ood.detach(), e_ood.detach())"),
    ("M06", "§3", "OOD split: top-K with the oracle ID count (6) instead of the threshold", SP,
     "rule=self.rule,\n            n_id=self.n_id,", 'rule="topk",\n            n_id=6,'),
    ("M07", "§3", "OT cost mis-broadcast: C_ij = |x_i|² + |y_i|² − 2 x_i·y_j", F + "ot.py",
     COST, "cost = (current.pow(2).sum(1, keepdim=True) + stored.pow(2).sum(1, keepdim=True)"
     " - 2.0 * current @ stored.T).clamp_min(0.0)"),
    ("M08", "§3", "OT cost mis-broadcast: row i = ‖x_i − y_i‖² repeated", F + "ot.py",
     COST, "cost = (current - stored).pow(2).sum(1, keepdim=True).expand(-1, stored.shape[0])"),
    ("M09", "§3", "OT plan transposed", F + "ot.py",
     "    return (plan * cost).sum()", "    return (plan.T * cost).sum()"),
    ("M10", "§3", "MI on one task of each meta-batch only", MI,
     "for e_id, p_id, e_ood, p_ood in pairs:", "for e_id, p_id, e_ood, p_ood in pairs[:1]:"),
    ("M11", "slip", "MI on the current tasks only (replayed tasks skipped)", MI,
     "for b, k in enumerate(n_id):", "for b, k in enumerate(n_id[:2]):"),
    ("M12", "§3", "memory stores support features only", RP,
     "features = torch.cat([state.support_emb[b], state.unlabeled_emb[b][u_id]])",
     "features = state.support_emb[b]"),
    ("M13", "slip", "memory stores features of S ∪ U (U_ood included)", RP,
     U_ID, "u_id = torch.ones_like(it.ood_split.is_id[b])"),
    ("M14", "slip", "MI: embeddings detached", MI,
     "e = state.unlabeled_emb[b]", "e = state.unlabeled_emb[b].detach()"),
    ("M15", "slip", "MI: prototypes detached", MI,
     "p = pair_with_prototypes(e, state.prototypes[b])",
     "p = pair_with_prototypes(e, state.prototypes[b].detach())"),
    ("M16", "slip", "OT: current features detached", OT,
     "return torch.cat(current), torch.cat(stored)",
     "return torch.cat(current).detach(), torch.cat(stored)"),
    ("M17", "slip", "λ dropped", MI, MI_TERM, MI_TERM.replace("self.lam * reg", "reg")),
    ("M18", "slip", "β dropped", OT, "return self.beta * value", "return value"),
    ("M19", "slip", "OT on the wrong rows (the current tasks')", OT,
     OT_ROWS, "for row, task in zip(range(len(replayed.tasks)), replayed.tasks):"),
    ("M20", "slip", "OT rows of the replayed tasks swapped", OT,
     OT_ROWS, "for row, task in zip(reversed(replayed.rows), replayed.tasks):"),
    ("M21", "slip", "OT: current side uses all of U, not the stored U_id", OT,
     "state.unlabeled_emb[row][u_id]])", "state.unlabeled_emb[row]])"),
    ("M22", "slip", "OOD split never reaches the head (unlabeled_weight not set)", SP,
     WEIGHT, "pass"),
    ("M23", "slip", "OOD split inverted in the head", SP,
     WEIGHT, WEIGHT.replace("split.is_id", "(~split.is_id)")),
    ("M24", "slip", "head ignores the weights (soft k-means on all U)",
     "avalanche_sets/models/episodic.py",
     "weights=state.unlabeled_weight[b],", "weights=None,"),
    ("M25", "slip", "MI pairs: every unlabeled image treated as ID", MI,
     "n_id = is_id.sum(1).tolist()", "n_id = torch.ones_like(is_id).sum(1).tolist()"),
    ("M26", "slip", "MI pairs with the refined prototypes instead of p_c", MI,
     "p = pair_with_prototypes(e, state.prototypes[b])",
     "p = pair_with_prototypes(e, state.refined_prototypes[b])"),
    ("M27", "defect", "β silently rescaled: meta loss a mean over the tasks", ST,
     SUM, SUM + " / n_tasks"),
    ("M28", "defect", "β silently rescaled: MI a mean over the tasks", ST,
     'reduction="sum",', 'reduction="mean",'),
    ("M29", "slip", "memory stores features of U_ood instead of U_id", RP,
     U_ID, "u_id = ~it.ood_split.is_id[b]"),
    ("M30", "slip", "OOD threshold without its k·std (k = 0)", SP, "k=self.k,", "k=0.0,"),
    ("M31", "slip", "memory tasks never replayed", RP,
     "        if len(self.reservoir) == 0:\n            return", "        if True:\n            return"),
    ("M32", "slip", "MI networks fitted on the ID / OOD pairs swapped", MI,
     FIT, "fit = estimator.fit_step(cat(2), cat(3), cat(0), cat(1))"),
    ("M33", "defect", "MI networks rebuilt on a hard-coded 'cpu'", MI,
     "est = self._build(dim, device)", 'est = self._build(dim, "cpu")'),
    ("M34", "slip", "OT cost without the norms (−2 x·y)", F + "ot.py",
     COST, "cost = (-2.0 * current @ stored.T).clamp_min(0.0)"),
    ("M35", "defect", "OOD split accepted with a head that ignores it", ST,
     'if use_ood_split and getattr(model, "uses_unlabeled_weight", True) is False:', "if False:"),
    ("M36", "defect", "MI state rebuilt on the CPU at load time (the reported resume bug)", MI,
     RESTORE, RESTORE + '\n        if self._restored is not None:\n            '
     'self.estimator_on(state["dim"], torch.device("cpu"))'),
    ("M37", "defect", "checkpoint read without saying where to (no map_location)",
     "avalanche_sets/training/checkpoint.py",
     'torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)',
     "torch.load(io.BytesIO(payload), weights_only=True)"),
    ("M38", "defect", "MI optimisers created before the networks move to their device",
     F + "mi.py", MOVE + OPTS, OPTS + "\n" + MOVE.rstrip("\n")),
    ("M39", "slip", "OOD threshold calibrated on the unlabeled distances, not the query's",
     F + "ood.py", "dist_q, _ = _min_distance(w_q, protos)  # [B, Q]", "dist_q = dist_u"),
    ("M40", "slip", "OOD split: unlabeled embeddings not L2-normalised", F + "ood.py",
     "w_u = F.normalize(unlabeled_emb.detach().to(dtype), dim=-1)",
     "w_u = unlabeled_emb.detach().to(dtype)"),
]  # fmt: skip

#: Mutants that cannot change any result, with why (listed, not counted as missed).
EQUIVALENT = {
    "M07": "with uniform weights and n = m (the only case that broadcasts), |y_i|² is a row "
    "constant and −|y_j|² a column constant of the cost: they change neither the optimal plan "
    "nor ⟨W, C⟩ (Σ_i |y_i|²/n − Σ_j |y_j|²/n = 0) nor the gradient — an equivalent mutant for "
    "every solver; the authors' broadcast fault that matters is M08",
}


def run_tests(copy: Path, xml: Path, tests: list[str]) -> dict[str, str | None]:
    """Run ``tests`` in ``copy``; {test id: None if passed, else its first error line}."""
    env = dict(os.environ, PYTHONPATH=str(copy))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
           "--tb=line", f"--junitxml={xml}", *tests]  # fmt: skip
    subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=1800)
    results = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{Path(case.get('file') or case.get('classname', '')).stem}::{case.get('name')}"
        name = re.sub(r"^tests\.order\.|^tests\.", "", name)
        bad = case.find("failure")
        bad = bad if bad is not None else case.find("error")
        if bad is None:
            results[name] = None
        else:
            text = (bad.get("message") or bad.text or "").strip().splitlines()
            results[name] = (text[0] if text else "failed")[:200]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.order_mutants", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only]
    prov = provenance(seeds="fixed inside the tests (deterministic inputs)")
    records = []
    with tempfile.TemporaryDirectory(prefix="order_mutants_") as tmp:
        copy = Path(tmp) / "repo"
        copy.mkdir()
        for item in ("avalanche_sets", "tests", "docs"):
            shutil.copytree(ROOT / item, copy / item, ignore=shutil.ignore_patterns("__pycache__"))
        for item in ("README.md", "pyproject.toml"):
            shutil.copy(ROOT / item, copy / item)
        intact = run_tests(copy, Path(tmp) / "intact.xml", TESTS)
        broken = {k: v for k, v in intact.items() if v is not None}
        if broken or not intact:
            raise SystemExit(f"the intact code fails its tests, nothing measured: {broken}")
        print(f"intact: {len(intact)} tests pass", flush=True)
        for mid, kind, fault, path, old, new in chosen:
            source = (copy / path).read_text()
            if source.count(old) != 1:
                raise SystemExit(f"{mid}: the text to mutate occurs {source.count(old)} times")
            (copy / path).write_text(source.replace(old, new))
            guards = [WIRING, *EXTRA_TESTS.get(mid, [])]
            try:
                result = run_tests(copy, Path(tmp) / f"{mid}.xml", guards)
            finally:
                (copy / path).write_text(source)
            failed = {k: v for k, v in result.items() if v is not None}
            status = "caught" if failed else ("equivalent" if mid in EQUIVALENT else "MISSED")
            records.append(
                {"id": mid, "kind": kind, "fault": fault, "file": path, "status": status,
                 "tests_run": guards, "failed": failed, "why_equivalent": EQUIVALENT.get(mid)}
            )  # fmt: skip
            print(f"{mid} {status}: {len(failed)} failing — {fault}", flush=True)
            write_outputs(records[-1:], sorted(intact), prov)  # progress survives a kill


def write_outputs(records: list[dict], tests: list[str], prov: dict) -> None:
    """Merge ``records`` into ``results.json`` (a record per mutant, the latest run's wins) and
    rewrite the CSV, the markdown table and the plot. Called after every mutant, so a killed
    run keeps its progress; ``runs`` lists the provenance of each run still represented."""
    out = out_dir("order_mutants")
    path = out / "results.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    if set(old.get("tests", [])) != set(tests):
        old = {}  # other tests: the old records measured something else
    mine = {r["id"] for r in records}
    order = {m[0]: i for i, m in enumerate(MUTANTS)}
    records = sorted(
        [r for r in old.get("mutants", []) if r["id"] not in mine] + list(records),
        key=lambda r: order.get(r["id"], len(order)),
    )
    runs = [dict(run) for run in old.get("runs", [])]
    if not runs or runs[-1]["date"] != prov["date"]:
        runs.append(dict(prov, mutants=[]))
    runs[-1]["mutants"] = list(dict.fromkeys(runs[-1]["mutants"] + sorted(mine)))
    for run in runs[:-1]:  # a mutant belongs to the last run that measured it
        run["mutants"] = [m for m in run["mutants"] if m not in runs[-1]["mutants"]]
    runs = [run for run in runs[:-1] if run["mutants"]] + runs[-1:]
    write_json(path, {"runs": runs, "tests": tests, "mutants": records})
    prov = runs[-1]
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "kind", "fault", "file", "status", "n_failed", "failed_tests"])
        for r in records:
            w.writerow([r["id"], r["kind"], r["fault"], r["file"], r["status"], len(r["failed"]),
                        " ".join(sorted(r["failed"]))])  # fmt: skip
    counts = {s: sum(r["status"] == s for r in records) for s in ("caught", "equivalent", "MISSED")}
    earlier = "".join(
        f"- earlier run for {', '.join(run['mutants'])}: `{run['command']}`, {run['date']}\n"
        for run in runs[:-1]
    )
    lines = [
        header_md("ORDER mutants against the wiring tests", prov) + earlier,
        f"{len(records)} mutants; {counts['caught']} caught, {counts['MISSED']} missed, "
        f"{counts['equivalent']} equivalent (cannot change any result). Every mutant is run "
        f"against `{WIRING}`, those of the resume defect (M33, M36–M38) also against "
        f"`{DEVICE}`, the refused head (M35) also against `{CATALOGUE}`; the {len(tests)} tests "
        "of these files all pass on the intact code. Kinds: §3 = the authors' reference code "
        "(design §3), slip = a plausible mistake, defect = an issue-11 defect coming back.\n",
        "| id | kind | fault | file | status | failing tests (first error) |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        shown = "; ".join(
            f"`{t.split('::')[-1]}` ({(m or '')[:90]})" for t, m in sorted(r["failed"].items())[:3]
        )
        if len(r["failed"]) > 3:
            shown += f"; +{len(r['failed']) - 3} more"
        if r["status"] == "equivalent":
            shown = r["why_equivalent"]
        fault, shown = (text.replace("|", "\\|") for text in (r["fault"], shown))
        lines.append(
            f"| {r['id']} | {r['kind']} | {fault} | `{r['file'].split('/')[-1]}` | "
            f"{r['status']} | {shown} |"
        )
    (out / "README.md").write_text("\n".join(lines) + "\n")
    plot(records, tests, out / "caught.png")
    print(f"wrote {out}")


def plot(records: list[dict], tests: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    used = [t for t in tests if any(t in r["failed"] for r in records)]
    grid = np.array([[t in r["failed"] for t in used] for r in records], dtype=float)
    fig, ax = plt.subplots(figsize=(4.5 + 0.32 * len(used), 3.5 + 0.28 * len(records)))
    ax.imshow(grid, cmap="Reds", vmin=0, vmax=1.4, aspect="auto")
    ax.set_xticks(range(len(used)), [t.split("::")[-1][:48] for t in used], rotation=75,
                  ha="right", fontsize=7)  # fmt: skip
    ax.set_yticks(range(len(records)), [f"{r['id']} {r['fault'][:42]}" for r in records],
                  fontsize=7)  # fmt: skip
    ax.set_title("ORDER mutants (rows) × tests that fail on them (red)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
