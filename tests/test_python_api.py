"""The Python API means what the command line means: the README's quick start computes the
command line's number for the same method, preset and seed; a preset is named as on the command
line; a run is as quiet as the command line and runs with its preset's threads; a strategy
built without an evaluator still returns Avalanche's default metrics from ``eval``."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin

import avalanche_sets
from avalanche_sets import OrderStrategy, build_benchmark, build_strategy, run_sets
from avalanche_sets.cli import main
from avalanche_sets.presets import PRESETS, resolve_preset
from avalanche_sets.runs.record import read_record

ROOT = Path(__file__).resolve().parents[1]

#: A small stream with the ``quick`` preset's method-side settings (threads included).
SMALL = dict(
    tasks_per_domain=6, n_test_episodes=3, n_query=2, n_unlabeled=2, n_ood=4, width=4,
    eval_mb_size=3, domains=["shapes", "strokes"],
)  # fmt: skip


def readme_quick_start() -> tuple[str, list[str]]:
    """The README's Python quick start (its first code block) and the command line it says it
    runs (the ``avalanche-sets run ...`` it quotes), as arguments."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start (Python)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    command = re.search(r"`avalanche-sets (run [^`]+)`", code).group(1)
    return code, shlex.split(command)


def test_the_readme_quick_start_gives_the_command_lines_number(tmp_path, monkeypatch, capsys):
    code, command = readme_quick_start()
    assert "--method" in command and "--preset" in command and "--seeds" in command
    preset = command[command.index("--preset") + 1]
    small = {**PRESETS[preset], **SMALL}
    monkeypatch.setitem(PRESETS, preset, small)  # both read the preset by its name
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--out", "runs"]) == 0
    (folder,) = [p.parent for p in (tmp_path / "runs").rglob("result.json")]
    cli = read_record(folder).result
    capsys.readouterr()
    # another thread count than the preset's before the script runs: the run sets its own
    torch.set_num_threads(1 if small["threads"] != 1 else 2)
    namespace: dict = {}
    exec(compile(code, "README.md quick start", "exec"), namespace)
    result = namespace["result"]
    assert result.matrix == cli["matrix"]  # exactly, every entry
    assert result.episode_acc == cli["episode_acc"]
    assert result.mean_accuracy == cli["mean_accuracy"]
    printed = capsys.readouterr().out
    assert result.table() in printed


def test_build_strategy_and_build_benchmark_are_the_packages():
    from avalanche_sets.methods import build_strategy as registry_build
    from avalanche_sets.runs import build_benchmark as runs_build

    assert avalanche_sets.build_strategy is registry_build
    assert avalanche_sets.build_benchmark is runs_build
    assert {"build_strategy", "build_benchmark"} <= set(avalanche_sets.__all__)


def test_a_preset_is_named_as_on_the_command_line():
    by_name = build_strategy("order", "quick", seed=3)
    by_config = build_strategy("order", resolve_preset("quick"), seed=3)
    assert by_name.run_config == resolve_preset("quick")
    for a, b in zip(by_name.model.state_dict().values(), by_config.model.state_dict().values()):
        assert torch.equal(a, b)
    assert by_name.model.backbone.width == PRESETS["quick"]["width"]
    with pytest.raises(ValueError, match="unknown preset 'quik'.*'quick'"):
        build_strategy("order", "quik")
    with pytest.raises(ValueError, match="unknown preset 'quik'.*'quick'"):
        build_benchmark("quik", seed=0)


def test_build_benchmark_gives_what_the_method_trains_on():
    preset = resolve_preset("quick", **{**SMALL, "domains": ["shapes", "strokes", "blobs"]})
    stream = build_benchmark(preset, seed=0)
    assert build_benchmark(preset, seed=0, method="order").train_stream[0].dataset is not None
    assert len(build_benchmark(preset, seed=0, method="mskm").train_stream) == 3
    joint = build_benchmark(preset, seed=0, method="joint")
    assert len(joint.train_stream) == 1
    assert len(joint.train_stream[0].dataset) == 3 * len(stream.train_stream[0].dataset)
    matched = build_benchmark(preset, seed=0, method="joint-matched")
    assert len(matched.train_stream[0].dataset) == 2 * len(joint.train_stream[0].dataset)


def _tiny_bench():
    return build_benchmark(resolve_preset("quick", **SMALL), seed=0)


class _Probe(SupervisedPlugin):
    """Records torch's thread count at every training iteration and the episodes each
    evaluation sees."""

    def __init__(self):
        super().__init__()
        self.threads: set[int] = set()
        self.evaluated: list[int] = []

    def after_training_iteration(self, strategy, **kwargs):
        self.threads.add(torch.get_num_threads())

    def before_eval(self, strategy, **kwargs):
        self.evaluated.append(0)

    def after_eval_iteration(self, strategy, **kwargs):
        self.evaluated[-1] += len(strategy.mb_x)


def test_run_sets_runs_with_the_presets_threads_and_interim_episodes():
    preset = resolve_preset("quick", **SMALL, interim_test_episodes=2)
    bench = build_benchmark(preset, seed=0)
    torch.set_num_threads(1)
    probe = _Probe()
    run_sets(build_strategy("order", preset, plugins=[probe]), bench)
    assert probe.threads == {preset.threads} != {1}
    assert torch.get_num_threads() == 1  # restored
    # after the first domain the first 2 episodes of each domain, after the last all 3
    assert probe.evaluated == [2 * 2, 2 * 3]
    probe = _Probe()
    strategy = build_strategy("order", preset, plugins=[probe])
    run_sets(strategy, bench, threads=1, interim_episodes=3)  # the caller's choice wins
    assert probe.threads == {1} and probe.evaluated == [2 * 3, 2 * 3]
    with pytest.raises(ValueError, match="threads must be a positive"):
        run_sets(strategy, bench, threads=0)


def test_a_quick_run_prints_nothing(capfd):
    bench = _tiny_bench()
    capfd.readouterr()
    preset = resolve_preset("quick", **SMALL, threads=1)
    run_sets(OrderStrategy(model=build_strategy("order", preset).model), bench)  # its default
    run_sets(build_strategy("mskm", preset), bench)
    out = capfd.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    assert len(lines) <= 2, lines


def test_an_explicit_evaluator_prints_more(capfd):
    from avalanche.training.plugins.evaluation import default_evaluator

    bench = _tiny_bench()
    capfd.readouterr()
    model = build_strategy("order", resolve_preset("quick", **SMALL)).model
    run_sets(OrderStrategy(model=model, evaluator=default_evaluator()), bench)
    out = capfd.readouterr()
    assert "Top1_Acc_Stream" in out.out + out.err


class _Queries(SupervisedPlugin):
    """Counts, per evaluated experience, the correct query predictions, the queries and the
    summed query cross-entropy, straight from the logits."""

    def __init__(self):
        super().__init__()
        self.per_exp: dict[int, list[float]] = {}

    def after_eval_iteration(self, strategy, **kwargs):
        out, y = strategy.mb_output.float(), strategy.mb_y
        seen = self.per_exp.setdefault(strategy.experience.current_experience, [0, 0, 0.0])
        seen[0] += int((out.argmax(-1) == y).sum())
        seen[1] += len(y)
        seen[2] += float(F.cross_entropy(out, y, reduction="sum"))


def readme_avalanche_loop() -> str:
    """The README's "same loop in plain Avalanche style" (the quick start's second code block)."""
    section = (ROOT / "README.md").read_text().split("## Quick start (Python)", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    assert "strategy.eval(bench.test_stream)" in blocks[1], blocks[1]
    return blocks[1]


@pytest.mark.parametrize(
    "make",
    [lambda preset: OrderStrategy(seed=0), lambda preset: build_strategy("order", preset)],
    ids=["OrderStrategy(seed=0)", "build_strategy"],
)
def test_without_an_evaluator_eval_returns_avalanches_metrics_and_nothing_is_printed(make, capfd):
    torch.set_num_threads(1)
    preset = resolve_preset("quick", **SMALL, threads=1)
    bench = build_benchmark(preset, seed=0)
    strategy = make(preset)
    capfd.readouterr()
    namespace = {"bench": bench, "strategy": strategy}
    exec(compile(readme_avalanche_loop(), "README.md Avalanche loop", "exec"), namespace)
    printed = capfd.readouterr()
    results = namespace["results"]
    stream = "eval_phase/test_stream"
    # what the loop prints (the stream accuracy after each domain), and nothing else
    assert printed.err == ""
    lines = printed.out.splitlines()
    assert len(lines) == 2 and float(lines[-1]) == results[f"Top1_Acc_Stream/{stream}"]
    trained = strategy.evaluator.get_last_metrics()
    assert 0 <= trained["Top1_Acc_Epoch/train_phase/train_stream"] <= 1
    assert math.isfinite(trained["Loss_Epoch/train_phase/train_stream"])
    # the values are the query predictions' accuracy and cross-entropy, recomputed here
    queries = _Queries()
    strategy.plugins.append(queries)
    assert strategy.eval(bench.test_stream) == results  # the same episodes, the same values
    for k, (correct, n, loss_sum) in queries.per_exp.items():
        assert results[f"Top1_Acc_Exp/{stream}/Exp{k:03d}"] == pytest.approx(correct / n)
        assert results[f"Loss_Exp/{stream}/Exp{k:03d}"] == pytest.approx(loss_sum / n, rel=1e-5)
    correct, n, loss_sum = (sum(v[i] for v in queries.per_exp.values()) for i in range(3))
    assert sorted(queries.per_exp) == [0, 1] and n == 2 * 3 * 5 * 2  # domains·episodes·N·Q
    accuracy = results[f"Top1_Acc_Stream/{stream}"]
    assert 0 < accuracy <= 1 and accuracy == pytest.approx(correct / n)
    loss = results[f"Loss_Stream/{stream}"]
    assert 0 < loss and loss == pytest.approx(loss_sum / n, rel=1e-5)
