"""ORDER plus DER-style logit distillation on its memory tasks: data of your own on ORDER's memory.

``MemoryLogitDistillation`` keeps, with every task ORDER's replay stores, that task's query
logits from the forward pass that trained on it (its ``payload``). When ORDER replays the task,
the plugin adds ``alpha * MSE(current query logits, stored logits)`` under the name
``"memory_logits"`` (Buzzega et al. 2020's DER term, on ORDER's memory instead of a second one).
The payload is saved in checkpoints with the task, so a resumed run distills the same targets.

    python examples/order_memory_payload.py            # ORDER with and without the plugin
    python examples/order_memory_payload.py --tiny     # a few seconds (what the test runs)

The documentation's ORDER guide ("Attaching your own data to ORDER's memory") walks through it.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.order import FeatureReservoirReplayPlugin, StoredTask
from avalanche_sets.presets import resolve_preset


# --8<-- [start:plugin]
class MemoryLogitDistillation(SupervisedPlugin):
    """Adds ``alpha`` × the MSE between replayed tasks' query logits and those stored with them."""

    KEY = "query_logits"  # this plugin's name in MemoryTask.payload
    TERM = "memory_logits"  # its term's name in strategy.loss_terms

    def __init__(self, alpha: float = 0.1) -> None:
        super().__init__()
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.alpha = alpha
        self.added = 0  # iterations that added the term

    def _task_logits(self, strategy) -> torch.Tensor:
        """This meta-batch's query logits, one row per task: ``[tasks, N*Q, N]``."""
        logits = strategy.mb_output
        return logits.reshape(len(strategy.mb_x), -1, logits.shape[-1])

    def on_memory_store(self, strategy, *, stored: list[StoredTask], **kwargs) -> None:
        """ORDER's memory kept these current tasks: keep their logits with them."""
        logits = self._task_logits(strategy).detach().float()
        for row, _slot, task in stored:
            task.payload[self.KEY] = logits[row].clone()

    def loss_term(self, strategy) -> torch.Tensor | None:
        """The strategy's criterion adds this term to the loss (``None``: no term)."""
        replayed = strategy.iteration.replayed  # None when this meta-batch replays nothing
        if replayed is None:
            return None
        logits = self._task_logits(strategy)
        pairs = [
            (r, t.payload[self.KEY])
            for r, t in zip(replayed.rows, replayed.tasks)
            if self.KEY in t.payload
        ]
        if not pairs:
            return None
        current = torch.stack([logits[r] for r, _ in pairs])
        stored = torch.stack([z for _, z in pairs]).to(current)
        self.added += 1
        return self.alpha * F.mse_loss(current, stored)


# --8<-- [end:plugin]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a few seconds: 2 small domains")
    ap.add_argument("--alpha", type=float, default=0.1)
    args = ap.parse_args(argv)
    size = dict(tasks_per_domain=8, n_test_episodes=4, mem_size=6) if args.tiny else {}
    preset = resolve_preset("quick", width=8 if args.tiny else 32, **size)
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=5, n_unlabeled=5, n_ood=20,
        tasks_per_domain=preset.tasks_per_domain, n_test_episodes=preset.n_test_episodes,
    )  # fmt: skip
    results = {}
    # --8<-- [start:run]
    for name, plugins in (
        ("order", []),
        ("order + distill", [MemoryLogitDistillation(args.alpha)]),
    ):
        strategy = build_strategy("order", preset, seed=0, plugins=plugins)
        res = run_sets(strategy, bench)
        results[name] = res.mean_accuracy
        memory = next(p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin))
        with_logits = sum(MemoryLogitDistillation.KEY in t.payload for t in memory.tasks)
        terms = ", ".join(f"{k} {float(v):.4f}" for k, v in strategy.loss_terms.items())
        print(f"{name:<16} {100 * res.mean_accuracy:.2f} ± {100 * res.mean_ci95:.2f}  "
              f"({with_logits}/{len(memory)} memory tasks with logits; last loss terms: {terms})")  # fmt: skip
    # --8<-- [end:run]
    return results


if __name__ == "__main__":
    main()
