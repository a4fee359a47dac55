"""SETS benchmarks as Avalanche scenarios: one experience per domain, each a dataset of episodes.

``sets_benchmark`` builds

* ``train_stream``: one experience per in-distribution domain, in the chosen order; each is an
  :class:`~avalanche.benchmarks.utils.AvalancheDataset` of ``tasks_per_domain`` training
  episodes (train classes, OOD from the OOD sources' train classes);
* ``valid_stream``: ``n_val_episodes`` episodes per domain from its validation classes (OOD from
  validation classes), for hyper-parameter search;
* ``test_stream``: a fixed set of ``n_test_episodes`` episodes per domain from its test classes
  (OOD from test classes).

Episodes are generated on access from ``(seed, domain, split, index)``: nothing is stored, yet
episode ``i`` is always the same. Every setting that could fail while sampling is checked here,
when the benchmark is built.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path

import torch
from avalanche.benchmarks.scenarios.dataset_scenario import DatasetExperience
from avalanche.benchmarks.scenarios.generic_scenario import CLScenario, EagerCLStream
from avalanche.benchmarks.utils import AvalancheDataset

from ..defaults import N_OOD, SOURCES
from ..suggest import did_you_mean
from .device_episodes import DeviceEpisodeSampler, DeviceImagePools
from .domain import Domain
from .episodes import SMALL_CLASSES, EpisodeConfig, EpisodeSampler, collate_episodes
from .packs import list_packs, load_pack
from .paper import PAPER_DATASETS, PAPER_OOD, PAPER_ORDERS, load_paper_domain
from .stream_folder import MANIFEST, read_stream_manifest
from .synthetic import SYNTHETIC_ID_DOMAINS, SYNTHETIC_OOD_SOURCES, make_synthetic_domain

__all__ = [
    "EpisodeDataset",
    "SETSExperience",
    "SETSBenchmark",
    "sets_benchmark",
    "load_source",
    "ORDER_PERMUTATIONS",
    "SOURCES",
]


# The paper's domain orders 2 and 3 as permutations of order 1 (appendix C):
#   order 1: Plantae, CUB, MiniImagenet, CIFARFS, Aircraft, Butterfly
#   order 2: Butterfly, CUB, CIFARFS, Plantae, MiniImagenet, Aircraft
#   order 3: CUB, CIFARFS, Plantae, MiniImagenet, Butterfly, Aircraft
# Applied to any source with six domains, whose own default order plays the role of order 1.
ORDER_PERMUTATIONS = {1: (0, 1, 2, 3, 4, 5), 2: (5, 1, 3, 0, 2, 4), 3: (1, 3, 0, 2, 5, 4)}

# Default order 1 of the real packs in shared/data/sets-mini (natural photos first, glyphs last).
SETS_MINI_ORDER = (
    "tinyimagenet_animals",
    "tinyimagenet_objects",
    "gtsrb",
    "icons",
    "glyphs_western",
    "glyphs_eastern",
)
SETS_MINI_OOD = ("ood_omniglot", "ood_fish", "ood_textures")

_SPLIT_CODE = {"train": 1, "val": 2, "test": 3}


class EpisodeDataset(torch.utils.data.Dataset):
    """A map-style dataset of ``n_episodes`` episodes drawn on access from a sampler."""

    def __init__(self, sampler: EpisodeSampler, n_episodes: int) -> None:
        if n_episodes < 1:
            raise ValueError(f"n_episodes must be positive, got {n_episodes}")
        self.sampler = sampler
        self.n_episodes = int(n_episodes)
        # Avalanche's generic machinery (metrics, replay buffers) expects these attributes.
        self.targets = [0] * self.n_episodes

    def __len__(self) -> int:
        return self.n_episodes

    def __getitem__(self, index: int):
        if not 0 <= index < self.n_episodes:
            raise IndexError(f"episode {index} out of range 0..{self.n_episodes - 1}")
        return self.sampler.sample(index)


class SETSExperience(DatasetExperience):
    """An experience of a SETS stream: the episodes of one domain.

    Attributes:
        domain_name: name of the domain (e.g. ``"plantae"``).
        split: ``"train"``, ``"val"`` or ``"test"``.
        sampler: the :class:`EpisodeSampler` behind the dataset.
    """

    def __init__(self, *, dataset: AvalancheDataset, current_experience: int, sampler) -> None:
        super().__init__(dataset=dataset, current_experience=current_experience)
        self.sampler = sampler
        self.domain_name = sampler.domain.name
        self.split = sampler.split
        self.task_label = 0

    def __repr__(self) -> str:
        return (
            f"SETSExperience({self.current_experience}: {self.domain_name!r}, {self.split}, "
            f"{len(self.dataset)} episodes)"
        )


class SETSBenchmark(CLScenario):
    """An Avalanche scenario with ``train_stream``, ``valid_stream`` and ``test_stream``.

    Also exposes ``domains`` (in stream order), ``ood_sources``, ``config`` (the
    :class:`EpisodeConfig`) and ``seed``.
    """

    def __init__(self, streams, *, domains, ood_sources, config, seed, settings) -> None:
        super().__init__(streams)
        self.domains: list[Domain] = list(domains)
        self.ood_sources: list[Domain] = list(ood_sources)
        self.config: EpisodeConfig = config
        self.seed = seed
        self.settings = dict(settings)

    @property
    def domain_names(self) -> list[str]:
        return [d.name for d in self.domains]

    def describe(self) -> str:
        """A human-readable description of the stream: domains, class counts, episode shape."""
        cfg = self.config
        lines = [
            f"SETS benchmark ({self.settings.get('source')}, seed {self.seed}): "
            f"{cfg.n_way}-way {cfg.n_shot}-shot, Q={cfg.n_query}/class, "
            f"Z={cfg.n_unlabeled}/class unlabeled ID, R={cfg.n_ood} OOD per episode",
            f"{'#':>2} {'domain':<24} {'train/val/test classes':>22} {'images':>8} "
            f"{'img/class min/med/max':>22} {'train episodes':>15}",
        ]
        for exp, dom in zip(self.train_stream, self.domains):
            s = dom.summary()
            c = s["classes"]
            lines.append(
                f"{exp.current_experience:>2} {dom.name:<24} "
                f"{c['train']:>8}/{c['val']}/{c['test']:<8} {s['images']:>8} "
                f"{'/'.join(map(str, s['images_per_class'])):>22} {len(exp.dataset):>15}"
            )
        lines.append(
            "OOD sources: "
            + ", ".join(
                f"{d.name} ({d.classes('train').size}/{d.classes('val').size}/"
                f"{d.classes('test').size} classes)"
                for d in self.ood_sources
            )
            if self.ood_sources
            else "OOD sources: none"
        )
        lines.append(
            f"Episode: {cfg.n_support_total} support + {cfg.n_query_total} query + "
            f"{cfg.n_unlabeled_total} unlabeled ({cfg.n_way * cfg.n_unlabeled} ID + {cfg.n_ood} "
            f"OOD) = {cfg.n_images} images; test stream: "
            f"{len(self.test_stream[0].dataset)} episodes/domain"
        )
        return "\n".join(lines)


def _stream_seed(seed: int, domain: str, split: str) -> int:
    """Seed of one domain's episodes in one split: independent of the domain order."""
    return (int(seed) * 1_000_003 + zlib.crc32(domain.encode()) * 7 + _SPLIT_CODE[split]) % (2**63)


