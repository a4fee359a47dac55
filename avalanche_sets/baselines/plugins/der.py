"""``DERPlugin``: dark experience replay (DER / DER++) with a reservoir memory of episodes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch import Tensor

from ...data.episodes import EpisodeBatch
from ...defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ...functional.reservoir import Reservoir
from ...training.memory_fill import MemoryFilling
from ._memory import episode_from_dict, episode_to_dict, learner_batch, stored_episodes

__all__ = ["DERPlugin", "dark_logit_loss"]


def dark_logit_loss(current: Tensor, stored: Tensor) -> Tensor:
    """DER's logit term ``MSE(f(x_m), z_m)``: the mean of the squared differences over every
    logit of every memory sample (Buzzega et al. 2020, Eq. 4; the ``F.mse_loss`` of Avalanche's
    ``DER`` strategy, whose loss ``tests/baselines/test_avalanche_reference.py`` reproduces).

    Raises:
        ValueError: the shapes differ (broadcasting would compare the wrong logits).
    """
    if current.shape != stored.shape:
        raise ValueError(
            f"current logits {tuple(current.shape)} and stored logits {tuple(stored.shape)} "
            "must have the same shape (the same memory samples, the same classes)"
        )
    return F.mse_loss(current, stored)


class DERPlugin(SupervisedPlugin):
    """Dark Experience Replay++ (Buzzega, Boschini, Porrello, Abati, Calderara, NeurIPS 2020,
    "Dark Experience for General Continual Learning: a Strong, Simple Baseline"; the ORDER
    paper's "DEGCL") on semi-supervised episodes.

    * **Memory**: reservoir sampling (Algorithm R, :class:`~avalanche_sets.functional.Reservoir`)
      of whole *tasks*, online, every training episode offered once after its iteration — no
      domain boundaries needed, as in DER. A stored task keeps its uint8 episode (support,
      query, unlabeled incl. OOD; no oracle) and its **query logits** ``[N·Q, N]`` from the
      forward pass that trained on it (before that step's update, as DER stores ``outputs``).
    * **Loss** (:meth:`loss_term`, which the strategy's criterion adds): ``L = L_meta(current) +
      α·MSE(f(x_m), z_m) + β·CE(f(x_m'), y_m')`` — the MSE between the current query logits of a memory sample
      ``x_m`` and their stored logits ``z_m`` (DER), plus the meta-loss on the query labels of
      an independent memory sample ``x_m'`` (the "++" term). ``label_weight=0`` gives plain DER.
      Each sample is ``replay_batch`` tasks forwarded as its own meta-batch through the
      full MSKM model (unlabeled/OOD included), like DER's separate buffer forward pass.

    ``last_logit_loss`` / ``last_label_loss`` hold the latest terms (unweighted) for logging.

    **Next to ORDER** (``OrderStrategy(plugins=[DERPlugin(...)])``): ORDER's replay appends
    memory tasks to the meta-batch; only the current tasks
    (``strategy.iteration.current_rows``) are offered to this memory, so every task of the stream is offered once.

    **Why not Avalanche's** ``avalanche.training.DER``: it is a whole strategy
    (``SupervisedTemplate``) for batches of single samples, not a plugin for the episodic
    template, and three of its choices do not fit episodes or differ from DER: (1) its memory is
    class-balanced by ``targets``, but episode labels are episode-relative (``0..N-1`` in every
    task), so balancing by them is meaningless, and a memory item here is a whole task, which
    its ``torch.cat`` of memory and current rows cannot hold; (2) it stores logits computed
    after each experience in eval mode, while DER stores the logits of the training forward pass
    online (reservoir), as done here; (3) it uses one memory sample for both terms, DER++ two.
    Where the definitions coincide the losses are equal:
    ``tests/baselines/test_avalanche_reference.py`` recomputes Avalanche's DER loss, step by
    step, from its own outputs, labels and stored logits with :func:`dark_logit_loss`.

    Args:
        mem_size: memory capacity in tasks (paper: 200).
        replay_batch: memory tasks per sample.
        logit_weight: α, the weight of the logit (MSE) term (DER++: 0.1 … 0.5).
        label_weight: β, the weight of the label (CE) term (DER++: 0.5 … 1).
        seed: seed of the reservoir and of memory sampling.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        logit_weight: float = 0.1,
        label_weight: float = 0.5,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_mem_size(mem_size)
        if not isinstance(replay_batch, int) or replay_batch < 1:
            raise ValueError(f"replay_batch must be a positive integer, got {replay_batch!r}")
        if not (logit_weight >= 0 and label_weight >= 0):
            raise ValueError(
                "logit_weight and label_weight must be >= 0, got "
                f"{logit_weight!r}, {label_weight!r}"
            )
        self.mem_size = mem_size
        self.replay_batch = replay_batch
        self.logit_weight = float(logit_weight)
        self.label_weight = float(label_weight)
        self.reservoir: Reservoir[dict] = Reservoir(mem_size, seed=seed)
        self.last_logit_loss: Tensor | None = None
        self.last_label_loss: Tensor | None = None

    def __len__(self) -> int:
        return len(self.reservoir)

    def memory_filling(self) -> MemoryFilling:
        """How the memory fills: each iteration's current tasks offered to a reservoir of
        ``mem_size`` (:mod:`~avalanche_sets.training.memory_fill`)."""
        return MemoryFilling(self.mem_size, "iteration", "reservoir", type(self).__name__)

    def _sample(self, device) -> tuple[EpisodeBatch, Tensor, Tensor]:
        items = self.reservoir.sample(self.replay_batch)
        x, y = learner_batch([it["episode"] for it in items], device)
        logits = torch.cat([it["logits"] for it in items]).to(device)
        return x, y, logits

    def loss_term(self, strategy) -> dict[str, Tensor] | None:
        """The weighted terms ``{"der_logits": α·MSE, "der_labels": β·CE}`` (α: ``logit_weight``,
        β: ``label_weight``; each only when its weight is > 0), in that order; ``None`` while the memory is empty."""
        self.last_logit_loss = self.last_label_loss = None
        if len(self.reservoir) == 0:
            return None
        model, device = strategy.model, strategy.device
        terms = {}
        if self.logit_weight > 0:
            x, _, stored = self._sample(device)
            self.last_logit_loss = dark_logit_loss(model(x), stored)
            terms["der_logits"] = self.logit_weight * self.last_logit_loss
        if self.label_weight > 0:
            x, y, _ = self._sample(device)
            self.last_label_loss = strategy._criterion(model(x), y)
            terms["der_labels"] = self.label_weight * self.last_label_loss
        return terms

    @torch.no_grad()
    def after_training_iteration(self, strategy, **kwargs) -> None:
        batch: EpisodeBatch = strategy.mb_x
        rows = strategy.iteration.current_rows
        logits = strategy.mb_output.detach().float()
        logits = logits.reshape(len(batch), -1, logits.shape[-1])[: len(rows)].cpu()
        for b, episode in enumerate(stored_episodes(batch, rows)):
            self.reservoir.offer({"episode": episode, "logits": logits[b].clone()})

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        res = self.reservoir.state_dict()
        res["items"] = [
            {"episode": episode_to_dict(it["episode"]), "logits": it["logits"]}
            for it in res["items"]
        ]
        return {"reservoir": res}

    def load_state_dict(self, state: dict) -> None:
        res = dict(state["reservoir"])
        res["items"] = [
            {"episode": episode_from_dict(it["episode"]), "logits": it["logits"]}
            for it in res["items"]
        ]
        self.reservoir.load_state_dict(res)
