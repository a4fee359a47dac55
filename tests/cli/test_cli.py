"""The command line: help, bad arguments, a tiny run, resumable sweeps and tables."""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from avalanche_sets.cli import main
from avalanche_sets.presets import PRESETS, resolve_preset
from avalanche_sets.runs.record import read_record

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2",
]  # fmt: skip


def test_help_everywhere():
    for sub in ([], ["run"], ["sweep"], ["table"], ["heatmap"], ["prepare"], ["prepare", "pack"],
                ["presets"]):  # fmt: skip
        out = subprocess.run(
            [sys.executable, "-m", "avalanche_sets", *sub, "--help"],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        assert out.returncode == 0 and "usage" in out.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--method", "nope"],
        ["run", "--preset", "huge"],
        ["run", "--set", "n_wya=5"],
        ["run", "--set", "n_way=500"],
        ["run", "--preset", "cpu"],  # packs without --root
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_non_zero(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    assert code != 0
    err = capsys.readouterr().err
    assert "error" in err


def test_presets_are_plain_data_and_checked():
    assert set(PRESETS) == {"quick", "cpu", "converged", "paper"}
    p = resolve_preset("paper")
    assert (p.image_size, p.n_blocks, p.width) == (84, 5, 64)
    assert p.tasks_per_domain == 12_000 and p.n_test_episodes == 600 and p.meta_batch == 2
    assert len(p.seeds) == 5
    json.dumps(PRESETS)  # copyable, printable
    with pytest.raises(ValueError, match="unknown preset setting"):
        resolve_preset("quick", n_wya=1)


def test_run_sweep_resume_and_table(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "--method", "order", "--out", str(out), *TINY]) == 0
    results = list(out.rglob("result.json"))
    assert len(results) == 1
    rec = read_record(results[0].parent)
    assert len(rec.result["matrix"]) == 2 and rec.provenance.machine["cores"]
    assert (results[0].parent / "accuracy_matrix.png").is_file()
    stamp = results[0].stat().st_mtime
    # A sweep over methods x seeds skips the finished run and runs the others.
    assert main(["sweep", "--methods", "order", "mskm", "--seeds", "0", "--out", str(out),
                 *TINY, "--set", "n_shot=1,2"]) == 0  # fmt: skip
    assert results[0].stat().st_mtime == stamp
    assert len(list(out.rglob("result.json"))) == 4  # order/mskm x 1-shot/2-shot
    capsys.readouterr()
    assert main(["table", str(out), "--out", str(tmp_path / "t")]) == 0
    text = capsys.readouterr().out
    assert "order" in text and "mskm" in text and "±" in text
    assert (tmp_path / "t.csv").is_file() and (tmp_path / "t.md").is_file()


def test_examples_compile():
    for path in (ROOT / "examples").glob("*.py"):
        py_compile.compile(str(path), doraise=True)


@pytest.mark.parametrize("root", [None, "no/such/folder"])
def test_no_packs_error_says_how_to_get_data(root, monkeypatch, capsys):
    """Without a packs folder the user is told every way forward: prepare packs from public
    datasets or image folders, or run the generated benchmark (issue 15)."""
    from avalanche_sets.cli import main

    monkeypatch.delenv("AVALANCHE_SETS_PACKS", raising=False)
    argv = ["run", "--preset", "cpu", "--seeds", "0"] + ([] if root is None else ["--root", root])
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code not in (0, None)
    message = capsys.readouterr().err
    for way in ("prepare torchvision", "prepare pack", "--set source=synthetic"):
        assert way in message, message


def test_a_closed_pipe_ends_quietly():
    """`avalanche-sets presets | head -1`: the reader leaves early; no traceback is printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "avalanche_sets", "presets"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    proc.stdout.close()  # the reader is gone before the first write (`head` after its lines)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("command", ["table", "heatmap"])
def test_table_and_heatmap_of_a_folder_without_runs_fail_naming_it(command, tmp_path, capsys):
    assert main([command, str(tmp_path)]) == 2
    assert f"error: no result.json under ['{tmp_path}']" in capsys.readouterr().err
