"""A method of your own, run by the command line beside a built-in method.

``PrototypeSpreadPlugin`` pushes the class prototypes of every training episode apart: its
``loss_term`` returns ``weight * mean_c,c' exp(-||p_c - p_c'||² / d)`` from the prototypes of the
meta-batch (``strategy.iteration.state``), named ``"spread"`` (its ``TERM``), and the strategy's
criterion adds it to the query loss. The template checks the term for NaN/inf before the step
and records its value in ``strategy.loss_terms``.

``MSKMSpread`` is the method: MSKM's class with the plugin added. The command line finds it as
``--method custom_method:MSKMSpread`` when it runs in this folder (or with this folder on
``PYTHONPATH``), and gives it what a built-in method gets: a run folder, resume, sweeps, tables.

    python examples/custom_method.py             # MSKM and MSKM + spread, 3 seeds, then a table
    python examples/custom_method.py --tiny      # seconds: what the test runs

The documentation's "Writing your own method" page walks through this file.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import torch

from avalanche_sets.baselines import MSKM
from avalanche_sets.training import EpisodicPlugin

HERE = Path(__file__).resolve().parent


# --8<-- [start:plugin]
class PrototypeSpreadPlugin(EpisodicPlugin):
    """Adds ``weight`` × the mean similarity between the class prototypes of an episode."""

    TERM = "spread"  # the term's name in strategy.loss_terms and in the logs

    def __init__(self, weight: float = 0.1) -> None:
        super().__init__()
        if weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        self.weight = weight
        self.calls = 0

    def loss_term(self, strategy) -> torch.Tensor:
        """This training iteration's term; the strategy's criterion adds it to the loss."""
        state = strategy.iteration.state  # this meta-batch's embeddings and prototypes
        protos = state.prototypes  # [B, N, d]
        dist = torch.cdist(protos, protos).pow(2) / protos.shape[-1]  # [B, N, N]
        off_diagonal = ~torch.eye(state.n_way, dtype=torch.bool, device=protos.device)
        similarity = torch.exp(-dist)[:, off_diagonal].mean()
        self.calls += 1
        return self.weight * similarity


# --8<-- [end:plugin]


# --8<-- [start:method]
class MSKMSpread(MSKM):
    """MSKM with the prototype-spread term (``--strategy-set weight=0.5`` sets its weight)."""

    name = "mskm-spread"
    summary = "MSKM + a term that pushes the class prototypes apart"

    def __init__(self, *, weight: float = 0.1, plugins=None, **kwargs) -> None:
        super().__init__(plugins=[PrototypeSpreadPlugin(weight), *(plugins or [])], **kwargs)


# --8<-- [end:method]

TINY = [
    "--set", "tasks_per_domain=8", "--set", "n_test_episodes=4", "--set", "width=8",
    "--set", "domains=['shapes','strokes']", "--set", "threads=1",
]  # fmt: skip


def cli(*args: str) -> str:
    """``avalanche-sets ARGS`` run in this folder (where it finds ``custom_method``); its output."""
    command = [sys.executable, "-m", "avalanche_sets", *args]
    print("$ avalanche-sets", " ".join(args), flush=True)
    done = subprocess.run(command, cwd=HERE, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"avalanche-sets {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="seconds: 2 small domains, 2 seeds")
    ap.add_argument("--out", type=Path, default=Path("runs/custom_method"))
    args = ap.parse_args(argv)
    out = str(args.out.resolve())
    size = TINY if args.tiny else []
    seeds = ["0", "1"] if args.tiny else ["0", "1", "2"]
    # --8<-- [start:run]
    # the built-in method and ours, on the same stream (same preset and seed)
    cli("run", "--method", "mskm", "--seeds", "0", "--out", out, "--loggers", *size)
    cli("run", "--method", "custom_method:MSKMSpread", "--seeds", "0", "--out", out,
        "--loggers", *size)  # fmt: skip
    # more seeds of both: seed 0 is found finished and not run again
    cli("sweep", "--methods", "mskm", "custom_method:MSKMSpread", "--seeds", *seeds,
        "--out", out, *size)  # fmt: skip
    table = cli("table", out)
    # --8<-- [end:run]
    print(table)
    return table


if __name__ == "__main__":
    main()
