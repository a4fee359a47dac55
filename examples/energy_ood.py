"""An OOD detector of your own in ORDER's place, run, swept and tabled beside ORDER.

``EnergyDetector`` scores an unlabeled image by the energy of its prototype logits,
``E(x) = -logsumexp_c(-‖x − p_c‖²)`` on L2-normalised embeddings (higher: more OOD), and cuts
every episode at a quantile of its query's energies: the query, drawn from the episode's
classes, is the calibration set, as in ORDER's own rule. ``EnergyOrder`` is ORDER with this
detector: it passes it as ``ood_detector`` (one of ORDER's four documented parts,
:mod:`avalanche_sets.order.components`) and takes the quantile as its own option
(``--strategy-set quantile=0.8``). Everything else is ORDER's, and ORDER's options for its
own detector (``ood_k``, ``ood_rule``) are refused for it.

    python examples/energy_ood.py          # ORDER and EnergyOrder, 3 seeds, then two tables
    python examples/energy_ood.py --tiny   # seconds: what the test runs

The documentation's "Writing your own method" page walks through this file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from avalanche_sets.cli import main as avalanche_sets
from avalanche_sets.order import OODSplit, OrderStrategy


# --8<-- [start:detector]
class EnergyDetector:
    """Energy of the prototype logits, cut at the ``quantile`` of the query's energies."""

    def __init__(self, quantile: float = 0.9) -> None:
        if not 0 < quantile <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {quantile}")
        self.quantile = quantile

    def split(self, query_emb, unlabeled_emb, prototypes) -> OODSplit:
        """``[B, Q, d]``, ``[B, U, d]``, ``[B, N, d]`` -> ``is_id`` and the score, ``[B, U]``."""
        protos = F.normalize(prototypes.float(), dim=-1)

        def energy(x: torch.Tensor) -> torch.Tensor:  # [B, n, d] -> [B, n]
            logits = -torch.cdist(F.normalize(x.float(), dim=-1), protos).pow(2)
            return -torch.logsumexp(logits, dim=-1)

        query, unlabeled = energy(query_emb), energy(unlabeled_emb)
        cut = torch.quantile(query, self.quantile, dim=-1, keepdim=True)  # [B, 1]
        return OODSplit(is_id=unlabeled <= cut, distances=unlabeled)


class EnergyOrder(OrderStrategy):
    """ORDER with the energy detector (``--strategy-set quantile=0.8`` sets its cut)."""

    name = "energy-order"
    summary = "ORDER with an energy-score OOD split cut at a quantile of the query's energies"

    def __init__(self, *, quantile: float = 0.9, **kwargs) -> None:
        super().__init__(ood_detector=EnergyDetector(quantile), **kwargs)


# --8<-- [end:detector]

TINY = [
    "--set", "tasks_per_domain=8", "--set", "n_test_episodes=4", "--set", "width=8",
    "--set", "domains=['shapes','strokes']", "--set", "threads=1", "--set", "mem_size=8",
]  # fmt: skip


def run(*args: str) -> None:
    """``avalanche-sets ARGS`` in this process; stops on an error."""
    print("$ avalanche-sets", " ".join(args), flush=True)
    if avalanche_sets(list(args)) != 0:
        raise SystemExit(f"avalanche-sets {' '.join(args)} failed")


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="seconds: 2 small domains, 2 seeds")
    ap.add_argument("--out", type=Path, default=Path("runs/energy_ood"))
    args = ap.parse_args(argv)
    out, size = str(args.out.resolve()), TINY if args.tiny else []
    seeds = ["0", "1"] if args.tiny else ["0", "1", "2"]
    # --8<-- [start:run]
    run("run", "--method", "energy_ood:EnergyOrder", "--seeds", "0", "--out", out, *size)
    run("sweep", "--methods", "order", "energy_ood:EnergyOrder", "--seeds", *seeds,
        "--out", out, *size)  # fmt: skip
    run("table", out)  # accuracy, mean ± 95% interval over seeds
    run("table", out, "--metric", "ood_auroc")  # how well each split tells ID from OOD
    # --8<-- [end:run]
    return Path(out)


if __name__ == "__main__":
    main()
