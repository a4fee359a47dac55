"""The OOD split measured: a learner's split of the unlabeled images scored against the oracle
(AUROC of its score, precision and recall of the images it kept as in-distribution), per domain
and pooled, in ``result.json``'s ``ood_split`` and in ``avalanche-sets table --metric ood_*``.

The metric's numbers are checked against a computation by hand; a tiny ORDER run writes them,
an MSKM run (no split) does not; the table shows them, and "—" for the runs without a split.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from scipy import stats as sps

from avalanche_sets.metrics import OODSplitCollector
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.record import RESULT_FILE, RecordError, read_record, write_record

sys.path.insert(0, str(Path(__file__).parent))
from test_table import record, table  # noqa: E402

DOMAINS = ["shapes", "strokes"]


# ------------------------------------------------------------------ the numbers, by hand
def _batch(pred_id, is_ood, distances) -> dict:
    """What the metric reads of one evaluation batch: the learner's split and the oracle."""
    split = SimpleNamespace(
        is_id=torch.tensor(pred_id, dtype=torch.bool),
        distances=torch.tensor(distances, dtype=torch.float32),
    )
    oracle = SimpleNamespace(unlabeled_is_ood=torch.tensor(is_ood, dtype=torch.bool))
    return {"iteration": SimpleNamespace(ood_split=split), "mb_x": SimpleNamespace(oracle=oracle)}


def _evaluate(collector: OODSplitCollector, batches: dict[int, list[dict]]) -> None:
    """One ``eval`` call of the test stream, through the plugin's callbacks."""
    stream = SimpleNamespace(name="test")
    s = SimpleNamespace(is_training=False, clock=SimpleNamespace(train_iterations=8))
    s.experience = SimpleNamespace(current_experience=0, origin_stream=stream)
    collector.before_eval(s)
    for j, episodes in batches.items():
        s.experience = SimpleNamespace(current_experience=j, origin_stream=stream)
        collector.before_eval_exp(s)
        for attrs in episodes:
            for k, v in attrs.items():
                setattr(s, k, v)
            collector.after_eval_iteration(s)
        collector.after_eval_exp(s)
    collector.after_eval(s)


# Domain 0, one episode: distances 0.1 0.4 0.4 0.8, truth ID ID OOD OOD, kept as ID: the first 3.
# Domain 1, two episodes: (0.2 0.9 0.5 | ID OOD ID | kept 1 0 0), (0.3 0.3 0.7 | ID OOD OOD |
# kept 1 1 0). A score is minus the distance, ID the positives; a tie counts one half.
HAND = {
    # AUROC: ID pairs beating OOD. d0: 0.1 beats 0.4, 0.8; 0.4 ties 0.4, beats 0.8 -> 3.5 / 4.
    # d1: 0.2 beats 3; 0.5 beats 0.9, 0.7; 0.3 beats 0.9, 0.7, ties 0.3 -> 7.5 / 9.
    # pooled (ID 0.1 0.4 0.2 0.5 0.3 vs OOD 0.4 0.8 0.9 0.3 0.7): 5 + 3.5 + 5 + 3 + 4.5 = 21 / 25
    "auroc": ([3.5 / 4, 7.5 / 9], 21 / 25),
    # precision, of the images kept as ID: d0 2 of 3; d1 2 of 3; pooled 4 of 6
    "precision": ([2 / 3, 2 / 3], 4 / 6),
    # recall, of the ID images: d0 2 of 2; d1 2 of 3; pooled 4 of 5
    "recall": ([1.0, 2 / 3], 4 / 5),
}


def test_the_split_is_scored_per_domain_and_pooled_as_computed_by_hand():
    collector = OODSplitCollector()
    _evaluate(collector, {
        0: [_batch([[1, 1, 1, 0]], [[0, 0, 1, 1]], [[0.1, 0.4, 0.4, 0.8]])],
        1: [_batch([[1, 0, 0], [1, 1, 0]], [[0, 1, 0], [0, 1, 1]],
                   [[0.2, 0.9, 0.5], [0.3, 0.3, 0.7]])],
    })  # fmt: skip
    got = collector.record(DOMAINS)
    assert list(got) == ["domains", "auroc", "precision", "recall", "n_unlabeled", "pooled"]
    assert got["domains"] == DOMAINS
    for measure, (per_domain, pooled) in HAND.items():
        assert got[measure] == pytest.approx(per_domain, abs=1e-12), measure
        assert got["pooled"][measure] == pytest.approx(pooled, abs=1e-12), measure
    assert got["n_unlabeled"] == [4, 6] and got["pooled"]["n_unlabeled"] == 10


