"""Class splits of one's own data: fractions or class counts, checked against the episode width.

A domain's classes are split into train, val and test, and an ``n_way``-way episode draws its
``n_way`` classes from one split. A stream domain therefore needs at least ``n_way`` classes in
*each* of the three splits (:func:`min_classes`: ``3 * n_way`` in all, 15 for 5-way episodes);
an OOD source needs one class in each. A split is given either as fractions of the classes
(``(0.6, 0.2, 0.2)``, CLI ``--split 0.6,0.2,0.2``) or as class counts (``(12, 4, 4)``, CLI
``--split 12,4,4``); :func:`class_split` draws it and refuses, before any image is decoded, a
split that leaves a part with fewer than ``n_way`` classes, naming the counts and the fix.

Every class must also be big enough for an episode: :func:`min_class_images` is the fewest
images a class needs for the episodes of the runs the data is prepared for, a :class:`RunTarget`
(16 for the ``cpu`` preset's, ``avalanche_sets.presets.run_target("cpu")``). The presets sit
above the data they configure: a data function is handed the target, it reads no preset.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .domain import SPLITS, _min_class_size, class_parts
from .images import split_classes

__all__ = [
    "RunTarget",
    "parse_split",
    "class_split",
    "min_classes",
    "min_class_images",
    "split_counts",
    "usable_counts",
    "fitting_episode",
    "nth_largest_sizes",
    "warn_small_classes",
]


@dataclass(frozen=True, kw_only=True)
class RunTarget:
    """The runs a pack or stream folder is prepared for: a preset's name and the settings of it
    that decide what the data must hold.

    Classes too small for its episodes are named in a warning (:func:`warn_small_classes`), and
    a stream folder's printed run command starts from its preset. Made from a preset by
    :func:`avalanche_sets.presets.run_target` (or :meth:`of`, from any preset dictionary).
    """

    preset: str
    n_way: int
    n_shot: int
    n_query: int
    n_unlabeled: int
    n_ood: int
    image_size: int

    @classmethod
    def of(cls, name: str, settings: Mapping[str, Any]) -> RunTarget:
        """The target of the runs of preset ``name`` whose settings are ``settings``."""
        keys = ("n_way", "n_shot", "n_query", "n_unlabeled", "n_ood", "image_size")
        return cls(preset=name, **{k: settings[k] for k in keys})


_SPLIT_HELP = (
    "fractions of the classes for train,val,test (e.g. 0.6,0.2,0.2) or class counts (e.g. 12,4,4)"
)


def _is_counts(split: Sequence[object]) -> bool:
    return all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in split
    )


def parse_split(text: str) -> tuple[float, float, float] | tuple[int, int, int]:
    """``"0.6,0.2,0.2"`` -> fractions ``(0.6, 0.2, 0.2)``; ``"12,4,4"`` -> counts ``(12, 4, 4)``.

    Three whole numbers are class counts; anything else must be three fractions.

    Raises:
        ValueError: not three comma-separated numbers.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"split {text!r} must be three comma-separated numbers, {_SPLIT_HELP}")
    try:
        return tuple(int(p) for p in parts)  # type: ignore[return-value]
    except ValueError:
        pass
    try:
        return tuple(float(p) for p in parts)  # type: ignore[return-value]
    except ValueError:
        raise ValueError(
            f"split {text!r} holds a value that is not a number; {_SPLIT_HELP}"
        ) from None


def min_classes(n_way: int) -> int:
    """Fewest classes a domain needs for ``n_way``-way episodes in train, val and test."""
    return 3 * int(n_way)


def split_counts(cls_split: np.ndarray) -> dict[str, int]:
    """``{"train": n, "val": n, "test": n}`` of a ``[C]`` class split."""
    return {s: int((np.asarray(cls_split) == s).sum()) for s in SPLITS}


def _spec(split: Sequence[float]) -> str:
    return ",".join(f"{v:g}" for v in split)


