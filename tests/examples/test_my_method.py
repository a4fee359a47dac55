"""``examples/my_method.py``, the one-file method of the development guide and the "Writing
your own method" page: named as ``my_method:SemiL2`` it is built, run, swept and tabled as a
built-in method is."""

from __future__ import annotations

from pathlib import Path

import pytest

from avalanche_sets.cli import main
from avalanche_sets.methods import build_strategy, method_options, parse_options
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.record import read_record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

METHOD = "my_method:SemiL2"
TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2", "--set", "threads=1",
]  # fmt: skip


@pytest.fixture
def in_examples(monkeypatch):
    """Commands run from the examples folder, where ``my_method`` is found."""
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_build_strategy_builds_it_with_its_typed_option(in_examples):
    options, _ = method_options(METHOD)
    assert options["anchor_weight"].type is float and options["anchor_weight"].default == 0.01
    assert parse_options(METHOD, {"anchor_weight": "0.5"}) == {"anchor_weight": 0.5}
    with pytest.raises(TypeError, match=r"did you mean 'anchor_weight'"):
        parse_options(METHOD, {"anchor_weigth": "0.5"})
    strategy = build_strategy(METHOD, resolve_preset("quick", width=4), anchor_weight=0.5)
    assert type(strategy).__name__ == "SemiL2" and strategy.cl_plugin.anchor_weight == 0.5
    # its learner is the continual baselines' MSKM, on the preset's backbone
    plain = build_strategy("semi-seq", resolve_preset("quick", width=4))
    assert type(strategy.model) is type(plain.model) and strategy.model.refine == "mskm"


def test_every_command_runs_it(in_examples, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "--method", METHOD, "--out", str(out), *TINY,
                 "--strategy-set", "anchor_weight=0.5"]) == 0  # fmt: skip
    (record,) = out.rglob("result.json")
    assert record.parent.parent.name == "my_method.SemiL2"
    assert read_record(record.parent).strategy_overrides == {"anchor_weight": 0.5}
    # the pull acts from the second domain on: its named loss term is logged
    assert "l2_anchor" in (record.parent / "log.txt").read_text()
    assert main(["sweep", "--methods", METHOD, "semi-seq", "--seeds", "0", "--out", str(out),
                 *TINY]) == 0  # fmt: skip
    assert len(list(out.rglob("result.json"))) == 3
    capsys.readouterr()
    assert main(["table", str(out), "--out", str(tmp_path / "t")]) == 0
    text = capsys.readouterr().out
    assert METHOD in text and "semi-seq" in text


def test_the_readme_shows_the_example_class_as_it_is():
    """The README's method class is the example's, line for line and in order (less its
    docstring): the example is what the tests above run."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    block = readme.split("```python\nclass SemiL2(SemiSeq):", 1)[1].split("```", 1)[0]
    shown = [line for line in ("class SemiL2(SemiSeq):" + block).splitlines() if line.strip()]
    lines = iter((EXAMPLES / "my_method.py").read_text().splitlines())
    assert all(any(line == have for have in lines) for line in shown), shown