def test_an_undefined_value_is_null_and_a_learner_without_a_split_has_no_record():
    collector = OODSplitCollector()
    # domain 0: every image OOD (no ID image: recall and AUROC undefined); domain 1 no split
    no_split = {"iteration": SimpleNamespace(ood_split=None), "mb_x": SimpleNamespace()}
    _evaluate(collector, {0: [_batch([[1, 0]], [[1, 1]], [[0.1, 0.2]])], 1: [no_split]})
    got = collector.record(DOMAINS)
    assert got["auroc"] == [None, None] and got["recall"] == [None, None]
    assert got["precision"] == [0.0, None] and got["n_unlabeled"] == [2, 0]
    assert got["pooled"] == {"auroc": None, "precision": 0.0, "recall": None, "n_unlabeled": 2}
    nothing = OODSplitCollector()
    _evaluate(nothing, {0: [no_split], 1: [no_split]})
    assert nothing.record(DOMAINS) is None


# ------------------------------------------------------------------ a run's record
TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
    width=4, domains=DOMAINS, eval_mb_size=2, interim_test_episodes=2,
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """A tiny ORDER run (its OOD split on) and a tiny MSKM run (no split)."""
    out = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AVALANCHE_SETS_CACHE", str(out / "cache"))
        preset = resolve_preset("quick", **TINY)
        return {
            m: run_experiment(m, preset, seed=0, out_root=out, loggers=())
            for m in ("order", "mskm")
        }


def test_an_order_run_records_its_split_per_domain_and_pooled(tiny_runs):
    order = tiny_runs["order"]
    body = json.loads((order.folder / RESULT_FILE).read_text())
    split = body["ood_split"]
    assert split == order.ood_split and list(body)[-1] == "ood_split"
    assert split["domains"] == DOMAINS == body["result"]["domains"]
    # each domain: 2 test episodes of 5 classes x 2 unlabeled ID images + 4 OOD images
    assert split["n_unlabeled"] == [2 * (5 * 2 + 4)] * 2
    assert split["pooled"]["n_unlabeled"] == 2 * 2 * (5 * 2 + 4)
    for measure in ("auroc", "precision", "recall"):
        values = [*split[measure], split["pooled"][measure]]
        assert len(values) == 3 and all(0 <= v <= 1 for v in values), (measure, values)
        assert order.ood_value(measure) == split["pooled"][measure]
    assert read_record(order.folder) == order  # it reads back as written


def test_an_mskm_run_has_no_split_and_no_ood_split_key(tiny_runs):
    mskm = tiny_runs["mskm"]
    assert mskm.ood_split is None and mskm.ood_value("auroc") is None
    assert "ood_split" not in json.loads((mskm.folder / RESULT_FILE).read_text())
    with pytest.raises(ValueError, match="no such measure of an OOD split; use one of auroc"):
        mskm.ood_value("AUROC")


GOOD_SPLIT = {
    "domains": DOMAINS, "auroc": [0.9, None], "precision": [0.8, 0.7], "recall": [1.0, 0.5],
    "n_unlabeled": [28, 28], "pooled": {"auroc": 0.8, "precision": 0.75, "recall": 0.7,
                                        "n_unlabeled": 56},
}  # fmt: skip


@pytest.mark.parametrize(
    "bad",
    [
        {**GOOD_SPLIT, "auroc": [0.9]},  # one value for two domains
        {**GOOD_SPLIT, "recall": [1.5, 0.5]},  # no share
        {**GOOD_SPLIT, "pooled": {"auroc": 0.8}},
        {k: v for k, v in GOOD_SPLIT.items() if k != "n_unlabeled"},
        [0.9, 0.8],
    ],
)
def test_a_record_with_a_split_of_another_shape_is_refused_with_the_fix(tmp_path, bad):
    good = tmp_path / "good"
    write_record(good, dataclasses.replace(record(), ood_split=GOOD_SPLIT))
    assert read_record(good).ood_split == GOOD_SPLIT
    body = json.loads((good / RESULT_FILE).read_text())
    (good / RESULT_FILE).write_text(json.dumps({**body, "ood_split": bad}))
    with pytest.raises(RecordError, match=r"'ood_split' is .*not an object of OOD split lists"):
        read_record(good)