def _by_counts(n_classes: int, counts: Sequence[int], seed: int, where: str) -> np.ndarray:
    n_train, n_val, n_test = (int(v) for v in counts)
    if min(n_train, n_val, n_test) < 0 or n_train + n_val + n_test != n_classes:
        example = (
            f"--split {n_classes - 2 * max(1, n_classes // 5)},"
            f"{max(1, n_classes // 5)},{max(1, n_classes // 5)}"
            if n_classes >= 3
            else "more classes"
        )
        raise ValueError(
            f"{where}: the class counts {_spec(counts)} (train,val,test) add up to "
            f"{n_train + n_val + n_test}, but there are {n_classes} classes; fix: give "
            f"non-negative counts that add up to {n_classes} (e.g. {example}), or fractions "
            "such as 0.6,0.2,0.2"
        )
    perm = np.random.default_rng(seed).permutation(n_classes)
    out = np.full(n_classes, "train", dtype="<U5")
    out[perm[:n_test]] = "test"
    out[perm[n_test : n_test + n_val]] = "val"
    return out


def class_split(
    n_classes: int,
    split: Sequence[float] | Sequence[int] = (0.6, 0.2, 0.2),
    seed: int = 0,
    *,
    n_way: int | None = 5,
    where: str = "classes",
) -> np.ndarray:
    """The train/val/test split of ``n_classes`` classes, refused if an episode cannot use it.

    Args:
        n_classes: number of classes ``C``.
        split: three fractions of the classes (train, val, test; they must add up to 1), drawn
            by :func:`~avalanche_sets.data.images.split_classes`; or three whole numbers, the
            class counts (they must add up to ``C``): the first ``n_test`` classes of
            ``np.random.default_rng(seed).permutation(C)`` go to test, the next ``n_val`` to
            val, the rest to train (the rule of ``split_classes``).
        seed: seed of the class permutation.
        n_way: every split must hold at least this many classes (the episode width of a stream
            domain; 1 for a pack used only as an OOD source); ``None`` checks nothing.
        where: what the classes are, for error messages (e.g. ``"image folder flowers/"``).

    Returns:
        ``[C]`` array of ``"train"`` / ``"val"`` / ``"test"``.

    Raises:
        ValueError: a malformed split, counts that do not add up to ``C``, or a split leaving
            fewer than ``n_way`` classes in a part; the message names the counts, the minimum
            number of classes (``3 * n_way``) and a split that works.
    """
    if isinstance(split, str) or len(split) != 3:
        raise ValueError(f"split must be three numbers, {_SPLIT_HELP}; got {split!r}")
    if n_way is not None and (
        isinstance(n_way, bool) or not isinstance(n_way, (int, np.integer)) or n_way < 1
    ):
        raise ValueError(f"n_way must be a positive integer (or None), got {n_way!r}")
    c = int(n_classes)
    if _is_counts(split):
        out = _by_counts(c, split, seed, where)
    else:
        ratios = np.asarray(split, dtype=np.float64)
        if (ratios < 0).any() or abs(ratios.sum() - 1.0) > 1e-6:
            raise ValueError(
                f"{where}: the split fractions {_spec(split)} must be non-negative and add up "
                f"to 1 (they add up to {ratios.sum():g}); fix: e.g. 0.6,0.2,0.2, or class "
                "counts such as 12,4,4"
            )
        out = split_classes(c, split, seed)
    if n_way is None:
        return out
    counts = split_counts(out)
    short = [s for s, k in counts.items() if k < n_way]
    if short:
        raise ValueError(_too_few(where, c, counts, split, int(n_way), short))
    return out


def _too_few(
    where: str, c: int, counts: dict[str, int], split: Sequence[float], n: int, short: list[str]
) -> str:
    need = min_classes(n)
    sizes = "/".join(str(k) for k in counts.values())
    role = (
        "an OOD source needs at least one class in each of train, val and test (3 in all)"
        if n == 1
        else f"{n}-way episodes draw {n} classes from each of train, val and test, so a stream "
        f"domain needs at least {need} classes in all ({n} per split)"
    )
    fixes = []
    if c >= need:
        fixes.append(
            f"a split with {n} or more classes in each part, e.g. --split {c - 2 * n},{n},{n} "
            f"(split=({c - 2 * n}, {n}, {n}))"
        )
    else:
        fixes.append(f"add classes (at least {need} for {n}-way)")
        if c // 3 >= 2 and n > 2:
            k = c // 3
            fixes.append(f"lower --n-way (n_way=) to {k}, with --split {c - 2 * k},{k},{k}")
        if c >= 3 and n > 1:
            fixes.append(
                "use the classes as an OOD source only (--n-way 1, or --ood of `prepare stream`)"
            )
    return (
        f"{where}: {c} classes split {sizes} (train/val/test, split {_spec(split)}) leave fewer "
        f"than {n} class(es) in {short}; {role}; fix: " + ", or ".join(fixes)
    )


