"""A method built for a run (:func:`~avalanche_sets.methods.build_strategy`) gets its class's
tuned values (:attr:`~avalanche_sets.method.Method.tuned`) — a class of one's own, subclassing a
built-in method's class, as a built-in one — and an option given overrides them."""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset

MODULE = """
from avalanche_sets import OrderStrategy
from avalanche_sets.baselines import MSKM


class TunedOrder(OrderStrategy):
    name = "tuned-order"
    summary = "ORDER with tuned weights of its own"
    tuned = {"lam": 0.02, "beta": 0.05, "ood_k": 2.0}


class TunedMSKM(MSKM):
    name = "tuned-mskm"
    summary = "MSKM with a tuned rate of its own, trained by SGD"
    tuned = {"lr": 0.05, "sgd": True}
"""


@pytest.fixture
def module(tmp_path, monkeypatch) -> str:
    """A module of one's own, ``tuned_<n>.py`` in the current folder (a fresh name per test)."""
    name = f"tuned_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture(scope="module")
def preset():
    return resolve_preset("quick", width=4, n_blocks=2, image_size=16, threads=1)


def test_an_order_class_of_ones_own_runs_with_its_tuned_values_unless_given_others(module, preset):
    strategy = build_strategy(f"{module}:TunedOrder", preset)
    assert strategy.mi.lam == 0.02  # ORDER's own defaults: 1e-5, 0.003, 1.0
    assert strategy.ot.beta == 0.05
    assert strategy.ood_split.k == 2.0
    given = build_strategy(f"{module}:TunedOrder", preset, beta=0.5)
    assert given.ot.beta == 0.5  # the option given wins
    assert given.mi.lam == 0.02 and given.ood_split.k == 2.0  # the rest stay tuned


def test_an_mskm_class_of_ones_own_runs_with_its_tuned_rate_over_the_presets(module, preset):
    assert preset.lr != 0.05
    strategy = build_strategy(f"{module}:TunedMSKM", preset)
    assert type(strategy.optimizer) is torch.optim.SGD
    assert strategy.optimizer.param_groups[0]["lr"] == 0.05  # not the preset's lr
    given = build_strategy(f"{module}:TunedMSKM", preset, lr=0.2)
    assert type(given.optimizer) is torch.optim.SGD
    assert given.optimizer.param_groups[0]["lr"] == 0.2
