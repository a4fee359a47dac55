"""Checkpoints: atomic, checksummed, rotated; damaged files are detected by name, never used."""

from __future__ import annotations

import warnings

import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import (
    CheckpointError,
    CheckpointWarning,
    CorruptCheckpointError,
    load_latest_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from avalanche_sets.training.checkpoint import previous_checkpoint_path

torch.set_num_threads(1)

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=12, n_test_episodes=4, n_val_episodes=2, mem_size=4,
    domains=["shapes", "strokes"], ood=["rings"], eval_mb_size=4,
)  # fmt: skip


def _bench():
    return sets_benchmark(
        "synthetic", domains=PRESET["domains"], ood=PRESET["ood"], n_way=2, n_shot=1,
        n_query=2, n_unlabeled=2, n_ood=2, tasks_per_domain=12, n_test_episodes=4,
        n_val_episodes=2, image_size=16, seed=0,
    )  # fmt: skip


def _strategy(seed: int = 0):
    return build_strategy("order", PRESET, seed=seed, evaluator=EvaluationPlugin())


def test_round_trip_and_rotation(tmp_path):
    s = _strategy()
    path = tmp_path / "c.pt"
    save_checkpoint(path, s, position={"experience": 0, "iteration": 2})
    assert not previous_checkpoint_path(path).exists()
    save_checkpoint(path, s, position={"experience": 0, "iteration": 4})
    assert read_checkpoint(path)["position"]["iteration"] == 4
    assert read_checkpoint(previous_checkpoint_path(path))["position"]["iteration"] == 2
    assert not list(tmp_path.glob("*.tmp"))  # nothing half-written left behind


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_damaged_checkpoint_is_detected_by_name(tmp_path, damage):
    s = _strategy()
    path = tmp_path / "c.pt"
    save_checkpoint(path, s, position={"experience": 0, "iteration": 2})
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"not a checkpoint at all\n" * 10)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match=f"checkpoint {path} is corrupt"):
        read_checkpoint(path)


def test_other_versions_are_refused_not_skipped(tmp_path):
    s = _strategy()
    old = tmp_path / "old.pt"
    torch.save({"format": 1}, old)  # what version 1 wrote: a bare torch.save
    with pytest.raises(CheckpointError, match="older avalanche-sets .format 1"):
        read_checkpoint(old)
    new = tmp_path / "new.pt"
    save_checkpoint(new, s, position={"experience": 0, "iteration": 1})
    data = new.read_bytes().replace(b"CHECKPOINT 2 ", b"CHECKPOINT 9 ", 1)
    new.write_bytes(data)
    with pytest.raises(CheckpointError, match="has format 9"):
        read_checkpoint(new)
    # another version is a decision for the user, not a damaged file to skip silently
    with pytest.raises(CheckpointError):
        load_latest_checkpoint(new, s)


def test_differently_built_strategy_is_refused(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, _strategy(), position={"experience": 0, "iteration": 1})
    mskm = build_strategy("mskm", PRESET, seed=0, evaluator=EvaluationPlugin())
    with pytest.raises(CheckpointError, match="plugins/metrics differ"):
        load_latest_checkpoint(path, mskm)


def _run(**kw):
    torch.manual_seed(0)
    return run_sets(_strategy(), _bench(), **kw)


def test_fallback_to_previous_and_start_over_give_the_same_numbers(tmp_path):
    ref = _run()
    ckpt = tmp_path / "run.pt"
    _run(checkpoint_path=ckpt, checkpoint_every=2, stop_after=9)
    assert previous_checkpoint_path(ckpt).is_file()
    prev_position = read_checkpoint(previous_checkpoint_path(ckpt))["position"]
    ckpt.write_bytes(ckpt.read_bytes()[:100])  # the newest is truncated

    used = {}
    with pytest.warns(CheckpointWarning, match=f"{ckpt} is corrupt") as rec:
        resumed = _run(checkpoint_path=ckpt, checkpoint_every=2, on_resume=used.update)
    assert any("previous good checkpoint" in str(w.message) for w in rec)
    assert used["path"] == str(previous_checkpoint_path(ckpt))
    assert used["position"] == prev_position and len(used["skipped"]) == 1
    assert resumed.matrix == ref.matrix and resumed.episode_acc == ref.episode_acc

    # Both damaged: the run says it starts over, and still ends with the same numbers.
    ckpt2 = tmp_path / "run2.pt"
    _run(checkpoint_path=ckpt2, checkpoint_every=2, stop_after=9)
    for p in (ckpt2, previous_checkpoint_path(ckpt2)):
        p.write_bytes(b"\x00" * 50)
    with pytest.warns(CheckpointWarning, match="starts over from the beginning"):
        again = _run(checkpoint_path=ckpt2, checkpoint_every=2)
    assert again.matrix == ref.matrix


def test_no_warning_when_nothing_is_damaged(tmp_path):
    ckpt = tmp_path / "run.pt"
    _run(checkpoint_path=ckpt, checkpoint_every=2, stop_after=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        assert load_latest_checkpoint(ckpt, _strategy())["skipped"] == []
