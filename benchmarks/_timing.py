"""Timing helpers shared by the benchmark scripts: a per-iteration clock and a way to train
exactly iterations [start, stop) of one experience, so that methods can be interleaved in
short rounds and machine noise hits them alike."""

from __future__ import annotations

import time
from collections import defaultdict

from avalanche.core import SupervisedPlugin

from avalanche_sets import training
from avalanche_sets.training.template import EpisodicPlugin

#: Plugin methods timed besides Avalanche's and the template's events (``before_*`` /
#: ``after_*``): ``loss_term`` builds ORDER's MI and OT terms, called by the strategy's criterion.
EXTRA_CALLBACKS = ("loss_term",)


def timed_callbacks(plugin) -> list[str]:
    """The callbacks ``plugin``'s class overrides: every ``before_*`` / ``after_*`` event it
    defines other than the template's no-op default (:class:`EpisodicPlugin`, a
    :class:`SupervisedPlugin` with ``after_encode``), and :data:`EXTRA_CALLBACKS`. Read off the
    class, not from a fixed list, so that a callback a plugin gains is timed too."""
    out = []
    for name in dir(type(plugin)):
        if not (name.startswith(("before_", "after_")) or name in EXTRA_CALLBACKS):
            continue
        fn = getattr(type(plugin), name)
        if callable(fn) and fn is not getattr(EpisodicPlugin, name, None):
            out.append(name)
    return out


def instrument(plugin, sink: dict, timer=time.perf_counter) -> list[str]:
    """Wrap every callback ``plugin`` overrides (:func:`timed_callbacks`) with a timer (the
    wrappers are its instance attributes): each call appends its ``timer`` seconds to
    ``sink["<Plugin>.<callback>"]``. Returns the names wrapped."""
    name = type(plugin).__name__
    names = timed_callbacks(plugin)
    for cb in names:
        fn = getattr(type(plugin), cb)

        def timed(strategy, *a, _fn=fn, _p=plugin, _key=f"{name}.{cb}", **kw):
            t = timer()
            out = _fn(_p, strategy, *a, **kw)
            sink[_key].append(timer() - t)
            return out

        setattr(plugin, cb, timed)
    return names


class IterationClock(SupervisedPlugin):
    """Wall time of whole training iterations and of their forward / backward phases (``t``),
    and their CPU seconds (``cpu`` for iterations, ``cpu_t`` for the phases).

    Only the iteration itself is timed: ``strategy.train`` set-up (data loader, experience
    callbacks) falls outside ``before_training_iteration`` … ``after_training_iteration``.
    ORDER builds its MI and OT terms in its criterion, between ``after_forward`` and
    ``before_backward``, so "backward" is the autograd pass alone.
    """

    def __init__(self):
        super().__init__()
        self.t: dict[str, list[float]] = defaultdict(list)
        self.cpu_t: dict[str, list[float]] = defaultdict(list)
        self.cpu: list[float] = []

        self._head: SupervisedPlugin | None = None

    def head(self) -> SupervisedPlugin:
        """A plugin that starts the iteration's clocks: put it first in ``strategy.plugins`` so
        that the plugins before this clock (ORDER's replay batch) count in the iteration."""
        clock = self

        class _Start(SupervisedPlugin):
            def before_training_iteration(self, s, **kw):
                clock._start()

        self._head = _Start()
        return self._head

    def _start(self) -> None:
        self._it = time.perf_counter()
        self._cpu = time.process_time()

    def before_training_iteration(self, s, **kw):
        if self._head is None:
            self._start()

    def before_forward(self, s, **kw):
        self._f = time.perf_counter()
        self._fc = time.process_time()

    def after_forward(self, s, **kw):
        self.t["forward (incl. after_encode)"].append(time.perf_counter() - self._f)
        self.cpu_t["forward (incl. after_encode)"].append(time.process_time() - self._fc)

    def before_backward(self, s, **kw):
        self._b = time.perf_counter()
        self._bc = time.process_time()

    def after_backward(self, s, **kw):
        self.t["backward"].append(time.perf_counter() - self._b)
        self.cpu_t["backward"].append(time.process_time() - self._bc)

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
    """Train iterations [start, stop) of an experience (the template's resume machinery), in
    a process set up as a run sets it up (``training.set_up_process``; a package that has none,
    counted with ``gpu_launches --package-path``, trains as its own benchmarks did)."""
    set_up = getattr(training, "set_up_process", None)
    if set_up is not None:
        set_up(strategy.device)
    stopper = _StopAt(stop)
    strategy.plugins.append(stopper)
    try:
        strategy.train(exp, eval_streams=[], start_iteration=start)
    finally:
        strategy.plugins.remove(stopper)
