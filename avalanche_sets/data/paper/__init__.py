"""The paper's nine datasets (ORDER, ECCV 2022, appendix A), loaded from a local root.

Six in-distribution domains form the stream (:data:`PAPER_ORDERS`) and three sources provide
out-of-distribution images (:data:`PAPER_OOD`). **Nothing is downloaded**: every dataset must
already be on disk under ``root``, in any of the layouts users actually have (the ORDER
authors' processed archive, torchmeta's, torchvision's, learn2learn's, the release as it
unpacks). ``PAPER_DATASETS[name].layout`` lists them in search order; the first one found
wins, each tried at ``<root>/<folder name>`` for every accepted folder name and at ``root``
itself. A missing, malformed or wrong dataset raises :class:`DatasetNotFoundError`, whose
message names the path, the problem, every layout looked for and where to get the data.

Canonical names (used everywhere in the package): ``plantae``, ``cub``, ``miniimagenet``,
``cifarfs``, ``aircraft``, ``butterfly`` (in-distribution) and ``omniglot``, ``vggflower``,
``fish`` (OOD). Common spellings (``CIFAR-FS``, ``mini-imagenet``, ``CUB-200``,
``FGVC-Aircraft``, ``Butterfly-200``, ``VGG-Flower-102``, ``WildFish``) are accepted too.

Class splits, in order of precedence:

1. The user's ``{train,val,test}.txt`` (one class name per line, ``#`` comments) in
   ``<dataset folder>/splits/`` (``<root>/splits/<name>/`` when the layout was found directly
   in a ``root`` shared by several datasets). Classes listed in no file are left out.
2. The split shipped with the data: the authors' own (their archive: CUB, Aircraft, Plantae,
   Butterfly, VGG-Flower, WildFish; torchmeta's miniImageNet, CIFAR-FS and Omniglot, which
   their code reads), Ravi & Larochelle's (miniImageNet pickles/csv/folders), Bertinetto et
   al.'s (CIFAR-FS), Tseng et al.'s ``base/val/novel.json`` (Plantae), torchmeta's (CUB).
3. The published rule, re-implemented: CUB (Chen et al. 2019, exact), FGVC-Aircraft
   (Vuorio et al. 2019, exact), Plantae (Tseng et al. 2020, exact up to ties).
4. A documented seeded random split of the paper's sizes: Butterfly (the paper's draw is
   only in the authors' archive), the OOD sources (60/20/20 so that the OOD classes of
   training and of evaluation are disjoint), and CIFAR-FS when its split files are absent
   (warned).

Every listing is checked against the complete release's figures (``PAPER_DATASETS[name]
.figures``: classes, images, most images per class): classes named like layout folders
(``WildFish_part1``, ``images``, ``train``), more classes or images than the release has, or
a class bigger than any of the release's raise :class:`DatasetNotFoundError`; fewer warn
(:class:`PaperDataWarning`). A :class:`PaperSplitWarning` is issued whenever the split sizes
differ from the paper's (except for the authors' own split).

Images are decoded once, converted to RGB, centre-cropped to a square, resized (Pillow
LANCZOS) to ``image_size`` and cached as an ``.npz`` domain pack (uncompressed, written
atomically) in ``cache_dir`` (default ``$AVALANCHE_SETS_CACHE`` or
``~/.cache/avalanche_sets/paper``), keyed by dataset, folder, layout, image size, class-split
seed and the contents of the user's split files. Pass ``refresh=True`` after changing the
images on disk. torchmeta's hdf5 files need ``h5py`` (``pip install 'avalanche-sets[datasets]'``);
the authors' ``.pt`` files are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from ._common import (
    DatasetNotFoundError,
    Figures,
    Layout,
    PaperDataset,
    PaperDataWarning,
    PaperSplitWarning,
)
from ._load import (
    check_figures,
    default_cache_dir,
    find_paper_layout,
    load_paper_domain,
    load_paper_domains,
    locate_paper_dataset,
)
from ._search import LayoutMatch
from ._specs import PAPER_DATASETS, PAPER_ID, PAPER_OOD, PAPER_ORDERS, paper_dataset

__all__ = [
    "PAPER_DATASETS",
    "PAPER_ORDERS",
    "PAPER_ID",
    "PAPER_OOD",
    "PaperDataset",
    "Layout",
    "LayoutMatch",
    "Figures",
    "DatasetNotFoundError",
    "PaperSplitWarning",
    "PaperDataWarning",
    "paper_dataset",
    "locate_paper_dataset",
    "find_paper_layout",
    "check_figures",
    "load_paper_domain",
    "load_paper_domains",
    "default_cache_dir",
]
