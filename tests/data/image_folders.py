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
