"""Our MER and DER against Avalanche 0.6's own ``MER`` and ``DER`` strategies.

Avalanche's strategies work on batches of single samples (tensor rows), ours on episodes, so
they cannot be swapped in (see the docstrings of ``MERPlugin`` / ``DERPlugin``). Where the
definitions coincide they are compared on the same input: MER's Reptile update
(:func:`mer_update`) on the same model, optimiser, memory and drawing order, and DER's loss
(:func:`dark_logit_loss` + the label term) on the outputs, labels and stored logits that
Avalanche's ``DER`` used in its own training step. The last test records the behaviour that
makes Avalanche's MER unsuitable for an online stream: its memory only fills at the end of an
experience, so the first experience replays nothing.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from avalanche.benchmarks.scenarios.dataset_scenario import benchmark_from_datasets
from avalanche.benchmarks.utils.classification_dataset import ClassificationDataset
from avalanche.benchmarks.utils.data_attribute import DataAttribute
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin
from avalanche.training.supervised.der import DER
from avalanche.training.supervised.mer import MER
from torch.utils.data import TensorDataset

from avalanche_sets.baselines.plugins.der import dark_logit_loss
from avalanche_sets.baselines.plugins.mer import mer_update

pytestmark = pytest.mark.filterwarnings("ignore:No loggers specified")


def _dataset(seed: int, classes: list[int], n: int = 24) -> ClassificationDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=g)
    y = torch.tensor([classes[i % len(classes)] for i in range(n)])
    return ClassificationDataset(
        [TensorDataset(x, y)],
        data_attributes=[
            DataAttribute(y.tolist(), "targets"),
            DataAttribute([0] * n, "targets_task_labels", use_in_getitem=True),
        ],
    )


class _Capture(SupervisedPlugin):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn, self.calls = fn, []

    def before_backward(self, strategy, **kwargs):
        self.calls.append(self.fn(strategy))


@pytest.mark.parametrize("n_batches, beta, gamma", [(1, 0.3, 1.0), (2, 0.3, 0.6), (3, 1.0, 0.5)])
def test_mer_update_matches_avalanche_mer(n_batches, beta, gamma):
    lr, mem_batch = 0.1, 3
    torch.manual_seed(0)
    theirs = torch.nn.Linear(5, 3)
    ours = copy.deepcopy(theirs)
    start = theirs.weight.detach().clone()
    g = torch.Generator().manual_seed(1)
    memory = [(torch.randn(5, generator=g), i % 3, 0) for i in range(5)]
    x, y = torch.randn(2, 5, generator=g), torch.tensor([0, 2])

    # Avalanche's MER: one training iteration on (x, y) with this memory.
    strategy = MER(model=theirs, optimizer=torch.optim.SGD(theirs.parameters(), lr=lr),
                   mem_size=10, batch_size_mem=mem_batch, n_inner_steps=n_batches, beta=beta,
                   gamma=gamma, evaluator=EvaluationPlugin())  # fmt: skip
    strategy.buffer.storage_policy.buffer = memory
    strategy.mbatch = [x, y, torch.zeros(2, dtype=torch.long)]
    torch.manual_seed(7)  # Avalanche draws each inner batch's memory samples with randperm
    strategy._before_inner_updates()
    strategy._inner_updates()
    strategy._outer_update()

    # Ours on the same items in the same order (Avalanche: current samples first).
    torch.manual_seed(7)
    draws = [torch.randperm(len(memory))[:mem_batch].tolist() for _ in range(n_batches)]
    current = [(x[i], int(y[i])) for i in range(2)]
    batches = [current + [memory[i][:2] for i in d] for d in draws]
    opt = torch.optim.SGD(ours.parameters(), lr=lr)

    def step(j, item):
        xi, yi = item
        opt.zero_grad()
        F.cross_entropy(ours(xi[None]), torch.tensor([yi])).backward()
        opt.step()

    mer_update(list(ours.parameters()), batches, step, beta=beta, gamma=gamma)
    for p_theirs, p_ours in zip(theirs.parameters(), ours.parameters()):
        torch.testing.assert_close(p_ours, p_theirs, atol=1e-6, rtol=0)
    assert (theirs.weight - start).abs().max() > 1e-3  # both trained


def test_avalanche_mer_replays_nothing_during_the_first_experience():
    # MER's reservoir takes every incoming example (Riemer et al. 2019, Alg. 1); Avalanche's
    # fills at experience ends only. Ours fills after every iteration (test_continual.py).
    bench = benchmark_from_datasets(train=[_dataset(0, [0, 1]), _dataset(1, [2, 0])])
    model = torch.nn.Linear(5, 3)
    sizes = []

    class Probe(SupervisedPlugin):
        def before_training_iteration(self, strategy, **kwargs):
            sizes.append((strategy.clock.train_exp_counter, len(strategy.buffer)))

    strategy = MER(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                   mem_size=10, batch_size_mem=2, train_mb_size=4, evaluator=EvaluationPlugin(),
                   plugins=[Probe()])  # fmt: skip
    for exp in bench.train_stream:
        strategy.train(exp)
    first = [n for e, n in sizes if e == 0]
    second = [n for e, n in sizes if e == 1]
    assert len(first) == 6 and set(first) == {0}
    assert set(second) == {10}


def test_der_loss_matches_avalanche_der():
    alpha, beta, mem_batch = 0.3, 0.7, 4
    bench = benchmark_from_datasets(train=[_dataset(0, [0, 1]), _dataset(1, [2, 3])])
    capture = _Capture(
        lambda s: dict(
            out=s.mb_output.detach().clone(),
            y=s.mb_y.clone(),
            loss=s.loss.detach().clone(),
            stored=None if s.replay_loader is None else s.batch_logits.clone(),
        )
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 4)
    strategy = DER(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                   mem_size=8, batch_size_mem=mem_batch, alpha=alpha, beta=beta, train_mb_size=6,
                   evaluator=EvaluationPlugin(), plugins=[capture])  # fmt: skip
    for exp in bench.train_stream:
        strategy.train(exp)
    replayed = [c for c in capture.calls if c["stored"] is not None]
    assert len(replayed) == 4 and len(capture.calls) == 8
    for c in replayed:
        mem_out, cur_out = c["out"][:mem_batch], c["out"][mem_batch:]
        mem_y, cur_y = c["y"][:mem_batch], c["y"][mem_batch:]
        # Avalanche uses one memory sample for both terms; DER++ (and ours) draws two. With the
        # same sample the definitions coincide: L = CE(current) + a MSE(f(x_m), z_m) + b CE(f(x_m), y_m)
        ours = (
            F.cross_entropy(cur_out, cur_y)
            + alpha * dark_logit_loss(mem_out, c["stored"])
            + beta * F.cross_entropy(mem_out, mem_y)
        )
        torch.testing.assert_close(ours, c["loss"].reshape(()), atol=1e-6, rtol=1e-6)
    # The logit term is live: 0 in the first step after the logits were stored, > 0 later.
    terms = [float(dark_logit_loss(c["out"][:mem_batch], c["stored"])) for c in replayed]
    assert terms[0] == 0 and min(terms[1:]) > 1e-4


def test_dark_logit_loss_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\(4, 3\) and stored logits \(4, 5\)"):
        dark_logit_loss(torch.zeros(4, 3), torch.zeros(4, 5))
