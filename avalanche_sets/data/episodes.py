"""Semi-supervised few-shot episodes: configuration, sampler, and (meta-)batch collation.

An episode (Ren et al. 2018; paper §3) has

* a labeled **support** set: ``n_way`` classes × ``n_shot`` images from the labeled part,
* a **query** set: ``n_way`` × ``n_query`` other images from the labeled part (their labels are
  used for the loss and for scoring only),
* an **unlabeled** set: ``n_way`` × ``n_unlabeled`` images from the unlabeled part of the same
  classes (in-distribution) mixed with ``n_ood`` images drawn equally from the OOD sources, in
  a random order so that position says nothing about which is which.

The ground truth of which unlabeled image is OOD (and where every image came from) travels in
``Episode.oracle`` for metrics and tests. **No learner may read it**: strategies receive
``batch.without_oracle()``.

Episode ``i`` of a sampler is a pure function of ``(seed, i)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
from torch import Tensor

from ..defaults import N_OOD
from .domain import SPLITS, Domain, _min_class_size

__all__ = [
    "SMALL_CLASSES",
    "EpisodeConfig",
    "Episode",
    "EpisodeOracle",
    "EpisodeBatch",
    "EpisodeDraw",
    "EpisodeSampler",
    "collate_episodes",
]


#: What an :class:`EpisodeSampler` does with classes too small for the episode shape.
SMALL_CLASSES = ("error", "drop")


def _is_int(value) -> bool:
    """An integer that is not a bool (``True`` is not an episode size)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_count(name: str, what: str, value: object, *, minimum: int) -> None:
    """Raise a clear error unless ``value`` (the :class:`EpisodeConfig` field ``name``, counting
    ``what``) is an integer of at least ``minimum`` (0 or 1).

    One check for every episode size, so that all of them say the same thing in the same words.
    """
    if not _is_int(value) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(
            f"EpisodeConfig.{name} ({what}) must be {kind}, got {value!r}; "
            f"fix: pass {name}={minimum} or more"
        )


def _what_classes_lack(domain, classes, n_lab, n_unl, cfg) -> str:
    """Per shape of too-small class: how many classes, which, and what they lack."""
    need_lab, need_unl = cfg.n_shot + cfg.n_query, cfg.n_unlabeled
    groups: dict[tuple[int, int], list[int]] = {}
    for c, lab, unl in zip(classes, n_lab, n_unl):
        groups.setdefault((int(lab), int(unl)), []).append(int(c))
    parts = []
    for (lab, unl), members in sorted(groups.items()):
        lacks = [
            f"{lab} labeled of the {need_lab} needed" if lab < need_lab else "",
            f"{unl} unlabeled of the {need_unl} needed" if unl < need_unl else "",
        ]
        names = ", ".join(repr(str(domain.class_names[c])) for c in members[:3])
        more = f" and {len(members) - 3} more" if len(members) > 3 else ""
        parts.append(
            f"{len(members)} class(es) ({names}{more}; {lab + unl} images: {lab} labeled + "
            f"{unl} unlabeled) have {' and '.join(x for x in lacks if x)}"
        )
    return "; ".join(parts)


