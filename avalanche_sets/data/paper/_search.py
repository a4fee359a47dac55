"""Finding a dataset's layout under a root, in the documented search order."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ._common import DatasetNotFoundError, Layout, PaperDataset, _norm


@dataclass(frozen=True)
class LayoutMatch:
    """The first accepted layout found under a root.

    Attributes:
        layout: the layout that matched.
        base: the folder its markers were found in.
        folder: the dataset's own folder (``base / layout.sub``), handed to the scanner.
        split_dir: where the user's ``{train,val,test}.txt`` are read from.
    """

    layout: Layout
    base: Path
    folder: Path
    split_dir: Path


def _has(folder: Path, pattern: str) -> bool:
    return next(iter(folder.glob(pattern)), None) is not None


def _matches(base: Path, layout: Layout) -> bool:
    if not base.is_dir():
        return False
    if layout.markers:
        return all(_has(base, m) for m in layout.markers)
    return any(p.is_dir() and not p.name.startswith(".") for p in base.iterdir())


def find_layout(spec: PaperDataset, root: str | os.PathLike) -> LayoutMatch:
    """The first of ``spec.layouts`` (in order) found under ``root``.

    Each layout is tried at every one of its bases in turn (by default ``<root>/<dirname>``
    for each accepted folder name of the dataset, then ``root`` itself), so one ``root``
    holding many datasets and a ``root`` that is the dataset's own folder both work.

    Raises:
        DatasetNotFoundError: no layout matches; the message lists every layout looked for.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DatasetNotFoundError(
            spec, root / spec.dirnames[0], "not found: the root folder does not exist"
        )
    own = _norm(root.name) in {_norm(d) for d in spec.dirnames}
    for layout in spec.layouts:
        for rel in spec.bases(layout):
            if not rel and layout.named and not own:
                continue
            base = root / rel if rel else root
            if _matches(base, layout):
                # A base under root, or a root named like the dataset, is the dataset's own
                # folder; a generic root shared by several datasets gets a per-dataset folder.
                split_dir = base / "splits" if (rel or own) else root / "splits" / spec.name
                folder = base / layout.sub if layout.sub else base
                return LayoutMatch(layout, base, folder, split_dir)
    present = [d for d in spec.dirnames if (root / d).is_dir()]
    problem = (
        f"not found: {root / present[0]} exists but matches none of the accepted layouts"
        if present
        else (
            f"not found: no folder {' / '.join(spec.dirnames)} under {root}, and none of the "
            "accepted layouts is in it"
        )
    )
    raise DatasetNotFoundError(spec, root / (present[0] if present else spec.dirnames[0]), problem)
