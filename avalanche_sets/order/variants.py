"""ORDER's ablations as methods: :class:`~.strategy.OrderStrategy` with components switched off
(paper Tables 2-3 and the appendix ablation tables).

Each class is one method (:class:`~avalanche_sets.method.Method`); its ``fixed`` options are the
switches of :class:`~.strategy.OrderStrategy` it sets, wherever it is built: ``OrderNoOT()`` in
Python is ``--method order-no-ot`` on the command line, and an option given that contradicts one
is refused, in its constructor too (``OrderNoOT(use_ot=True)``: use ``order``).
"""

from __future__ import annotations

from .strategy import OrderStrategy

__all__ = [
    "OrderMIIdOnly",
    "OrderMIOnly",
    "OrderMIOodOnly",
    "OrderNoOT",
    "OrderOODFilterOnly",
    "OrderOTOnly",
    "OrderOTSupportOnly",
    "OrderStrategy",
]


class OrderMIOnly(OrderStrategy):
    name = "order-mi-only"
    summary = "ORDER's OOD split and MI terms, without replay or OT"
    fixed = {"use_replay": False, "use_ot": False}


class OrderOTOnly(OrderStrategy):
    name = "order-ot-only"
    summary = "ORDER without its MI terms: replay and OT on replayed tasks"
    fixed = {"use_mi": False}


class OrderOTSupportOnly(OrderStrategy):
    name = "order-ot-support-only"
    summary = "ORDER without MI, its OT matching supports only (no unlabeled images)"
    fixed = {"use_mi": False, "ot_unlabeled": False}


class OrderNoOT(OrderStrategy):
    name = "order-no-ot"
    summary = "ORDER without OT: OOD split, MI terms and replay"
    fixed = {"use_ot": False}


class OrderMIIdOnly(OrderStrategy):
    name = "order-mi-id-only"
    summary = "ORDER with the in-distribution MI term only"
    fixed = {"mi_terms": ("id",)}


class OrderMIOodOnly(OrderStrategy):
    name = "order-mi-ood-only"
    summary = "ORDER with the out-of-distribution MI term only"
    fixed = {"mi_terms": ("ood",)}


class OrderOODFilterOnly(OrderStrategy):
    name = "order-ood-filter-only"
    summary = "ORDER's OOD split alone: prototypes refined on the images it keeps as ID"
    fixed = {"use_mi": False, "use_replay": False, "use_ot": False}
