"""Checkpoints: atomic, checksummed, rotated; damaged files are detected by name, never used."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.training import (
    CheckpointError,
    CheckpointWarning,
    CorruptCheckpointError,
    load_latest_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from avalanche_sets.training.checkpoint import FORMAT_VERSION, previous_checkpoint_path

sys.path.insert(0, str(Path(__file__).parent))
from tiny_order import PRESET, tiny_bench  # noqa: E402

torch.set_num_threads(1)


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
    data = new.read_bytes().replace(b"CHECKPOINT %d " % FORMAT_VERSION, b"CHECKPOINT 9 ", 1)
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
    return run_sets(_strategy(), tiny_bench(), **kw)


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


# ---------------------------------------------------------------------------- no code on load
class _RunsCode:
    """Pickles as a call: what a malicious checkpoint holds."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (_touch, (str(self.marker),))


def _touch(path: str):
    from pathlib import Path

    Path(path).write_text("code ran")
    return "payload"


def _forge(path, state) -> None:
    """A checkpoint file with a valid header and checksum around any pickled ``state``."""
    import hashlib
    import io

    from avalanche_sets.training.checkpoint import _MAGIC, FORMAT_VERSION

    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    header = b"%s %d %s\n" % (_MAGIC, FORMAT_VERSION, hashlib.sha256(payload).hexdigest().encode())
    path.write_bytes(header + payload)


def test_a_checkpoint_whose_pickle_would_run_code_is_refused(tmp_path):
    s = _strategy()
    path = tmp_path / "c.pt"
    save_checkpoint(path, s, position={"experience": 0, "iteration": 2})
    state = read_checkpoint(path)
    marker = tmp_path / "ran"
    state["extra"] = {"note": _RunsCode(marker)}
    forged = tmp_path / "forged.pt"
    _forge(forged, state)
    with pytest.raises(CheckpointError, match="could run code; it was refused"):
        read_checkpoint(forged)
    with pytest.raises(CheckpointError, match="could run code"):
        load_latest_checkpoint(forged, _strategy())
    assert not marker.exists(), "loading the checkpoint ran its code"


def test_numpy_state_survives_the_plain_payload_exactly(tmp_path):
    import random

    import numpy as np

    np.random.seed(123)
    np.random.random(7)
    expected = np.random.get_state()
    s = _strategy()
    path = tmp_path / "c.pt"
    save_checkpoint(
        path, s, position={"experience": 0, "iteration": 2},
        extra={"a": np.arange(6, dtype=np.uint16).reshape(2, 3), "n": np.int64(5)},
    )  # fmt: skip
    state = read_checkpoint(path)
    got = state["rng"]["numpy"]
    assert got[0] == expected[0] and got[2:] == expected[2:]
    assert got[1].dtype == expected[1].dtype and np.array_equal(got[1], expected[1])
    a = state["extra"]["a"]
    assert a.dtype == np.uint16 and a.shape == (2, 3) and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert state["extra"]["n"] == 5 and isinstance(state["extra"]["n"], np.int64)
    np.random.set_state(expected)
    after = np.random.random(3)
    np.random.seed(0)
    random.seed(0)
    load_latest_checkpoint(path, _strategy())
    assert np.array_equal(np.random.random(3), after), "the legacy RNG did not resume exactly"


def test_a_plugin_state_that_would_need_code_to_load_is_refused_when_saved(tmp_path):
    from avalanche.core import SupervisedPlugin

    class Opaque(SupervisedPlugin):
        def state_dict(self):
            return {"when": range(3)}

        def load_state_dict(self, state):
            pass

    s = _strategy()
    s.plugins.append(Opaque())
    with pytest.raises(CheckpointError, match=r"cannot checkpoint .*'when'.*builtins.range"):
        save_checkpoint(tmp_path / "c.pt", s, position={"experience": 0, "iteration": 2})
    assert not (tmp_path / "c.pt").exists()


