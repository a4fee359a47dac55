"""``examples/custom_replay.py``, the replay plugin of the "Writing your own method" guide: it
imports only public names, replays its memory in every training iteration, stores only the
stream's tasks (as copies a learner may see), survives a checkpoint, and runs end to end."""

from __future__ import annotations

import ast
import importlib
import io

import pytest
import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets import OrderStrategy, build_benchmark, run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset

from .conftest import EXAMPLES


def test_the_example_imports_only_public_names():
    tree = ast.parse((EXAMPLES / "custom_replay.py").read_text())
    imported = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    ours = [n for n in imported if n.module.split(".")[0] == "avalanche_sets"]
    assert any(n.module == "avalanche_sets.training" for n in ours)
    for node in ours:
        assert not any(part.startswith("_") for part in node.module.split(".")), node.module
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert alias.name in module.__all__, f"{alias.name} not public in {node.module}"


class _Rows(SupervisedPlugin):
    """Records, per training iteration, the current and the replayed tasks of the meta-batch."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[int, int]] = []

    def before_forward(self, strategy, **kwargs):
        it = strategy.iteration
        if it.training:
            replayed = 0 if it.replayed is None else len(it.replayed.rows)
            assert len(strategy.mb_x) == it.n_current + replayed  # they are in the meta-batch
            self.rows.append((it.n_current, replayed))


def _tiny(ex):
    preset = resolve_preset("quick", **ex.TINY)
    return preset, build_benchmark(preset, seed=0)


def test_the_plugin_replays_its_memory_and_keeps_copies_of_the_streams_tasks(
    load_example, monkeypatch
):
    ex = load_example("custom_replay")
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where the command line finds the method
    preset, bench = _tiny(ex)
    rows = _Rows()
    strategy = build_strategy("custom_replay:MSKMReplay", preset, seed=0, plugins=[rows])
    (plugin,) = [p for p in strategy.plugins if type(p).__name__ == "TaskReplayPlugin"]
    run_sets(strategy, bench)
    tasks = preset.tasks_per_domain * len(preset.domains)
    meta = preset.meta_batch
    # every iteration after the first replays min(replay_batch, stored) tasks
    assert rows.rows[0] == (meta, 0)
    assert rows.rows[1:] == [
        (meta, min(preset.replay_batch, meta * i)) for i in range(1, tasks // meta)
    ]
    # each of the stream's tasks was offered once; the replayed ones were not stored again
    assert plugin.memory.n_seen == tasks and len(plugin.memory) == preset.mem_size
    n, k, q = preset.n_way, preset.n_shot, preset.n_query
    for episode in plugin.memory:
        assert episode.oracle is None and episode.support_x.device.type == "cpu"
        assert episode.support_x.dtype == torch.uint8 and episode.support_x.shape[0] == n * k
        assert episode.query_y.shape == (n * q,) and not episode.query_x.requires_grad
    # the replayed tasks reach the loss: plain MSKM on the same seed ends elsewhere
    plain = build_strategy("mskm", preset, seed=0)
    run_sets(plain, bench)
    assert not torch.equal(next(plain.model.parameters()), next(strategy.model.parameters()))

    # a checkpoint restores the same memory and the same next draw
    buffer = io.BytesIO()
    torch.save(plugin.state_dict(), buffer)
    buffer.seek(0)
    restored = ex.TaskReplayPlugin(mem_size=preset.mem_size, replay_batch=2, seed=5)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert restored.memory.n_seen == tasks
    for a, b in zip(plugin.memory, restored.memory, strict=True):
        assert torch.equal(a.unlabeled_x, b.unlabeled_x) and torch.equal(a.query_y, b.query_y)
    assert restored.memory.sample_indices(2) == plugin.memory.sample_indices(2)


def test_the_plugin_is_refused_beside_another_memory_and_the_example_runs(load_example, capsys):
    ex = load_example("custom_replay")
    with pytest.raises(ValueError, match="TaskReplayPlugin cannot be used together with"):
        OrderStrategy(plugins=[ex.TaskReplayPlugin()])
    with pytest.raises(ValueError, match="replay_batch must be >= 1"):
        ex.TaskReplayPlugin(replay_batch=0)
    results = ex.main(["--tiny"])
    printed = capsys.readouterr().out
    assert "## mskm\n" in printed and "## mskm + replay\n" in printed
    assert results["mskm"].table() in printed and results["mskm + replay"].table() in printed
    assert results["mskm"].matrix != results["mskm + replay"].matrix
