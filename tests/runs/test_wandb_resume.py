"""The W&B logger continues an online W&B run after a kill: every step once, none dropped.

No W&B server can be reached from the tests, so the server is a stand-in (:class:`_Server`)
that keeps W&B's rules as the logger meets them: a run id has one history; ``resume="allow"``
continues it at ``starting_step`` (one past the last step the server has); a row logged at a
step below the run's current step is dropped (W&B drops it with a warning, here it is counted);
``commit=True`` closes the step. What this cannot cover: the real server's upload path (which
rows of a killed process reach it is modelled by cutting the server's history), and wandb's
own resume handshake. The offline path (a real ``.wandb`` file) is covered end to end by
tests/cli/test_logger_resume.py.
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from avalanche.evaluation.metric_results import MetricValue

from avalanche_sets.training import WandBLogger


class _Server:
    def __init__(self) -> None:
        self.runs: dict[str, dict[int, dict]] = {}
        self.dropped: list[tuple[int, dict]] = []
        self.finished: list[int] = []

    def init(self, *, id, resume=None, mode=None, **kwargs):
        assert mode == "online"
        if resume is None:
            assert id not in self.runs, "a new run with the id of one the server has"
        rows = self.runs.setdefault(id, {})
        return _Run(self, id, max(rows) + 1 if rows else 0)


class _Run:
    def __init__(self, server: _Server, id: str, starting_step: int) -> None:
        self.server, self.id, self.starting_step = server, id, starting_step
        self.step = starting_step

    def log(self, row: dict, *, step: int, commit: bool) -> None:
        if step < self.step:
            self.server.dropped.append((step, row))
            return
        rows = self.server.runs[self.id]
        rows[step] = {**rows.get(step, {}), **row}
        self.step = step + 1 if commit else step

    def define_metric(self, name: str, step_metric: str) -> None:
        pass

    def finish(self, exit_code: int = 0) -> None:
        self.server.finished.append(exit_code)


class _Logger(WandBLogger):
    """The project's W&B logger, talking to :class:`_Server` instead of wandb."""

    server: _Server

    def import_wandb(self) -> None:
        self.wandb = SimpleNamespace(init=self.server.init)
        self._generate_id = lambda: "run1"
        self._chart = type("CustomChart", (), {})


# What a run logs: two domains of 4 iterations; loss terms every 3 iterations and at a domain's
# end, its evaluation at the domain's last step, the accuracy matrix at its row (a lower step).
def _events() -> list[tuple]:
    events: list[tuple] = []
    for exp in range(2):
        for it in range(1, 5):
            step = 4 * exp + it
            if step % 3 == 0 or it == 4:
                events.append(("m", step - 1, "LossTerm/meta", 0.5 + step, step))
        for j in range(2):
            events.append(("m", 4 * exp + 4, f"Acc/Exp{j}", 0.1 * step + j, 4 * exp + 4))
        events.append(("m", 4 * exp + 4, "AccMatrix/Exp0", 0.7 - exp / 10, exp))
        events.append(("exp", 4 * exp + 4, exp))
    return events


def _play(logger: _Logger, events: list[tuple]) -> None:
    for event in events:
        clock = SimpleNamespace(train_iterations=event[1], train_exp_counter=event[-1])
        strategy = SimpleNamespace(clock=clock)
        logger.before_training(strategy, [])
        if event[0] == "m":
            _, _, name, value, x = event
            logger.log_metrics([MetricValue(None, name, value, x)])
        else:
            logger.after_training_exp(strategy, [])


def _logger(server: _Server, log=None) -> _Logger:
    cls = type("L", (_Logger,), {"server": server})
    return cls(run_name="r", mode="online", log_file=log)


@pytest.fixture(scope="module")
def uninterrupted() -> dict[int, dict]:
    server = _Server()
    logger = _logger(server)
    _play(logger, _events())
    logger.close()
    assert server.dropped == [] and server.finished == [0]
    return server.runs["run1"]


