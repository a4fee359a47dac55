"""The typed run record (``avalanche_sets.runs.record``): every committed record reads and writes
back to the same bytes, every file that is no record of this format is refused with the fix,
and what a run writes and returns is one :class:`RunRecord`."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import experiment
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.record import (
    RESULT_FILE,
    RESULT_FORMAT,
    RUN_FILE,
    Provenance,
    RecordError,
    ResultsVersionError,
    RunRecord,
    read_record,
    write_record,
)

REPO = Path(__file__).resolve().parents[2]
TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
    width=4, domains=["shapes", "strokes"], eval_mb_size=2, interim_test_episodes=2,
)  # fmt: skip
RERUN = "fix: re-run it (delete the folder, or write the run to a new --out folder)"


def _committed() -> list[Path]:
    """The folders of every committed record (``git ls-files``)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "benchmarks/results/**/result.json"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    if not listed:
        pytest.skip("no committed records (or no git checkout)")
    return [(REPO / path).parent for path in listed]


# ---------------------------------------------------------------------------- the round trip
def test_every_committed_record_reads_and_writes_back_byte_identical(tmp_path):
    folders = _committed()
    for i, folder in enumerate(folders):
        record = read_record(folder)
        assert record.folder == folder
        copy = tmp_path / str(i)
        write_record(copy, record)
        for name in (RESULT_FILE, RUN_FILE):
            assert (copy / name).read_bytes() == (folder / name).read_bytes(), folder / name
        assert read_record(copy) == record


def test_a_record_holds_one_typed_field_per_key_and_omits_what_a_run_has_not():
    record = RunRecord(method="mskm", seed=0, preset={"n_shot": 1}, code={}, result={})
    body = json.loads(record.to_result_json())
    assert list(body) == [
        "format", "method", "seed", "preset", "eval_stream", "strategy_overrides",
        "unread_settings", "code", "result",
    ]  # fmt: skip
    assert body["format"] == RESULT_FORMAT and record.to_run_json() is None
    full = dataclasses.replace(record, plugins=("P()",), user_code={"m": "h"}, tag="t",
                               memory=({"capacity": 1},), numerics={}, data={},
                               avalanche_sets="0.1.0")  # fmt: skip
    assert list(json.loads(full.to_result_json())) == [
        "format", "avalanche_sets", "method", "seed", "preset", "eval_stream",
        "strategy_overrides", "unread_settings", "plugins", "user_code", "tag", "code",
        "numerics", "data", "memory", "result",
    ]  # fmt: skip
    assert json.loads(full.to_result_json())["plugins"] == ["P()"]


def test_the_code_that_made_a_run_is_run_jsons_where_it_names_one():
    record = RunRecord(method="mskm", seed=0, preset={}, code={"package": "a"}, result={})
    assert record.made_by == {"package": "a"}
    with_run = dataclasses.replace(record, provenance=Provenance(code={"package": "b"}))
    assert with_run.made_by == {"package": "b"} and with_run.code == {"package": "a"}


# ---------------------------------------------------------------------------- refusals
def _folder(tmp_path: Path, body, run=None) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    text = body if isinstance(body, str) else json.dumps(body)
    (folder / RESULT_FILE).write_text(text)
    if run is not None:
        (folder / RUN_FILE).write_text(run if isinstance(run, str) else json.dumps(run))
    return folder


GOOD = {"format": RESULT_FORMAT, "method": "mskm", "seed": 0, "preset": {}, "code": {},
        "result": {}}  # fmt: skip


def test_a_good_record_reads(tmp_path):
    assert read_record(_folder(tmp_path, GOOD, {"seconds": 1.0})).seconds == 1.0


@pytest.mark.parametrize(
    ("body", "run", "error", "message"),
    [
        ('{"method": "ms', None, RecordError, r"result\.json is not valid JSON .*re-run"),
        ("[1, 2]", None, RecordError, r"result\.json holds a list, not a run record"),
        (GOOD, "{", RecordError, r"run\.json is not valid JSON"),
        ({**GOOD, "format": 2}, None, ResultsVersionError,
         r"holds a run record of result format 2 .*older than the format 3.*re-run it"),
        ({**GOOD, "format": 9}, None, ResultsVersionError,
         r"written by another version of avalanche-sets \(result format 9"),
        ({k: v for k, v in GOOD.items() if k != "code"}, None, RecordError,
         r"lacks \['code'\], which every run of result format 3 writes: the file was edited"),
        ({**GOOD, "sconds": 1.0}, None, RecordError,
         r"result\.json holds \['sconds'\], which no run record of result format 3 holds"),
        (GOOD, {"seconds": 1.0, "hostname": "x"}, RecordError,
         r"run\.json holds \['hostname'\], which no run record"),
        ({**GOOD, "seed": "0"}, None, RecordError,
         r"result\.json: 'seed' is str '0', not an integer as every run of result format 3"),
        ({**GOOD, "seed": True}, None, RecordError, r"'seed' is bool True, not an integer"),
        ({**GOOD, "plugins": [1]}, None, RecordError, r"'plugins' is list .*not a list of strings"),
        (GOOD, {"pid": "12"}, RecordError, r"run\.json: 'pid' is str '12', not an integer"),
    ],
)  # fmt: skip
def test_a_file_that_is_no_record_of_this_format_is_refused_with_the_fix(
    tmp_path, body, run, error, message
):
    folder = _folder(tmp_path, body, run)
    with pytest.raises(error, match=message) as err:
        read_record(folder)
    assert str(folder) in str(err.value)
    if error is RecordError and "valid JSON" not in message and "holds a list" not in message:
        assert RERUN in str(err.value)


# ---------------------------------------------------------------------------- a run's record
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny ORDER run (a memory: the optional ``memory`` key; a tag: ``tag``), with the
    record :func:`experiment._write` handed to ``write_record`` and what the call returned."""
    out = tmp_path_factory.mktemp("runs")
    written = []

    def keep(folder, record):
        written.append(record)
        experiment_write(folder, record)

    experiment_write = experiment.write_record
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AVALANCHE_SETS_CACHE", str(out / "cache"))
        mp.setattr(experiment, "write_record", keep)
        preset = resolve_preset("quick", **TINY)
        returned = run_experiment("order", preset, seed=0, out_root=out, loggers=(), tag="t")
    (record,) = written
    return out, preset, record, returned


def test_what_write_builds_is_what_it_wrote(tiny_run):
    _, _, record, returned = tiny_run
    folder = returned.folder
    assert read_record(folder) == record  # every field, the provenance included
    assert (folder / RESULT_FILE).read_text() == record.to_result_json()
    assert (folder / RUN_FILE).read_text() == record.to_run_json()
    assert record.memory and record.tag == "t" and record.plugins == ()
    body = json.loads((folder / RESULT_FILE).read_text())
    assert "plugins" not in body and "user_code" not in body and body["tag"] == "t"


def test_run_experiment_returns_the_record_with_what_the_call_did(tiny_run):
    out, preset, record, returned = tiny_run
    assert returned.status == "ran" and returned == record and returned.folder.is_dir()
    assert "status" not in (returned.folder / RESULT_FILE).read_text()  # not stored
    again = run_experiment("order", preset, seed=0, out_root=out, loggers=(), tag="t")
    assert again.status == "finished before"
    assert again == record and again.folder == returned.folder
