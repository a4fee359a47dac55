"""The ``README.md`` of a folder of domain packs, as ``prepare stream``
(:mod:`.stream_folder`) and ``prepare torchvision`` (:mod:`.prepare`) write it: who wrote it,
the command that regenerates it, the run on it, and a table of its packs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def readme_head(
    manifest: Mapping[str, Any],
    *,
    title: str,
    written: str,
    run_on: str,
    columns: Sequence[str],
    cells: Callable[[Mapping[str, Any]], Sequence[str]],
) -> list[str]:
    """The README's lines up to the end of its table of packs.

    Args:
        manifest: the folder's manifest (``command``, ``run_command`` and ``packs``; a
            ``run_command_note`` says which domains it leaves out, or why there is none).
        title: the heading.
        written: the sentence saying what wrote the folder (``Regenerate with:`` follows it).
        run_on: what introduces the run command (a colon follows it).
        columns: the table's first columns; every table ends with the pack's classes,
            images, images per class (min/med/max) and class split (train/val/test).
        cells: the first cells of a pack's row, from its manifest entry.
    """
    run, note = manifest["run_command"], manifest.get("run_command_note", "")
    lines = [
        f"# {title}",
        "",
        f"{written}. Regenerate with:",
        "",
        f"    {manifest['command']}",
        "",
        *([f"{run_on}:", "", f"    {run}", ""] if run else []),
        *([note, ""] if note else []),
        _row([*columns, "classes", "images", "img/class min/med/max", "split tr/va/te"]),
        _row(["---"] * len(columns) + ["---:"] * 4),
    ]
    for e in manifest["packs"]:
        lo, med, hi = e["images_per_class"]
        sp = e["split"]
        counts = [f"{e['classes']}", f"{e['images']}", f"{lo}/{med}/{hi}"]
        lines.append(_row([*cells(e), *counts, f"{sp['train']}/{sp['val']}/{sp['test']}"]))
    return lines
