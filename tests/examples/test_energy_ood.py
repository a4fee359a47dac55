"""``examples/energy_ood.py``, the guide's OOD detector of one's own in ORDER's place: it
imports only public names, replaces ORDER's split through ``ood_detector`` (its split is the
one the head uses), and runs through ``run``, ``sweep`` and ``table`` beside ORDER."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_it_imports_only_public_names():
    tree = ast.parse((EXAMPLES / "energy_ood.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("avalanche_sets"):
            assert not any(part.startswith("_") for part in node.module.split("."))
            for alias in node.names:
                assert not alias.name.startswith("_"), alias.name
                module = __import__(node.module, fromlist=[alias.name])
                if hasattr(module, "__all__") and node.module != "avalanche_sets.cli":
                    assert alias.name in module.__all__, (node.module, alias.name)


def test_its_split_is_the_energy_cut_at_the_query_quantile(load_example):
    ex = load_example("energy_ood")
    torch.manual_seed(0)
    protos = torch.eye(3, 4)[None]  # [1, 3, 4]: three unit prototypes
    query = protos.repeat(1, 2, 1) + 0.05 * torch.randn(1, 6, 4)
    unlabeled = torch.cat([protos[0, :2], -protos[0, :2]])[None]  # two ID, two opposite
    split = ex.EnergyDetector(quantile=1.0).split(query, unlabeled, protos)
    assert split.is_id.tolist() == [[True, True, False, False]]
    assert (split.distances[0, 2:] > split.distances[0, :2].max()).all()
    strategy = ex.EnergyOrder(seed=0)
    assert isinstance(strategy.ood_split.detector, ex.EnergyDetector)
    with pytest.raises(ValueError, match=r"\['ood_k'\] are read by ORDER's own OOD detector"):
        ex.EnergyOrder(ood_k=2.0)


@pytest.mark.slow
def test_it_runs_through_run_sweep_and_table_beside_order(
    load_example, tmp_path, monkeypatch, capsys
):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where the command line finds energy_ood
    out = load_example("energy_ood").main(["--tiny", "--out", str(tmp_path)])
    said = capsys.readouterr().out
    records = {
        (r["method"], r["seed"]): r
        for r in (json.loads(p.read_text()) for p in out.rglob("result.json"))
    }
    assert set(records) == {(m, s) for m in ("order", "energy_ood:EnergyOrder") for s in (0, 1)}
    ours, order = records["energy_ood:EnergyOrder", 0], records["order", 0]
    assert ours["user_code"] and ours["result"]["domains"] == order["result"]["domains"]
    # the splits differ (another detector), and both are measured on every domain
    assert ours["ood_split"]["auroc"] != order["ood_split"]["auroc"]
    assert len(ours["ood_split"]["auroc"]) == len(ours["result"]["domains"])
    rows = [line for line in said.splitlines() if line.startswith("| energy_ood:EnergyOrder")]
    assert len(rows) == 2, said  # one row in the accuracy table, one in the OOD table
    assert all("| 0, 1 |" in r for r in rows)
