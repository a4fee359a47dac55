"""The table of what ``OrderStrategy()`` builds against what each preset builds.

``OrderStrategy()`` takes the class's own defaults; ``build_strategy("order", preset)`` — the
command line's ``--method order --preset P`` — takes the preset's. The table is read off the
strategies themselves (their backbone, optimiser, memory, batches) and the presets' run
settings, so it says what the code builds: ``make readme`` writes it into the pages
(``<!-- strategy-defaults:start -->``) and ``tests/benchmarks/test_readme_numbers.py`` fails when
a page and the code disagree.

    python -m benchmarks.strategy_defaults      # print the table
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["defaults_block", "defaults_rows"]

#: The presets of the table's columns, in the order the documentation introduces them.
PRESET_COLUMNS = ("quick", "cpu", "converged", "paper")

#: The class's column: it has no preset, so ``run_sets`` leaves these as they are.
_CLASS_RUN = {"threads": "torch's setting, unchanged", "interim": "every episode"}


def _describe(strategy, config=None) -> dict[str, str]:
    """The settings of one ORDER strategy (and of the preset it was built from) as text."""
    bb = strategy.model.backbone
    return {
        "backbone": f"{bb.n_blocks} blocks × {bb.width} filters",
        "image size (px)": str(bb.image_size),
        "precision": f"`{bb.precision}`",
        "memory layout": "channels-last" if bb.channels_last else "NCHW",
        "learning rate": f"{strategy.optimizer.param_groups[0]['lr']:g}",
        "tasks per iteration": str(strategy.train_mb_size),
        "memory / replayed per iteration (tasks)": (
            f"{strategy.replay.mem_size} / {strategy.replay.replay_batch}"
        ),
        "λ (MI), β (OT)": f"{strategy.mi.lam:g}, {strategy.ot.beta:g}",
        "evaluation batch (episodes)": str(strategy.eval_mb_size),
        "device": str(strategy.device) if config is None else config.device,
        "torch threads in `run_sets`": (
            _CLASS_RUN["threads"] if config is None else str(config.threads)
        ),
        "interim test episodes": (
            _CLASS_RUN["interim"]
            if config is None or config.interim_test_episodes is None
            else str(config.interim_test_episodes)
        ),
    }


@functools.cache
def defaults_rows() -> dict[str, dict[str, str]]:
    """Column name -> setting -> its value: ``OrderStrategy()``, then each preset's ORDER.

    A GPU preset's strategy is built on the CPU here (its ``device`` column is the preset's);
    torch's random state is left as it was.
    """
    import torch

    from avalanche_sets import OrderStrategy, build_strategy
    from avalanche_sets.presets import resolve_preset

    columns: dict[str, dict[str, Any]] = {}
    with torch.random.fork_rng(devices=[]):
        columns["`OrderStrategy()`"] = _describe(OrderStrategy())
        for name in PRESET_COLUMNS:
            config = resolve_preset(name)
            strategy = build_strategy("order", config.replace(device="cpu"), seed=0)
            columns[f"`{name}`"] = _describe(strategy, config)
    return columns


def defaults_block() -> str:
    """The markdown table: one row per setting; a preset's value in bold where it differs from
    ``OrderStrategy()``'s."""
    columns = defaults_rows()
    names = list(columns)
    base = columns[names[0]]
    lines = [
        "| setting | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for setting, value in base.items():
        cells = [value]
        for name in names[1:]:
            other = columns[name][setting]
            cells.append(other if other == value else f"**{other}**")
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(defaults_block())