def load_source(
    source: str,
    *,
    root: str | Path | None = None,
    domains: Sequence[str] | None = None,
    ood: Sequence[str] | None = None,
    order: int = 1,
    image_size: int | None = None,
    seed: int = 0,
) -> tuple[list[Domain], list[Domain]]:
    """Load the in-distribution domains (in stream order) and OOD sources of a source.

    Args:
        source: ``"synthetic"`` (generated offline), ``"packs"`` (a folder of ``.npz`` domain
            packs) or ``"paper"`` (the paper's nine datasets from a local root).
        root: folder of the packs or of the paper's datasets (refused with ``"synthetic"``).
        domains: custom domain order (names); defaults to the source's order ``order``.
        ood: OOD source names; defaults to the source's three OOD sources.
        order: the paper's order 1, 2 or 3; leave it at 1 when ``domains`` is given (a custom
            order and a paper order together are refused).
        image_size: image side in pixels (defaults: 32 for synthetic/packs, 84 for paper).
        seed: seed of the synthetic generator.
    """
    if source not in SOURCES:
        raise ValueError(
            f"unknown source {source!r}{did_you_mean(str(source), SOURCES)}; choose one of {SOURCES}"
        )
    _check_order(order, domains)
    if isinstance(domains, str) or isinstance(ood, str):
        raise TypeError(
            "domains and ood are lists of names; fix: pass domains=['a', 'b'], not domains='a'"
        )
    if source == "synthetic":
        id_names, ood_names, load = _synthetic_names(root, domains, ood, order, image_size, seed)
    elif source == "packs":
        id_names, ood_names, load = _pack_names(root, domains, ood, order, image_size)
    else:
        id_names, ood_names, load = _paper_names(root, domains, ood, order, image_size)
    _check_distinct(id_names, ood_names)
    cache: dict[str, Domain] = {}
    id_domains = [cache.setdefault(n, load(n)) for n in id_names]
    ood_domains = [cache.setdefault(n, load(n)) for n in ood_names]
    return id_domains, ood_domains


