"""What a run prints: the stream, one bar per domain, the table, the paths; the rest in log.txt."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from tqdm import tqdm

from avalanche_sets.cli import main

ROOT = Path(__file__).resolve().parents[2]

# two domains, 2 training iterations each, 2 test episodes per domain
TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2",
]  # fmt: skip

METRIC_LINE = re.compile(r"EpisodeAcc/eval_phase/test_stream/Exp\d{3} = ")


def _run(capsys, *argv) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["run", "--method", "protonet", *TINY, *argv]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_run_prints_the_stream_bars_table_and_paths_and_logs_the_metrics(tmp_path, capsys):
    out, err = _run(capsys, "--out", str(tmp_path))
    folder = next(tmp_path.rglob("result.json")).parent
    lines = (out + err).strip().split("\n")  # a bar redraws itself with \r: one line per bar
    assert len(lines) <= 30, "\n".join(lines)
    assert "SETS benchmark (synthetic, seed 0)" in out  # the stream
    assert "| **mean** |" in out and "| shapes |" in out  # the final table
    assert f"wrote {folder}/" in out
    for name in ("result.json", "run.json", "table.md", "accuracy_matrix.png", "log.txt"):
        assert re.search(rf"^  {re.escape(name)} ", out, re.M), name
        assert (folder / name).is_file()
    assert not METRIC_LINE.search(out + err)  # no metric dumps on the terminal
    assert "0it [" not in err  # no bar opened before its total is known
    # One bar per domain, each on one line, each state drawn once (no update + refresh pairs).
    bars = [line for line in err.split("\n") if "domain " in line]
    assert [b.split("\r")[-1].split(":")[0] for b in bars] == [
        "domain 1/2 shapes",
        "domain 2/2 strokes",
    ]
    for bar in bars:
        states = [s for s in bar.split("\r") if s]
        assert all(a != b for a, b in zip(states, states[1:])), states
        assert re.search(r"2/2 .*test acc on domains 1-\d: \d+\.\d%\]$", states[-1]), states[-1]
    # Everything the terminal did not show is in the run's log.
    log = (folder / "log.txt").read_text()
    assert len(METRIC_LINE.findall(log)) == 2 * 2  # matrix rows x domains
    assert re.match(r"# \d{4}-\d\d-\d\dT", log)  # a header line per (re)start: date, command


def test_the_loss_terms_show_on_the_bar_and_in_the_log(tmp_path, capsys, monkeypatch):
    """``--log-every 1``: each iteration's loss terms (ProtoNet: the query loss, ``meta``) on
    the domain's bar while it trains, and a line per interval in log.txt."""
    from avalanche_sets.training import progress

    def every_update_drawn(*args, **kwargs):  # the tiny run trains faster than a bar redraws
        return tqdm(*args, **{**kwargs, "mininterval": 0})

    monkeypatch.setattr(progress, "tqdm", every_update_drawn)
    _, err = _run(capsys, "--out", str(tmp_path), "--log-every", "1")
    bars = [line for line in err.split("\n") if "domain " in line]
    assert len(bars) == 2 and all(re.search(r"meta=\d", bar) for bar in bars), bars
    log = next(tmp_path.rglob("log.txt")).read_text()
    steps = re.findall(r"^loss terms at iteration (\d+): meta=\d\S*$", log, re.M)
    assert steps == ["1", "2", "3", "4"]  # two domains of two iterations


def test_verbose_prints_the_metric_values(tmp_path, capsys):
    out, _ = _run(capsys, "--out", str(tmp_path), "--verbose")
    assert len(METRIC_LINE.findall(out)) == 4
    log = next(tmp_path.rglob("log.txt")).read_text()
    assert len(METRIC_LINE.findall(log)) == 4


def test_a_sweep_logs_to_the_run_folders_without_the_no_loggers_warning(tmp_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # whatever the test configuration filters
        code = main(["sweep", "--methods", "protonet", "--seeds", "0", "1", "--out",
                     str(tmp_path), *TINY])  # fmt: skip
    assert code == 0
    assert [str(w.message) for w in caught if "No loggers" in str(w.message)] == []
    logs = sorted(tmp_path.rglob("log.txt"))
    assert len(logs) == 2 and all(METRIC_LINE.search(p.read_text()) for p in logs)
    out = capsys.readouterr()
    assert not METRIC_LINE.search(out.out + out.err)


@pytest.mark.slow
def test_quick_start_example_writes_its_heatmap_where_it_says_not_in_the_cwd(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quick_start.py"), "--out", "out/qs",
         "--tasks-per-domain", "2", "--test-episodes", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = re.search(r"^accuracy matrix heatmap: (.+)$", done.stdout, re.M)
    assert said is not None, done.stdout
    assert Path(said.group(1)) == Path("out/qs/accuracy_matrix.png")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "out", "out/qs", "out/qs/accuracy_matrix.png",
    ]  # fmt: skip
    assert not METRIC_LINE.search(done.stdout)  # the example is quiet too


def test_result_files_store_the_data_folder_as_given_not_this_machines_absolute_path(
    tmp_path, monkeypatch, capsys
):
    from avalanche_sets.data.packs import save_pack
    from avalanche_sets.data.synthetic import make_synthetic_domain

    monkeypatch.chdir(tmp_path)
    for name in ("shapes", "strokes", "ood_rings"):  # a folder of packs: a source with a root
        save_pack(
            make_synthetic_domain(name.removeprefix("ood_")), tmp_path / "data" / f"{name}.npz"
        )
    for given, stored in [(str(tmp_path / "data"), "data"), ("data", "data")]:
        out = tmp_path / f"out-{len(given)}"
        _run(capsys, "--out", str(out), "--root", given, "--set", "source=packs")
        record = json.loads(next(out.rglob("result.json")).read_text())
        assert record["preset"]["root"] == stored
        assert str(tmp_path) not in json.dumps(record)
