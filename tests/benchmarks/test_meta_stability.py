"""ANIL's/LST's inner-loop probe and its stability ratio (benchmarks/meta_stability.py)."""

import csv
import json

import pytest
import torch
from torch import nn

from avalanche_sets.baselines.meta import ANILModel, weighted_cross_entropy
from avalanche_sets.presets import resolve_preset
from benchmarks import meta_stability as ms


@pytest.mark.parametrize("weighted", [False, True])
def test_stability_ratio_is_the_step_times_the_largest_hessian_eigenvalue_at_uniform_predictions(
    weighted,
):
    g = torch.Generator().manual_seed(0)
    emb = 3 * torch.rand(12, 6, generator=g)
    y = torch.arange(4).repeat(3)
    w = torch.rand(12, generator=g) + 0.1 if weighted else None
    n_way, lr = 4, 0.07

    def loss(flat):  # a zero head: uniform predictions
        weight, bias = flat[: n_way * 6].view(n_way, 6), flat[n_way * 6 :]
        return weighted_cross_entropy(emb @ weight.T + bias, y, w)

    hessian = torch.autograd.functional.hessian(loss, torch.zeros(n_way * 7))
    exact = lr * torch.linalg.eigvalsh(hessian)[-1]
    assert ms.stability_ratio(emb, lr, n_way, w) == pytest.approx(float(exact), rel=1e-4)


def _scaled(base: torch.Tensor, rho: float) -> float:
    """The factor c with stability_ratio(c · base) = rho (bisection; ρ grows with c)."""
    lo, hi = 1e-3, 1e3
    for _ in range(80):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if ms.stability_ratio(base * mid, 0.01, 5) < rho else (lo, mid)
    return lo


def _head_meta_gradient(rho: float, *, first_order: bool, seed: int) -> float:
    """Norm of the query loss's gradient w.r.t. the head's initialisation after ANIL's 20 inner
    steps on support embeddings scaled to stability ratio ``rho``."""
    g = torch.Generator().manual_seed(seed)
    support, query = torch.rand(25, 16, generator=g), torch.rand(25, 16, generator=g)
    y = torch.arange(5).repeat_interleave(5)
    torch.manual_seed(seed)
    model = ANILModel(nn.Identity(), emb_dim=16, inner_lr=0.01, first_order=first_order)
    c = _scaled(support, rho)
    learner = model.adapt(support * c, y, second_order=not first_order)
    nn.functional.cross_entropy(learner(query * c), y).backward()
    return float(torch.cat([p.grad.flatten() for p in model.head.parameters()]).norm())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_second_order_meta_gradient_explodes_once_the_stability_ratio_is_large(seed):
    # What the probe's ρ is for: below 2 the 20-step inner loop's Jacobian is a contraction;
    # far above it the second-order meta-gradient is thousands of times larger (the converged
    # ANIL runs: ρ ≈ 3 on domain 4, max meta-gradient 3.9; ρ ≈ 5 on domain 5, 798), while
    # first-order MAML, which drops that Jacobian, stays within a small factor.
    stable = _head_meta_gradient(1.0, first_order=False, seed=seed)
    large = _head_meta_gradient(6.0, first_order=False, seed=seed)
    assert large > 300 * stable
    fo_stable = _head_meta_gradient(1.0, first_order=True, seed=seed)
    fo_large = _head_meta_gradient(6.0, first_order=True, seed=seed)
    assert fo_large < 15 * fo_stable


def _tiny_preset():
    return resolve_preset(
        "quick", source="synthetic", domains=["shapes", "strokes"], tasks_per_domain=4,
        n_val_episodes=2, n_test_episodes=2, threads=1,
    )  # fmt: skip


def test_the_probe_writes_one_row_per_training_iteration_and_changes_nothing(tmp_path, monkeypatch):
    from avalanche_sets.methods import build_strategy
    from avalanche_sets.runs.experiment import build_benchmark
    from avalanche_sets.training import run_sets

    preset = _tiny_preset()
    options = ms.VARIANTS["anil"][0]
    rec = ms.run_variant("anil", options, preset, seed=0, out=tmp_path)
    folder = ms.variant_folder(tmp_path, "anil", options, seed=0)
    with open(folder / "iterations.csv") as f:
        rows = list(csv.DictReader(f))
    iterations = preset["tasks_per_domain"] // preset["meta_batch"]
    assert [(int(r["domain"]), int(r["iteration"])) for r in rows] == [
        (d, i) for d in range(2) for i in range(iterations)
    ]
    for r in rows:
        assert float(r["meta_grad_norm"]) > 0 and float(r["sq_norm"]) > 0
        assert 0 < float(r["rho_mean"]) <= float(r["rho_max"])
        assert float(r["inner_loss_after"]) < float(r["inner_loss_before"])  # ρ ≪ 2 here
    # the same run without the probe gives the same accuracies
    plain = run_sets(
        build_strategy("anil", preset, seed=0, **options), build_benchmark(preset, seed=0),
        eval_stream="valid", interim_episodes=preset["interim_test_episodes"],
    )  # fmt: skip
    assert rec["result"]["episode_acc"] == plain.to_dict()["episode_acc"]
    # a finished variant is read back, not run again
    monkeypatch.setattr("avalanche_sets.training.run_sets", lambda *a, **k: 1 / 0)
    assert ms.run_variant("anil", options, preset, seed=0, out=tmp_path) == rec


def test_the_report_keeps_the_default_unless_a_variant_beats_it_resolved(tmp_path):
    preset = _tiny_preset()
    for options in ms.VARIANTS["anil"][:2]:
        ms.run_variant("anil", options, preset, seed=0, out=tmp_path)
    # make the first-order variant's validation episodes all correct: a resolved gain
    folder = ms.variant_folder(tmp_path, "anil", ms.VARIANTS["anil"][1], seed=0)
    rec = json.loads((folder / "record.json").read_text())
    rec["result"]["episode_acc"] = [1.0] * len(rec["result"]["episode_acc"])
    rec["result"]["mean_accuracy"] = 1.0
    (folder / "record.json").write_text(json.dumps(rec))
    summary = ms.report(tmp_path, seed=0)
    assert summary["chosen"] == {"anil": ms.VARIANTS["anil"][1]}
    assert json.loads((tmp_path / "chosen.json").read_text()) == {"converged": summary["chosen"]}
    assert (tmp_path / "probe.png").stat().st_size > 0
    assert "**yes**" in (tmp_path / "README.md").read_text()


def test_the_class_defaults_are_the_variants_the_validation_stream_chose():
    import inspect

    from avalanche_sets.methods import _strategy_class, method_spec

    chosen = json.loads((ms.OUT / "chosen.json").read_text())["converged"]
    assert set(chosen) == set(ms.VARIANTS)
    for method, options in chosen.items():
        cls = _strategy_class(method_spec(method))
        assert set(options) <= set(cls.model_option_names()), method  # options of its model
        params = inspect.signature(cls.model_class).parameters  # where their defaults live
        assert {k: params[k].default for k in options} == options, method
