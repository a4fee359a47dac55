"""A run's protocol holds what the run reads: an option given at its default is the default run
(one folder, one identity, one table row), a setting the method ignores is neither in its
identity nor in its row, ``table --vs`` pairs on the settings both methods read, and a setting a
method ignores but the user set is refused (``run``) or named (``sweep``)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from avalanche_sets.cli import main
from avalanche_sets.methods import default_options, normal_options, unread_settings
from avalanche_sets.presets import RunConfig, resolve_preset
from avalanche_sets.runs.folder import record_identity, run_dir_name
from avalanche_sets.runs.protocols import protocol_settings
from avalanche_sets.runs.record import RunRecord, read_record

TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2", "--set", "n_query=2",
    "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2", "--set", "threads=1",
]  # fmt: skip
STREAM = "a run evaluated on the test stream never draws the valid stream"


def _records(root: Path) -> dict[str, RunRecord]:
    return {
        p.parent.relative_to(root).as_posix(): read_record(p.parent)
        for p in sorted(root.rglob("result.json"))
    }


def _table_rows(md: Path) -> list[list[str]]:
    lines = [ln for ln in md.read_text().splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


# ------------------------------------------------------------- an explicit default is the default
def test_an_option_given_at_its_default_is_the_same_run(tmp_path, capsys):
    out = tmp_path / "runs"
    base = ["run", "--method", "order", "--seeds", "0", "--out", str(out), *TINY]
    assert main(base) == 0
    first = capsys.readouterr().out
    assert "seed 0 (" in first and "ran)" in first
    # ORDER's defaults, given explicitly (lam, beta) and in another spelling (1e-5 as 0.00001)
    again = [*base, "--strategy-set", "beta=0.003", "--strategy-set", "lam=0.00001"]
    assert main(again) == 0
    second = capsys.readouterr().out
    assert "finished before" in second
    records = _records(out)
    assert len(records) == 1  # one folder, not a "-beta0.003-lam1e_05" one beside it
    (folder, rec), = records.items()  # fmt: skip
    assert rec.strategy_overrides == {} and str(out / folder) in second
    assert main(["table", str(out), "--out", str(tmp_path / "t")]) == 0
    header, *rows = _table_rows(tmp_path / "t.md")
    assert header[0] == "method" and [r[0] for r in rows] == ["order"]  # one row


def test_normal_options_drop_what_the_method_runs_with_anyway():
    preset = resolve_preset("quick")
    # the signature's defaults (a tuple given as a list), the preset's lr, a value apart kept
    assert normal_options("order", preset, {"lam": 1e-5, "mi_terms": ["id", "ood"]}) == {}
    assert normal_options("order", preset, {"lr": preset.lr, "beta": 0.01}) == {"beta": 0.01}
    assert normal_options("order", preset.replace(lr=0.01), {"lr": 0.001}) == {"lr": 0.001}
    # a declaration's tuned options and its fixed ones are its defaults
    assert normal_options("semi-gpm", preset, {"threshold": 0.9, "lr": 0.01}) == {}
    assert normal_options("semi-gpm", preset, {"threshold": 0.97}) == {"threshold": 0.97}
    assert normal_options("order-no-ot", preset, {"use_ot": False}) == {}
    # the preset's memory is ORDER's option default; a bool is no number (True is not 1)
    assert normal_options("order", preset.replace(mem_size=50), {"mem_size": 50}) == {}
    assert default_options("order", preset)["use_ot"] is True
    assert normal_options("order", preset, {"use_ot": True, "ot_max_points": 250}) == {}


def test_a_method_classs_own_defaults_and_those_it_inherits_and_tunes(tmp_path, monkeypatch):
    (tmp_path / "protomethods.py").write_text(
        textwrap.dedent(
            """
            from avalanche_sets import OrderStrategy
            from avalanche_sets.baselines import ProtoNet

            class Own(ProtoNet):
                name = "own"
                summary = "ProtoNet with options of its own"

                def __init__(self, *, policy: str = "hardest", k: int = 3, **kwargs):
                    super().__init__(**kwargs)

            class Tuned(OrderStrategy):
                name = "tuned-order"
                summary = "ORDER with another lambda"
                tuned = {"lam": 1e-4}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "protomethods", raising=False)
    preset = resolve_preset("quick")
    assert normal_options("protomethods:Own", preset, {"policy": "hardest", "k": 4}) == {"k": 4}
    # its tuned value is its default; ORDER's default is then an override
    assert normal_options("protomethods:Tuned", preset, {"lam": 1e-4, "beta": 0.003}) == {}
    assert normal_options("protomethods:Tuned", preset, {"lam": 1e-5}) == {"lam": 1e-5}
    # a class of one's own reads the settings the class it inherits reads
    assert set(unread_settings("protomethods:Own", preset)) == set(
        unread_settings("protonet", preset)
    )