def test_a_checkpoint_of_the_previous_format_is_refused_by_its_version(tmp_path):
    """Format 2 payloads were unrestricted pickles: they are refused by version (finish the run
    with the version that started it), never unpickled."""
    import hashlib

    from avalanche_sets.training.checkpoint import _MAGIC

    path = tmp_path / "v2.pt"
    payload = b"anything"
    path.write_bytes(
        b"%s 2 %s\n" % (_MAGIC, hashlib.sha256(payload).hexdigest().encode()) + payload
    )
    with pytest.raises(CheckpointError, match="has format 2, this version of avalanche-sets reads"):
        read_checkpoint(path)


# ------------------------------------------------------------------------- Avalanche's clock
def test_a_checkpoint_without_the_clock_is_refused_by_its_format(tmp_path):
    """Format 3 held no clock: its run would log from step 0 again, so it is refused by name."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, _strategy(), position={"experience": 0, "iteration": 1})
    assert FORMAT_VERSION == 4 and "clock" in read_checkpoint(path)
    path.write_bytes(path.read_bytes().replace(b"CHECKPOINT 4 ", b"CHECKPOINT 3 ", 1))
    with pytest.raises(CheckpointError, match="has format 3, this version of avalanche-sets "
                       "reads format 4"):  # fmt: skip
        load_latest_checkpoint(path, _strategy())


# 6 iterations a domain: stopped in domain 1 (checkpoint at 8), or after the last iteration of
# domain 0 (its end is checkpointed after its evaluation, so the run resumes from iteration 4)
@pytest.mark.parametrize("stop_after, checkpointed", [(9, 8), (6, 4)])
def test_a_resumed_run_ends_with_the_clock_of_an_uninterrupted_one(
    tmp_path, stop_after, checkpointed
):
    """Avalanche's clock (the steps of every logged value) is part of the checkpoint, and the
    per-experience counters are put back after ``train`` zeroes them at a mid-domain resume."""
    from avalanche_sets.training.checkpoint import CLOCK_FIELDS

    def clock(s):
        return {k: getattr(s.clock, k) for k in CLOCK_FIELDS}

    torch.manual_seed(0)
    ref = _strategy()
    run_sets(ref, tiny_bench())
    ckpt = tmp_path / "run.pt"
    torch.manual_seed(0)
    first = _strategy()
    run_sets(first, tiny_bench(), checkpoint_path=ckpt, checkpoint_every=2, stop_after=stop_after)
    saved = read_checkpoint(ckpt)
    assert saved["clock"]["train_iterations"] == checkpointed
    resumed = _strategy()  # a new process: its clock starts at 0
    seen = []

    class _Steps(SupervisedPlugin):
        def before_training_iteration(self, s, **kw):
            seen.append((s.clock.train_iterations, s.clock.train_exp_iterations))

    resumed.plugins.append(_Steps())
    run_sets(resumed, tiny_bench(), checkpoint_path=ckpt, checkpoint_every=2)
    assert seen[0][0] == saved["clock"]["train_iterations"]  # continues, not from 0
    assert seen[0][1] == saved["position"]["iteration"]
    assert clock(resumed) == clock(ref)


def test_the_optimiser_state_resumes_on_the_device_the_strategy_trains_on(tmp_path):
    """Resuming a CPU checkpoint into a strategy whose device is another one (``meta``, a
    stand-in for a GPU, whose model is still on the CPU as Avalanche leaves it until train()):
    Adam's moments must load onto that device, next to the parameters they update."""
    path = tmp_path / "c.pt"
    s1 = _strategy()
    run_sets(s1, tiny_bench(), stop_after=2)
    save_checkpoint(path, s1, position={"experience": 0, "iteration": 2})
    assert any("exp_avg" in st for st in s1.optimizer.state.values())

    s2 = _strategy()
    s2.device = torch.device("meta")
    assert {p.device.type for p in s2.model.parameters()} == {"cpu"}
    # moving to the meta device keeps the Parameter objects (as a move to a GPU does) only in
    # torch's swap mode; the optimiser refers to those objects
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        load_latest_checkpoint(path, s2)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
    params = [p for group in s2.optimizer.param_groups for p in group["params"]]
    assert {p.device.type for p in params} == {"meta"}
    moments = [
        (p, t)
        for p in params
        for name, t in s2.optimizer.state[p].items()
        if name in ("exp_avg", "exp_avg_sq")
    ]
    assert moments and all(t.device == p.device for p, t in moments)