def _ordered(default: Sequence[str], domains: Sequence[str] | None, order: int) -> list[str]:
    """The stream's domain names: ``domains`` if given, else paper order ``order`` of six."""
    if domains is not None:
        return list(domains)
    if len(default) != 6:
        raise ValueError(f"paper orders need six domains, this source has {len(default)}")
    return [default[i] for i in ORDER_PERMUTATIONS[order]]


def _synthetic_names(root, domains, ood, order, image_size, seed):
    """``(id_names, ood_names, load)`` of the synthetic source, names checked."""
    if root is not None:
        raise ValueError(
            f"root={str(root)!r} was given, but source 'synthetic' reads no folder (it "
            "generates its images); fix: source='packs' for a folder of .npz domain packs, "
            "source='paper' for the paper's datasets, or no root"
        )
    id_names = _ordered(SYNTHETIC_ID_DOMAINS, domains, order)
    ood_names = list(SYNTHETIC_OOD_SOURCES if ood is None else ood)
    valid = set(SYNTHETIC_ID_DOMAINS) | set(SYNTHETIC_OOD_SOURCES)
    _check_names(id_names + ood_names, valid, "synthetic")
    size = image_size or 32
    return id_names, ood_names, lambda n: make_synthetic_domain(n, seed=seed, image_size=size)


def _pack_names(root, domains, ood, order, image_size):
    """``(id_names, ood_names, load)`` of a folder of packs, names checked."""
    if root is None:
        raise ValueError("source='packs' needs root=<folder of .npz domain packs>")
    stream = read_stream_manifest(root)  # prepare stream: names and roles, in order
    if stream is not None:
        files = {**stream[0], **stream[1]}
        available, default_id, default_ood = list(files), list(stream[0]), list(stream[1])
        _warn_unlisted(root, set(files.values()))
    else:  # the file names decide: ood_*.npz are the OOD sources
        available = list_packs(root)
        files = {n: f"{n}.npz" for n in available}
        default_ood = [n for n in available if n.startswith("ood_")]
        default_id = [n for n in SETS_MINI_ORDER if n in available]
        if len(default_id) != 6:
            default_id = [n for n in available if not n.startswith("ood_")]
    if domains is None and order != 1 and len(default_id) != 6:
        raise ValueError(
            f"order={order} permutes six domains, but the packs in {root} hold "
            f"{len(default_id)} in-distribution packs {default_id}; fix: pass "
            "domains=[...] for a custom order"
        )
    id_names = (
        _ordered(default_id, domains, order)
        if (domains is not None or len(default_id) == 6)
        else (list(default_id))
    )
    ood_names = list(ood) if ood is not None else default_ood
    _check_names(id_names + ood_names, set(available), f"packs in {root}")
    return (
        id_names,
        ood_names,
        lambda n: load_pack(Path(root) / files[n], image_size=image_size, name=n),
    )


def _paper_names(root, domains, ood, order, image_size):
    """``(id_names, ood_names, load)`` of the paper's datasets, names checked."""
    if root is None:
        raise ValueError("source='paper' needs root=<folder holding the paper's datasets>")
    id_names = list(domains) if domains is not None else list(PAPER_ORDERS[order])
    ood_names = list(PAPER_OOD if ood is None else ood)
    _check_names(id_names + ood_names, set(PAPER_DATASETS), "paper datasets")
    size = image_size or 84
    return id_names, ood_names, lambda n: load_paper_domain(n, root, image_size=size)