def _shapes_that_fit(n_lab: np.ndarray, n_unl: np.ndarray, cfg, k: int) -> str:
    """Which n_shot / n_query / n_unlabeled leave at least ``k`` classes big enough (each
    class has ``n_lab`` labeled and ``n_unl`` unlabeled images)."""
    need_lab, need_unl = cfg.n_shot + cfg.n_query, cfg.n_unlabeled
    which = f"all {k} classes" if k == n_lab.size else f"n_way = {k} classes"

    def kth_largest(values: np.ndarray) -> int | None:
        return int(np.sort(values)[::-1][k - 1]) if values.size >= k else None

    hints = []
    # keep n_unlabeled: the labeled part of the n_way-th largest class with enough unlabeled
    lab = kth_largest(n_lab[n_unl >= need_unl])
    if lab is not None and lab >= 2:
        shot = min(cfg.n_shot, lab - 1)
        hints.append(
            f"n_shot + n_query <= {lab} (e.g. n_shot={shot}, n_query={lab - shot}) with "
            f"n_unlabeled = {need_unl}"
        )
    # keep n_shot and n_query: the unlabeled part of the n_way-th largest class with enough
    # labeled images
    unl = kth_largest(n_unl[n_lab >= need_lab])
    if unl is not None:
        hints.append(f"n_unlabeled <= {unl} with n_shot + n_query = {need_lab}")
    if not hints:  # both must shrink: the n_way-th largest labeled part, then unlabeled
        lab = kth_largest(n_lab)
        if lab is not None and lab >= 2:
            unl = kth_largest(n_unl[n_lab >= lab])
            shot = min(cfg.n_shot, lab - 1)
            hints.append(
                f"n_shot + n_query <= {lab} (e.g. n_shot={shot}, n_query={lab - shot}) and "
                f"n_unlabeled <= {unl}"
            )
    if not hints:
        return (
            f"no shape with n_shot >= 1 and n_query >= 1 fits {which}: fewer than {k} "
            "classes hold 2 labeled images"
        )
    return f"shapes that fit {which}: " + ", or ".join(hints)


@dataclass(frozen=True)
class EpisodeConfig:
    """Shape of a semi-supervised episode (paper: 5-way, 1/5-shot, Z = 10, R = 50).

    Args:
        n_way: classes per episode (N).
        n_shot: labeled support images per class (K).
        n_query: query images per class (Q).
        n_unlabeled: unlabeled in-distribution images per class (Z).
        n_ood: unlabeled out-of-distribution images per episode (R), mixed equally from the
            OOD sources.
    """

    n_way: int = 5
    n_shot: int = 1
    n_query: int = 10
    n_unlabeled: int = 10
    n_ood: int = N_OOD

    def __post_init__(self) -> None:
        for name, what in (
            ("n_way", "classes per episode"),
            ("n_shot", "labeled support images per class"),
            ("n_query", "query images per class"),
        ):
            _check_count(name, what, getattr(self, name), minimum=1)
        if self.n_way < 2:
            raise ValueError(
                f"EpisodeConfig.n_way must be at least 2 (an episode tells classes apart), got "
                f"{self.n_way}; fix: pass n_way=2 or more (the paper: 5)"
            )
        for name, what in (
            ("n_unlabeled", "unlabeled in-distribution images per class"),
            ("n_ood", "unlabeled out-of-distribution images per episode"),
        ):
            _check_count(name, what, getattr(self, name), minimum=0)

    @property
    def n_support_total(self) -> int:
        return self.n_way * self.n_shot

    @property
    def n_query_total(self) -> int:
        return self.n_way * self.n_query

    @property
    def n_unlabeled_total(self) -> int:
        return self.n_way * self.n_unlabeled + self.n_ood

    @property
    def n_images(self) -> int:
        return self.n_support_total + self.n_query_total + self.n_unlabeled_total


@dataclass
class EpisodeOracle:
    """Ground truth and provenance of an episode: **for metrics and tests only**.

    Attributes:
        unlabeled_is_ood: bool ``[U]``, True where the unlabeled image is OOD.
        unlabeled_source: int ``[U]``: -1 for the episode's own domain, ``s`` for OOD source s.
        unlabeled_class: int ``[U]``: the image's class id in its source (domain or OOD pack).
        unlabeled_index: int ``[U]``: the image's index in its source.
        support_index / query_index: int ``[N*K]`` / ``[N*Q]``: indices in the domain.
        class_ids: int ``[N]``: the domain class id behind episode label ``0..N-1``.
        episode_index: int ``[]``: ``i`` in "episode i of the stream".
    """

    unlabeled_is_ood: Tensor
    unlabeled_source: Tensor
    unlabeled_class: Tensor
    unlabeled_index: Tensor
    support_index: Tensor
    query_index: Tensor
    class_ids: Tensor
    episode_index: Tensor


@dataclass
class _EpisodeFields:
    """The fields of an episode; a batch holds the same ones, stacked (:func:`collate_episodes`,
    :meth:`EpisodeBatch.episode`)."""

    support_x: Tensor
    support_y: Tensor
    query_x: Tensor
    query_y: Tensor
    unlabeled_x: Tensor
    oracle: EpisodeOracle | None = None


