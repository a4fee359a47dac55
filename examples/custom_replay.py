"""A replay plugin of your own, made of the package's public names only.

``TaskReplayPlugin`` keeps a reservoir of whole training tasks (copies of the episodes, made by
``copy_episodes``) and appends ``replay_batch`` of them to every training iteration's
meta-batch (``strategy.iteration.replay``), so the replayed tasks receive the same loss as the
current ones: experience replay of episodes, online, without domain boundaries. Its memory is
checkpointed (``state_dict``), so a killed run resumes with the same memory.

``MSKMReplay`` is the method: MSKM's class plus the plugin, with the preset's ``mem_size`` and
``replay_batch``. The command line finds it as ``--method custom_replay:MSKMReplay`` in this
folder, as ``examples/custom_method.py``'s method.

    python examples/custom_replay.py             # MSKM and MSKM + replay on the quick preset
    python examples/custom_replay.py --tiny      # seconds: what the test runs

The documentation's "Writing your own method" page walks through this file.
"""

from __future__ import annotations

import argparse

# --8<-- [start:imports]
from avalanche_sets import build_benchmark, run_sets
from avalanche_sets.baselines import MSKM
from avalanche_sets.functional import Reservoir
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import (
    EpisodicPlugin,
    MetaBatchReplay,
    copy_episodes,
    episode_from_dict,
    episode_to_dict,
    learner_batch,
)

# --8<-- [end:imports]


# --8<-- [start:plugin]
class TaskReplayPlugin(MetaBatchReplay, EpisodicPlugin):
    """Replays ``replay_batch`` tasks of a reservoir of ``mem_size`` training tasks in every
    training iteration's meta-batch."""

    # MetaBatchReplay says what this plugin does; a plugin with a memory of its own in the same
    # strategy (ORDER's, Semi-ER's, MER's) would store this one's replayed tasks as new ones
    CONFLICTS = {MetaBatchReplay: "one memory per strategy: drop one of the two"}

    def __init__(self, *, mem_size: int = 200, replay_batch: int = 2, seed: int = 0) -> None:
        super().__init__()
        if replay_batch < 1:
            raise ValueError(f"replay_batch must be >= 1, got {replay_batch}")
        self.replay_batch = replay_batch
        # uniform over every task offered; its generators are in its state_dict
        self.memory = Reservoir(mem_size, seed=seed)

    def before_training_iteration(self, strategy, **kwargs) -> None:
        if len(self.memory) == 0:
            return  # the first iteration: nothing stored yet
        slots = self.memory.sample_indices(self.replay_batch)  # distinct, at most len(memory)
        episodes = [self.memory[i] for i in slots]
        batch, _ = learner_batch(episodes, strategy.device)  # [size, ...] on the device
        # the template puts them after the current tasks; they get the same loss
        strategy.iteration.replay(batch, tasks=episodes, slots=slots)

    def after_training_iteration(self, strategy, **kwargs) -> None:
        # only the stream's tasks (the rows after them are this memory's replayed ones);
        # a copy is CPU, detached, without the OOD ground truth
        for episode in copy_episodes(strategy.mb_x, strategy.iteration.current_rows):
            self.memory.offer(episode)

    # a checkpoint saves and restores the memory: a resumed run replays the same tasks
    def state_dict(self) -> dict:
        state = self.memory.state_dict()
        state["items"] = [episode_to_dict(e) for e in state["items"]]
        return {"memory": state}

    def load_state_dict(self, state: dict) -> None:
        memory = dict(state["memory"])
        memory["items"] = [episode_from_dict(d) for d in memory["items"]]
        self.memory.load_state_dict(memory)


# --8<-- [end:plugin]


# --8<-- [start:method]
class MSKMReplay(MSKM):
    """MSKM with a replay memory of ``mem_size`` tasks (a run hands it the preset's:
    ``--set mem_size=100``)."""

    name = "mskm-replay"
    summary = "MSKM + experience replay of whole tasks inside the meta-batch"

    def __init__(
        self, *, mem_size: int = 200, replay_batch: int = 2, seed: int = 0, plugins=None, **kwargs
    ) -> None:
        replay = TaskReplayPlugin(mem_size=mem_size, replay_batch=replay_batch, seed=seed)
        super().__init__(plugins=[replay, *(plugins or [])], **kwargs)


# --8<-- [end:method]

TINY = dict(
    tasks_per_domain=8, n_test_episodes=4, n_query=2, n_unlabeled=2, n_ood=4, width=8,
    eval_mb_size=4, mem_size=6, domains=["shapes", "strokes"], threads=1,
)  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    """MSKM and MSKM + replay on one stream (same preset, same seed); their results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="seconds: 2 small domains")
    args = ap.parse_args(argv)
    preset = resolve_preset("quick", **(TINY if args.tiny else {}))
    bench = build_benchmark(preset, seed=0)
    results = {}
    for name, make in (("mskm", lambda: build_strategy("mskm", preset, seed=0)),
                       ("mskm + replay", lambda: build_strategy(
                           "custom_replay:MSKMReplay", preset, seed=0))):  # fmt: skip
        results[name] = run_sets(make(), bench)
        print(f"## {name}\n\n{results[name].table()}\n")
    return results


if __name__ == "__main__":
    main()
