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
