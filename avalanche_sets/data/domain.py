"""One in-memory representation of an image domain (an in-distribution domain or an OOD source).

A :class:`Domain` is a pool of uint8 images with integer labels, a fixed train/val/test split of
its *classes*, and a fixed, seeded labeled/unlabeled split of the *images inside every class*
(paper: 40% labeled, 60% unlabeled; Ren et al. 2018). Every source (synthetic generator, domain
packs, the paper's datasets) ends up as a :class:`Domain`, so the episode sampler only has to
know this one type.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Domain", "SPLITS", "PARTS"]

SPLITS = ("train", "val", "test")
PARTS = ("labeled", "unlabeled", "all")


@dataclass(eq=False)
class Domain:
    """A class pool of uint8 images with a fixed class split and a labeled/unlabeled split.

    Args:
        name: identifier used in streams, tables and error messages.
        images: ``uint8`` array ``[N, H, W, 3]`` (RGB, channels last).
        labels: integer array ``[N]`` with values in ``0..C-1``.
        class_names: ``C`` human-readable names.
        class_split: ``C`` strings in ``{"train", "val", "test"}``.
        labeled_fraction: fraction of every class's images that form its labeled part.
        split_seed: seed of the labeled/unlabeled split (mixed with the domain name, so two
            domains never share a permutation by accident).
        source: one line on where the images come from (and their licence).
        origin: the file or folder the domain was loaded from (a pack, a dataset folder);
            named in error messages, empty for generated domains.
    """

    name: str
    images: np.ndarray
    labels: np.ndarray
    class_names: Sequence[str]
    class_split: np.ndarray
    labeled_fraction: float = 0.4
    split_seed: int = 0
    source: str = ""
    origin: str = ""
    _class_index: list[np.ndarray] = field(init=False, repr=False)
    _labeled: list[np.ndarray] = field(init=False, repr=False)
    _unlabeled: list[np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        images = np.asarray(self.images)
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(
                f"domain {self.name!r}: images must be a uint8 array [N, H, W, 3], got "
                f"{images.dtype} {images.shape}; fix: store 8-bit RGB, channels last "
                "(images.astype(np.uint8) for values in 0..255; replicate grey images to 3 "
                "channels)"
            )
        labels = np.asarray(self.labels)
        if labels.size and labels.dtype.kind not in "iu":
            raise ValueError(
                f"domain {self.name!r}: labels must be integer class ids, got dtype "
                f"{labels.dtype}; fix: labels.astype(np.int64) if they are whole numbers "
                "0..C-1 (indices into class_names)"
            )
        labels = labels.astype(np.int64, copy=False)
        if labels.shape != (images.shape[0],):
            raise ValueError(
                f"domain {self.name!r}: labels must have shape [{images.shape[0]}] "
                f"(one per image), got {labels.shape}"
            )
        names = [str(n) for n in self.class_names]
        n_classes = len(names)
        split = np.asarray(self.class_split).astype(str)
        if split.shape != (n_classes,):
            raise ValueError(
                f"domain {self.name!r}: class_split must have one entry per class "
                f"({n_classes}), got shape {split.shape}"
            )
        bad = sorted(set(split.tolist()) - set(SPLITS))
        if bad:
            raise ValueError(
                f"domain {self.name!r}: class_split values must be in {SPLITS}, found {bad}"
            )
        if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
            raise ValueError(
                f"domain {self.name!r}: labels must lie in 0..{n_classes - 1}, found "
                f"{labels.min()}..{labels.max()}; fix: labels index class_names, so remap them "
                "to 0..C-1 or add the missing class names"
            )
        if not 0.0 < self.labeled_fraction < 1.0:
            raise ValueError(
                f"domain {self.name!r}: labeled_fraction must be in (0, 1), got "
                f"{self.labeled_fraction}"
            )
        self.images = images
        self.labels = labels
        self.class_names = tuple(names)
        self.class_split = split

        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=n_classes)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        self._class_index = [order[bounds[c] : bounds[c + 1]] for c in range(n_classes)]

        # Fixed seeded labeled/unlabeled split inside every class. The seed mixes the domain
        # name in so that the split is a property of (name, split_seed), not of load order.
        rng = np.random.default_rng([self.split_seed, zlib.crc32(self.name.encode())])
        self._labeled, self._unlabeled = [], []
        for idx in self._class_index:
            perm = idx[rng.permutation(idx.size)]
            n_lab, _ = class_parts(idx.size, self.labeled_fraction)
            self._labeled.append(np.sort(perm[:n_lab]))
            self._unlabeled.append(np.sort(perm[n_lab:]))

    # ------------------------------------------------------------------ queries
    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_size(self) -> int:
        return int(self.images.shape[1])

    def classes(self, split: str) -> np.ndarray:
        """Class ids of one split (``"train"``, ``"val"`` or ``"test"``), sorted."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        return np.flatnonzero(self.class_split == split)

    def indices(self, class_id: int, part: str = "all") -> np.ndarray:
        """Image indices of one class, restricted to its ``labeled``/``unlabeled`` part."""
        if part == "labeled":
            return self._labeled[class_id]
        if part == "unlabeled":
            return self._unlabeled[class_id]
        if part == "all":
            return self._class_index[class_id]
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")

    def part_sizes(self, part: str) -> np.ndarray:
        """Number of images of every class in one part, shape ``[C]``."""
        return np.array([self.indices(c, part).size for c in range(self.n_classes)])

    @property
    def nbytes(self) -> int:
        return int(self.images.nbytes + self.labels.nbytes)

    def describe_origin(self) -> str:
        """``'name'`` or ``'name' (origin)``: how error messages name this domain."""
        return f"{self.name!r} ({self.origin})" if self.origin else repr(self.name)

    def summary(self) -> dict:
        """Class counts per split and image counts, for printing a stream."""
        sizes = self.part_sizes("all")
        return {
            "name": self.name,
            "classes": {s: int(self.classes(s).size) for s in SPLITS},
            "images": int(self.images.shape[0]),
            "images_per_class": (int(sizes.min()), int(np.median(sizes)), int(sizes.max())),
            "image_size": self.image_size,
            "source": self.source,
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Domain({self.name!r}, images={s['images']}, size={s['image_size']}, "
            f"classes={s['classes']})"
        )


def class_parts(size: int, labeled_fraction: float) -> tuple[int, int]:
    """The labeled and unlabeled images of a class of ``size`` images, as :class:`Domain` splits
    it: ``labeled_fraction`` of them, rounded, and at least one of each part from 2 images."""
    lab = int(round(labeled_fraction * size))
    if size >= 2:
        lab = min(max(lab, 1), size - 1)
    return lab, size - lab


def _min_class_size(labeled_fraction: float, n_labeled: int, n_unlabeled: int) -> int | None:
    """Fewest images a class needs so that its labeled/unlabeled parts (as :class:`Domain`
    splits them) hold ``n_labeled`` and ``n_unlabeled`` images; None if none up to 10^5 does."""
    for n in range(max(1, n_labeled + n_unlabeled), 100_001):
        lab, _ = class_parts(n, labeled_fraction)
        if lab >= n_labeled and n - lab >= n_unlabeled:
            return n
    return None
