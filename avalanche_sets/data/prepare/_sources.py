"""The torchvision datasets a SETS stream can be prepared from (:data:`TORCHVISION_SOURCES`):
for each, the dataset class and the official parts read, the paths that must exist, the md5
checks torchvision makes, the licence and how its label ids are named; the default stream; and
the check of the dataset names a stream is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...suggest import did_you_mean


@dataclass(frozen=True)
class TorchvisionSource:
    """How one torchvision dataset becomes a domain pack.

    Attributes:
        name: our name (pack file stem, CLI name).
        title: the dataset's usual name.
        dataset: the class in :mod:`torchvision.datasets`.
        parts: constructor keyword arguments of each official part read (merged by class name).
        needs: paths under the torchvision root that must exist (checked before torchvision
            is called, so that a missing dataset names them).
        n_classes: classes of the full dataset (to refuse a stream that cannot work before
            reading anything).
        md5_module: the torchvision module whose ``check_integrity`` verifies md5 sums even
            with ``download=False`` (``None``: torchvision checks only that folders exist).
        md5_files: the files whose md5 torchvision verifies (for error messages).
        licence: where the images come from and their terms of use.
        class_names: names of a built dataset object's label ids (default ``ds.classes``).
    """

    name: str
    title: str
    dataset: str
    parts: tuple[dict[str, Any], ...]
    needs: tuple[str, ...]
    n_classes: int
    licence: str
    md5_module: str | None = None
    md5_files: tuple[str, ...] = ()
    class_names: Callable[[Any], list[str]] = field(default=lambda ds: [str(c) for c in ds.classes])


def _omniglot_names(ds) -> list[str]:
    # torchvision's Omniglot has no ``classes``; its label ids index "<alphabet>/<character>".
    return [str(c) for c in ds._characters]


def _gtsrb_names(ds) -> list[str]:
    # GTSRB labels are the indices of the sorted class folders (00000 ... 00042).
    from torchvision.datasets.folder import find_classes  # heavy (torch); loaded by now

    return find_classes(str(ds._target_folder))[0]


def _pet_names(ds) -> list[str]:
    # torchvision numbers a split's breeds by the labels *present in that split*; naming each
    # label from its own images' file names ("Bengal_12" -> "Bengal") stays right even when a
    # split lacks a breed.
    names: dict[int, str] = {}
    for path, label in zip(ds._images, ds._labels):
        names[int(label)] = " ".join(
            p.title() for p in Path(path).stem.rsplit("_", 1)[0].split("_")
        )
    return [names.get(i, f"class {i}") for i in range(max(names, default=-1) + 1)]


def _digit_names(ds) -> list[str]:
    return [str(d) for d in range(10)]  # SVHN: label 0..9 is the digit (10 mapped to 0)


#: The datasets ``prepare_torchvision_stream`` can read, by name.
TORCHVISION_SOURCES: dict[str, TorchvisionSource] = {
    s.name: s
    for s in (
        TorchvisionSource(
            name="cifar100",
            title="CIFAR-100",
            dataset="CIFAR100",
            parts=({"train": True}, {"train": False}),
            needs=("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
            n_classes=100,
            md5_module="cifar",
            md5_files=("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
            licence="CIFAR-100 (Krizhevsky 2009), 80 Million Tiny Images; research use",
        ),
        TorchvisionSource(
            name="aircraft",
            title="FGVC-Aircraft",
            dataset="FGVCAircraft",
            parts=({"split": "trainval"}, {"split": "test"}),
            needs=("fgvc-aircraft-2013b/data",),
            n_classes=100,
            licence="FGVC-Aircraft 2013b (Maji et al. 2013), variants; non-commercial research",
        ),
        TorchvisionSource(
            name="flowers102",
            title="Flowers-102",
            dataset="Flowers102",
            parts=({"split": "train"}, {"split": "val"}, {"split": "test"}),
            needs=("flowers-102/jpg", "flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
            n_classes=102,
            md5_module="flowers102",
            md5_files=("flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
            licence="Oxford 102 Flowers (Nilsback & Zisserman 2008); research use",
        ),
        TorchvisionSource(
            name="dtd",
            title="DTD",
            dataset="DTD",
            parts=({"split": "train"}, {"split": "val"}, {"split": "test"}),
            needs=("dtd/dtd/images", "dtd/dtd/labels"),
            n_classes=47,
            licence="Describable Textures Dataset (Cimpoi et al. 2014); research use",
        ),
        TorchvisionSource(
            name="gtsrb",
            title="GTSRB",
            dataset="GTSRB",
            parts=({"split": "train"},),
            needs=("gtsrb/GTSRB/Training",),
            n_classes=43,
            class_names=_gtsrb_names,
            licence="GTSRB training set (Stallkamp et al. 2011); research use",
        ),
        TorchvisionSource(
            name="omniglot",
            title="Omniglot (background)",
            dataset="Omniglot",
            parts=({"background": True},),
            needs=("omniglot-py/images_background",),
            n_classes=964,
            md5_module="omniglot",
            md5_files=("omniglot-py/images_background.zip",),
            class_names=_omniglot_names,
            licence="Omniglot (Lake et al. 2015), background set; MIT",
        ),
        TorchvisionSource(
            name="svhn",
            title="SVHN",
            dataset="SVHN",
            parts=({"split": "train"},),
            needs=("train_32x32.mat",),
            n_classes=10,
            md5_module="svhn",
            md5_files=("train_32x32.mat",),
            class_names=_digit_names,
            licence="SVHN (Netzer et al. 2011), cropped digits; non-commercial use",
        ),
        TorchvisionSource(
            name="food101",
            title="Food-101",
            dataset="Food101",
            parts=({"split": "train"}, {"split": "test"}),
            needs=("food-101/images", "food-101/meta"),
            n_classes=101,
            licence="Food-101 (Bossard et al. 2014), Foodspotting images; research use",
        ),
        TorchvisionSource(
            name="pets",
            title="Oxford-IIIT Pet",
            dataset="OxfordIIITPet",
            parts=({"split": "trainval"}, {"split": "test"}),
            needs=("oxford-iiit-pet/images", "oxford-iiit-pet/annotations"),
            n_classes=37,
            class_names=_pet_names,
            licence="Oxford-IIIT Pet (Parkhi et al. 2012); CC BY-SA 4.0",
        ),
        TorchvisionSource(
            name="eurosat",
            title="EuroSAT (RGB)",
            dataset="EuroSAT",
            parts=({},),
            needs=("eurosat/2750",),
            n_classes=10,
            licence="EuroSAT (Helber et al. 2019), Sentinel-2 RGB; MIT",
        ),
    )
}

#: Default stream domains, in stream order: every source dataset above with >= 20 classes.
DEFAULT_DOMAINS: tuple[str, ...] = (
    "cifar100",
    "aircraft",
    "flowers102",
    "dtd",
    "gtsrb",
    "omniglot",
)
#: Default OOD sources: SVHN's 10 digit classes are too few for 5-way val/test episodes.
DEFAULT_OOD: tuple[str, ...] = ("svhn",)


# ----------------------------------------------------------------------------- checks
def _unknown(name: str) -> ValueError:
    hint = did_you_mean(name, TORCHVISION_SOURCES, cutoff=0.5)
    return ValueError(
        f"unknown torchvision dataset {name!r}{hint}; known: {sorted(TORCHVISION_SOURCES)}; an "
        "image folder with one sub-folder per class goes through `avalanche-sets prepare pack`"
    )


def check_stream_names(domains: Sequence[str], ood: Sequence[str]) -> None:
    """Refuse unknown, repeated or doubly used dataset names (before anything is read)."""
    if isinstance(domains, str) or isinstance(ood, str):
        raise TypeError("domains and ood are lists of names, e.g. domains=['cifar100', 'dtd']")
    if not domains:
        raise ValueError("a stream needs at least one domain; fix: name datasets in domains=")
    for name in (*domains, *ood):
        if name not in TORCHVISION_SOURCES:
            raise _unknown(name)
    names = [*domains, *ood]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"{twice} named twice (domains {list(domains)}, ood {list(ood)}); a dataset is "
            f"either one stream domain or one OOD source; fix: name it once (the default OOD "
            f"sources are {list(DEFAULT_OOD)}: pass --ood / ood=[...] to choose others)"
        )
