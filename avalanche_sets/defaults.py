"""Settings every layer shares, defined once: their choices, the paper's defaults, their checks.

A leaf module (standard library only), so the data layer, the models, the strategies, the
presets and the command line's parser all take the same values from here — the command line
before it loads torch.
"""

from __future__ import annotations

__all__ = [
    "SOURCES",
    "FOLDER_SOURCES",
    "PRECISIONS",
    "MEM_SIZE",
    "N_OOD",
    "DEFAULT_OOD",
    "REPLAY_BATCH",
    "LOG_EVERY",
    "check_mem_size",
]

SOURCES: tuple[str, ...] = ("synthetic", "packs", "paper")
"""Where the domains of a benchmark come from: the offline synthetic domains, a folder of
``.npz`` domain packs, or the paper's datasets."""

FOLDER_SOURCES: tuple[str, ...] = ("packs", "paper")
"""The sources that read a data folder (``root``); ``synthetic`` generates its images."""

PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")
"""The backbone's precision: ``auto`` is bf16 where the device runs it natively, else fp32."""

MEM_SIZE = 200
"""Memory capacity in tasks of every replay method (the paper's M = 200)."""

N_OOD = 50
"""OOD images in an episode's unlabeled set (the paper's R = 50)."""

DEFAULT_OOD: dict[str, tuple[str, ...]] = {
    "synthetic": ("rings", "lattices", "spirals"),
    "paper": ("omniglot", "vggflower", "fish"),
}
"""The OOD sources a source mixes into every episode when the preset names none (``ood``);
a folder of packs decides its own (its ``ood_*`` packs or its stream manifest). Here, not in
the data layer, so that a table names them without loading torch."""

REPLAY_BATCH = 2
"""Memory tasks replayed per training iteration."""

LOG_EVERY = 50
"""Training iterations per logged mean of the loss terms (``--log-every``): as many as between
two checkpoints by default (``--checkpoint-every``)."""


def check_mem_size(mem_size: object, *, when: str = "") -> int:
    """Return ``mem_size`` when it is a positive number of tasks; else raise ``ValueError``.

    ``when`` completes the message (``" when replay is on"``).
    """
    if not isinstance(mem_size, int) or mem_size < 1:
        raise ValueError(f"mem_size must be a positive number of tasks{when}, got {mem_size!r}")
    return mem_size
