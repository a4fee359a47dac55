"""A method of your own: a plugin that adds one named loss term to a built-in method.

``PrototypeSpreadPlugin`` pushes the class prototypes of every training episode apart: after the
template has embedded a meta-batch (``strategy.episode_state``) and computed the query loss, it
adds ``weight * mean_c,c' exp(-||p_c - p_c'||² / d)`` under the name ``"spread"``. The template
checks the term for NaN/inf before the step and records its value in ``strategy.loss_terms``.

    python examples/custom_plugin.py            # MSKM with and without the plugin
    python examples/custom_plugin.py --tiny     # a few seconds (what the test runs)

The documentation's "Writing your own method" page walks through this file.
"""

from __future__ import annotations

import argparse

import torch

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training.template import EpisodicPlugin


# --8<-- [start:plugin]
class PrototypeSpreadPlugin(EpisodicPlugin):
    """Adds ``weight`` × the mean similarity between the class prototypes of an episode."""

    def __init__(self, weight: float = 0.1) -> None:
        super().__init__()
        if weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        self.weight = weight
        self.calls = 0

    def before_backward(self, strategy, **kwargs):
        state = strategy.episode_state  # this meta-batch's embeddings and prototypes
        protos = state.prototypes  # [B, N, d]
        dist = torch.cdist(protos, protos).pow(2) / protos.shape[-1]  # [B, N, N]
        off_diagonal = ~torch.eye(state.n_way, dtype=torch.bool, device=protos.device)
        similarity = torch.exp(-dist)[:, off_diagonal].mean()
        strategy.add_loss_term("spread", self.weight * similarity)
        self.calls += 1


# --8<-- [end:plugin]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a few seconds: 2 small domains")
    ap.add_argument("--weight", type=float, default=0.1)
    args = ap.parse_args(argv)
    size = dict(tasks_per_domain=8, n_test_episodes=4) if args.tiny else {}
    preset = resolve_preset("quick", width=8 if args.tiny else 32, **size)
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=5, n_unlabeled=5, n_ood=20,
        tasks_per_domain=preset["tasks_per_domain"], n_test_episodes=preset["n_test_episodes"],
    )  # fmt: skip
    results = {}
    # --8<-- [start:run]
    for name, plugins in (("mskm", []), ("mskm + spread", [PrototypeSpreadPlugin(args.weight)])):
        strategy = build_strategy("mskm", preset, seed=0, plugins=plugins)
        res = run_sets(strategy, bench)
        results[name] = res.mean_accuracy
        terms = ", ".join(f"{k} {float(v):.4f}" for k, v in strategy.loss_terms.items())
        print(f"{name:<14} {100 * res.mean_accuracy:.2f} ± {100 * res.mean_ci95:.2f}  "
              f"(last iteration's loss terms: {terms})")  # fmt: skip
    # --8<-- [end:run]
    return results


if __name__ == "__main__":
    main()
