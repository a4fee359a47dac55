"""``benchmarks/gpu_launches.py`` at tiny shapes: its counts add up, the fused optimiser is one
operator per step, and a host read or a graph break put into the package's step shows up at
its line."""

from __future__ import annotations

import json

import pytest
import torch

from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from benchmarks import gpu_launches

SHAPES = dict(image_size=16, n_blocks=2, width=4, n_way=2, n_query=2, n_unlabeled=2, n_ood=2,
              mem_size=3, threads=1)  # fmt: skip
WARM, ITERS = 4, 3


@pytest.fixture(scope="module")
def tiny():
    preset = resolve_preset(
        "paper", source="synthetic", domains=["shapes"], device="cpu", precision="fp32",
        **SHAPES,
    )  # fmt: skip
    preset = preset.replace(tasks_per_domain=preset.meta_batch * (WARM + ITERS + 1))
    return preset, build_benchmark(preset, seed=0).train_stream[0]


def _count(tiny, method: str, **kwargs) -> dict:
    preset, exp = tiny
    kwargs.setdefault("explain", False)
    return gpu_launches.count_method(
        method, preset, exp, warm=WARM, iters=ITERS, log_every=50, **kwargs
    )


def _patch_classify(monkeypatch, line: str) -> int:
    """Make ``PrototypicalModel.classify`` (once per training step) run ``line`` on its logits,
    as code of the package's ``models/episodic.py``; returns the line's number there."""
    original = PrototypicalModel.classify
    source = (
        f"def classify(self, state):\n    out = ORIGINAL(self, state)\n    {line}\n    return out\n"
    )
    namespace = {"ORIGINAL": original, "torch": torch}
    exec(compile(source, PrototypicalModel.classify.__code__.co_filename, "exec"), namespace)
    monkeypatch.setattr(PrototypicalModel, "classify", namespace["classify"])
    return 3


def test_the_benchmark_writes_counts_that_add_up(tmp_path):
    args = ["--out", str(tmp_path), "--stem", "t", "--methods", "protonet", "order",
            "--warm", str(WARM), "--iters", str(ITERS), "--log-every", "2", "--no-explain",
            "--precision", "fp32"]  # fmt: skip
    for key, value in SHAPES.items():
        args += ["--set", f"{key}={value}"]
    summary = gpu_launches.main(args)
    assert json.loads((tmp_path / "t.json").read_text())["rows"] == json.loads(
        json.dumps(summary["rows"])
    )
    assert (tmp_path / "t.png").stat().st_size > 0 and "| **total** |" in (
        tmp_path / "t.md"
    ).read_text()
    fused = {"protonet": 1, "order": 3}  # ORDER: the model's Adam and the two MI networks'
    for row in summary["rows"]:
        launches = row["launches"]
        assert launches["per_iteration"] > 0
        assert sum(launches["by_part"].values()) == pytest.approx(launches["per_iteration"])
        assert sum(launches["each_iteration"]) == pytest.approx(launches["per_iteration"] * ITERS)
        # every operator belongs to a named part of the step; none is left to "other"
        assert not [p for p in launches["by_part"] if p.startswith(("unmapped", "outside"))]
        for part in ("backbone", "backward", "optimiser", "finite check", "loss"):
            assert launches["by_part"][part] > 0, (part, launches["by_part"])
        # one fused step per optimiser per iteration, one operator each
        assert all(o["fused"] for o in row["optimisers"])
        assert len(row["optimisers"]) == fused[row["method"]]
        assert launches["fused_optimiser_steps_per_iteration"] == fused[row["method"]]
        syncs = row["syncs"]
        assert syncs["logging_steps"] >= 1
        assert any("loss_terms.py" in k for k in syncs["logging_step_extra"])
    # with fused optimisers the step waits for nothing: the finite check and the label check
    # stay on the device
    assert summary["rows"][0]["syncs"]["per_non_logging_iteration"] == 0
    order = summary["rows"][1]
    assert order["replays"]
    for part in ("replay", "OOD split", "MI pairs", "MI fit", "MI term", "OT"):
        assert order["launches"]["by_part"][part] > 0, part
    # ORDER's exact OT plan: one copy to the host (cpu, numpy), none back; the replay memory
    # reads the episode indices in the batch's oracle, which stays on the host on a GPU
    sites = order["syncs"]["by_site"]
    assert {k.split(":")[0].split(" ")[-1] for k in sites} == {
        "functional/ot.py",
        "order/replay.py",
    }
    assert not [k for k in sites if k.startswith("h2d:")], sites


def test_a_host_read_in_the_step_is_counted_at_its_line(tiny, monkeypatch):
    before = _count(tiny, "protonet")
    line = _patch_classify(monkeypatch, "out.sum().item()")
    after = _count(tiny, "protonet")
    site = f"item models/episodic.py:{line}"
    assert site not in before["syncs"]["by_site"]
    assert after["syncs"]["by_site"][site] == 1.0
    assert after["syncs"]["per_non_logging_iteration"] == (
        before["syncs"]["per_non_logging_iteration"] + 1
    )
    # and its one kernel (the sum) is the classification's
    part = "prototypes & refinement"
    assert after["launches"]["by_part"][part] == before["launches"]["by_part"][part] + 1


def test_a_graph_break_in_the_step_is_reported_with_its_site(tiny, monkeypatch):
    before = _count(tiny, "protonet", explain=True)["graph_breaks"]
    line = _patch_classify(monkeypatch, "torch._dynamo.graph_break()")
    after = _count(tiny, "protonet", explain=True)["graph_breaks"]
    assert before["trace_autograd_ops"] and before["graph_count"] >= 1
    # one more break reason, at the line put in (dynamo's own break count need not move: the
    # frames it resumes in are cut differently)
    total = lambda g: sum(r["count"] for r in g["reasons"])  # noqa: E731
    assert total(after) == total(before) + 1
    site = f"avalanche_sets/models/episodic.py:{line}"
    assert site not in {r["site"] for r in before["reasons"]}
    assert site in {r["site"] for r in after["reasons"]}
    assert not torch._dynamo.config.trace_autograd_ops  # nothing leaks out of explain


def test_operators_run_by_the_autograd_engine_count_as_backward():
    from avalanche_sets.models import heads
    from benchmarks._sync_count import package_root

    # a forward and its backward, both made by the package's code (its heads.py)
    code = compile("y = (x * x).sum()\ny.backward()\n", heads.__file__, "exec")
    x = torch.ones(3, requires_grad=True)
    counter = gpu_launches.LaunchCounter(package_root())
    with counter:
        exec(code, {"x": x})
    parts = counter.parts["between"]
    assert parts["prototypes & refinement"] == 3  # mul, sum, the seed gradient (ones_like)
    assert parts["backward"] >= 2 and set(parts) == {"prototypes & refinement", "backward"}
