"""ORDER's plugin contract (``avalanche_sets.order.contract``): a plugin that reads what another
writes fails when the strategy is built without that partner — matched by class, so DER's and
MER's plugins, which also keep a ``reservoir``, do not stand in for ORDER's memory."""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.baselines.plugins.der import DERPlugin
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import (
    FeatureReservoirReplayPlugin,
    MIRegularizationPlugin,
    OODSplitPlugin,
    OrderStrategy,
    OTFeatureLossPlugin,
)
from avalanche_sets.training import EpisodicTemplate, silent_evaluator


def template(*plugins) -> EpisodicTemplate:
    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    return EpisodicTemplate(
        model=model, optimizer=torch.optim.Adam(model.parameters()), plugins=list(plugins),
        evaluator=silent_evaluator(),
    )  # fmt: skip


def test_mi_without_the_ood_split_fails_at_construction():
    with pytest.raises(ValueError, match=r"MIRegularizationPlugin needs OODSplitPlugin in the same "
                       r"strategy \(it separates U_id from U_ood.*fix: add OODSplitPlugin"):  # fmt: skip
        template(MIRegularizationPlugin())
    template(OODSplitPlugin(), MIRegularizationPlugin())  # with its partner: fine


def test_ot_without_orders_memory_fails_at_construction_even_next_to_another_reservoir():
    with pytest.raises(ValueError, match="OTFeatureLossPlugin needs FeatureReservoirReplayPlugin"):
        template(OTFeatureLossPlugin())
    der = DERPlugin(mem_size=4)
    assert hasattr(der, "reservoir")  # looks alike, holds no stored features for OT
    with pytest.raises(ValueError, match=r"the plugins are \['DERPlugin', 'OTFeatureLossPlugin'\]"):
        template(der, OTFeatureLossPlugin())
    template(FeatureReservoirReplayPlugin(mem_size=4), OTFeatureLossPlugin())


def test_order_strategy_and_its_ablations_bring_their_partners():
    for options in (
        {},
        {"use_ot": False},
        {"use_mi": False},
        {"use_replay": False, "use_ot": False},
    ):
        OrderStrategy(evaluator=silent_evaluator(), mem_size=4, **options)
