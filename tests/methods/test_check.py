"""Options typed for one method are that method's: handed to another method that takes the same
names (ORDER's options to its ablation ``order-no-ot``), they are refused with the fix on every
path a run takes, rather than typed again and built into the other method — where ORDER's
``use_ot=True`` would make ``order-no-ot`` ORDER."""

from __future__ import annotations

import pytest

from avalanche_sets.methods import (
    MethodOptionError,
    build_checked_strategy,
    check_method,
    method_options,
    typed_options,
)
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.run import Run
from avalanche_sets.runs.sweep import RunSpec

FIX = (
    r"options typed for method 'order' were handed to method 'order-no-ot'; "
    r"fix: type them for it: typed_options\('order-no-ot', dict\(options\)\)"
)


@pytest.fixture(scope="module")
def config():
    return resolve_preset(
        "quick", tasks_per_domain=2, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
        width=4, eval_mb_size=2, domains=["shapes", "strokes"], threads=1,
    )  # fmt: skip


@pytest.fixture
def orders():
    """ORDER's typed options, every name of which ``order-no-ot`` takes too."""
    options = typed_options("order", {"use_ot": True, "beta": 0.01})
    assert set(options) <= set(method_options("order-no-ot")[0])
    return options


def test_typed_options_and_the_methods_check_refuse_another_methods_options(orders, config):
    with pytest.raises(MethodOptionError, match=FIX):
        typed_options("order-no-ot", orders)
    with pytest.raises(MethodOptionError, match=FIX):
        check_method("order-no-ot", config, orders)


def test_a_strategy_is_not_built_from_another_methods_options(orders, config):
    with pytest.raises(MethodOptionError, match=FIX):
        build_checked_strategy("order-no-ot", config, orders)


def test_a_run_refuses_another_methods_options_before_making_its_folder(orders, config, tmp_path):
    with pytest.raises(MethodOptionError, match=FIX):
        Run(method="order-no-ot", config=config, seed=0, strategy_options=orders)
    with pytest.raises(MethodOptionError, match=FIX):
        RunSpec(
            method="order-no-ot", preset=config, seed=0, out_root=tmp_path,
            strategy_overrides=orders,
        )  # fmt: skip
    for checked in (True, False):
        with pytest.raises(MethodOptionError, match=FIX):
            run_experiment(
                "order-no-ot", config, seed=0, out_root=tmp_path, strategy_overrides=orders,
                checked=checked,
            )  # fmt: skip
    assert not any(tmp_path.iterdir())  # refused before any folder was made
