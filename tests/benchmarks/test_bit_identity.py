"""``benchmarks.bit_identity``: the comparison it reports, and the tree it really runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bit_identity

ROOT = Path(__file__).resolve().parents[2]


def _fake_runs(monkeypatch, tmp_path, hashes: dict[tuple[str, str], str]):
    def run_record(tree, method, out):
        side = "reference" if Path(tree) != bit_identity.ROOT else "this"
        return hashes[side, method], out / "result.json"

    monkeypatch.setattr(bit_identity, "run_record", run_record)
    monkeypatch.setattr(bit_identity, "out_dir", lambda name: tmp_path)


def test_equal_hashes_pass_and_one_difference_fails_naming_the_method(monkeypatch, tmp_path):
    reference = tmp_path / "before"
    (reference / "avalanche_sets").mkdir(parents=True)
    (reference / "avalanche_sets" / "__init__.py").write_text("")
    same = {(side, m): f"h-{m}" for side in ("reference", "this") for m in bit_identity.METHODS}
    _fake_runs(monkeypatch, tmp_path, same)
    assert bit_identity.main(["--reference", str(reference)]) == 0
    record = json.loads((tmp_path / "results.json").read_text())
    assert [r["identical"] for r in record["runs"]] == [True, True, True]

    _fake_runs(monkeypatch, tmp_path, {**same, ("this", "mskm"): "other"})
    assert bit_identity.main(["--reference", str(reference)]) == 1
    table = (tmp_path / "README.md").read_text()
    assert "| mskm |" in table and "**no**" in table and table.count("| yes |") == 2


def test_a_reference_without_the_package_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        bit_identity.main(["--reference", str(tmp_path)])


def test_the_child_process_imports_the_tree_it_is_given(tmp_path):
    assert bit_identity.tree_env(ROOT)["PYTHONPATH"] == str(ROOT)
    (tmp_path / "avalanche_sets").mkdir()  # no __init__: the installed package would answer
    with pytest.raises(SystemExit, match="shadowed"):
        bit_identity.tree_env(tmp_path)


def test_the_digest_ignores_what_made_the_record_and_nothing_else(tmp_path):
    record = {"method": "order", "result": {"matrix": [[0.5]]}, "code": {"commit": "a" * 40}}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record))
    digest = bit_identity.record_digest(path)
    path.write_text(json.dumps({**record, "code": {"commit": "b" * 40}, "numerics": {}}))
    assert bit_identity.record_digest(path) == digest  # another commit: the same numbers
    path.write_text(json.dumps({**record, "result": {"matrix": [[0.25]]}}))
    assert bit_identity.record_digest(path) != digest  # another number
