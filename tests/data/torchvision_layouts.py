"""Tiny fabricated datasets in the on-disk layouts torchvision 0.29's dataset classes read.

Every ``make_<name>(root, classes, per_class)`` writes ``per_class`` images of each of
``classes`` classes (a mapping ``{class index: per-class image count}`` where a class needs a
different count) under ``root`` exactly where ``torchvision.datasets.<Class>(root)`` looks for
them, and returns ``{class name as the pack will call it: RGB colour}``: every image of a class
is filled with that class's colour, so a test can check that images and labels stay paired.
Images are deliberately not square (``SIZE``) so that the centre crop is exercised.

The layouts follow the torchvision sources (``torchvision/datasets/<module>.py``):
file names, folder names, pickle keys and ``.mat`` variables are the ones those classes read.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from PIL import Image

SIZE = (14, 10)  # (width, height)


def colour(k: int) -> tuple[int, int, int]:
    """A distinct, JPEG-robust colour per class index (channels 40 apart at least)."""
    return (40 + 17 * k % 180, 220 - 23 * k % 180, 60 + 41 * k % 160)


def grey(k: int) -> tuple[int, int, int]:
    g = 20 + 20 * k
    return (g, g, g)


def _save(path: Path, rgb: tuple[int, int, int], mode: str = "RGB", fmt: str | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    value = rgb[0] if mode == "L" else rgb
    Image.new(mode, SIZE, value).save(path, format=fmt)


def _counts(n_classes: int, per_class: int, counts: Mapping[int, int] | None) -> list[int]:
    return [(counts or {}).get(k, per_class) for k in range(n_classes)]


def make_cifar100(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "cifar-100-python"
    base.mkdir(parents=True)
    names = [f"fine_{k}" for k in range(n_classes)]
    labels = np.repeat(np.arange(n_classes), _counts(n_classes, per_class, counts))
    images = np.stack([np.full((32, 32, 3), colour(k), np.uint8) for k in labels])
    data = images.transpose(0, 3, 1, 2).reshape(len(labels), -1)  # CIFAR rows: R, G, B planes
    half = len(labels) // 2  # train and test both hold images; the packs merge them
    for name, rows in (("train", slice(0, half)), ("test", slice(half, None))):
        with open(base / name, "wb") as f:
            pickle.dump({"data": data[rows], "fine_labels": labels[rows].tolist()}, f)
    with open(base / "meta", "wb") as f:
        pickle.dump({"fine_label_names": names, "coarse_label_names": ["c"]}, f)
    return {names[k]: colour(k) for k in range(n_classes)}


def make_omniglot(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "omniglot-py" / "images_background"
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        alphabet, char = f"Alphabet_{k % 2}", f"character{k // 2 + 1:02d}"
        for d in range(n):
            _save(base / alphabet / char / f"{900 + k:04d}_{d + 1:02d}.png", grey(k), mode="L")
        out[f"{alphabet}/{char}"] = grey(k)
    return out


def make_gtsrb(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "gtsrb" / "GTSRB" / "Training"
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        folder = base / f"{k:05d}"
        for i in range(n):
            _save(folder / f"00000_{i:05d}.ppm", colour(k), fmt="PPM")
        (folder / f"GT-{k:05d}.csv").write_text("Filename;ClassId\n")  # ignored: not .ppm
        out[f"{k:05d}"] = colour(k)
    return out


def make_dtd(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "dtd" / "dtd"
    lines: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        cls = f"texture{k}"
        for i in range(n):
            name = f"{cls}_{i:04d}.jpg"
            _save(base / "images" / cls / name, colour(k))
            lines[("train", "val", "test")[i % 3]].append(f"{cls}/{name}")
        out[cls] = colour(k)
    (base / "labels").mkdir(parents=True)
    for split, rows in lines.items():
        (base / "labels" / f"{split}1.txt").write_text("\n".join(rows) + "\n")
    return out


def make_aircraft(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    data = root / "fgvc-aircraft-2013b" / "data"
    variants = [f"Model {k}-{100 + k}" for k in range(n_classes)]  # names contain spaces
    lines: dict[str, list[str]] = {"trainval": [], "test": []}
    image_id = 1000000
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        for i in range(n):
            image_id += 1
            _save(data / "images" / f"{image_id:07d}.jpg", colour(k))
            lines["trainval" if i % 2 else "test"].append(f"{image_id:07d} {variants[k]}")
    (data / "variants.txt").write_text("\n".join(variants) + "\n")
    for split, rows in lines.items():
        (data / f"images_variant_{split}.txt").write_text("\n".join(rows) + "\n")
    return {variants[k]: colour(k) for k in range(n_classes)}


def make_flowers102(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    from scipy.io import savemat
    from torchvision.datasets import Flowers102

    base = root / "flowers-102"
    labels, sets = [], {"trnid": [], "valid": [], "tstid": []}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        for i in range(n):
            labels.append(k + 1)  # 1-based in imagelabels.mat
            image_id = len(labels)
            _save(base / "jpg" / f"image_{image_id:05d}.jpg", colour(k))
            sets[("trnid", "valid", "tstid")[i % 3]].append(image_id)
    savemat(base / "imagelabels.mat", {"labels": np.asarray([labels])})
    savemat(base / "setid.mat", {s: np.asarray([ids]) for s, ids in sets.items()})
    return {Flowers102.classes[k]: colour(k) for k in range(n_classes)}


def make_svhn(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    from scipy.io import savemat

    assert n_classes <= 10, "SVHN has the ten digits"
    digits = np.repeat(np.arange(n_classes), _counts(n_classes, per_class, counts))
    x = np.stack([np.full((32, 32, 3), colour(int(d)), np.uint8) for d in digits], axis=-1)
    y = np.where(digits == 0, 10, digits).reshape(-1, 1)  # SVHN stores the digit 0 as 10
    root.mkdir(parents=True, exist_ok=True)
    savemat(root / "train_32x32.mat", {"X": x, "y": y})
    return {str(d): colour(d) for d in range(n_classes)}


def make_food101(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "food-101"
    meta: dict[str, dict[str, list[str]]] = {"train": {}, "test": {}}
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        cls = f"dish_{k}"
        for i in range(n):
            _save(base / "images" / cls / f"{5000 + i}.jpg", colour(k))
            meta["train" if i % 2 else "test"].setdefault(cls, []).append(f"{cls}/{5000 + i}")
        out[cls] = colour(k)
    (base / "meta").mkdir(parents=True)
    for split, content in meta.items():
        (base / "meta" / f"{split}.json").write_text(json.dumps(content))
    return out


def make_pets(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "oxford-iiit-pet"
    lines: dict[str, list[str]] = {"trainval": [], "test": []}
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        raw = f"{'Breed' if k % 2 == 0 else 'breed'}_name{k}"  # cats are capitalised
        for i in range(n):
            image_id = f"{raw}_{i + 1}"
            _save(base / "images" / f"{image_id}.jpg", colour(k))
            lines["trainval" if i % 2 else "test"].append(f"{image_id} {k + 1} {1 + k % 2} 1")
        out[" ".join(p.title() for p in raw.split("_"))] = colour(k)
    (base / "annotations").mkdir(parents=True)
    for split, rows in lines.items():
        (base / "annotations" / f"{split}.txt").write_text("\n".join(rows) + "\n")
    return out


def make_eurosat(root: Path, n_classes: int, per_class: int, counts=None) -> dict:
    base = root / "eurosat" / "2750"
    out = {}
    for k, n in enumerate(_counts(n_classes, per_class, counts)):
        cls = f"Land{k}"
        for i in range(n):
            _save(base / cls / f"{cls}_{i + 1}.jpg", colour(k))
        out[cls] = colour(k)
    return out


#: name in ``TORCHVISION_SOURCES`` -> fabricator.
MAKERS: dict[str, Callable[..., dict]] = {
    "cifar100": make_cifar100,
    "omniglot": make_omniglot,
    "gtsrb": make_gtsrb,
    "dtd": make_dtd,
    "aircraft": make_aircraft,
    "flowers102": make_flowers102,
    "svhn": make_svhn,
    "food101": make_food101,
    "pets": make_pets,
    "eurosat": make_eurosat,
}
