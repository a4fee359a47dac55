"""``avalanche-sets table``: one row per protocol, the paired Δ, the footer, the pictures.

Run folders are written here as records (``result.json`` + ``run.json`` with the record schema:
``code``, ``numerics``, ``data``), no training: each test builds the runs whose differences it
is about.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from avalanche_sets.cli import main
from avalanche_sets.presets import PRESETS
from avalanche_sets.runs import protocols, report
from avalanche_sets.runs.folder import record_identity
from avalanche_sets.runs.protocols import protocol_settings
from avalanche_sets.runs.record import Provenance, RunRecord, write_record
from avalanche_sets.runs.report import aggregate_results, find_results

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ["shapes", "strokes"]
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40
BASE_PRESET = {**PRESETS["quick"], "precision": "fp32"}


def episodes(method: str, seed: int, shift: float = 0.0) -> np.ndarray:
    """Per-episode test accuracies ``[2 domains, 4 episodes]`` of one run, fixed by its name."""
    rng = np.random.default_rng([seed, sum(map(ord, method))])
    return np.clip(rng.uniform(0.3, 0.9, (2, 4)) + shift, 0, 1)


def record(method="order", seed=0, *, preset=None, strategy=None, plugins=None, commit=COMMIT_A,
           dirty=False, threads=1, content="c0ffee", eval_stream="test", shift=0.0,
           unread=None):  # fmt: skip
    """The record (``result.json`` and ``run.json``) of one finished run."""
    ep = episodes(method, seed, shift)
    final = ep.mean(axis=1)
    first = float(np.clip(final[0] + 0.1 * (seed + 1), 0, 1))  # domain 0 before domain 1
    return RunRecord(
        method=method, seed=seed,
        preset={**BASE_PRESET, "threads": threads, **(preset or {})},
        eval_stream=eval_stream, strategy_overrides=dict(strategy or {}),
        unread_settings=dict(unread or {}), plugins=tuple(plugins or ()),
        code={"version": "0.1.0", "commit": commit, "dirty": dirty,
              "torch": "2.4.0", "avalanche": "0.6.0"},
        numerics={"precision": "fp32", "device": "cpu", "threads": threads, "cpu_bf16": False},
        data={"source": "synthetic", "root": None, "content": content},
        result={
            "domains": DOMAINS, "matrix": [[first, None], final.tolist()],
            "final": final.tolist(), "ci95": [[0.04, None], [0.05, 0.06]],
            "final_ci95": [0.05, 0.06],
            "episode_acc": ep.ravel().tolist(), "mean_accuracy": float(ep.mean()),
        },
        provenance=Provenance(seconds=2.0, command="test"),
    )  # fmt: skip


def write(root: Path, name: str, **kw) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    write_record(folder, record(**kw))
    return folder


def table(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["table", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------- a row is one protocol
#: an identity field, by the keyword of :func:`record` that sets it -> (the other value, the
#: column that shows it)
VARIED = {
    "preset": ({"tasks_per_domain": 6}, "tasks_per_domain"),
    "strategy": ({"gamma": 0.05}, "gamma"),
    "plugins": (["PrototypeSpreadPlugin(weight=0.1)"], "plugins"),
    "eval_stream": ("valid", "eval_stream"),
    "content": ("deadbeef", "data"),
    "threads": (2, "threads"),
    "commit": (COMMIT_B, "code"),
}
FIELDS = list(VARIED)


@pytest.mark.parametrize("field", FIELDS)
def test_runs_differing_in_one_identity_field_are_two_rows(field, tmp_path, capsys):
    value, column = VARIED[field]
    write(tmp_path, "a0", seed=0)
    write(tmp_path, "a1", seed=1)
    write(tmp_path, "b0", seed=0, **{field: value})  # seed 0 again, other protocol
    rows = aggregate_results(find_results([tmp_path]))
    assert [r["seeds"] for r in rows] == [2, 1] or [r["seeds"] for r in rows] == [1, 2]
    assert len({r[column] for r in rows}) == 2, f"column {column} does not tell the rows apart"
    code, out, _ = table(capsys, tmp_path)
    assert code == 0 and column in out.splitlines()[0]


def _drop(field: str, monkeypatch) -> None:
    """The mutation: grouping that ignores ``field``."""
    if field == "commit":
        monkeypatch.setattr(protocols, "code_key", lambda rec: ("same",))
        return
    path = {"preset": ("preset", "tasks_per_domain"), "strategy": ("strategy_overrides",),
            "plugins": ("plugins",), "eval_stream": ("eval_stream",),
            "content": ("data",), "threads": ("preset", "threads")}[field]  # fmt: skip

    def without(rec):
        ident = record_identity(rec)
        inner = ident
        for key in path[:-1]:
            inner = inner[key]
        inner.pop(path[-1], None)
        return ident

    monkeypatch.setattr(protocols, "record_identity", without)


@pytest.mark.parametrize("field", FIELDS)
def test_the_split_test_fails_when_grouping_ignores_the_field(field, tmp_path, monkeypatch):
    """The test above has teeth: drop the field from the grouping and the seed-0 run of the
    other protocol lands in the row, refused as a seed counted twice."""
    value, _ = VARIED[field]
    write(tmp_path, "a0", seed=0)
    write(tmp_path, "b0", seed=0, **{field: value})
    records = find_results([tmp_path])
    _drop(field, monkeypatch)
    with pytest.raises(ValueError, match="appears twice"):
        aggregate_results(records)


def test_a_seed_twice_in_one_protocol_is_refused_naming_both_folders(tmp_path, capsys):
    a = write(tmp_path, "first", seed=0)
    b = write(tmp_path, "again", seed=0)
    code, _, err = table(capsys, tmp_path)
    assert code == 2
    assert "seed 0" in err and str(a) in err and str(b) in err and "twice" in err


def test_only_the_differing_settings_are_columns(tmp_path):
    write(tmp_path, "a", method="order", strategy={"gamma": 0.5})
    write(tmp_path, "b", method="mskm")
    rows = aggregate_results(find_results([tmp_path]))
    labels = [k for k in rows[0] if k in ("method", "gamma", "n_shot", "code", "lr")]
    assert labels == ["method", "gamma"]  # n_shot, lr and the code are the same everywhere
    assert {r["method"]: r["gamma"] for r in rows} == {"mskm": "—", "order": "0.5"}


# ---------------------------------------------------------------------- --by
def test_by_labels_and_orders_rows_but_never_merges(tmp_path, capsys):
    for shot in (5, 1):
        write(tmp_path, f"o{shot}", preset={"n_shot": shot})
    write(tmp_path, "o1lr", preset={"n_shot": 1, "lr": 0.01})
    rows = aggregate_results(find_results([tmp_path]), by=["n_shot"])
    assert [r["n_shot"] for r in rows] == ["1", "1", "5"]
    assert list(rows[0])[:2] == ["n_shot", "lr"]  # the setting that differs: a column


@pytest.mark.parametrize("typo, hint", [
    ("n_shto", "'n_shot'"), ("mthod", "'method'"), ("eval_strem", "'eval_stream'"),
])  # fmt: skip
def test_by_a_key_no_record_has_is_refused_with_did_you_mean(typo, hint, tmp_path, capsys):
    write(tmp_path, "a")
    code, out, err = table(capsys, tmp_path, "--by", f"method,{typo}")
    assert code == 2 and out == ""
    assert f"--by {typo!r}" in err and f"did you mean {hint}" in err and "n_way" in err


# ---------------------------------------------------------------------- --vs, the footer
def test_vs_is_the_paired_delta_by_hand(tmp_path, capsys):
    for s in (0, 1, 2):
        write(tmp_path, f"order{s}", method="order", seed=s, shift=0.05)
        write(tmp_path, f"mskm{s}", method="mskm", seed=s)
    write(tmp_path, "mskm3", method="mskm", seed=3)  # no order run of seed 3: not paired
    rows = {r["method"]: r for r in aggregate_results(find_results([tmp_path]), vs="mskm")}
    deltas, halves = [], []
    for s in (0, 1, 2):
        d = (episodes("order", s, 0.05) - episodes("mskm", s)).ravel()
        deltas.append(d.mean())
        halves.append(1.96 * d.std(ddof=1) / math.sqrt(d.size))
    got = rows["order"]["delta"]
    assert got["per_seed"] == pytest.approx(dict(enumerate(deltas)))
    assert got["delta"] == pytest.approx(np.mean(deltas))
    assert got["ci95"] == pytest.approx(math.sqrt(sum(h * h for h in halves)) / 3)
    # over seeds: mean ± t(0.975, 2 df) · sd / sqrt(3) of the three per-seed differences
    seeds_half = 4.302653 * np.std(deltas, ddof=1) / math.sqrt(3)
    assert got["seeds_ci95"] == pytest.approx(seeds_half, rel=1e-6)
    assert got["resolved"] is bool(abs(np.mean(deltas)) > seeds_half)
    assert rows["mskm"]["delta"] == {"vs": "mskm", "reference": True}
    code, out, _ = table(capsys, tmp_path, "--vs", "mskm")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("| order |"))
    assert f"{100 * np.mean(deltas):+.2f} ± " in line
    assert f"[seeds ± {100 * seeds_half:.2f}" in line
    assert "Δ vs mskm" in out and "paired per seed" in out and "seeds 0, 1, 2" in out
    assert "paired 95% Student-t interval over the seeds" in out
    assert "no seed-level claim" not in out  # every Δ has 3 seeds


def _hand_delta(seeds):
    """The paired Δ of order (shift 0.05) against mskm over ``seeds``, by hand: each seed's
    mean per-episode difference, their mean, the episode-level and the seed-level ± (2 seeds:
    t(0.975, 1 df) = 12.706205)."""
    each, halves = {}, []
    for s in seeds:
        d = (episodes("order", s, 0.05) - episodes("mskm", s)).ravel()
        each[s] = d.mean()
        halves.append(1.96 * d.std(ddof=1) / math.sqrt(d.size))
    values = list(each.values())
    over_seeds = 12.706205 * abs(values[0] - values[1]) / math.sqrt(2) / math.sqrt(2)
    return each, math.sqrt(sum(h * h for h in halves)) / len(seeds), over_seeds


def test_vs_pairs_by_seed_when_the_reference_lacks_a_seed_and_lists_others_in_another_order(
    tmp_path, capsys
):
    runs = [record("order", s, shift=0.05) for s in (0, 1, 2)]
    references = [record("mskm", s) for s in (2, 0)]  # no seed 1, seed 2 first
    each, episode_half, seeds_half = _hand_delta([0, 2])
    got = report.paired_delta(runs, references)
    assert got.per_seed == pytest.approx(each) and list(got.per_seed) == [0, 2]
    assert got.delta == pytest.approx((each[0] + each[2]) / 2)
    assert got.ci95 == pytest.approx(episode_half)
    assert got.seeds_ci95 == pytest.approx(seeds_half, rel=1e-6)
    assert not got.resolved  # two seeds: no seed-level claim, whatever the interval
    # the same through the command: mskm ran seeds 2 and 0 only
    for s in (0, 1, 2):
        write(tmp_path, f"order{s}", method="order", seed=s, shift=0.05)
    for s in (2, 0):
        write(tmp_path, f"mskm{s}", method="mskm", seed=s)
    row = next(r for r in aggregate_results(find_results([tmp_path]), vs="mskm")
               if r["method"] == "order")  # fmt: skip
    assert row["delta"]["per_seed"] == pytest.approx(each)
    assert row["delta"]["seeds_ci95"] == pytest.approx(seeds_half, rel=1e-6)
    code, out, _ = table(capsys, tmp_path, "--vs", "mskm")
    line = next(x for x in out.splitlines() if x.startswith("| order |"))
    assert f"[seeds ± {100 * seeds_half:.2f} †]" in line and "✓" not in line
    assert "† fewer than 3 seeds paired: no seed-level claim can be made" in out


@pytest.mark.parametrize(
    ("each", "half", "cell"),
    [({0: 0.03, 1: 0.04, 2: 0.05}, 0.02, "+4.00 ± 0.50 (+3.0, +4.0, +5.0) [seeds ± 2.00 ✓]"),
     ({0: 0.03, 1: 0.04, 2: 0.05}, 0.04, "+4.00 ± 0.50 (+3.0, +4.0, +5.0) [seeds ± 4.00]"),
     ({0: 0.03, 1: 0.05}, 0.001, "+4.00 ± 0.50 (+3.0, +5.0) [seeds ± 0.10 †]"),
     ({0: 0.04}, math.nan, "+4.00 ± 0.50 [1 seed †]")],
)  # fmt: skip
def test_a_delta_cell_marks_resolved_and_too_few_seeds(each, half, cell):
    assert report.delta_text(0.04, 0.005, each, half) == cell


def test_forgetting_and_bwt_have_intervals_over_seeds_and_the_footer_says_what_pm_is(
    tmp_path, capsys
):
    for s in (0, 1, 2):
        write(tmp_path, f"o{s}", seed=s)
    (row,) = aggregate_results(find_results([tmp_path]))
    forgetting = []
    for s in (0, 1, 2):
        final = episodes("order", s).mean(axis=1)
        forgetting.append(min(final[0] + 0.1 * (s + 1), 1.0) - final[0])
    t = sps.t.ppf(0.975, 2)
    assert row["forgetting"] == pytest.approx(np.mean(forgetting))
    assert row["forgetting_ci95"] == pytest.approx(t * np.std(forgetting, ddof=1) / math.sqrt(3))
    assert row["bwt"] == pytest.approx(-np.mean(forgetting))  # two domains: BWT = −forgetting
    assert row["bwt_ci95"] == pytest.approx(row["forgetting_ci95"])
    _, out, _ = table(capsys, tmp_path)
    assert "95% Student-t interval over seeds (n = 3)" in out
    assert f"{100 * np.mean(forgetting):.2f} ± {100 * row['forgetting_ci95']:.2f}" in out


def test_vs_a_method_no_record_has_is_refused_with_did_you_mean(tmp_path, capsys):
    write(tmp_path, "a", method="mskm")
    code, _, err = table(capsys, tmp_path, "--vs", "mksm")
    assert code == 2 and "did you mean 'mskm'" in err and "--vs 'mksm'" in err


def test_vs_pairs_within_one_setting_only(tmp_path):
    write(tmp_path, "o1", method="order", preset={"n_shot": 1})
    write(tmp_path, "o5", method="order", preset={"n_shot": 5})
    write(tmp_path, "m1", method="mskm", preset={"n_shot": 1})
    rows = {(r["method"], r["n_shot"]): r for r in
            aggregate_results(find_results([tmp_path]), vs="mskm")}  # fmt: skip
    assert rows[("order", "1")]["delta"]["per_seed"].keys() == {0}
    assert rows[("order", "5")]["delta"] is None  # no mskm run with 5 shots


MSKM_UNREAD = {"mem_size": "mskm keeps no memory of tasks", "replay_batch": "mskm replays none"}


def test_vs_pairs_on_the_settings_both_methods_read(tmp_path):
    # MSKM reads no memory size: its one row is the reference of ORDER's at every memory size,
    # paired by seed; a setting both read (n_shot) still keeps rows apart
    for seed in (0, 1):
        write(tmp_path, f"m{seed}", method="mskm", seed=seed, unread=MSKM_UNREAD)
        for mem in (20, 200):
            write(tmp_path, f"o{mem}-{seed}", method="order", seed=seed,
                  preset={"mem_size": mem}, shift=0.01 * (mem == 20))  # fmt: skip
    write(tmp_path, "o5", method="order", preset={"mem_size": 20, "n_shot": 5})
    rows = aggregate_results(find_results([tmp_path]), vs="mskm")
    by = {(r["method"], r["mem_size"], r["n_shot"]): r for r in rows}
    assert by[("mskm", "—", "1")]["delta"] == {"vs": "mskm", "reference": True}
    for mem in ("20", "200"):
        assert by[("order", mem, "1")]["delta"]["per_seed"].keys() == {0, 1}
    mskm = find_results([tmp_path / "m0"])[0]
    order = find_results([tmp_path / "o20-0"])[0]
    got = by[("order", "20", "1")]["delta"]["per_seed"][0]
    want = np.mean(np.array(order.result["episode_acc"]) - mskm.result["episode_acc"])
    assert got == pytest.approx(want)
    assert by[("order", "20", "5")]["delta"] is None  # no MSKM run with 5 shots
    # the other way round MSKM's row has two references (memory 20 and 200): refused
    with pytest.raises(ValueError, match="2 rows of order share one setting with the row of mskm"):
        aggregate_results(find_results([tmp_path]), vs="order")


def test_a_setting_a_record_did_not_read_is_no_part_of_its_protocol(tmp_path):
    write(tmp_path, "a", method="mskm", unread=MSKM_UNREAD)
    write(tmp_path, "b", method="mskm", seed=1, preset={"mem_size": 20}, unread=MSKM_UNREAD)
    recs = find_results([tmp_path])
    assert "mem_size" not in protocol_settings(recs[0]) and "mem_size" in recs[0].preset
    (row,) = aggregate_results(recs)  # one protocol, two seeds: the memory size is no column
    assert row["seeds"] == 2 and "mem_size" not in row


# ---------------------------------------------------------------------- code
def test_code_splits_rows_unless_pooled_and_the_table_says_so(tmp_path, capsys):
    write(tmp_path, "a0", seed=0)
    write(tmp_path, "a1", seed=1, dirty=True)
    write(tmp_path, "b2", seed=2, commit=COMMIT_B)
    _, out, _ = table(capsys, tmp_path)
    assert sum(x.startswith("| order |") for x in out.splitlines()) == 3
    assert "aaaaaaa+dirty" in out and "never pooled" in out
    code, out, _ = table(capsys, tmp_path, "--pool-code")
    (line,) = [x for x in out.splitlines() if x.startswith("| order |")]
    assert "aaaaaaa, aaaaaaa+dirty, bbbbbbb" in line and "--pool-code" in out


def test_pooled_code_still_refuses_a_seed_twice(tmp_path, capsys):
    write(tmp_path, "a0", seed=0)
    write(tmp_path, "b0", seed=0, commit=COMMIT_B)
    code, _, err = table(capsys, tmp_path, "--pool-code")
    assert code == 2 and "drop --pool-code" in err


def test_a_record_without_code_is_refused_by_name(tmp_path, capsys):
    """Every record names the code that made it; one without (edited by hand) is refused,
    naming the file, rather than tabled as of unknown code."""
    folder = write(tmp_path, "old", seed=0)
    body = json.loads((folder / "result.json").read_text())
    del body["code"]
    (folder / "result.json").write_text(json.dumps(body))
    write(tmp_path, "new", seed=1)
    code, _, err = table(capsys, tmp_path)
    assert code == 2 and f"{folder / 'result.json'} lacks ['code']" in err


# ---------------------------------------------------------------------- pictures
def test_out_writes_the_table_and_the_pictures_with_their_data(tmp_path, capsys):
    for s in (0, 1):
        write(tmp_path / "runs", f"o{s}", method="my_package.methods:a_long_factory_name", seed=s)
        write(tmp_path / "runs", f"m{s}", method="mskm", seed=s)
    out = tmp_path / "paper" / "table"
    code, text, _ = table(capsys, tmp_path / "runs", "--vs", "mskm", "--out", out)
    assert code == 0
    for name in ("table.md", "table.csv", "table_stream.png", "table_stream.csv",
                 "table_final.png", "table_final.csv"):  # fmt: skip
        assert (out.parent / name).is_file(), name
    with open(out.parent / "table_stream.csv") as f:
        stream = list(csv.DictReader(f))
    # domain 0 after domains 1 and 2, domain 1 after domain 2: three points per row
    assert len(stream) == 6
    point = next(p for p in stream if p["row"] == "mskm" and p["after_domain"] == "2"
                 and p["domain"] == "shapes")  # fmt: skip
    finals = [episodes("mskm", s).mean(axis=1)[0] for s in (0, 1)]
    assert float(point["accuracy_pct"]) == pytest.approx(100 * np.mean(finals))
    with open(out.parent / "table_final.csv") as f:
        assert len(list(csv.DictReader(f))) == 4


def test_a_table_of_one_setting_says_its_protocol_in_md_csv_pictures_and_stdout(
    tmp_path, capsys, monkeypatch
):
    from matplotlib.figure import Figure

    drawn = {}
    savefig = Figure.savefig

    def keep_texts(fig, path, **kw):  # the text a picture carries, caption included
        drawn[Path(path).name] = "\n".join(t.get_text() for t in fig.texts)
        return savefig(fig, path, **kw)

    monkeypatch.setattr(Figure, "savefig", keep_texts)
    mem = {"mem_size": 20, "tasks_per_domain": 40}
    for s in (0, 1):
        for shot in (1, 5):  # n_shot differs between rows: a column, not the protocol
            for method in ("order", "mskm"):
                write(tmp_path / "runs", f"{method}{shot}-{s}", method=method, seed=s,
                      preset={**mem, "n_shot": shot},
                      content="sha256:" + "0123abcd" * 8)  # fmt: skip
    out = tmp_path / "paper" / "table"
    # --caption-inside: the pictures carry their caption too (by default only beside them)
    code, text, _ = table(capsys, tmp_path / "runs", "--vs", "mskm", "--out", out,
                          "--caption-inside")  # fmt: skip
    assert code == 0
    want = [
        "n_way 5, ",
        "mem_size 20, tasks_per_domain 40, ",
        "Data: synthetic, content sha256:0123abcd0123.",
        "OOD sources: rings, lattices, spirals (synthetic's default).",
        "Domain order: ",
        "Numerics: device cpu, precision fp32, threads 1, cpu_bf16 False.",
        f"Code: every run was made by {COMMIT_A[:7]}.",
    ]
    md = (out.parent / "table.md").read_text()
    captions = {n: (out.parent / n).read_text() for n in ("table_stream.md", "table_final.md")}
    for where, body in [("stdout", text), ("table.md", md), *captions.items(), *drawn.items()]:
        protocol = next((x for x in body.splitlines() if x.startswith("Protocol (every row): ")),
                        "")  # fmt: skip
        assert "n_shot" not in protocol and "method" not in protocol, where
        for piece in want:
            assert piece in body.replace("\n", " "), (where, piece)
    assert set(drawn) == {"table_stream.png", "table_final.png"}
    assert "![" in captions["table_final.md"] and "(table_final.png)" in captions["table_final.md"]
    # the CSV stays a plain table (header first); its companion holds the protocol
    with open(out.parent / "table.csv") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == 4 and {r["n_shot"] for r in csv_rows} == {"1", "5"}
    companion = json.loads((out.parent / "table.json").read_text())
    assert companion["csv"] == "table.csv"
    settings = companion["protocol"]["settings"]
    assert settings["mem_size"] == "20" and settings["tasks_per_domain"] == "40"
    assert "n_shot" not in settings and companion["protocol"]["columns"] == ["method", "n_shot"]
    assert companion["protocol"]["data"] == ["synthetic, content sha256:0123abcd0123"]
    assert companion["protocol"]["code"] == [COMMIT_A[:7]]
    assert companion["footer"] == [x.rstrip() for x in md.split("\n\n", 1)[1].splitlines()]
    order = next(r for r in csv_rows if r["method"] == "order" and r["n_shot"] == "1")
    assert order["delta_seeds"] == "0 1" and order["delta_resolved"] == "False"
    assert [float(v) for v in order["delta_per_seed"].split()] == pytest.approx(
        [(episodes("order", s) - episodes("mskm", s)).mean() for s in (0, 1)]
    )
    assert float(order["delta_seeds_ci95"]) > 0


def test_shared_settings_are_those_every_row_has_with_one_value():
    rows = [{"n_way": "5", "mem_size": "20", "gamma": "0.1", "lr": "0.001"},
            {"n_way": "5", "mem_size": "20", "gamma": "0.5", "lr": "0.001"},
            {"n_way": "5", "mem_size": "20", "lr": "0.001"}]  # fmt: skip
    assert protocols.shared_settings(rows) == {"n_way": "5", "mem_size": "20", "lr": "0.001"}
    assert protocols.shared_settings(rows, skip=["lr"]) == {"n_way": "5", "mem_size": "20"}
    assert protocols.shared_settings([]) == {}


def test_data_and_numerics_that_differ_between_runs_are_all_named():
    body = record(content="sha256:" + "ab" * 32)
    other = dataclasses.replace(body, numerics={**body.numerics, "threads": 2})
    assert protocols.data_label(dataclasses.replace(
        body, data={"source": "packs", "root": "../d", "content": None})) == (
        "packs at ../d, content not recorded")  # fmt: skip
    assert protocols.data_label(dataclasses.replace(body, data=None)) == "not recorded"
    rows = [{"protocol_settings": {"n_way": "5", "n_shot": "1"}, "method": "order",
             "data_sources": [protocols.data_label(body)],
             "numeric_paths": sorted({protocols.numerics_label(r) for r in (body, other)}),
             "ood_sources": ["fish"], "domain_orders": ["a → b"],
             "codes": ["aaaaaaa"]}]  # fmt: skip
    lines = report.protocol_lines(rows)
    assert lines[0] == "Protocol (every row): n_way 5, n_shot 1."
    assert lines[2:4] == ["OOD sources: fish.", "Domain order: a → b."]
    assert lines[4] == (
        "Numerics (runs differ): device cpu, precision fp32, threads 1, cpu_bf16 False; "
        "device cpu, precision fp32, threads 2, cpu_bf16 False."
    )


# ---------------------------------------------------------------------- speed
def test_table_loads_no_torch(tmp_path):
    """Neither for a record written here nor for a committed one (its precision resolved,
    so reading it asks no device)."""
    write(tmp_path, "a", seed=0)
    old = ROOT / "benchmarks/results/runs/joint/packs-o1-5w1s-R50-seed0"
    assert json.loads((old / "result.json").read_text())["preset"]["precision"] == "fp32"
    shutil.copytree(old, tmp_path / "old")
    code = (
        "import sys; from avalanche_sets.cli import main; "
        f"assert main(['table', {str(tmp_path)!r}]) == 0; "
        "print(sorted(m for m in ('torch', 'avalanche', 'scipy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_two_reference_rows_in_one_setting_are_refused(tmp_path, capsys):
    write(tmp_path, "m", method="mskm")
    write(tmp_path, "mp", method="mskm", plugins=["PrototypeSpreadPlugin(weight=0.1)"])
    write(tmp_path, "o", method="order")
    code, _, err = table(capsys, tmp_path, "--vs", "mskm")
    assert code == 2 and "2 rows of mskm share one setting" in err


def test_long_names_wrap_in_titles_instead_of_being_cut(tmp_path, monkeypatch):
    from avalanche_sets.metrics import accuracy_matrix
    from avalanche_sets.runs.report import fit_title, write_heatmap

    name = "my_package.a_rather_long_module_name:my_consistency_factory_with_options"
    title = fit_title(f"{name}, seed 0: test accuracy (%) after each training domain", 60)
    lines = title.splitlines()
    assert len(lines) == 3 and all(len(x) <= 60 for x in lines)
    assert "".join(lines).replace(" ", "") == f"{name},seed0:testaccuracy(%)aftereachtrainingdomain"
    assert fit_title("x" * 200, 10, max_lines=2).endswith("…")
    seen = {}

    def fake_plot(matrix, domains, path, *, title):
        seen["title"] = title
        return path

    monkeypatch.setattr(accuracy_matrix, "plot_accuracy_matrix", fake_plot)
    write_heatmap(tmp_path, record(method=name))
    assert name in seen["title"].replace("\n", "") and "\n" in seen["title"]