def min_class_images(target: RunTarget, labeled_fraction: float = 0.4) -> int:
    """Fewest images a class needs for the episodes of ``target``'s runs.

    A class gives an episode ``n_shot + n_query`` labeled and ``n_unlabeled`` unlabeled images,
    and ``labeled_fraction`` of its images are labeled (:class:`~.domain.Domain`), so the
    ``cpu`` preset (1-shot, 5 queries, 10 unlabeled) needs 16 images per class.
    """
    t = target
    least = _min_class_size(labeled_fraction, t.n_shot + t.n_query, t.n_unlabeled)
    if least is None:  # pragma: no cover - the presets' shapes all fit
        raise ValueError(f"no class size fits the {t.preset} preset's episode shape")
    return least


def fitting_episode(
    size: int, target: RunTarget, labeled_fraction: float = 0.4
) -> dict[str, int] | None:
    """The largest episode of ``target``'s shape that a class of ``size`` images gives: its
    ``n_shot`` (1 when the labeled part holds too few for it and a query), as many queries as
    the labeled part holds besides (at most ``n_query``), as many unlabeled images as the
    unlabeled part holds (at most ``n_unlabeled``); ``None`` when not even 1 shot and 1 query
    fit."""
    lab, unl = class_parts(size, labeled_fraction)
    shot = target.n_shot if lab > target.n_shot else 1
    if lab <= shot:
        return None
    return {
        "n_shot": shot,
        "n_query": min(target.n_query, lab - shot),
        "n_unlabeled": min(target.n_unlabeled, unl),
    }


def nth_largest_sizes(sizes: Sequence[int], cls_split: np.ndarray, n: int) -> dict[str, int]:
    """``{split: images}`` of the ``n``-th largest class of each split (0 for a split of fewer
    classes): the class size that decides whether ``n``-way episodes can draw from it."""
    out = {}
    for s in SPLITS:
        part = sorted((int(k) for k, p in zip(sizes, cls_split) if p == s), reverse=True)
        out[s] = part[n - 1] if len(part) >= n else 0
    return out


def usable_counts(sizes: Sequence[int], cls_split: np.ndarray, target: RunTarget) -> dict[str, int]:
    """``{split: classes}`` of the classes (images per class ``sizes``, split ``cls_split``)
    with the images ``target``'s episodes need (:func:`min_class_images`): the classes its
    runs keep (a split with fewer than ``n_way`` of them makes the domain unusable)."""
    need = min_class_images(target)
    return {
        s: sum(1 for n, part in zip(sizes, cls_split) if part == s and n >= need) for s in SPLITS
    }


def warn_small_classes(
    sizes: dict[str, int],
    cls_split: np.ndarray,
    n_way: int | None,
    where: str,
    *,
    target: RunTarget,
) -> list[str]:
    """Warn about classes with fewer images than ``target``'s episodes need; return their names.

    Runs leave such classes out (``small_classes="drop"``, the ``cpu`` preset) or refuse them
    (``"error"``); the warning names them, the need, and the splits that would be left with
    fewer than ``n_way`` classes.
    """
    need = min_class_images(target)
    small = [c for c, n in sizes.items() if n < need]
    if not small:
        return small
    preset = target.preset
    detail = ", ".join(f"{c!r} ({sizes[c]})" for c in small[:5])
    more = f" and {len(small) - 5} more" if len(small) > 5 else ""
    message = (
        f"{where}: {len(small)} of {len(sizes)} classes have fewer than {need} images "
        f"({detail}{more}), the fewest the {preset} preset's episodes need (n_shot + n_query = "
        f"{target.n_shot + target.n_query} labeled and n_unlabeled = {target.n_unlabeled} "
        "unlabeled "
        "images per class, 40% of a class labeled); runs leave them out (--set "
        "small_classes=drop, as the cpu preset does) or refuse them (--set small_classes=error)"
    )
    if n_way is not None and n_way > 1:
        left = usable_counts(list(sizes.values()), cls_split, target)
        short = [s for s, k in left.items() if k < n_way]
        if short:
            message += (
                f"; without them {'/'.join(str(k) for k in left.values())} classes remain "
                f"(train/val/test), fewer than n_way = {n_way} in {short}, so {preset} runs "
                "cannot use this pack"
            )
    warnings.warn(
        message + "; fix: add images to these classes, or run with fewer per class (--set "
        "n_query=... n_unlabeled=...)",
        stacklevel=3,
    )
    return small