@pytest.mark.parametrize("checkpoint", [3, 6, 9])
@pytest.mark.parametrize("kill", [1, 4])  # events after the checkpoint
@pytest.mark.parametrize("uploaded", [None, 0, 1, 4])  # the server's last step (None: all)
def test_a_killed_online_run_continued_holds_each_step_once(
    uninterrupted, checkpoint, kill, uploaded
):
    """Stopped ``kill`` events after a checkpoint taken at event ``checkpoint``, with the
    server holding what the killed process committed (or only up to step ``uploaded``: wandb
    had not sent the rest), then resumed from the checkpoint: the server's history is the
    uninterrupted run's, and no row was dropped."""
    events = _events()
    server = _Server()
    killed = _logger(server)
    _play(killed, events[:checkpoint])
    state = killed.state_dict()
    _play(killed, events[checkpoint : checkpoint + kill])  # then SIGKILL: no close()
    rows = server.runs["run1"]
    if uploaded is not None:
        for step in [s for s in rows if s > uploaded]:
            del rows[step]
    log = io.StringIO()
    resumed = _logger(server, log)
    resumed.load_state_dict(state)
    _play(resumed, events[checkpoint:])
    resumed.close()
    assert server.dropped == []
    assert server.runs["run1"] == uninterrupted
    assert server.finished == [0]
    assert log.getvalue().startswith("W&B run run1 (online) continued: ")


@pytest.mark.parametrize("uploaded", [None, 0])
def test_a_run_killed_twice_keeps_the_rows_before_the_first_resume(uninterrupted, uploaded):
    """Killed, resumed, checkpointed again and killed again: the second checkpoint holds the
    rows of both processes, so a server that has none of them (``uploaded=0``) gets them all."""
    events = _events()
    server = _Server()
    first = _logger(server)
    _play(first, events[:3])
    state = first.state_dict()
    _play(first, events[3:5])  # killed
    second = _logger(server)
    second.load_state_dict(state)
    _play(second, events[3:9])
    state = second.state_dict()
    _play(second, events[9:10])  # killed
    if uploaded is not None:
        rows = server.runs["run1"]
        for step in [s for s in rows if s > uploaded]:
            del rows[step]
    third = _logger(server)
    third.load_state_dict(state)
    _play(third, events[9:])
    third.close()
    assert server.dropped == []
    assert server.runs["run1"] == uninterrupted


def test_a_run_stopped_by_an_exception_sends_no_partial_step_and_fails():
    """Closed while an exception propagates, the logger does not send the step it was
    gathering (the resumed run sends it whole) and finishes the W&B run as failed."""
    server = _Server()
    logger = _logger(server)
    events = _events()
    _play(logger, events[:8])  # into the second domain's evaluation, step 8
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        logger.close()
    assert server.finished == [1]
    assert max(server.runs["run1"]) < 8


def test_a_checkpoint_holding_only_the_runs_id_continues_the_run():
    """A checkpoint whose W&B state is the run's id alone (a logger that kept no rows) continues
    that run (``resume="allow"``) at the server's step; what the server has stays."""
    server = _Server()
    killed = _logger(server)
    events = _events()
    _play(killed, events[:7])  # the server has steps 3 and 4
    had = dict(server.runs["run1"])
    assert sorted(had) == [3, 4]
    resumed = _logger(server)
    resumed.load_state_dict({"id": "run1"})
    _play(resumed, events[3:])
    resumed.close()
    rows = server.runs["run1"]
    assert {s: rows[s] for s in had} == had and max(rows) == 8
    assert server.dropped == []  # the steps the server had are not sent again


def test_the_offline_folders_of_earlier_attempts_are_found_with_wandbs_same_second_suffix(
    tmp_path,
):
    """wandb names a second folder of one id started in the same second ``...-<id>-1``: a
    resumed process removes every earlier folder of its id, suffixed or not, and keeps its own
    and other ids'."""
    wandb_dir = tmp_path / "wandb"
    own = wandb_dir / "offline-run-20261127_120003-abc123"
    earlier = ["offline-run-20261127_120002-abc123", "offline-run-20261127_120002-abc123-1"]
    other = "offline-run-20261127_120000-zzz999"
    for name in [*earlier, own.name, other]:
        (wandb_dir / name).mkdir(parents=True)
    logger = object.__new__(WandBLogger)  # only the folder logic: no wandb run is started
    logger._run = SimpleNamespace(settings=SimpleNamespace(sync_dir=str(own)))
    assert logger._remove_earlier_folders("abc123") == earlier
    assert sorted(p.name for p in wandb_dir.iterdir()) == sorted([own.name, other])