# ------------------------------------------------------------- settings a method does not read
def test_unread_settings_of_the_methods():
    preset = resolve_preset("quick")
    assert unread_settings("order", preset) == {"n_val_episodes": STREAM}
    assert set(unread_settings("order", preset, eval_stream="valid")) == {"n_test_episodes"}
    mskm = unread_settings("mskm", preset)
    assert set(mskm) == {"mem_size", "replay_batch", "n_val_episodes"}
    assert mskm["mem_size"] == "mskm keeps no memory of tasks"
    assert set(unread_settings("semi-agem", preset)) == {"replay_batch", "n_val_episodes"}
    assert "lr" in unread_settings("semi-gpm", preset)  # it trains with a rate of its own
    off = unread_settings("order", preset, {"use_replay": False})
    assert off["mem_size"] == "order runs with use_replay=False" and "replay_batch" in off
    assert "mem_size" in unread_settings("order-mi-only", preset)


def test_run_refuses_a_setting_the_method_ignores_before_any_data_loads(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["run", "--method", "mskm", "--out", str(out), *TINY, "--set", "mem_size=20"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "mem_size" in captured.err and "mskm keeps no memory of tasks" in captured.err
    assert "fix:" in captured.err
    assert "domain" not in captured.out  # the stream was never described: no data loaded
    assert not out.exists()  # no folder, no episode picture


def test_a_sweep_runs_a_method_once_for_the_values_of_a_setting_it_ignores(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["sweep", "--methods", "order", "mskm", "--set", "mem_size=20,200", "--seeds", "0",
            "--out", str(out), *TINY]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    warnings = [ln for ln in captured.err.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: mskm does not read mem_size (mskm keeps no memory of tasks): it runs once "
        "for every value of mem_size of this sweep"
    ]
    assert "sweep: 3 runs" in captured.out
    records = _records(out)
    assert sorted(r.method for r in records.values()) == ["mskm", "order", "order"]
    (mskm,) = [r for r in records.values() if r.method == "mskm"]
    assert set(mskm.unread_settings) == {"mem_size", "replay_batch", "n_val_episodes"}
    # its identity, its row's settings and its folder's name have no memory setting
    ident = record_identity(mskm)
    assert not {"mem_size", "replay_batch", "n_val_episodes"} & set(ident["preset"])
    assert "mem_size" not in protocol_settings(mskm)
    (mskm_folder,) = [f for f, r in records.items() if r.method == "mskm"]
    assert "mem_size" not in mskm_folder
    assert mskm_folder == run_dir_name(
        "mskm", RunConfig.of(mskm.preset), 0, unread=mskm.unread_settings
    ) == run_dir_name("mskm", RunConfig.of({**mskm.preset, "mem_size": 200}), 0,
                      unread=mskm.unread_settings)  # fmt: skip
    order = [r for r in records.values() if r.method == "order"]
    assert sorted(r.preset["mem_size"] for r in order) == [20, 200]
    assert all("mem_size" in record_identity(r)["preset"] for r in order)
    # the sweep again: every run finished before, the same three folders
    assert main(argv) == 0
    assert capsys.readouterr().out.count("finished before") == 3
    assert len(_records(out)) == 3
    # table --vs mskm: both memory sizes of ORDER are paired with MSKM's one row
    assert main(["table", str(out), "--vs", "mskm", "--out", str(tmp_path / "t")]) == 0
    header, *rows = _table_rows(tmp_path / "t.md")
    col = {name: i for i, name in enumerate(header)}
    by_row = {(r[col["method"]], r[col["mem_size"]]): r for r in rows}
    assert set(by_row) == {("mskm", "—"), ("order", "20"), ("order", "200")}
    delta = col["Δ vs mskm (pts)"]
    assert by_row["mskm", "—"][delta] == "(reference)"
    for mem in ("20", "200"):
        assert by_row["order", mem][delta].startswith(("+", "-")), by_row["order", mem]
    csv_rows = (tmp_path / "t.csv").read_text().splitlines()
    assert len(csv_rows) == 4
    # the other way round, MSKM's row would have two references: refused, with the fix
    assert main(["table", str(out), "--vs", "order", "--out", str(tmp_path / "u")]) == 2
    err = capsys.readouterr().err
    assert "2 rows of order share one setting with the row of mskm" in err and "fix:" in err


def test_a_sweep_refuses_a_setting_none_of_its_methods_reads(tmp_path, capsys):
    argv = ["sweep", "--methods", "mskm", "protonet", "--set", "mem_size=20,200",
            "--out", str(tmp_path / "runs"), *TINY]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "mem_size" in err and "fix:" in err and "warning" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("method", ["order", "mskm"])
def test_records_name_what_their_run_did_not_read(method, tmp_path):
    # what a run writes: its unread settings, as the record's own field (JSON-safe)
    from avalanche_sets.runs.experiment import run_settings

    preset = resolve_preset("quick")
    where = run_settings(method, preset, strategy_overrides={"lr": preset.lr})
    assert where["strategy_overrides"] == {}
    assert where["unread"] == unread_settings(method, preset)
    json.dumps(where)


def test_one_value_in_two_spellings_is_one_value_and_a_bool_is_no_number():
    from avalanche_sets.method import same_value as _same

    assert _same(["id", "ood"], ("id", "ood")) and _same(1e-5, 0.00001) and _same(None, None)
    assert not _same(True, 1) and not _same(0, False) and not _same(("id",), ("id", "ood"))
