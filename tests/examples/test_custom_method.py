"""``examples/custom_method.py``, the code of the "Writing your own method" guide: its plugin
adds its term every iteration, and its method runs through ``run``, ``sweep`` and ``table``
beside a built-in method, as a built-in method does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow
def test_the_method_runs_through_run_sweep_and_table_beside_mskm(load_example, tmp_path, capsys):
    table = load_example("custom_method").main(["--tiny", "--out", str(tmp_path)])
    said = capsys.readouterr().out
    records = {
        (r["method"], r["seed"]): r
        for r in (json.loads(p.read_text()) for p in tmp_path.rglob("result.json"))
    }
    assert set(records) == {(m, s) for m in ("mskm", "custom_method:MSKMSpread") for s in (0, 1)}
    ours = [p.parent for p in tmp_path.glob("custom_method.MSKMSpread/*/result.json")]
    assert len(ours) == 2  # its own folder, as a built-in method's
    for folder in ours:
        assert {"run.json", "table.md", "log.txt", "accuracy_matrix.png"} <= {
            p.name for p in folder.iterdir()
        }
    # the same stream (the same test episodes), another method: other numbers
    mskm, spread = records["mskm", 0]["result"], records["custom_method:MSKMSpread", 0]["result"]
    assert mskm["domains"] == spread["domains"] and mskm["matrix"] != spread["matrix"]
    # the sweep found seed 0 of both finished (run above) and ran seed 1 of both
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert any(r.startswith("| custom_method:MSKMSpread |") and "| 0, 1 |" in r for r in rows)
    assert any(r.startswith("| mskm |") and "| 0, 1 |" in r for r in rows)
    assert "$ avalanche-sets sweep --methods mskm custom_method:MSKMSpread" in said


def test_the_plugin_adds_its_named_term_every_iteration(load_example, monkeypatch):
    ex = load_example("custom_method")
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where the command line finds it
    from avalanche_sets import run_sets, sets_benchmark
    from avalanche_sets.methods import build_strategy
    from avalanche_sets.presets import resolve_preset

    preset = resolve_preset("quick", width=4, tasks_per_domain=6, n_test_episodes=2)
    bench = sets_benchmark(
        "synthetic", domains=["shapes"], n_query=2, n_unlabeled=2, n_ood=4, tasks_per_domain=6,
        n_test_episodes=2,
    )  # fmt: skip
    strategy = build_strategy("custom_method:MSKMSpread", preset, seed=0, weight=0.5)
    (plugin,) = [p for p in strategy.plugins if type(p).__name__ == "PrototypeSpreadPlugin"]
    run_sets(strategy, bench)
    assert plugin.calls == 6 // preset.meta_batch  # one call per training iteration
    spread = strategy.loss_terms["spread"]
    assert torch.isfinite(spread) and 0 < float(spread) <= 0.5
    with pytest.raises(ValueError, match="weight must be >= 0"):
        ex.PrototypeSpreadPlugin(weight=-1)
    # the term reaches the gradient: the same seed without it ends with other weights
    plain = build_strategy("mskm", preset, seed=0)
    run_sets(plain, bench)
    assert not torch.equal(next(plain.model.parameters()), next(strategy.model.parameters()))
