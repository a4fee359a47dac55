"""One synthetic domain from its arguments: the domain names, the generation (class parameters,
images rendered in chunks, the class split, each from its own seeded generator) and the
``.npz`` cache keyed by every argument and :data:`GENERATOR_VERSION`.
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ...defaults import DEFAULT_OOD
from ...files import atomic_write
from ..domain import SPLITS, Domain
from ._domains import _ID_FAMILIES
from ._draw import _canvas, _Family, _postprocess
from ._ood import _OOD_FAMILIES

#: Bump whenever the images for given arguments change; it is part of every cache key.
GENERATOR_VERSION = 1

SYNTHETIC_ID_DOMAINS: tuple[str, ...] = (
    "shapes",
    "strokes",
    "gratings",
    "blobs",
    "tilings",
    "textures",
)
SYNTHETIC_OOD_SOURCES: tuple[str, ...] = DEFAULT_OOD["synthetic"]
SYNTHETIC_DOMAINS: tuple[str, ...] = SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES

_DEFAULT_ID_CLASSES = 100
_DEFAULT_OOD_CLASSES = 60
_CHUNK = 256  # images rendered at once (bounds memory at 84 px); part of the RNG layout
_SPLIT_FRACTIONS = (0.6, 0.2, 0.2)

_FAMILIES: dict[str, _Family] = {**_ID_FAMILIES, **_OOD_FAMILIES}


# ----------------------------------------------------------------------------- generation
def _name_seed(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def _check_name(name: str) -> None:
    if name not in _FAMILIES:
        raise ValueError(
            f"unknown synthetic domain {name!r}; valid names: ID domains "
            f"{', '.join(SYNTHETIC_ID_DOMAINS)}; OOD sources {', '.join(SYNTHETIC_OOD_SOURCES)}"
        )


def _generate(name: str, seed: int, image_size: int, n_classes: int, images_per_class: int):
    fam = _FAMILIES[name]
    key = [int(seed), _name_seed(name), GENERATOR_VERSION]
    params = fam.class_params(np.random.default_rng([*key, 1]), n_classes, image_size)
    labels = np.repeat(np.arange(n_classes, dtype=np.int64), images_per_class)
    images = np.empty((labels.size, image_size, image_size, 3), dtype=np.uint8)
    for start in range(0, labels.size, _CHUNK):
        lab = labels[start : start + _CHUNK]
        rng = np.random.default_rng([*key, 2, start])
        cv = _canvas(rng, lab.size, image_size, fam.jitter)
        img = fam.render(cv, {k: v[lab] for k, v in params.items()}, rng)
        images[start : start + lab.size] = _postprocess(img, cv, rng, fam.jitter)

    split_rng = np.random.default_rng([*key, 3])
    n_train = int(round(_SPLIT_FRACTIONS[0] * n_classes))
    n_val = int(round(_SPLIT_FRACTIONS[1] * n_classes))
    split = np.empty(n_classes, dtype="<U5")
    perm = split_rng.permutation(n_classes)
    split[perm[:n_train]] = SPLITS[0]
    split[perm[n_train : n_train + n_val]] = SPLITS[1]
    split[perm[n_train + n_val :]] = SPLITS[2]
    class_names = np.array([f"{name}_{c:03d}" for c in range(n_classes)])
    return images, labels, class_names, split


def default_cache_dir() -> Path:
    """``$AVALANCHE_SETS_CACHE`` if set, else ``~/.cache/avalanche_sets/synthetic``."""
    env = os.environ.get("AVALANCHE_SETS_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "avalanche_sets" / "synthetic"


def _cache_path(cache_dir: Path, name, seed, image_size, n_classes, images_per_class) -> Path:
    return cache_dir / (
        f"{name}-seed{seed}-px{image_size}-c{n_classes}-n{images_per_class}"
        f"-v{GENERATOR_VERSION}.npz"
    )


_ARRAYS = ("images", "labels", "class_names", "class_split")


def _load_cache(path: Path):
    try:
        with np.load(path, allow_pickle=False) as data:
            return tuple(data[k] for k in _ARRAYS)
    except FileNotFoundError:
        return None
    except Exception as err:  # a truncated or foreign file: regenerate and overwrite it
        warnings.warn(f"ignoring unreadable synthetic cache {path}: {err}", stacklevel=3)
        return None


def _save_cache(path: Path, arrays) -> None:
    try:
        atomic_write(path, lambda f: np.savez(f, **dict(zip(_ARRAYS, arrays))))
    except OSError as err:
        warnings.warn(f"could not write synthetic cache {path}: {err}", stacklevel=3)


def make_synthetic_domain(
    name: str,
    *,
    seed: int = 0,
    image_size: int = 32,
    n_classes: int | None = None,
    images_per_class: int = 40,
    cache_dir: str | Path | None = None,
    cache: bool = True,
) -> Domain:
    """Generate (or load from the cache) one synthetic domain.

    Args:
        name: one of :data:`SYNTHETIC_ID_DOMAINS` or :data:`SYNTHETIC_OOD_SOURCES`.
        seed: everything (class parameters, images, class split, labeled/unlabeled split) is a
            pure function of ``(name, seed, image_size, n_classes, images_per_class)``.
        image_size: side length in pixels (at least 8; 32 by default, 84 works too).
        n_classes: number of classes; default 100 for ID domains and 60 for OOD sources.
        images_per_class: images per class (default 40).
        cache_dir: where to cache the generated arrays; default :func:`default_cache_dir`.
        cache: set to False to neither read nor write the cache.

    Returns:
        A :class:`Domain` with a seeded 60/20/20 train/val/test split of its classes.

    Raises:
        ValueError: for an unknown name or invalid sizes.
    """
    _check_name(name)
    if n_classes is None:
        n_classes = _DEFAULT_ID_CLASSES if name in SYNTHETIC_ID_DOMAINS else _DEFAULT_OOD_CLASSES
    for arg, value, low in (
        ("image_size", image_size, 8),
        ("n_classes", n_classes, 3),
        ("images_per_class", images_per_class, 2),
    ):
        if int(value) != value or value < low:
            raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
    seed, image_size = int(seed), int(image_size)
    n_classes, images_per_class = int(n_classes), int(images_per_class)

    arrays = None
    path = None
    if cache:
        root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        path = _cache_path(root, name, seed, image_size, n_classes, images_per_class)
        arrays = _load_cache(path)
    if arrays is None:
        arrays = _generate(name, seed, image_size, n_classes, images_per_class)
        if path is not None:
            _save_cache(path, arrays)
    images, labels, class_names, class_split = arrays
    kind = "in-distribution domain" if name in SYNTHETIC_ID_DOMAINS else "OOD source"
    return Domain(
        name=name,
        images=images,
        labels=labels,
        class_names=class_names.tolist(),
        class_split=class_split,
        split_seed=seed,
        source=(
            f"synthetic {kind}: {_FAMILIES[name].description} "
            f"(avalanche_sets generator v{GENERATOR_VERSION}, seed {seed}; no licence needed)"
        ),
    )


def load_synthetic_domains(
    names: Iterable[str] | None = None,
    *,
    seed: int = 0,
    image_size: int = 32,
    n_classes: int | None = None,
    images_per_class: int = 40,
    cache_dir: str | Path | None = None,
    cache: bool = True,
) -> dict[str, Domain]:
    """Several synthetic domains by name (default: the 6 ID domains, then the 3 OOD sources).

    Keyword arguments are passed to :func:`make_synthetic_domain` for every domain.
    """
    names = SYNTHETIC_DOMAINS if names is None else tuple(names)
    for name in names:
        _check_name(name)
    return {
        name: make_synthetic_domain(
            name,
            seed=seed,
            image_size=image_size,
            n_classes=n_classes,
            images_per_class=images_per_class,
            cache_dir=cache_dir,
            cache=cache,
        )
        for name in names
    }
