"""When a memory of tasks fills, and whether its storage rule can matter before the last domain.

A memory of ``M`` tasks holds every task offered to it until it is full: before its first
eviction (the first offer it must choose for: keep this task or an old one), *any* rule that
decides what to keep — a reservoir, a "hardest tasks" policy, a per-domain quota — holds the
same tasks. A stream too short for the memory to evict before its last domain starts therefore
trains every domain but the last on the same memory whatever that rule is, and two such rules
compared on it differ at most in the last domain's row.

Every memory of the package declares how it fills (a plugin's ``memory_filling()``, returning a
:class:`MemoryFilling`); :func:`memory_fill` computes from it and the stream's training tasks
per domain and meta-batch when the memory is full and when it first evicts, before any
training, and :func:`strategy_memories` finds the declarations of a strategy (its plugins and
itself, so a plugin of one's own that subclasses a memory of the package declares what it
inherits). Methods without a memory declare nothing.

The counts are exact for the package's memories (``tests/training/test_memory_fill.py`` checks
them against the memories' sizes after training):

* ``stores="iteration"``, ``layout="reservoir"`` (ORDER's
  :class:`~avalanche_sets.order.replay.FeatureReservoirReplayPlugin`, DER, MER): each training
  iteration offers its current tasks (``meta_batch``, fewer in a domain's last iteration when
  ``meta_batch`` does not divide its tasks; replayed tasks are not offered again) to a reservoir
  (:class:`~avalanche_sets.functional.Reservoir`): full at the ``M``-th offer, first evicts at
  offer ``M + 1``.
* ``stores="domain"``, ``layout="reservoir"`` (semi-ER): at the end of each domain, its
  training tasks are offered to a reservoir of ``M`` (Avalanche's ``ReservoirSamplingBuffer``).
* ``stores="domain"``, ``layout="balanced"`` (A-GEM, GEM): at the end of each domain, ``M`` is
  divided equally among the domains seen (Avalanche's adaptive ``ExperienceBalancedBuffer``:
  ``M // d`` each, the remainder to the first ones); each domain keeps up to its quota of its
  own tasks, and older domains shrink to theirs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MemoryFilling", "MemoryFill", "memory_fill", "strategy_memories", "memory_fills"]


@dataclass(frozen=True)
class MemoryFilling:
    """How a memory of tasks fills: what a plugin with a memory declares.

    Attributes:
        capacity: ``M``, the tasks it holds when full.
        stores: ``"iteration"``: each training iteration's current tasks are offered to it;
            ``"domain"``: each domain's training tasks are offered at the domain's end.
        layout: ``"reservoir"``: one memory over every task offered (full at ``M`` offers);
            ``"balanced"``: equal quotas per domain seen (see the module's docstring).
        holder: what keeps it (a plugin's class name), for the message.
    """

    capacity: int
    stores: Literal["iteration", "domain"]
    layout: Literal["reservoir", "balanced"] = "reservoir"
    holder: str = ""

    def __post_init__(self) -> None:
        if self.stores not in ("iteration", "domain"):
            raise ValueError(f"stores must be 'iteration' or 'domain', got {self.stores!r}")
        if self.layout not in ("reservoir", "balanced"):
            raise ValueError(f"layout must be 'reservoir' or 'balanced', got {self.layout!r}")
        if self.layout == "balanced" and self.stores != "domain":
            raise ValueError("a balanced memory sets its quotas at domain ends: stores='domain'")
        if (
            isinstance(self.capacity, bool)
            or not isinstance(self.capacity, int)
            or self.capacity < 1
        ):
            raise ValueError(f"capacity must be a positive integer, got {self.capacity!r}")


def _quotas(capacity: int, groups: int) -> list[int]:
    """Avalanche's adaptive ``ExperienceBalancedBuffer.get_group_lengths``."""
    lengths = [capacity // groups] * groups
    for i in range(capacity - sum(lengths)):
        lengths[i] += 1
    return lengths


@dataclass(frozen=True)
class MemoryFill:
    """When a memory fills on one stream (:func:`memory_fill`).

    ``full_at`` and ``first_eviction`` are ``(domain, iteration)``, both counted from 1, with
    ``iteration`` ``None`` for a memory that stores at domain ends (the end of that domain);
    ``None`` when it never happens on this stream. ``held_at_last_domain``: the tasks it holds
    when the last domain's training starts; ``held_at_end``: when the stream ends.
    """

    filling: MemoryFilling
    tasks_per_domain: tuple[int, ...]
    meta_batch: int
    held_at_last_domain: int
    held_at_end: int
    full_at: tuple[int, int | None] | None
    first_eviction: tuple[int, int | None] | None

    @property
    def tasks_before_last_domain(self) -> int:
        return sum(self.tasks_per_domain[:-1])

    @property
    def evicts_before_last_domain(self) -> bool:
        """Whether a storage rule decides anything the domains before the last train with
        (an eviction during them, or at the end of one of them for a domain-end memory)."""
        return self.first_eviction is not None and self.first_eviction[0] < len(
            self.tasks_per_domain
        )

    def _when(self, at: tuple[int, int | None]) -> str:
        domain, iteration = at
        if iteration is None:
            return f"at the end of domain {domain}"
        return f"at iteration {iteration} of domain {domain}"

    def message(self) -> str:
        """What a run whose memory does not evict before its last domain says (the numbers,
        and what follows); meant for such a run (:attr:`evicts_before_last_domain` false)."""
        f = self.filling
        n_domains = len(self.tasks_per_domain)
        tasks = sorted(set(self.tasks_per_domain))
        per_domain = "/".join(map(str, tasks))
        if f.stores == "iteration":
            stores = (
                f"stores the {self.meta_batch} current tasks of every training iteration "
                f"({per_domain} per domain)"
            )
        else:
            stores = f"stores each domain's {per_domain} training tasks at the domain's end"
        layout = (
            "a reservoir over every task offered"
            if f.layout == "reservoir"
            else "equal quotas per domain seen"
        )
        full = (
            f"it is full {self._when(self.full_at)}"
            if self.full_at is not None
            else f"it is never full (it ends with {self.held_at_end} of {f.capacity})"
        )
        if self.first_eviction is None:
            evicts, keeps = "never evicts", "It keeps every task offered"
        else:
            evicts = f"first evicts {self._when(self.first_eviction)}"
            if f.stores == "domain" and self.first_eviction[0] == n_domains:
                evicts += ", after the last training"
            keeps = "Until it first evicts it keeps every task offered"
        before = max(n_domains - 1, 0)
        matters = (
            f"domains 1-{before} train on the same memory whatever rule decides what it keeps "
            "(a storage or eviction policy cannot matter before the last domain)"
            if before > 1
            else "no domain but the last trains with a memory a storage rule chose"
        )
        fix = self._fix()
        return (
            f"memory note: {f.holder or 'the memory'} holds {f.capacity} tasks and {stores}, "
            f"{layout}; {self.tasks_before_last_domain} training tasks come before the last "
            f"domain (domain {n_domains}), so the memory holds {self.held_at_last_domain} "
            f"when it starts: {full} and {evicts}. {keeps}, so {matters}.{fix}"
        )

    def _fix(self) -> str:
        """What makes this memory evict before the last domain, for a stream of equal
        domains of ``T`` tasks: more than ``M`` tasks before it, ``(D - 1)·T > M`` (a reservoir
        evicts at offer ``M + 1``; balanced quotas of ``M // (D - 1)`` are exceeded when
        ``T > M // (D - 1)``, the same condition)."""
        n_domains = len(self.tasks_per_domain)
        if n_domains < 2 or len(set(self.tasks_per_domain)) != 1:
            return ""
        before = self.tasks_before_last_domain
        more = self.filling.capacity // (n_domains - 1) + 1
        smaller = f"mem_size {before - 1} or less, or " if before > 1 else ""
        return (
            f" For the memory to choose before the last domain: {smaller}tasks_per_domain "
            f"{more} or more."
        )

    def to_dict(self) -> dict[str, Any]:
        """What a run's record keeps (``result.json``'s ``"memory"``)."""
        f = self.filling
        return {
            "holder": f.holder,
            "capacity": f.capacity,
            "stores": f.stores,
            "layout": f.layout,
            "tasks_per_domain": list(self.tasks_per_domain),
            "meta_batch": self.meta_batch,
            "tasks_before_last_domain": self.tasks_before_last_domain,
            "held_at_last_domain": self.held_at_last_domain,
            "held_at_end": self.held_at_end,
            "full_at": None if self.full_at is None else list(self.full_at),
            "first_eviction": None if self.first_eviction is None else list(self.first_eviction),
            "evicts_before_last_domain": self.evicts_before_last_domain,
        }


def _fill(filling: MemoryFilling, tasks: Sequence[int], meta_batch: int) -> MemoryFill:
    m = filling.capacity
    full_at = evict_at = None
    held_at_last = offered = 0
    held: list[int] = []  # a balanced memory's tasks per domain seen
    if filling.layout == "balanced":
        for d, t in enumerate(tasks, 1):
            if d == len(tasks):
                held_at_last = sum(held)
            quota = _quotas(m, d)
            evicts = t > quota[-1] or any(h > q for h, q in zip(held, quota, strict=False))
            held = [min(h, q) for h, q in zip(held, quota[:-1], strict=False)] + [min(t, quota[-1])]
            if full_at is None and sum(held) >= m:
                full_at = (d, None)
            if evict_at is None and evicts:
                evict_at = (d, None)
    else:
        for d, t in enumerate(tasks, 1):
            if d == len(tasks):
                held_at_last = min(m, offered)
            steps = (
                [
                    (i, min(meta_batch, t - (i - 1) * meta_batch))
                    for i in range(1, math.ceil(t / meta_batch) + 1)
                ]
                if filling.stores == "iteration"
                else [(None, t)]
            )
            for i, k in steps:
                if full_at is None and offered + k >= m:
                    full_at = (d, i)
                if evict_at is None and offered + k > m:
                    evict_at = (d, i)
                offered += k
    return MemoryFill(
        filling=filling,
        tasks_per_domain=tuple(tasks),
        meta_batch=meta_batch,
        held_at_last_domain=held_at_last,
        held_at_end=sum(held) if filling.layout == "balanced" else min(m, offered),
        full_at=full_at,
        first_eviction=evict_at,
    )


def memory_fill(
    filling: MemoryFilling, *, tasks_per_domain: Sequence[int], meta_batch: int
) -> MemoryFill:
    """When ``filling``'s memory is full and first evicts on a stream of ``tasks_per_domain``
    training tasks per domain (in stream order) at ``meta_batch`` tasks per iteration.

    Raises:
        ValueError: no domain, a negative task count, or ``meta_batch`` < 1.
    """
    tasks = tuple(int(t) for t in tasks_per_domain)
    if not tasks or any(t < 0 for t in tasks):
        raise ValueError(f"tasks_per_domain must be counts of a non-empty stream, got {tasks}")
    if int(meta_batch) < 1:
        raise ValueError(f"meta_batch must be >= 1, got {meta_batch!r}")
    return _fill(filling, tasks, int(meta_batch))


def strategy_memories(strategy: Any) -> list[MemoryFilling]:
    """The memories a strategy declares: ``memory_filling()`` of the strategy itself and of
    each of its plugins that defines it (one that returns ``None`` keeps no memory in this
    configuration)."""
    found = []
    for holder in [strategy, *getattr(strategy, "plugins", [])]:
        declare = getattr(holder, "memory_filling", None)
        filling = declare() if callable(declare) else None
        if filling is not None:
            found.append(filling)
    return found


def memory_fills(strategy: Any, benchmark: Any) -> list[MemoryFill]:
    """:func:`memory_fill` of every memory of ``strategy`` on ``benchmark``'s training stream
    (its domains' training tasks, the strategy's ``train_mb_size`` tasks per iteration)."""
    tasks = [len(exp.dataset) for exp in benchmark.train_stream]
    return [
        memory_fill(f, tasks_per_domain=tasks, meta_batch=strategy.train_mb_size)
        for f in strategy_memories(strategy)
    ]
