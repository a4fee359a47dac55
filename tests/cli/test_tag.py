"""``--tag NAME``: the same run kept apart by name (its own folder, identity and table row);
a tag that is no name is refused before any data loads."""

from __future__ import annotations

import pytest

import avalanche_sets.runs.run as run_module
from avalanche_sets.cli import main
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import experiment
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import record_identity, run_folder
from avalanche_sets.runs.report import find_results
from avalanche_sets.runs.sweep import RunSpec

TINY = {
    "tasks_per_domain": 4, "n_test_episodes": 2, "n_query": 2, "n_unlabeled": 2, "n_ood": 4,
    "width": 4, "domains": ["shapes", "strokes"], "eval_mb_size": 2, "threads": 1,
    "interim_test_episodes": 2,
}  # fmt: skip
SETS = [f"--set={k}={v}" for k, v in TINY.items()]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))


def test_a_tag_makes_a_separate_run_a_separate_folder_and_a_separate_row(tmp_path, capsys):
    out = tmp_path / "runs"
    command = ["run", "--method", "protonet", "--seeds", "0", "--out", str(out), *SETS]
    assert main(command) == 0
    assert main([*command, "--tag", "second.try"]) == 0
    printed = capsys.readouterr().out
    assert "finished before" not in printed  # the tagged run ran
    plain, tagged = sorted(find_results([out]), key=lambda r: r.tag)
    assert '"tag"' not in (plain.folder / "result.json").read_text()
    assert plain.tag == "" and "tag" not in record_identity(plain)
    assert tagged.tag == "second.try" and record_identity(tagged)["tag"] == "second.try"
    assert tagged.folder.name == plain.folder.name + "-tag_second.try"
    assert plain.result == tagged.result  # the same computation, apart by name
    # the sweep's --tag names the same run: found finished, not run again
    assert main(["sweep", "--methods", "protonet", "--seeds", "0", "--out", str(out),
                 "--tag", "second.try", *SETS]) == 0  # fmt: skip
    assert "finished before" in capsys.readouterr().out
    assert main(["table", str(out)]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| protonet")]
    assert len(rows) == 2 and "tag" in table.splitlines()[0]
    assert sum("second.try" in row for row in rows) == 1


@pytest.mark.parametrize("tag", ["", "a/b", "../up", "-x", "two words", "x" * 65, "é"])
def test_a_tag_that_is_no_name_is_refused_before_any_data_loads(tag, tmp_path, capsys, monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("data loaded before the tag was checked")

    monkeypatch.setattr(experiment, "build_benchmark", no_data)
    monkeypatch.setattr(run_module, "run_data", no_data)  # a Run reads its data's identity
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--method", "protonet", "--out", str(out), f"--tag={tag}", *SETS])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--tag" in err and ("fix" in err or "leave --tag out" in err)
    assert not out.exists()
    if not tag:
        return  # run_experiment's tag="" is no tag (its default)
    preset = resolve_preset("quick", **TINY)
    with pytest.raises(ValueError, match=r"tag .* is not a name a run folder can carry; fix"):
        run_experiment("protonet", preset, seed=0, out_root=out, loggers=(), tag=tag)
    with pytest.raises(ValueError, match=r"tag .* is not a name"):
        RunSpec("protonet", preset, 0, out, tag=tag)
    with pytest.raises(ValueError, match=r"tag .* is not a name"):
        run_folder(out, "protonet", preset, 0, tag=tag)
    assert not out.exists()
