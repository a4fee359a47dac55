"""Image folders for tests of one's own data: ``root/class_XX/i.png``, generated with PIL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def image_folder(root: Path, n_classes: int, per_class: int = 16, seed: int = 0) -> Path:
    """``root/class_XX/i.png``: one flat colour (plus noise) per class."""
    rng = np.random.default_rng(seed)
    for c in range(n_classes):
        d = root / f"class_{c:02d}"
        d.mkdir(parents=True)
        colour = rng.integers(0, 256, 3)
        for i in range(per_class):
            img = np.clip(colour + rng.normal(0, 20, (10, 12, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(d / f"{i}.png")
    return root


def messy_stream_folders(root: Path) -> dict[str, list[str]]:
    """Three image folders as a user's disk holds them, for ``prepare stream --split 15,6,6``:
    ``flowers`` and ``birds`` (27 classes of 16 images, one class of 4 in each: too small for
    the cpu preset's episodes, which need 16), ``emoji`` (27 classes of 6 images: no class the
    cpu preset can use), and stray entries at every level of each. Returns each folder's
    stray entries, as ``ignored_files`` names them."""
    for name, seed in (("flowers", 0), ("birds", 1)):
        folder = image_folder(root / name, 27, per_class=16, seed=seed)
        for p in sorted((folder / "class_05").glob("*.png"))[4:]:
            p.unlink()
    image_folder(root / "emoji", 27, per_class=6, seed=2)
    stray = {
        "flowers": ["notes.txt", ".DS_Store", "class_00/.DS_Store", "class_01/notes.txt"],
        "birds": [".DS_Store", "class_02/.DS_Store", "class_02/thumbs/"],
        "emoji": [".git/", "README", "class_00/notes.txt"],
    }
    for name, entries in stray.items():
        for entry in entries:
            path = root / name / entry
            if entry.endswith("/"):
                path.mkdir()
                (path / "0.png").write_bytes(b"not read")
            else:
                path.write_text("not an image")
    (root / ".DS_Store").write_text("beside the domains: not read by prepare stream")
    return {name: sorted(entries) for name, entries in stray.items()}
