"""ORDER and its ablations as methods: :class:`~.strategy.OrderStrategy` with components switched
off (paper Tables 2-3 and the appendix ablation tables).

Each ``MethodSpec`` below is one method (:mod:`avalanche_sets.method_spec`); its ``fixed``
options are the switches of :class:`~.strategy.OrderStrategy` it sets, and an option given that
contradicts one is refused (``order-no-ot`` with ``use_ot=True``: use ``order``).
"""

from __future__ import annotations

from ..method_spec import MethodSpec, PaperRow
from .strategy import OrderStrategy

__all__ = ["OrderStrategy"]

ORDER = MethodSpec(
    name="order",
    summary="ORDER: OOD split + MI regularisation + reservoir replay + OT on replayed tasks",
    family="order",
    strategy="OrderStrategy",
    rows=(
        PaperRow("table2", 7, ((41.25, 0.64), (53.96, 0.71))),
        PaperRow("table3", 9, ((41.25, 0.64), (53.96, 0.71))),
        PaperRow("order2", 15, ((42.49, 0.57), (55.37, 0.71))),
        PaperRow("order3", 15, ((43.36, 0.61), (56.89, 0.58))),
        PaperRow("ablation_components", 5, ((53.96, 0.71), (51.87, 0.68))),
        PaperRow("ablation_mi", 5, ((53.96, 0.71), (51.87, 0.68))),
        PaperRow("ood_sensitivity", 4),
        PaperRow("memory_size", 3),
        PaperRow("lambda_beta", 1),
    ),
)

ORDER_MI_ONLY = MethodSpec(
    name="order-mi-only",
    summary="ORDER's OOD split and MI terms, without replay or OT",
    family="order",
    strategy="OrderStrategy",
    fixed={"use_replay": False, "use_ot": False},
    rows=(
        PaperRow("table2", 6, ((36.93, 0.90), (48.85, 0.53))),
        PaperRow("order2", 6),
        PaperRow("order3", 6),
        PaperRow("ablation_mi", 8),
    ),
)

ORDER_OT_ONLY = MethodSpec(
    name="order-ot-only",
    summary="ORDER without its MI terms: replay and OT on replayed tasks",
    family="order",
    strategy="OrderStrategy",
    fixed={"use_mi": False},
    rows=(
        PaperRow("table3", 8, ((39.21, 0.61), (51.72, 0.61))),
        PaperRow("order2", 14),
        PaperRow("order3", 14),
        PaperRow("ablation_components", 3, ((51.72, 0.61), (48.57, 0.80))),
        PaperRow("ablation_mi", 2, ((51.67, 0.85), (48.36, 0.82))),
    ),
)

ORDER_OT_SUPPORT_ONLY = MethodSpec(
    name="order-ot-support-only",
    summary="ORDER without MI, its OT matching supports only (no unlabeled images)",
    family="order",
    strategy="OrderStrategy",
    fixed={"use_mi": False, "ot_unlabeled": False},
    rows=(PaperRow("ablation_components", 2, ((51.18, 0.82), (47.69, 0.87))),),
)

ORDER_NO_OT = MethodSpec(
    name="order-no-ot",
    summary="ORDER without OT: OOD split, MI terms and replay",
    family="order",
    strategy="OrderStrategy",
    fixed={"use_ot": False},
    rows=(PaperRow("ablation_components", 4, ((52.63, 0.77), (50.23, 0.62))),),
)

ORDER_MI_ID_ONLY = MethodSpec(
    name="order-mi-id-only",
    summary="ORDER with the in-distribution MI term only",
    family="order",
    strategy="OrderStrategy",
    fixed={"mi_terms": ("id",)},
    rows=(PaperRow("ablation_mi", 3, ((52.87, 0.89), (49.98, 0.70))),),
)

ORDER_MI_OOD_ONLY = MethodSpec(
    name="order-mi-ood-only",
    summary="ORDER with the out-of-distribution MI term only",
    family="order",
    strategy="OrderStrategy",
    fixed={"mi_terms": ("ood",)},
    rows=(PaperRow("ablation_mi", 4),),
)

ORDER_OOD_FILTER_ONLY = MethodSpec(
    name="order-ood-filter-only",
    summary="ORDER's OOD split alone: prototypes refined on the images it keeps as ID",
    family="order",
    strategy="OrderStrategy",
    fixed={"use_mi": False, "use_replay": False, "use_ot": False},
    rows=(PaperRow("ablation_mi", 7),),
)