@dataclass
class Episode(_EpisodeFields):
    """One semi-supervised episode. Images are uint8 ``[n, H, W, 3]`` (channels last)."""


def _map_tensors(obj, fn):
    """Apply ``fn`` to every tensor field of a dataclass (recursing into nested dataclasses)."""
    if obj is None:
        return None
    changes = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Tensor):
            changes[f.name] = fn(value)
        elif hasattr(value, "__dataclass_fields__"):
            changes[f.name] = _map_tensors(value, fn)
    return replace(obj, **changes)


@dataclass
class EpisodeBatch(_EpisodeFields):
    """A meta-batch of ``B`` episodes of one shape, stacked along a leading dimension.

    ``support_x`` is ``[B, N*K, H, W, 3]`` uint8, ``support_y`` ``[B, N*K]``, and so on.
    It behaves like a tensor where Avalanche needs it to (``.to(device)``, ``len``).
    """

    def to(self, *args, **kwargs) -> EpisodeBatch:
        """The inputs and labels moved by ``Tensor.to(*args, **kwargs)``. The oracle stays
        where it is (on the host, as the samplers make it): it is read there, by metrics and
        by the replay memory's bookkeeping (``episode_index``), and a copy on a GPU would make
        each such read wait for the device."""
        moved = _map_tensors(replace(self, oracle=None), lambda t: t.to(*args, **kwargs))
        return replace(moved, oracle=self.oracle)

    def without_oracle(self) -> EpisodeBatch:
        """The view a learner gets: identical inputs, no ground truth of the unlabeled set."""
        return replace(self, oracle=None)

    def __len__(self) -> int:
        return int(self.support_x.shape[0])

    @property
    def n_way(self) -> int:
        return int(self.support_y.max().item()) + 1

    def episode(self, b: int) -> Episode:
        """Episode ``b`` of the batch (views, no copy)."""
        return Episode(**{f.name: _index(getattr(self, f.name), b) for f in fields(Episode)})

    def select(self, index: Sequence[int] | Tensor) -> EpisodeBatch:
        """A sub-batch of the given episodes."""
        index = torch.as_tensor(index, dtype=torch.long)
        return _map_tensors(self, lambda t: t[index])

    def cat(self, other: EpisodeBatch) -> EpisodeBatch:
        """This batch's episodes followed by ``other``'s, as a learner sees them: the result
        carries no oracle (``other`` may come from a memory, which keeps none)."""
        names = [f.name for f in fields(self) if f.name != "oracle"]
        return EpisodeBatch(**{n: torch.cat([getattr(self, n), getattr(other, n)]) for n in names})


def _index(value, b):
    if value is None:
        return None
    if isinstance(value, Tensor):
        return value[b]
    return _map_tensors(value, lambda t: t[b])


def _stack(values):
    if values[0] is None:
        return None
    if isinstance(values[0], Tensor):
        return torch.stack(values)
    return type(values[0])(
        **{f.name: _stack([getattr(v, f.name) for v in values]) for f in fields(values[0])}
    )


def collate_episodes(episodes: Sequence[Episode]) -> tuple[EpisodeBatch, Tensor, Tensor]:
    """Collate episodes into the Avalanche mini-batch ``(x, y, t)``.

    ``x`` is the :class:`EpisodeBatch`, ``y`` the flattened query labels ``[B*N*Q]`` (so that
    Avalanche's accuracy and loss metrics, which compare ``mb_output`` with ``mb_y``, work
    unchanged) and ``t`` the task labels, one per query like ``y`` (all zero: SETS is
    task-free; Avalanche's task-aware metrics need one label per prediction).
    """
    if len(episodes) == 0:
        raise ValueError("collate_episodes needs at least one episode")
    batch = EpisodeBatch(
        **{f.name: _stack([getattr(e, f.name) for e in episodes]) for f in fields(Episode)}
    )
    y = batch.query_y.reshape(-1)
    return batch, y, torch.zeros_like(y)