def _check_distinct(id_names: list[str], ood_names: list[str]) -> None:
    """Refuse a name twice in the order or the OOD sources, or in both."""
    for what, names, fix in (
        ("the domain order", id_names, "a custom order is a permutation of distinct names"),
        ("the OOD sources", ood_names, "OOD sources are mixed equally, name each once"),
    ):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{twice} appear(s) twice in {what} {names}; fix: {fix}")
    overlap = set(id_names) & set(ood_names)
    if overlap:
        raise ValueError(
            f"{sorted(overlap)} cannot be both a stream domain and an OOD source; fix: remove "
            "it from domains= or from ood="
        )


def _warn_unlisted(root: str | Path, listed: set[str]) -> None:
    """Packs in a stream folder that its manifest does not name are not read: say so."""
    extra = sorted(f"{n}.npz" for n in list_packs(root) if f"{n}.npz" not in listed)
    if extra:
        warnings.warn(
            f"{Path(root) / MANIFEST} names the stream, and not {extra}: they are not loaded; "
            "fix: prepare the stream again with them (avalanche-sets prepare stream) or move "
            "them out of the folder",
            stacklevel=4,  # load_source's caller
        )


def _check_order(order: object, domains: Sequence[str] | None) -> None:
    """``order`` is one of the paper's orders; it and a custom ``domains`` order exclude each
    other (the default order 1 is allowed with ``domains``, which then wins)."""
    valid = isinstance(order, int) and not isinstance(order, bool) and order in ORDER_PERMUTATIONS
    if not valid:
        raise ValueError(
            f"unknown domain order {order!r}; the paper defines orders "
            f"{sorted(ORDER_PERMUTATIONS)}; fix: pass order=1, 2 or 3, or domains=[...] for a "
            "custom order"
        )
    if domains is not None and order != 1:
        raise ValueError(
            f"order={order} and domains={list(domains)} both set the domain order; fix: pass "
            "only one of them (domains=[...] is a custom order)"
        )


def _check_names(names: Sequence[str], valid: set[str], what: str) -> None:
    unknown = [n for n in names if n not in valid]
    if unknown:
        hints = did_you_mean(unknown, valid)
        raise ValueError(
            f"unknown domain name(s) {unknown} for {what}{hints}; valid: {sorted(valid)}"
        )


def _check_settings(small_classes: object, **episode_counts: object) -> None:
    """Refuse a non-positive episode count or an unknown ``small_classes``, before any loading."""
    for name, value in episode_counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if small_classes not in SMALL_CLASSES:
        raise ValueError(
            f"small_classes must be one of {SMALL_CLASSES}, got {small_classes!r}; 'error' "
            "refuses classes too small for the episode shape, 'drop' leaves them out with a "
            "warning"
        )


def _streams(id_domains, ood_domains, config, seed, small_classes, pools, episodes) -> list:
    """The train, valid and test streams, or one error naming every domain that cannot be drawn."""
    streams = []
    failed: dict[str, list[str]] = {}  # every domain's problems, refused together below
    for stream_name, split in (("train", "train"), ("valid", "val"), ("test", "test")):
        exps = []
        for i, dom in enumerate(id_domains):
            draws = dict(
                split=split,
                config=config,
                seed=_stream_seed(seed, dom.name, split),
                small_classes=small_classes,
            )
            try:
                sampler = (
                    EpisodeSampler(dom, ood_domains, **draws)
                    if pools is None
                    else DeviceEpisodeSampler(dom, ood_domains, pools=pools, **draws)
                )
            except ValueError as err:
                failed.setdefault(dom.name, []).append(f"{split}: {err}")
                continue
            data = AvalancheDataset(
                [EpisodeDataset(sampler, episodes[split])], collate_fn=collate_episodes
            )
            exps.append(SETSExperience(dataset=data, current_experience=i, sampler=sampler))
        streams.append(EagerCLStream(stream_name, exps))
    if failed:
        raise ValueError(_refusal(failed, [d.name for d in id_domains]))
    return streams


