"""benchmarks/batched_step_ab.py pairs the same runs of two code versions on their test episodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.batched_step_ab import compare


def _write(root, method, seed, acc, *, threads=1):
    folder = root / method / f"run-seed{seed}"
    folder.mkdir(parents=True)
    record = {
        "method": method,
        "seed": seed,
        "preset": {"n_way": 5, "threads": threads},
        "data": {"source": "synthetic"},
        "result": {"episode_acc": list(acc), "mean_accuracy": float(np.mean(acc))},
    }
    (folder / "result.json").write_text(json.dumps(record))


def test_paired_deltas_their_intervals_and_bit_identity(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 1.0, 200)
    for seed in (0, 1, 2):
        _write(tmp_path / "a", "order", seed, base)
        _write(tmp_path / "a", "protonet", seed, base)
        shift = 0.05 if seed == 1 else 0.0  # one seed really moved, on every episode
        _write(tmp_path / "b", "order", seed, base + shift + rng.normal(0, 0.01, 200))
        _write(tmp_path / "b", "protonet", seed, base)
    summary = compare(tmp_path / "a", tmp_path / "b")
    rows = {(r["method"], r["seed"]): r for r in summary["rows"]}
    assert rows[("order", 1)]["excludes_0"] and rows[("order", 1)]["delta"] == pytest.approx(
        0.05, abs=0.005
    )
    assert not rows[("order", 0)]["excludes_0"] and not rows[("order", 2)]["excludes_0"]
    assert all(rows[("protonet", s)]["bit_identical"] for s in (0, 1, 2))
    assert not rows[("order", 0)]["bit_identical"]
    over = summary["over_seeds"]["order"]
    assert over["seeds"] == [0, 1, 2] and over["delta"] == pytest.approx(0.05 / 3, abs=0.005)


def test_runs_of_other_settings_are_refused_unless_named(tmp_path):
    _write(tmp_path / "a", "mskm", 1, [0.5, 0.6])
    _write(tmp_path / "b", "mskm", 1, [0.5, 0.7], threads=2)
    with pytest.raises(SystemExit, match="differ in preset"):
        compare(tmp_path / "a", tmp_path / "b")
    row = compare(tmp_path / "a", tmp_path / "b", differing=("threads",))["rows"][0]
    assert row["delta"] == pytest.approx(0.05)


def test_a_record_is_identical_but_its_code_only_when_nothing_else_differs(tmp_path):
    acc = np.linspace(0.5, 1.0, 50)
    for side, package in (("a", "p1"), ("b", "p2")):
        _write(tmp_path / side, "protonet", 0, acc)
        _write(tmp_path / side, "mskm", 0, acc)
        for method in ("protonet", "mskm"):
            path = tmp_path / side / method / "run-seed0" / "result.json"
            record = json.loads(path.read_text())
            record["code"] = {"package": package}  # differs by design
            if side == "b" and method == "mskm":
                record["unread_settings"] = {"mem_size": "keeps no memory"}  # differs for real
            path.write_text(json.dumps(record))
    rows = {r["method"]: r for r in compare(tmp_path / "a", tmp_path / "b")["rows"]}
    assert rows["protonet"]["identical_but_code"] and rows["protonet"]["bit_identical"]
    assert rows["mskm"]["bit_identical"] and not rows["mskm"]["identical_but_code"]
