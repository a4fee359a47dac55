"""Timing helpers shared by the benchmark scripts: a per-iteration clock and a way to train
exactly iterations [start, stop) of one experience, so that methods can be interleaved in
short rounds and machine noise hits them alike."""

from __future__ import annotations

import time
from collections import defaultdict

from avalanche.core import SupervisedPlugin


class IterationClock(SupervisedPlugin):
    """Wall time of whole training iterations and of their forward / backward phases.

    Only the iteration itself is timed: ``strategy.train`` set-up (data loader, experience
    callbacks) falls outside ``before_training_iteration`` … ``after_training_iteration``.
    """

    def __init__(self):
        super().__init__()
        self.t: dict[str, list[float]] = defaultdict(list)
        self.cpu: list[float] = []

    def before_training_iteration(self, s, **kw):
        self._it = time.perf_counter()
        self._cpu = time.process_time()

    def before_forward(self, s, **kw):
        self._f = time.perf_counter()

    def after_forward(self, s, **kw):
        self.t["forward (incl. after_encode)"].append(time.perf_counter() - self._f)

    def before_backward(self, s, **kw):
        self._b = time.perf_counter()

    def after_backward(self, s, **kw):
        self.t["backward"].append(time.perf_counter() - self._b)

    def after_training_iteration(self, s, **kw):
        self.t["iteration"].append(time.perf_counter() - self._it)
        # CPU seconds of this process (user + system, page faults included): on a shared
        # machine the wall time also counts the time spent waiting for a core.
        self.cpu.append(time.process_time() - self._cpu)


class _StopAt(SupervisedPlugin):
    def __init__(self, stop: int):
        super().__init__()
        self.stop = stop

    def after_training_iteration(self, s, **kw):
        if s.exp_iteration + 1 >= self.stop:
            s.stop_training()


def train_range(strategy, exp, start: int, stop: int) -> None:
    """Train iterations [start, stop) of an experience (the template's resume machinery)."""
    stopper = _StopAt(stop)
    strategy.plugins.append(stopper)
    try:
        strategy.train(exp, eval_streams=[], start_iteration=start)
    finally:
        strategy.plugins.remove(stopper)
