"""Reservoir sampling of whole tasks (Vitter 1985, Algorithm R; paper Algorithm 2, lines 7–9).

After ``n`` offers every offered item is in the reservoir with probability ``min(1, M/n)``,
without knowing ``n`` in advance — which is what a boundary-free learner needs. The reservoir
owns its random generators (``numpy.random.Generator``), and :meth:`Reservoir.state_dict`
stores their states, so a resumed run makes exactly the same decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np
import torch

__all__ = ["Reservoir"]

T = TypeVar("T")


class Reservoir(Generic[T]):
    """A fixed-capacity uniform sample of a stream of items (Algorithm R).

    The ``n``-th offer (1-based) fills slot ``n - 1`` while ``n <= M``; afterwards it draws
    ``j`` uniformly from ``{0, …, n - 1}`` and, if ``j < M``, replaces slot ``j``.

    Args:
        capacity: M > 0.
        seed: seed of the reservoir's generators (one for the keep/replace decisions, an
            independent one for :meth:`sample` when no generator is given).

    Raises:
        ValueError: ``capacity <= 0``.
    """

    def __init__(self, capacity: int, seed: int | None = 0) -> None:
        if (
            isinstance(capacity, bool)
            or not isinstance(capacity, (int, np.integer))
            or capacity <= 0
        ):
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = int(capacity)
        offer_seq, sample_seq = np.random.SeedSequence(seed).spawn(2)
        self._rng = np.random.Generator(np.random.PCG64(offer_seq))
        self._sample_rng = np.random.Generator(np.random.PCG64(sample_seq))
        self._items: list[T] = []
        self._n_seen = 0

    @property
    def n_seen(self) -> int:
        """Number of items offered so far (n)."""
        return self._n_seen

    @property
    def items(self) -> list[T]:
        """The stored items, by slot (a shallow copy)."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))

    def __getitem__(self, slot: int) -> T:
        return self._items[slot]

    def map_items(self, fn: Callable[[T], T]) -> None:
        """Replace every stored item by ``fn(item)``, slot for slot (e.g. to move the items to
        another device); the keep/replace decisions and both generators are untouched."""
        self._items = [fn(item) for item in self._items]

    def is_full(self) -> bool:
        return len(self._items) >= self.capacity

    def offer(self, item: T) -> int | None:
        """Offer one item: it goes where :meth:`choose_slot` says.

        Returns:
            the slot it now occupies (filled or replaced), or ``None`` if it was discarded.

        Raises:
            ValueError: :meth:`choose_slot` named a slot that is neither a stored item's nor
                the next free one.
        """
        self._n_seen += 1
        slot = self.choose_slot(self._n_seen)
        if slot is None:
            return None
        n_slots = len(self._items) + (len(self._items) < self.capacity)  # stored + next free
        if (
            isinstance(slot, bool)
            or not isinstance(slot, (int, np.integer))
            or not 0 <= slot < n_slots
        ):
            raise ValueError(
                f"{type(self).__name__}.choose_slot({self._n_seen}) gave slot {slot!r}; a "
                f"slot is a stored item's (0..{len(self._items) - 1}) or, while the memory "
                f"is not full, the next free one ({len(self._items)}), or None to discard it"
            )
        if slot == len(self._items):
            self._items.append(item)
        else:
            self._items[slot] = item
        return int(slot)

    def choose_slot(self, n: int) -> int | None:
        """The memory's policy: the slot the ``n``-th item offered (1-based) goes to — a
        stored item's (replaced), the next free one (``len(self)``, while not full) — or
        ``None`` to discard it. Algorithm R: the next free slot until full; then ``j`` uniform
        on ``{0, …, n − 1}``, kept at ``j`` if ``j < M``. Override it for another policy
        (a FIFO memory returns ``(n - 1) % self.capacity``)."""
        if len(self._items) < self.capacity:
            return len(self._items)
        j = int(self._rng.integers(0, n))  # uniform on {0, ..., n-1}
        return j if j < self.capacity else None

    def sample_indices(
        self, b: int, generator: np.random.Generator | torch.Generator | None = None
    ) -> list[int]:
        """``min(b, len)`` distinct slots, uniformly without replacement."""
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 0:
            raise ValueError(f"b must be a non-negative integer, got {b!r}")
        k = min(int(b), len(self._items))
        if k == 0:
            return []
        if isinstance(generator, torch.Generator):
            return torch.randperm(len(self._items), generator=generator)[:k].tolist()
        rng = self._sample_rng if generator is None else generator
        return [int(i) for i in rng.choice(len(self._items), size=k, replace=False)]

    def sample(
        self, b: int, generator: np.random.Generator | torch.Generator | None = None
    ) -> list[T]:
        """``min(b, len)`` distinct stored items, uniformly without replacement.

        Args:
            b: number of items wanted (the replay batch B).
            generator: a ``numpy.random.Generator`` or a ``torch.Generator``; the reservoir's
                own sampling generator (saved in :meth:`state_dict`) when ``None``. Sampling
                never touches the generator of the keep/replace decisions.
        """
        return [self._items[i] for i in self.sample_indices(b, generator)]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: capacity, ``n_seen``, the items and both RNG states."""
        return {
            "capacity": self.capacity,
            "n_seen": self._n_seen,
            "items": list(self._items),
            "rng_state": self._rng.bit_generator.state,
            "sample_rng_state": self._sample_rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (the capacity must match)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"capacity mismatch: reservoir has {self.capacity}, state has {state['capacity']}"
            )
        items = list(state["items"])
        n_seen = int(state["n_seen"])
        if len(items) > min(n_seen, self.capacity):
            raise ValueError("inconsistent state: more items than min(n_seen, capacity)")
        self._items = items
        self._n_seen = n_seen
        self._rng.bit_generator.state = state["rng_state"]
        self._sample_rng.bit_generator.state = state["sample_rng_state"]

    def __repr__(self) -> str:
        return f"Reservoir(capacity={self.capacity}, len={len(self)}, n_seen={self.n_seen})"
