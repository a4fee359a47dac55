"""``MERPlugin``: meta-experience replay (Reptile within and across batches) over episodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import torch
from avalanche.core import SupervisedPlugin
from torch import Tensor

from ...data.episodes import Episode
from ...defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ...functional.reservoir import Reservoir
from ...training.iteration import MetaBatchReplay
from ...training.memory_fill import MemoryFilling
from ._memory import episode_from_dict, episode_to_dict, learner_batch, stored_episodes

__all__ = ["MERPlugin", "mer_update"]

T = TypeVar("T")


def _interpolate(params: Sequence[Tensor], start: Sequence[Tensor], rate: float) -> None:
    """``θ ← start + rate·(θ − start)`` in place (Reptile's interpolation)."""
    with torch.no_grad():
        for p, s in zip(params, start):
            p.copy_(torch.lerp(s, p, rate))


def mer_update(
    params: Sequence[Tensor],
    batches: Iterable[Sequence[T]],
    step: Callable[[int, T], None],
    *,
    beta: float,
    gamma: float,
) -> None:
    """MER's parameter update (Riemer et al. 2019, Algorithm 1 with ``k`` batches), in place.

    ``θ_A ← θ``; for every batch: ``θ_B ← θ``, ``step(j, item)`` for its items in order (one
    optimiser step on one item each), ``θ ← θ_B + β(θ − θ_B)``; finally
    ``θ ← θ_A + γ(θ − θ_A)``. ``batches`` may be a generator: a batch is drawn only when the
    previous one is done. Whatever an item is (an episode here, a sample in Avalanche's
    ``MER``) is up to ``step``.
    """
    theta_a = [p.detach().clone() for p in params]
    for batch in batches:
        theta_b = [p.detach().clone() for p in params]
        for j, item in enumerate(batch):
            step(j, item)
        _interpolate(params, theta_b, beta)
    _interpolate(params, theta_a, gamma)


class MERPlugin(SupervisedPlugin):
    """Meta-Experience Replay (Riemer, Cases, Ajemian, Liu, Rish, Tu, Tesauro, ICLR 2019,
    "Learning to Learn without Forgetting by Maximizing Transfer and Minimizing Interference"),
    Algorithm "MER" with ``k`` batches per incoming example, on semi-supervised episodes.

    One training iteration on a meta-batch of current episodes (:meth:`train_iteration`, driven
    by :class:`~avalanche_sets.baselines.continual.SemiMER`, which overrides ``training_epoch``):

    1. ``θ_A ← θ`` (across-batch start);
    2. for each of ``n_batches`` batches: draw ``replay_batch`` tasks from the memory, form the
       batch ``[memory tasks…, current episodes…]`` (the incoming data last, as MER appends the
       new example to the memory sample), ``θ_B ← θ``, then one optimiser step on the MSKM
       meta-loss of **each episode in turn** (sequential, batch size one task), and the
       within-batch Reptile interpolation ``θ ← θ_B + β(θ − θ_B)``;
    3. across-batch Reptile interpolation ``θ ← θ_A + γ(θ − θ_A)``;
    4. the current episodes are offered to a reservoir of ``mem_size`` tasks (online, no domain
       boundaries, as MER's reservoir).

    Every inner step fires the usual ``before/after_forward``, ``before/after_backward`` and
    ``before/after_update`` callbacks (so gradient plugins still apply); the iteration-level
    callbacks fire once. Afterwards ``strategy.mb_output`` / ``strategy.loss`` are the query
    logits / mean meta-loss of the current episodes' inner steps in the last batch (what
    Avalanche's metrics read). ``last_batches`` keeps the episodes of each inner batch, in
    order, for inspection. Interpolation acts on parameters; BatchNorm running statistics
    simply follow the inner steps.

    **Why not Avalanche's** ``avalanche.training.MER``: its update is the same Reptile schedule
    (:func:`mer_update` reproduces its parameters exactly on the same model, memory and drawing
    order: ``tests/baselines/test_avalanche_reference.py``), but (1) it fills its memory only at
    the end of each experience, so nothing is replayed during the first domain and a domain's
    examples are replayed only after it ends, unlike MER's per-example reservoir (the same test
    file records this); (2) its inner steps index tensor rows (``x[idx]``), whereas an
    item here is a whole episode; (3) it draws memory with the global torch RNG (not part of a
    checkpoint) and fires no ``before/after_backward``/``update`` callbacks in its inner steps.

    Deviations: the inner steps use the strategy's optimiser (MER: plain SGD with rate α);
    with the package default Adam the step size is Adam's. MER's default ``γ = 1`` is kept;
    ``β`` (MER used 0.03 with α = 0.03 on MNIST) defaults to 0.3 here — a setting for the
    SETS presets, untuned in the paper.

    Not combinable with ORDER's memory (:attr:`CONFLICTS`, checked when the strategy is
    built): see there why.

    Args:
        mem_size: memory capacity in tasks (paper: 200).
        replay_batch: memory tasks per inner batch (MER's ``s − 1``).
        n_batches: inner batches per iteration (MER's ``k``).
        within_batch_rate: β, the within-batch Reptile rate.
        across_batch_rate: γ, the across-batch Reptile rate.
        seed: seed of the reservoir and of memory sampling.
    """

    #: Plugins it cannot share a strategy with, and why (checked when the strategy is built).
    CONFLICTS = {
        MetaBatchReplay: (
            "MER's update runs in SemiMER's own training loop, which OrderStrategy does not run, "
            "so this plugin would only store tasks, ORDER's replayed ones among them, and never "
            "replay them; fix: use method semi-mer for MER, or keep your own data with ORDER's "
            "stored tasks through MemoryTask.payload (see FeatureReservoirReplayPlugin)"
        )
    }

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        n_batches: int = 1,
        within_batch_rate: float = 0.3,
        across_batch_rate: float = 1.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_mem_size(mem_size)
        if not isinstance(replay_batch, int) or replay_batch < 0:
            raise ValueError(f"replay_batch must be a non-negative integer, got {replay_batch!r}")
        if not isinstance(n_batches, int) or n_batches < 1:
            raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
        rates = (("within_batch_rate", within_batch_rate), ("across_batch_rate", across_batch_rate))
        for name, value in rates:
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        self.mem_size = mem_size
        self.replay_batch = replay_batch
        self.n_batches = n_batches
        self.within_batch_rate = float(within_batch_rate)
        self.across_batch_rate = float(across_batch_rate)
        self.reservoir: Reservoir[Episode] = Reservoir(mem_size, seed=seed)
        self.last_batches: list[list[Episode]] = []

    def __len__(self) -> int:
        return len(self.reservoir)

    def memory_filling(self) -> MemoryFilling:
        """How the memory fills: each iteration's current tasks offered to a reservoir of
        ``mem_size`` (:mod:`~avalanche_sets.training.memory_fill`)."""
        return MemoryFilling(self.mem_size, "iteration", "reservoir", type(self).__name__)

    def train_iteration(self, strategy, **kwargs) -> None:
        """MER's update for the current meta-batch ``strategy.mbatch`` (see the class doc)."""
        original = list(strategy.mbatch)
        current = stored_episodes(strategy.mb_x)
        params = [p for p in strategy.model.parameters() if p.requires_grad]
        self.last_batches = []
        outputs, losses = [], []

        def batches():
            for _ in range(self.n_batches):
                episodes = [*self.reservoir.sample(self.replay_batch), *current]
                self.last_batches.append(episodes)
                outputs.clear()
                losses.clear()
                yield episodes

        def step(position: int, ep: Episode) -> None:
            x, y = learner_batch([ep], strategy.device)
            strategy.replace_batch(x, y)
            strategy.optimizer.zero_grad()
            strategy.loss = strategy._make_empty_loss()
            strategy._before_forward(**kwargs)
            strategy.mb_output = strategy.forward()
            strategy._after_forward(**kwargs)
            strategy.loss += strategy.criterion()
            strategy._before_backward(**kwargs)
            strategy.backward()
            strategy._after_backward(**kwargs)
            strategy._before_update(**kwargs)
            strategy.optimizer_step()
            strategy._after_update(**kwargs)
            if position >= len(self.last_batches[-1]) - len(current):
                outputs.append(strategy.mb_output.detach())
                losses.append(strategy.loss.detach())

        mer_update(
            params, batches(), step, beta=self.within_batch_rate, gamma=self.across_batch_rate
        )
        strategy.mbatch = original
        strategy.mb_output = torch.cat(outputs)
        strategy.loss = torch.stack(losses).mean()

    @torch.no_grad()
    def after_training_iteration(self, strategy, **kwargs) -> None:
        for ep in stored_episodes(strategy.mb_x):
            self.reservoir.offer(ep)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        res = self.reservoir.state_dict()
        res["items"] = [episode_to_dict(e) for e in res["items"]]
        return {"reservoir": res}

    def load_state_dict(self, state: dict) -> None:
        res = dict(state["reservoir"])
        res["items"] = [episode_from_dict(d) for d in res["items"]]
        self.reservoir.load_state_dict(res)