# ------------------------------------------------------------------ the table
#: each seed's pooled AUROC, precision, recall and its per-domain AUROC, of ORDER's three runs
ORDER_SEEDS = {0: (0.80, 0.9, 0.6, [0.7, 0.9]), 1: (0.84, 0.8, 0.7, [0.8, 0.9]),
               2: (0.88, 0.7, 0.8, [0.9, 0.8])}  # fmt: skip


def _write_runs(root: Path) -> None:
    for seed, (auroc, precision, recall, per_domain) in ORDER_SEEDS.items():
        split = {
            "domains": DOMAINS, "auroc": per_domain, "precision": [precision] * 2,
            "recall": [recall] * 2, "n_unlabeled": [28, 28],
            "pooled": {"auroc": auroc, "precision": precision, "recall": recall,
                       "n_unlabeled": 56},
        }  # fmt: skip
        write_record(
            root / f"order-{seed}",
            dataclasses.replace(record(method="order", seed=seed), ood_split=split),
        )
        write_record(root / f"mskm-{seed}", record(method="mskm", seed=seed))


def _row(text: str, method: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {method} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_table_metric_ood_auroc_shows_the_mean_over_seeds_with_its_interval(tmp_path, capsys):
    _write_runs(tmp_path)
    code, out, _ = table(capsys, tmp_path, "--metric", "ood_auroc")
    assert code == 0
    assert "| method | OOD AUROC (%) | shapes | strokes | seeds |" in out
    # by hand: mean 0.84, sample sd 0.04, t(0.975, 2 df) * sd / sqrt(3)
    half = sps.t.ppf(0.975, 2) * 0.04 / math.sqrt(3)
    assert _row(out, "order") == [
        "order", f"84.00 ± {100 * half:.2f}", "80.00", "86.67", "0, 1, 2"
    ]  # fmt: skip
    assert _row(out, "mskm") == ["mskm", "—", "—", "—", "—"]  # never 0
    assert "—: the row's runs record no OOD split: the method splits no unlabeled images" in out
    assert "95% Student-t interval over seeds (n = 3)" in out
    code, out, _ = table(capsys, tmp_path, "--metric", "ood_recall")
    assert _row(out, "order")[:2] == ["order", f"70.00 ± {100 * half * 2.5:.2f}"]  # sd 0.1
    assert "ID recall (%)" in out and "of the in-distribution unlabeled images" in out


def test_table_metric_out_writes_the_table_and_no_zero_for_a_row_without_a_split(tmp_path, capsys):
    _write_runs(tmp_path / "runs")
    code, out, _ = table(capsys, tmp_path / "runs", "--metric", "ood_precision",
                         "--out", tmp_path / "t")  # fmt: skip
    assert code == 0 and (tmp_path / "t.md").read_text().startswith("| method | ID precision")
    rows = {r["method"]: r for r in csv.DictReader(open(tmp_path / "t.csv"))}
    assert float(rows["order"]["precision"]) == pytest.approx(0.8)
    assert rows["mskm"]["precision"] == "" and rows["mskm"]["seeds"] == "0"
    assert json.loads((tmp_path / "t.json").read_text())["metric"] == "ood_precision"
    assert not list(tmp_path.glob("t*.png"))  # the pictures draw the accuracy only


def test_table_metric_ood_with_vs_or_a_wrong_name_is_refused(tmp_path, capsys):
    _write_runs(tmp_path)
    code, _, err = table(capsys, tmp_path, "--metric", "ood_auroc", "--vs", "mskm")
    assert code == 2 and "--vs mskm gives the paired Δ of the accuracy" in err
    assert "drop --vs, or table --metric accuracy" in err
    with pytest.raises(SystemExit):
        table(capsys, tmp_path, "--metric", "auroc")
    assert "invalid choice: 'auroc'" in capsys.readouterr().err
    code, out, _ = table(capsys, tmp_path)  # the default: the accuracy, as before
    assert code == 0 and "accuracy (%)" in out and "OOD AUROC" not in out
