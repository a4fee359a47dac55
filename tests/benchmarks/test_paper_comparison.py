"""Our runs next to the paper's: cells, paired differences and references per artefact."""

import dataclasses
import sys

import numpy as np

from avalanche_sets.runs.record import Provenance, RunRecord
from benchmarks import _paper


def _rec(method, seed, episodes, shot=5, overrides=None, **preset):
    acc = np.asarray(episodes, dtype=float)
    return RunRecord(
        method=method, seed=seed, eval_stream="test", provenance=Provenance(seconds=1.0),
        preset={"n_shot": shot, "n_ood": 50, "mem_size": 200, "seeds": [seed], "root": "x",
                "precision": "fp32", **preset},
        strategy_overrides=overrides or {},
        code={"version": "0.1.0", "commit": "0" * 40, "dirty": False},
        result={"mean_accuracy": float(acc.mean()), "mean_ci95": 0.01, "episode_acc": list(acc),
                "forgetting": [None], "domains": ["d"], "final": [float(acc.mean())],
                "matrix": [[float(acc.mean())]]},
    )  # fmt: skip


def _row(md: str, label: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_paired_delta_is_the_mean_per_episode_difference_over_seeds():
    rng = np.random.default_rng(0)
    base = {s: rng.uniform(0.4, 0.6, 50) for s in (0, 1)}
    gain = {0: 0.02, 1: 0.06}
    recs = [_rec("mskm", s, base[s]) for s in (0, 1)]
    recs += [_rec("order", s, base[s] + gain[s]) for s in (0, 1)]
    md = _paper.comparison_md("table2", recs, row_order=["mskm", "order"])
    cells = _row(md, "order")
    # columns: method, ours 5-shot, Δ 5-shot, forgetting 5-shot, paper 5-shot (5-shot only)
    mean = np.mean([(base[s] + gain[s]).mean() for s in (0, 1)])
    assert cells[1].startswith(f"{100 * mean:.2f} ± ")
    # per-seed Δ 0.02 and 0.06: over seeds t(0.975, 1 df) · sd / sqrt(2) = 12.706205 · 0.02
    assert cells[2] == "+4.00 ± 0.00 (+2.0, +6.0) [seeds ± 25.41 †]"
    assert cells[3] == "n/a"  # one domain: nothing to forget
    assert cells[4] == "53.96 ± 0.71"  # the paper's ORDER, 5-shot
    assert _row(md, "mskm")[2] == "—"  # no Δ of the reference to itself
    # a row only the paper has is listed with its numbers and no runs
    assert _row(md, "protonet")[1:3] == ["—", "—"]


def test_pairs_md_pairs_each_seeds_episodes_and_only_the_seeds_both_rows_ran():
    rng = np.random.default_rng(1)
    base = {s: rng.uniform(0.4, 0.6, 40) for s in (0, 1, 2)}
    gain = {0: 0.01, 1: 0.05, 2: 0.03}
    recs = [_rec("semi-er", s, base[s]) for s in (0, 1, 2)]
    recs += [_rec("order", s, base[s] + gain[s]) for s in (0, 1)]  # seed 2 not run
    recs += [_rec("order", 0, base[0] + 0.2, shot=1), _rec("semi-er", 1, base[1], shot=1)]
    md = _paper.pairs_md(recs, [("order", "semi-er"), ("joint", "order")], [5, 1])
    five, one = _row(md, "order − semi-er")[1:]
    # each seed's episodes differ by exactly its gain: Δ = mean gain, paired CI 0
    # over seeds: Δ_s 0.01 and 0.05, 12.706205 · (0.04 / sqrt(2)) / sqrt(2) = 0.2541; 2 seeds: †
    assert five == "+3.00 ± 0.00 (+1.0, +5.0) [seeds ± 25.41 †], seeds [0, 1]"
    assert one == "—"  # 1-shot: no seed has both rows
    assert _row(md, "joint − order")[1:] == ["—", "—"]


def test_unpaired_runs_get_no_delta():
    # a different seed or a different R is not the same test episodes: no pairing
    recs = [_rec("mskm", 0, [0.5] * 10), _rec("order", 1, [0.6] * 10),
            _rec("tpn", 0, [0.6] * 10, n_ood=250)]  # fmt: skip
    md = _paper.comparison_md("table2", recs)
    assert _row(md, "order")[2] == "—"
    assert _row(md, "tpn")[2] == "—" and _row(md, "tpn")[1] != "—"


def test_stream_tables_carry_each_seeds_average_forgetting_with_a_ci_over_seeds():
    # three domains; seed 0 forgets 30 points of domain 0 and 10 of domain 1 (after a peak of
    # 0.7 on domain 1 in row 1), seed 1 forgets 10 and 0: averages 20 and 5, mean 12.5
    mats = {
        0: [[0.8, 0.1, 0.1], [0.6, 0.7, 0.1], [0.5, 0.6, 0.9]],
        1: [[0.6, 0.1, 0.1], [0.7, 0.5, 0.1], [0.6, 0.5, 0.8]],
    }
    recs = []
    for seed, m in mats.items():
        rec = _rec("semi-seq", seed, [0.5] * 10)
        rec.result["matrix"] = m
        recs.append(rec)
    joint = _rec("joint", 0, [0.6] * 10)
    joint.result["matrix"] = [[0.6, 0.6, 0.6]]  # trained once: nothing to forget
    md = _paper.comparison_md("table3", [*recs, joint])
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    col = header.index("forgetting, pts (5-shot)")
    half = 12.7062 * np.std([20.0, 5.0], ddof=1) / np.sqrt(2)
    assert _row(md, "semi-seq")[col] == f"12.50 ± {half:.2f}"
    assert _row(md, "joint")[col] == "n/a"
    assert _paper.forgetting_cell(recs[:1]) == "20.00 (1 seed)"
    # a single-domain artefact has no forgetting column
    assert "forgetting" not in _paper.comparison_md("memory_size", recs).splitlines()[0]


def test_lambda_beta_cells_pair_with_the_default_and_memory_with_200():
    ep = np.linspace(0.3, 0.7, 20)
    recs = [
        _rec("order", 0, ep, overrides={"lam": 1e-5, "beta": 0.003}),
        _rec("order", 0, ep - 0.01, overrides={"lam": 1e-4, "beta": 0.01}),
    ]
    md = _paper.comparison_md("lambda_beta", recs)
    assert md.startswith("| λ | ours 5-shot, β = 0.003 |")
    row = _row(md, "λ = 1e-4")
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    assert row[header.index("Δ vs lam = 1e-5, beta = 0.003, paired (5-shot, β = 0.01)")] == (
        "-1.00 ± 0.00 [1 seed †]"
    )
    assert row[header.index("paper 5-shot, β = 0.01")] == "52.65 ± 0.79"
    mem = [_rec("order", 0, ep), _rec("order", 0, ep - 0.02, mem_size=50)]
    md = _paper.comparison_md("memory_size", mem)
    assert _row(md, "order, memory 50")[2] == "-2.00 ± 0.00 [1 seed †]"
    assert _row(md, "order, memory 50")[3] == "52.75 ± 0.77"


def test_main_tables_show_the_packs_and_the_synthetic_tables_each_from_its_own_runs(
    tmp_path, monkeypatch
):
    import json

    from avalanche_sets.runs.record import write_record
    from benchmarks import main_tables

    results = tmp_path / "results"
    acc = {("packs", "mskm"): 0.5, ("packs", "order"): 0.55,
           ("synthetic", "mskm"): 0.8, ("synthetic", "order"): 0.9}  # fmt: skip
    for source, folder in (("packs", "table2"), ("synthetic", "table2_synthetic")):
        runs = []
        for method in ("mskm", "order"):
            rec = _rec(method, 0, [acc[source, method]] * 10, source=source)
            run = f"runs/{method}/{source}-seed0"
            (results / run).mkdir(parents=True)
            write_record(results / run, rec)
            runs.append(run)
        (results / folder).mkdir()
        (results / folder / "summary.json").write_text(json.dumps({"seeds": [0], "runs": runs}))
    conv = []  # the converged regime's Table 3: ORDER at 75% of Joint
    for method, a in (("order", 0.6), ("joint", 0.8)):
        run = f"runs/{method}/converged-seed0"
        (results / run).mkdir(parents=True)
        write_record(results / run, _rec(method, 0, [a] * 10))
        conv.append(run)
    (results / "table3_converged").mkdir()
    (results / "table3_converged" / "summary.json").write_text(
        json.dumps({"seeds": [0], "runs": conv})
    )
    monkeypatch.setattr(main_tables, "RESULTS", results)
    monkeypatch.setattr(sys, "argv", ["main_tables.py"])
    main_tables.main()
    md = (results / "main_tables.md").read_text()
    # the packs' provenance link, as it resolves from benchmarks/results/
    sets_mini = main_tables.SETS_MINI.replace("](docs/", "](../../docs/")
    md, converged = md.split(f"**Table 3, converged regime** (ours: {sets_mini}, `converged`")
    share = converged.split("**ORDER as a percentage of Joint, converged regime**")[1]
    assert _row(share, "5")[2] == "75.0% (1 seed)"
    packs, synthetic = md.split("**Table 2, synthetic benchmark** (ours: the offline synthetic")
    assert packs.startswith(f"**Table 2** (ours: {sets_mini}, `cpu` preset")
    assert _row(packs, "order")[1].startswith("55.00") and _row(packs, "order")[2].startswith(
        "+5.00"
    )
    assert _row(synthetic, "order")[1].startswith("90.00")
    assert _row(synthetic, "order")[2].startswith("+10.00")


def test_order_as_a_share_of_joint_uses_the_seeds_both_have():
    recs = [_rec("order", 0, [0.6]), _rec("order", 1, [0.7]), _rec("joint", 0, [0.8])]
    recs += [_rec("joint-matched", s, [1.0]) for s in (0, 1)]
    recs += [_rec("order", 0, [0.3], shot=1), _rec("semi-seq", 0, [0.1], shot=1)]
    md = _paper.share_of_joint_md(recs, shots=[1, 5])
    five = _row(md, "5")
    # ORDER / Joint over seed 0 only (Joint has no seed 1): 0.6 / 0.8
    assert five[1] == "80.00%" and five[2] == "75.0% (1 seed)"
    assert five[3] == "100.00%" and five[4] == "65.0% (2 seeds)"  # (0.6 + 0.7) / 2 / 1.0
    assert five[5] == "80.0% (1 seed)" and five[6] == "87.3%"  # the paper: 53.96 / 61.78
    one = _row(md, "1")
    assert one[1:5] == ["—", "—", "—", "—"] and one[6] == "82.6%"  # 41.25 / 49.91


def test_the_reference_pairs_on_the_settings_both_runs_read():
    # MSKM's record names mem_size as unread (as every record does since issue 42): it is the
    # reference of ORDER's runs at any memory size; a setting both read still keeps them apart
    ep = np.linspace(0.3, 0.7, 20)
    mskm = dataclasses.replace(
        _rec("mskm", 0, ep, mem_size=200),
        unread_settings={"mem_size": "mskm keeps no memory of tasks"},
    )
    order = _rec("order", 0, ep + 0.03, mem_size=20)
    other = _rec("order", 0, ep + 0.03, shot=1, mem_size=20)
    assert _paper.reference_of("table2", order, [mskm, order, other]) is mskm
    assert _paper.reference_of("table2", other, [mskm, order, other]) is None
    md = _paper.comparison_md("table2", [mskm, order], row_order=["mskm", "order"])
    assert _row(md, "order")[2].startswith("+3.00 ± 0.00")