@dataclass(frozen=True)
class EpisodeDraw:
    """The images an episode holds, as indices (what :meth:`EpisodeSampler.draw` returns).

    Attributes:
        index: ``i`` in "episode i of the sampler".
        class_ids: ``[N]`` domain class ids behind episode labels ``0..N-1``.
        support_index / query_index: ``[N*K]`` / ``[N*Q]`` image indices in the domain.
        unlabeled_source: ``[U]``: -1 for the domain, ``s`` for OOD source ``s``.
        unlabeled_index: ``[U]``: the image's index in its source.
    """

    index: int
    class_ids: np.ndarray
    support_index: np.ndarray
    query_index: np.ndarray
    unlabeled_source: np.ndarray
    unlabeled_index: np.ndarray


def _split_counts(total: int, n_parts: int, rng: np.random.Generator) -> np.ndarray:
    """Split ``total`` into ``n_parts`` counts as equal as possible (remainder to random parts)."""
    counts = np.full(n_parts, total // n_parts, dtype=np.int64)
    extra = total - counts.sum()
    if extra:
        counts[rng.choice(n_parts, size=extra, replace=False)] += 1
    return counts


def _usable_classes(
    domain: Domain, split: str, cfg: EpisodeConfig, small_classes: str
) -> np.ndarray:
    """The ``split`` classes an episode may draw from: at least ``n_way``, none too small."""
    classes = domain.classes(split)
    n_lab = domain.part_sizes("labeled")[classes]
    n_unl = domain.part_sizes("unlabeled")[classes]
    ok = (n_lab >= cfg.n_shot + cfg.n_query) & (n_unl >= cfg.n_unlabeled)
    if not ok.all():
        classes = _drop_small_classes(domain, split, cfg, small_classes, classes, n_lab, n_unl, ok)
    if classes.size < cfg.n_way:
        raise ValueError(
            f"domain {domain.describe_origin()} has {classes.size} usable {split} classes"
            f", fewer than n_way = {cfg.n_way}; fix: lower n_way to at most "
            f"{classes.size} or use a domain with more {split} classes"
        )
    return classes


def _drop_small_classes(domain, split, cfg, small_classes, classes, n_lab, n_unl, ok):
    """``classes[ok]`` with a warning (``small_classes="drop"``), else an error naming the fix."""
    need_lab, need_unl = cfg.n_shot + cfg.n_query, cfg.n_unlabeled
    bad = np.flatnonzero(~ok)
    least = _min_class_size(domain.labeled_fraction, need_lab, need_unl)
    detail = (
        f"{bad.size} of {classes.size} {split} classes of domain "
        f"{domain.describe_origin()} are too small for n_shot + n_query = {need_lab} "
        f"labeled and n_unlabeled = {need_unl} unlabeled images per class: "
        + _what_classes_lack(domain, classes[bad], n_lab[bad], n_unl[bad], cfg)
        + (
            f"; with labeled_fraction = {domain.labeled_fraction:g} a class needs at "
            f"least {least} images"
            if least is not None
            else ""
        )
    )
    if small_classes == "error":
        keep = int(ok.sum())
        raise ValueError(
            detail + f"; {_shapes_that_fit(n_lab, n_unl, cfg, classes.size)}; fix: "
            "lower n_shot/n_query/n_unlabeled, or leave these classes out with --set "
            "small_classes=drop (small_classes='drop' in Python; with a warning; "
            f"{keep} of {classes.size} would remain"
            + (f", fewer than n_way = {cfg.n_way})" if keep < cfg.n_way else ")")
        )
    # stacklevel: the caller of EpisodeSampler(...), past _usable_classes and __init__
    warnings.warn(detail + "; they are left out of this sampler", stacklevel=4)
    classes = classes[ok]
    dropped = int(bad.size)
    if classes.size < cfg.n_way:
        raise ValueError(
            f"domain {domain.describe_origin()} has {classes.size} usable {split} "
            f"classes after leaving out {dropped} too small ones, fewer than n_way = "
            f"{cfg.n_way}: {detail}; {_shapes_that_fit(n_lab, n_unl, cfg, cfg.n_way)}; "
            "fix: lower n_shot/n_query/n_unlabeled"
            + (f", or n_way to at most {classes.size}" if classes.size >= 2 else "")
        )
    return classes


def _ood_pools(
    domain: Domain, ood_sources: tuple[Domain, ...], split: str, cfg: EpisodeConfig
) -> list[np.ndarray]:
    """Every OOD source's ``split`` image indices, each checked to hold a share of ``n_ood``."""
    pools: list[np.ndarray] = []
    if cfg.n_ood > 0:
        if not ood_sources:
            raise ValueError(
                f"n_ood = {cfg.n_ood} OOD images per episode need at least one OOD source, "
                "but none was given; fix: pass OOD sources (sets_benchmark(ood=[...]), "
                "EpisodeSampler(ood_sources=...)) or set n_ood = 0"
            )
        per_source = -(-cfg.n_ood // len(ood_sources))
        for src in ood_sources:
            src_classes = src.classes(split)
            pool = (
                np.concatenate([src.indices(c) for c in src_classes])
                if src_classes.size
                else np.zeros(0, dtype=np.int64)
            )
            if pool.size < per_source:
                raise ValueError(
                    f"OOD source {src.describe_origin()} has {pool.size} images in its "
                    f"{split} classes, fewer than the {per_source} an episode may draw from "
                    f"it (n_ood = {cfg.n_ood} over {len(ood_sources)} sources); fix: "
                    "lower n_ood, add OOD sources, or give this source more images"
                )
            if src.image_size != domain.image_size:
                raise ValueError(
                    f"OOD source {src.describe_origin()} has {src.image_size} px images but "
                    f"domain {domain.describe_origin()} has {domain.image_size} px; fix: load "
                    "both at one size (image_size=...)"
                )
            pools.append(pool)
    return pools


class EpisodeSampler:
    """Draws semi-supervised episodes from one domain (and OOD sources), deterministically.

    Args:
        domain: the in-distribution domain.
        ood_sources: OOD domains; the ``R`` OOD images are split equally among them.
        split: class split to draw from (``"train"``, ``"val"`` or ``"test"``). OOD images come
            from the same split of the OOD sources (train for training, test for evaluation).
        config: episode shape.
        seed: base seed; episode ``i`` is a pure function of ``(seed, i)``.
        small_classes: what to do with classes too small for the episode shape (fewer than
            ``K + Q`` labeled or ``Z`` unlabeled images): ``"error"`` (default) raises
            :class:`ValueError`; ``"drop"`` leaves them out of this sampler with a warning that
            names how many were dropped.

    Raises:
        ValueError: at construction, for any setting that would fail while sampling.
    """

    def __init__(
        self,
        domain: Domain,
        ood_sources: Sequence[Domain] = (),
        *,
        split: str = "train",
        config: EpisodeConfig = EpisodeConfig(),
        seed: int = 0,
        small_classes: str = "error",
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if small_classes not in SMALL_CLASSES:
            raise ValueError(
                f"small_classes must be one of {SMALL_CLASSES}, got {small_classes!r}; "
                "'error' refuses classes too small for the episode shape, 'drop' leaves them "
                "out with a warning"
            )
        self.domain = domain
        self.ood_sources = tuple(ood_sources)
        self.split = split
        self.config = config
        self.seed = int(seed)
        self.classes = _usable_classes(domain, split, config, small_classes)
        self._ood_pools = _ood_pools(domain, self.ood_sources, split, config)

    def __repr__(self) -> str:
        return self.episodes_key()

    def episodes_key(self) -> str:
        """What decides this sampler's episodes: domain, split, configuration, OOD sources and
        seed. A sampler of another class or device with the same key draws the same pixels
        (the replay memory checks it when a restored task's images are drawn again)."""
        return (
            f"EpisodeSampler({self.domain.name!r}, split={self.split!r}, {self.config}, "
            f"ood={[s.name for s in self.ood_sources]}, seed={self.seed})"
        )

    def draw(self, index: int) -> EpisodeDraw:
        """Which images episode ``index`` holds (indices only): a pure function of
        ``(self.seed, index)``, shared by :meth:`sample` and the device-resident sampler."""
        cfg, dom = self.config, self.domain
        rng = np.random.default_rng([self.seed, int(index)])
        class_ids = rng.choice(self.classes, size=cfg.n_way, replace=False)
        k, q, z = cfg.n_shot, cfg.n_query, cfg.n_unlabeled

        support, query, unlabeled = [], [], []
        for c in class_ids:
            lab = dom.indices(c, "labeled")
            picked = lab[rng.choice(lab.size, size=k + q, replace=False)]
            support.append(picked[:k])
            query.append(picked[k:])
            if z:
                unl = dom.indices(c, "unlabeled")
                unlabeled.append(unl[rng.choice(unl.size, size=z, replace=False)])
        support_idx = np.concatenate(support)
        query_idx = np.concatenate(query)
        id_idx = np.concatenate(unlabeled) if z else np.zeros(0, dtype=np.int64)

        # OOD: equal share per source, uniformly over the images of its split's classes.
        ood_src, ood_idx = [], []
        if cfg.n_ood:
            counts = _split_counts(cfg.n_ood, len(self.ood_sources), rng)
            for s, (pool, n) in enumerate(zip(self._ood_pools, counts)):
                ood_idx.append(pool[rng.choice(pool.size, size=n, replace=False)])
                ood_src.append(np.full(n, s, dtype=np.int64))
        n_id = id_idx.size
        u_src = np.concatenate([np.full(n_id, -1, dtype=np.int64), *ood_src])
        u_idx = np.concatenate([id_idx, *ood_idx]).astype(np.int64)
        perm = rng.permutation(u_src.size)
        return EpisodeDraw(
            index=int(index),
            class_ids=class_ids.astype(np.int64),
            support_index=support_idx.astype(np.int64),
            query_index=query_idx.astype(np.int64),
            unlabeled_source=u_src[perm],
            unlabeled_index=u_idx[perm],
        )

    def _labels(self) -> tuple[np.ndarray, np.ndarray]:
        """Episode labels of the support and query rows: ``0..N-1``, each K (Q) times."""
        labels = np.arange(self.config.n_way, dtype=np.int64)
        return np.repeat(labels, self.config.n_shot), np.repeat(labels, self.config.n_query)

    def _unlabeled(self, draw: EpisodeDraw, field: str) -> np.ndarray:
        """``field`` (``"images"`` or ``"labels"``) of every unlabeled image of ``draw``, each
        read from its source: the domain (source -1) or OOD source ``s``."""
        u_src, u_idx = draw.unlabeled_source, draw.unlabeled_index
        column = getattr(self.domain, field)
        out = np.empty((u_idx.size, *column.shape[1:]), dtype=column.dtype)
        for s, src in enumerate((self.domain, *self.ood_sources), start=-1):
            m = u_src == s
            if m.any():
                out[m] = getattr(src, field)[u_idx[m]]
        return out

    def _oracle(self, draw: EpisodeDraw) -> EpisodeOracle:
        return EpisodeOracle(
            unlabeled_is_ood=torch.from_numpy(draw.unlabeled_source >= 0),
            unlabeled_source=torch.from_numpy(draw.unlabeled_source),
            unlabeled_class=torch.from_numpy(self._unlabeled(draw, "labels")),
            unlabeled_index=torch.from_numpy(draw.unlabeled_index),
            support_index=torch.from_numpy(draw.support_index),
            query_index=torch.from_numpy(draw.query_index),
            class_ids=torch.from_numpy(draw.class_ids),
            episode_index=torch.tensor(draw.index),
        )

    def sample(self, index: int) -> Episode:
        """Episode ``index``: a pure function of ``(self.seed, index)``."""
        draw = self.draw(index)
        dom = self.domain
        support_y, query_y = self._labels()
        return Episode(
            support_x=torch.from_numpy(dom.images[draw.support_index]),
            support_y=torch.from_numpy(support_y),
            query_x=torch.from_numpy(dom.images[draw.query_index]),
            query_y=torch.from_numpy(query_y),
            unlabeled_x=torch.from_numpy(self._unlabeled(draw, "images")),
            oracle=self._oracle(draw),
        )
