"""ORDER's four parts replaced through their documented arguments (``ood_detector``,
``mi_estimator``, ``memory``, ``transport``): each replacement runs in the real training loop and
what it gives is what ORDER uses; options only the replaced default reads are refused."""

import sys
from pathlib import Path

import pytest
import torch

from avalanche_sets.order import (
    OODSplit,
    OrderStrategy,
    PrototypeDistanceDetector,
    Reservoir,
)
from avalanche_sets.order.variants import OrderNoOT, OrderOODFilterOnly

sys.path.insert(0, str(Path(__file__).parent))
import test_wiring  # noqa: E402
from test_wiring import Probe, make_batch, order, perturb, run_steps  # noqa: E402

carrier = test_wiring.carrier  # the fixture


class FirstHalfID:
    """Calls the first half of every unlabeled set ID, by position; records its calls."""

    def __init__(self):
        self.calls = []

    def split(self, query_emb, unlabeled_emb, prototypes):
        self.calls.append((query_emb, unlabeled_emb, prototypes))
        b, u = unlabeled_emb.shape[:2]
        is_id = (torch.arange(u) < u // 2).expand(b, u).clone()
        return OODSplit(is_id=is_id, distances=torch.arange(u, dtype=torch.float32).expand(b, u))


def test_an_ood_detector_of_ones_own_splits_and_its_split_reaches_the_head(carrier):
    detector = FirstHalfID()
    probe = Probe()
    s = order(probe, ood_detector=detector)
    run_steps(s, carrier, make_batch(1, 2))
    assert len(detector.calls) == 1
    q, u, p = detector.calls[0]
    assert not (q.requires_grad or u.requires_grad or p.requires_grad), "detached inputs"
    state = probe.records[0]["state"]
    assert u.shape == state.unlabeled_emb.shape and p.shape == state.prototypes.shape
    want = (torch.arange(u.shape[1]) < u.shape[1] // 2).expand(u.shape[:2]).float()
    # the head refines its prototypes with the detector's U_id, and memory keeps its U_id
    assert torch.equal(state.unlabeled_weight, want)
    assert torch.equal(s.replay.tasks[0].unlabeled_id, want[0].bool())
    assert s.ood_split.detector is detector


def test_the_paper_detector_is_the_default_and_replacing_it_refuses_its_options():
    s = OrderStrategy()
    assert isinstance(s.ood_split.detector, PrototypeDistanceDetector)
    assert s.ood_split.detector.k == 1.0
    read_by_default = r"\['ood_k', 'ood_n_id', 'ood_rule'\] are read by ORDER's own OOD"
    with pytest.raises(ValueError, match=read_by_default):
        OrderStrategy(ood_detector=FirstHalfID(), ood_k=2.0, ood_rule="topk", ood_n_id=3)
    OrderStrategy(ood_detector=FirstHalfID(), ood_k=1.0)  # an explicit default is no option
    with pytest.raises(ValueError, match="use_ot=False.*fix: drop transport"):
        OrderNoOT(transport=lambda *a, **k: None)
    with pytest.raises(ValueError, match="use_ood_split=False"):
        OrderStrategy(use_ood_split=False, use_mi=False, ood_detector=FirstHalfID())


def test_a_detector_giving_the_wrong_shape_is_named(carrier):
    class Wrong(FirstHalfID):
        def split(self, query_emb, unlabeled_emb, prototypes):
            return OODSplit(is_id=torch.ones(3, dtype=torch.bool), distances=torch.ones(3))

    with pytest.raises(ValueError, match=r"Wrong.split must return an OODSplit .* \[B, U\]"):
        run_steps(order(ood_detector=Wrong()), carrier, make_batch(1, 2))


class ConstantMI:
    """I_ood = 2, I_id = 0.5 for every episode (attached to the embeddings' graph); fit counts
    its calls and the pairs it was given."""

    made = []

    def __init__(self, dim, device):
        self.dim, self.device, self.fits = dim, device, []
        ConstantMI.made.append(self)

    def fit(self, e, p, is_id):
        self.fits.append((e, p, is_id))
        return {"my_value": torch.tensor(1.5)}

    def episode_bounds(self, e, p, is_id, *, use_id, use_ood):
        zero = (e.sum((1, 2)) + p.sum((1, 2))) * 0.0
        return zero + 2.0, zero + 0.5

    def state_dict(self):
        return {"n_fits": len(self.fits)}

    def load_state_dict(self, state):
        self.fits = [None] * state["n_fits"]


def test_an_mi_estimator_of_ones_own_gives_the_mi_term(carrier):
    ConstantMI.made.clear()
    probe = Probe()
    s = order(probe, mi_estimator=ConstantMI, use_replay=False, use_ot=False)
    run_steps(s, carrier, make_batch(1, 2))
    (est,) = ConstantMI.made
    state = probe.records[0]["state"]
    assert est.dim == state.unlabeled_emb.shape[-1]
    ((e, p, is_id),) = est.fits
    assert not e.requires_grad and e.shape == (2 * state.unlabeled_emb.shape[1], est.dim)
    assert torch.equal(is_id, s.iteration.ood_split.is_id.reshape(-1))
    # λ Σ_T (I_ood − I_id) over the two tasks: 0.5 · 2 · (2 − 0.5)
    assert float(probe.records[0]["terms"]["mi"].detach()) == pytest.approx(0.5 * 2 * 1.5)
    assert float(s.mi.last_values["my_value"]) == 1.5
    assert s.mi.state_dict() == {"estimator": {"n_fits": 1}, "dim": est.dim}


class FIFO(Reservoir):
    """Keeps the newest tasks: the n-th goes to slot (n - 1) mod M."""

    def choose_slot(self, n):
        return (n - 1) % self.capacity


def test_a_memory_policy_of_ones_own_decides_what_is_kept(carrier):
    s = order(memory=FIFO, mem_size=2, replay_batch=1, use_mi=False, use_ot=False)
    assert isinstance(s.replay.reservoir, FIFO) and s.replay.reservoir.capacity == 2
    batches = [make_batch(2 * i + 1, 2 * i + 2) for i in range(3)]
    run_steps(s, carrier, *batches)
    # FIFO keeps the last meta-batch's two tasks (Algorithm R would keep each with p = 2/6)
    kept = [t.query_y for t in s.replay.tasks]
    last = batches[-1][0]
    assert [torch.equal(k, last.query_y[i]) for i, k in enumerate(kept)] == [True, True]
    support = [t.images()[0] for t in s.replay.tasks]
    assert all(torch.equal(x, last.support_x[i]) for i, x in enumerate(support))
    with pytest.raises(TypeError, match="fix: give a Reservoir subclass"):
        order(memory=lambda capacity, seed: [])


def test_a_memory_policy_naming_a_slot_out_of_range_is_refused():
    class Bad(Reservoir):
        def choose_slot(self, n):
            return 5

    with pytest.raises(ValueError, match=r"Bad.choose_slot\(1\) gave slot 5"):
        Bad(2).offer("task")


class HalfSquared:
    """Half the squared distance of paired rows, over the marked rows; records its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, current, stored, *, mask, generator):
        self.calls.append((current.shape, stored.shape, mask.clone(), generator))
        return 0.5 * (((current - stored) ** 2).sum(-1) * mask).sum()


def test_a_transport_loss_of_ones_own_gives_the_ot_term(carrier):
    transport = HalfSquared()
    probe = Probe()
    s = order(probe, transport=transport, use_mi=False, ot_max_points=250)  # 250: the default
    run_steps(s, carrier, make_batch(1, 2))
    assert transport.calls == [], "nothing is replayed before the memory holds a task"
    perturb(s.model, seed=7)  # stored and current features differ
    run_steps(s, carrier, make_batch(3, 4))
    ((shape, stored_shape, mask, generator),) = transport.calls
    assert shape == stored_shape and mask.shape == shape[:1] and mask.any()
    assert isinstance(generator, torch.Generator)
    term = probe.records[1]["terms"]["ot"]
    assert float(term.detach()) == pytest.approx(0.7 * float(s.ot.last_value))
    assert float(s.ot.last_value) > 0 and term.requires_grad
    with pytest.raises(ValueError, match=r"\['ot_solver'\] are read by ORDER's own transport"):
        OrderStrategy(transport=transport, ot_solver="sinkhorn")


def test_a_replaced_part_of_an_ablation_keeps_the_ablation():
    s = OrderOODFilterOnly(ood_detector=FirstHalfID())
    assert s.mi is None and s.replay is None and s.ot is None
    assert isinstance(s.ood_split.detector, FirstHalfID)
