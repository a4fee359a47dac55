"""Build a domain pack from your own image folder (one sub-folder per class) and use it.

    python examples/domain_pack_from_folder.py path/to/images [more/image/folders ...]

Without arguments it fabricates two small folders so the example runs anywhere.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from avalanche_sets import sets_benchmark
from avalanche_sets.data.packs import build_pack_from_folder, load_pack


def fabricate(root: Path, name: str, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    for c in range(25):
        d = root / name / f"class_{c:02d}"
        d.mkdir(parents=True)
        colour = rng.integers(0, 256, 3)
        for i in range(30):
            img = np.clip(colour + rng.normal(0, 40, (40, 48, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(d / f"{i}.png")
    return root / name


work = Path(tempfile.mkdtemp())
folders = [Path(p) for p in sys.argv[1:]] or [fabricate(work, n, i) for i, n in enumerate("ab")]
packs = work / "packs"
for i, folder in enumerate(folders):
    # The OOD source is just another pack; its name decides its role below.
    name = f"ood_{folder.name}" if i == len(folders) - 1 and len(folders) > 1 else folder.name
    path = build_pack_from_folder(folder, packs / f"{name}.npz", image_size=32)
    print(path, load_pack(path))

ids = [p.stem for p in sorted(packs.glob("*.npz")) if not p.stem.startswith("ood_")]
bench = sets_benchmark(
    "packs", root=packs, domains=ids, n_way=5, n_shot=1, n_query=5, n_unlabeled=5, n_ood=10,
    tasks_per_domain=20, n_test_episodes=5,
)  # fmt: skip
print(bench.describe())
episode = bench.train_stream[0].dataset[0]
print("support", tuple(episode.support_x.shape), "unlabeled", tuple(episode.unlabeled_x.shape))