def _refusal(failed: dict[str, list[str]], names: list[str]) -> str:
    """One message for every domain whose episodes cannot be drawn (each split's reason), so
    that one try shows them all; with the command-line fix that leaves those domains out."""
    lines = [f"{name!r} {reason}" for name, reasons in failed.items() for reason in reasons]
    message = (
        f"the episodes of {len(failed)} of the {len(names)} stream domain(s) cannot be drawn "
        f"({', '.join(map(repr, failed))}), every one named here:\n  " + "\n  ".join(lines)
    )
    kept = [n for n in names if n not in failed]
    if kept:
        listed = ",".join(f"'{n}'" for n in kept)
        message += (
            f'\nor run without them: --set "domains=[{listed}]" (domains=[{listed}] in Python)'
        )
    return message


def sets_benchmark(
    source: str = "synthetic",
    *,
    root: str | Path | None = None,
    domains: Sequence[str] | None = None,
    ood: Sequence[str] | None = None,
    order: int = 1,
    n_way: int = 5,
    n_shot: int = 1,
    n_query: int = 10,
    n_unlabeled: int = 10,
    n_ood: int = N_OOD,
    tasks_per_domain: int = 12_000,
    n_val_episodes: int = 100,
    n_test_episodes: int = 600,
    image_size: int | None = None,
    seed: int = 0,
    small_classes: str = "error",
    loaded: tuple[Sequence[Domain], Sequence[Domain]] | None = None,
    data_device: str | torch.device | None = None,
) -> SETSBenchmark:
    """Build a SETS benchmark (an Avalanche scenario) from a source of domains.

    Args:
        source: ``"synthetic"`` (offline default), ``"packs"`` or ``"paper"``.
        root: data folder for ``"packs"``/``"paper"``.
        domains: custom domain order (distinct names); ``order`` picks the paper's orders 1–3
            otherwise (not both).
        ood: OOD source names (default: the source's three OOD sources). ``[]`` for none.
        n_way, n_shot, n_query, n_unlabeled, n_ood: the episode shape (N, K, Q, Z, R).
        tasks_per_domain: training episodes per domain (paper: 12,000).
        n_val_episodes: validation episodes per domain (validation classes).
        n_test_episodes: test episodes per domain (paper: 600).
        image_size: image side in pixels.
        seed: seed of the episode streams (and of the synthetic generator).
        small_classes: ``"error"`` or ``"drop"`` classes too small for the episode shape.
        loaded: already loaded ``(domains, ood_sources)`` to use instead of ``source``.
        data_device: ``None`` (default) draws episodes in host memory; a device (``"cuda"``)
            keeps every domain's images on it, copied once, and gathers each episode there
            (:class:`~.device_episodes.DeviceEpisodeSampler`: the same episodes, no per-episode
            host-to-device copy of images).

    Raises:
        ValueError: for any invalid setting, before training starts.
    """
    config = EpisodeConfig(
        n_way=n_way, n_shot=n_shot, n_query=n_query, n_unlabeled=n_unlabeled, n_ood=n_ood
    )
    _check_settings(
        small_classes,
        tasks_per_domain=tasks_per_domain,
        n_val_episodes=n_val_episodes,
        n_test_episodes=n_test_episodes,
    )
    if loaded is not None:
        id_domains, ood_domains = list(loaded[0]), list(loaded[1])
    else:
        id_domains, ood_domains = load_source(
            source, root=root, domains=domains, ood=ood, order=order,
            image_size=image_size, seed=seed,
        )  # fmt: skip
    if not id_domains:
        raise ValueError("a SETS benchmark needs at least one in-distribution domain")
    pools = DeviceImagePools(data_device) if data_device is not None else None
    episodes = {"train": tasks_per_domain, "val": n_val_episodes, "test": n_test_episodes}
    streams = _streams(id_domains, ood_domains, config, seed, small_classes, pools, episodes)
    settings = dict(
        source=source if loaded is None else "custom",
        root=str(root) if root is not None else None,
        order=order if domains is None else "custom",
        tasks_per_domain=tasks_per_domain,
        n_val_episodes=n_val_episodes,
        n_test_episodes=n_test_episodes,
        image_size=id_domains[0].image_size,
        small_classes=small_classes,
        data_device=str(pools.device) if pools is not None else None,
    )
    return SETSBenchmark(
        streams,
        domains=id_domains,
        ood_sources=ood_domains,
        config=config,
        seed=seed,
        settings=settings,
    )
