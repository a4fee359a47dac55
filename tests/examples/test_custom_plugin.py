"""``examples/custom_plugin.py``, the code of the "Writing your own method" guide, runs and its
plugin changes what trains."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _example():
    spec = importlib.util.spec_from_file_location(
        "custom_plugin", ROOT / "examples" / "custom_plugin.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_runs_and_its_plugin_changes_the_result(capsys):
    results = _example().main(["--tiny"])
    out = capsys.readouterr().out
    assert "spread" in out.splitlines()[-1] and "spread" not in out.splitlines()[-2]
    assert results["mskm"] != results["mskm + spread"]  # the term reached the gradient


def test_the_plugin_adds_its_named_term_every_iteration():
    ex = _example()
    from avalanche_sets import run_sets, sets_benchmark
    from avalanche_sets.methods import build_strategy
    from avalanche_sets.presets import resolve_preset

    preset = resolve_preset("quick", width=4, tasks_per_domain=6, n_test_episodes=2)
    bench = sets_benchmark(
        "synthetic", domains=["shapes"], n_query=2, n_unlabeled=2, n_ood=4, tasks_per_domain=6,
        n_test_episodes=2,
    )  # fmt: skip
    plugin = ex.PrototypeSpreadPlugin(weight=0.5)
    strategy = build_strategy("mskm", preset, seed=0, plugins=[plugin])
    run_sets(strategy, bench)
    assert plugin.calls == 6 // preset["meta_batch"]  # one call per training iteration
    spread = strategy.loss_terms["spread"]
    assert torch.isfinite(spread) and 0 < float(spread) <= 0.5
    with pytest.raises(ValueError, match="weight must be >= 0"):
        ex.PrototypeSpreadPlugin(weight=-1)
