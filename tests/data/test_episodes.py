"""Sampler invariants on every source, bad settings, and the Avalanche streams."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from avalanche_sets.data import (
    Domain,
    EpisodeBatch,
    EpisodeConfig,
    EpisodeSampler,
    collate_episodes,
    sets_benchmark,
)
from avalanche_sets.data.benchmark import ORDER_PERMUTATIONS, SETS_MINI_ORDER
from avalanche_sets.data.packs import build_pack_from_folder, load_pack
from avalanche_sets.data.synthetic import SYNTHETIC_ID_DOMAINS, SYNTHETIC_OOD_SOURCES

SHARED = Path(
    os.environ.get(
        "AVALANCHE_SETS_SHARED_DATA",
        Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sets-mini",
    )
)
CFG = EpisodeConfig(n_way=5, n_shot=2, n_query=3, n_unlabeled=4, n_ood=10)


def random_domain(name: str, n_classes: int = 20, per_class: int = 20, size: int = 8) -> Domain:
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    split = np.array(["train"] * (n_classes - 10) + ["val"] * 5 + ["test"] * 5)
    return Domain(
        name,
        rng.integers(0, 256, (n_classes * per_class, size, size, 3), dtype=np.uint8),
        np.repeat(np.arange(n_classes), per_class),
        [f"{name}{c}" for c in range(n_classes)],
        split,
    )


# ---------------------------------------------------------------------------- sources
@pytest.fixture(scope="module")
def synthetic():
    from avalanche_sets.data.synthetic import make_synthetic_domain

    ids = [make_synthetic_domain(n) for n in SYNTHETIC_ID_DOMAINS[:2]]
    oods = [make_synthetic_domain(n) for n in SYNTHETIC_OOD_SOURCES]
    return ids, oods


@pytest.fixture(scope="module")
def folder_pack(tmp_path_factory):
    """A pack built from an image folder (the user's own data path)."""
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    for c in range(25):  # 60/20/20 → 5 val and 5 test classes
        d = root / "imgs" / f"class_{c:02d}"
        d.mkdir(parents=True)
        base = rng.integers(0, 256, 3)
        for i in range(20):
            arr = np.clip(base + rng.normal(0, 30, (20, 24, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(d / f"{i}.png")
    pack = build_pack_from_folder(root / "imgs", root / "mine.npz", image_size=16, progress=False)
    dom = load_pack(pack)
    return [dom], [random_domain("ood_a", size=16), random_domain("ood_b", size=16)]


@pytest.fixture(scope="module")
def shared_packs():
    if not (SHARED / "gtsrb.npz").is_file():
        pytest.skip(f"shared packs not found at {SHARED}")
    ids = [load_pack(SHARED / f"{n}.npz") for n in ("gtsrb", "icons")]
    oods = [load_pack(SHARED / f"{n}.npz") for n in ("ood_omniglot", "ood_fish", "ood_textures")]
    return ids, oods


@pytest.fixture(scope="module")
def paper_cub(tmp_path_factory):
    """The paper loader on a fabricated CUB tree (its real on-disk layout)."""
    from avalanche_sets.data.paper import load_paper_domain

    root = tmp_path_factory.mktemp("paper")
    rng = np.random.default_rng(1)
    images = root / "CUB_200_2011" / "images"
    for c in range(24):
        d = images / f"{c + 1:03d}.Bird_{c}"
        d.mkdir(parents=True)
        for i in range(16):
            Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(d / f"{i}.jpg")
    with pytest.warns(Warning):  # split sizes differ from the paper's 100/50/50
        dom = load_paper_domain("cub", root, image_size=8, cache_dir=root / "cache", progress=False)
    return [dom], [random_domain("ood_x"), random_domain("ood_y")]


SOURCES = ["synthetic", "folder_pack", "shared_packs", "paper_cub"]


def _labeled_sets(dom: Domain):
    lab = {c: set(dom.indices(c, "labeled").tolist()) for c in range(dom.n_classes)}
    unl = {c: set(dom.indices(c, "unlabeled").tolist()) for c in range(dom.n_classes)}
    return lab, unl


def check_episode(sampler: EpisodeSampler, index: int) -> None:
    """Every invariant an episode must satisfy."""
    cfg, dom, split = sampler.config, sampler.domain, sampler.split
    ep = sampler.sample(index)
    o = ep.oracle
    size = dom.image_size
    n, k, q, z, r = cfg.n_way, cfg.n_shot, cfg.n_query, cfg.n_unlabeled, cfg.n_ood
    # Counts and shapes exactly as configured.
    assert ep.support_x.shape == (n * k, size, size, 3) and ep.support_x.dtype == torch.uint8
    assert ep.query_x.shape == (n * q, size, size, 3)
    assert ep.unlabeled_x.shape == (n * z + r, size, size, 3)
    assert ep.support_y.tolist() == np.repeat(np.arange(n), k).tolist()
    assert ep.query_y.tolist() == np.repeat(np.arange(n), q).tolist()
    assert int(o.unlabeled_is_ood.sum()) == r
    # Classes: distinct, from the right split (never a test class in training).
    classes = o.class_ids.numpy()
    assert len(set(classes.tolist())) == n
    assert set(classes.tolist()) <= set(dom.classes(split).tolist())
    if split == "train":
        assert not set(classes.tolist()) & set(dom.classes("test").tolist())
    lab, unl = _labeled_sets(dom)
    s_idx, q_idx = o.support_index.numpy(), o.query_index.numpy()
    # Support and query: disjoint, labeled part of the right class, pixels from the domain.
    assert not set(s_idx.tolist()) & set(q_idx.tolist())
    assert len(set(s_idx.tolist())) == n * k and len(set(q_idx.tolist())) == n * q
    for idx, y in ((s_idx, ep.support_y), (q_idx, ep.query_y)):
        for i, lbl in zip(idx.tolist(), y.tolist()):
            assert i in lab[classes[lbl]]
    assert torch.equal(ep.support_x, torch.from_numpy(dom.images[s_idx]))
    assert torch.equal(ep.query_x, torch.from_numpy(dom.images[q_idx]))
    # Unlabeled ID: unlabeled part of the episode's classes, Z per class.
    is_id = ~o.unlabeled_is_ood
    u_idx = o.unlabeled_index.numpy()
    ids = u_idx[is_id.numpy()]
    assert (o.unlabeled_source[is_id] == -1).all()
    per_class = {c: 0 for c in classes.tolist()}
    for i in ids.tolist():
        owner = [c for c in classes.tolist() if i in unl[c]]
        assert len(owner) == 1, "unlabeled ID image outside the unlabeled part of the classes"
        per_class[owner[0]] += 1
    assert set(per_class.values()) == {z} or z == 0
    assert torch.equal(ep.unlabeled_x[is_id], torch.from_numpy(dom.images[ids]))
    # OOD: the same split's classes of the OOD sources, mixed equally.
    counts = []
    for s, src in enumerate(sampler.ood_sources):
        m = (o.unlabeled_source == s).numpy()
        counts.append(int(m.sum()))
        allowed = set(np.concatenate([src.indices(c) for c in src.classes(split)]).tolist())
        assert set(u_idx[m].tolist()) <= allowed
        assert torch.equal(
            ep.unlabeled_x[torch.from_numpy(m)], torch.from_numpy(src.images[u_idx[m]])
        )
    if r:
        assert max(counts) - min(counts) <= 1 and sum(counts) == r


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_sampler_invariants_on_every_source(source, split, request):
    ids, oods = request.getfixturevalue(source)
    cfg = CFG
    if source == "paper_cub":  # 16 images per class: 6 labeled, 10 unlabeled
        cfg = EpisodeConfig(n_way=3, n_shot=2, n_query=3, n_unlabeled=4, n_ood=6)
    for dom in ids:
        sampler = EpisodeSampler(dom, oods, split=split, config=cfg, seed=3, small_classes="drop")
        for i in range(5):
            check_episode(sampler, i)


@pytest.mark.parametrize("source", ["synthetic", "folder_pack"])
def test_determinism(source, request):
    ids, oods = request.getfixturevalue(source)
    a = EpisodeSampler(ids[0], oods, config=CFG, seed=11)
    b = EpisodeSampler(ids[0], oods, config=CFG, seed=11)
    e1, e2, e3 = a.sample(7), b.sample(7), a.sample(8)
    for field in ("support_x", "query_x", "unlabeled_x"):
        assert torch.equal(getattr(e1, field), getattr(e2, field))
    assert torch.equal(e1.oracle.unlabeled_is_ood, e2.oracle.unlabeled_is_ood)
    assert not torch.equal(e1.unlabeled_x, e3.unlabeled_x)
    assert not torch.equal(e1.oracle.support_index, e3.oracle.support_index)
    c = EpisodeSampler(ids[0], oods, config=CFG, seed=12).sample(7)
    assert not torch.equal(e1.oracle.support_index, c.oracle.support_index)


def test_unlabeled_order_hides_ood_flag():
    """ID and OOD images are interleaved at random: position says nothing about the flag."""
    dom, oods = random_domain("d"), [random_domain("o1"), random_domain("o2")]
    sampler = EpisodeSampler(dom, oods, config=CFG, seed=0)
    flags = torch.stack([sampler.sample(i).oracle.unlabeled_is_ood for i in range(200)]).float()
    # Every position is OOD with frequency R / U = 1/3; 200 episodes → std ≈ 0.033.
    freq = flags.mean(0)
    assert (freq - 1 / 3).abs().max() < 0.15


# ---------------------------------------------------------------------------- bad settings
def _bench(**kw):
    ids = [random_domain(f"d{i}") for i in range(2)]
    oods = [random_domain("o1"), random_domain("o2")]
    kw = {
        "tasks_per_domain": 4,
        "n_test_episodes": 2,
        "n_val_episodes": 2,
        "n_query": 3,
        "n_unlabeled": 4,
        "n_ood": 4,
        **kw,
    }
    return sets_benchmark(loaded=(ids, oods), **kw)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_way": 11}, "fewer than n_way"),  # 10 train classes
        ({"n_shot": 5, "n_query": 4}, "too small for n_shot"),  # 8 labeled per class
        ({"n_unlabeled": 13}, "n_unlabeled"),  # 12 unlabeled per class
        ({"n_way": 0}, "n_way"),
        ({"n_shot": 0}, "n_shot"),
        ({"n_ood": -1}, "n_ood"),
        ({"tasks_per_domain": 0}, "tasks_per_domain"),
    ],
)
def test_bad_settings_raise_when_the_benchmark_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _bench(**kwargs)


def test_ood_without_sources_raises():
    ids = [random_domain("d0")]
    with pytest.raises(ValueError, match="OOD source"):
        sets_benchmark(loaded=(ids, []), n_ood=5, n_query=3, tasks_per_domain=2)
    # R = 0 without sources is fine.
    sets_benchmark(loaded=(ids, []), n_ood=0, n_query=3, tasks_per_domain=2)


def test_unknown_names_and_orders_raise():
    with pytest.raises(ValueError, match="unknown domain name"):
        sets_benchmark("synthetic", domains=["nope"], tasks_per_domain=2)
    with pytest.raises(ValueError, match="unknown domain order"):
        sets_benchmark("synthetic", order=4, tasks_per_domain=2)
    with pytest.raises(ValueError, match="unknown source"):
        sets_benchmark("imagenet")
    with pytest.raises(ValueError, match="root"):
        sets_benchmark("packs")


def test_small_classes_can_be_dropped_with_a_warning():
    dom = random_domain("d", per_class=20)
    # Make class 0 tiny: only 5 images.
    keep = np.concatenate([np.flatnonzero(dom.labels == 0)[:5], np.flatnonzero(dom.labels != 0)])
    small = Domain("small", dom.images[keep], dom.labels[keep], dom.class_names, dom.class_split)
    cfg = EpisodeConfig(n_way=3, n_shot=2, n_query=3, n_unlabeled=2, n_ood=0)
    with pytest.raises(ValueError, match="--set small_classes=drop"):
        EpisodeSampler(small, config=cfg)
    with pytest.warns(UserWarning, match="1 of 10 train classes") as caught:
        sampler = EpisodeSampler(small, config=cfg, small_classes="drop")
    assert 0 not in sampler.classes.tolist()
    assert caught[0].filename == __file__  # it points at the line that built the sampler


def test_missing_paper_dataset_raises_documented_error(tmp_path):
    from avalanche_sets.data.paper import DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError, match=str(tmp_path)):
        sets_benchmark("paper", root=tmp_path, tasks_per_domain=2)


# ---------------------------------------------------------------------------- streams
def test_streams_orders_and_experiences(synthetic):
    bench = sets_benchmark("synthetic", tasks_per_domain=6, n_test_episodes=3, n_val_episodes=2)
    assert bench.domain_names == list(SYNTHETIC_ID_DOMAINS)
    assert [e.domain_name for e in bench.train_stream] == list(SYNTHETIC_ID_DOMAINS)
    assert [len(e.dataset) for e in bench.train_stream] == [6] * 6
    assert [len(e.dataset) for e in bench.test_stream] == [3] * 6
    assert {e.split for e in bench.valid_stream} == {"val"}
    assert {e.split for e in bench.test_stream} == {"test"}
    for order, perm in ORDER_PERMUTATIONS.items():
        b = sets_benchmark("synthetic", order=order, tasks_per_domain=2, n_test_episodes=2)
        assert b.domain_names == [SYNTHETIC_ID_DOMAINS[i] for i in perm]
    custom = sets_benchmark(
        "synthetic", domains=list(SYNTHETIC_ID_DOMAINS[:3])[::-1], tasks_per_domain=2
    )
    assert custom.domain_names == list(SYNTHETIC_ID_DOMAINS[:3])[::-1]
    # The test episodes of a domain do not depend on the order it comes in.
    b2 = sets_benchmark("synthetic", order=2, tasks_per_domain=2, n_test_episodes=3)
    name = SYNTHETIC_ID_DOMAINS[0]
    e_a = next(e for e in bench.test_stream if e.domain_name == name).dataset[1]
    e_b = next(e for e in b2.test_stream if e.domain_name == name).dataset[1]
    assert torch.equal(e_a.query_x, e_b.query_x)
    # Test episodes come from test classes, fixed across accesses.
    exp = bench.test_stream[2]
    assert torch.equal(exp.dataset[0].support_x, exp.dataset[0].support_x)
    assert "OOD sources" in bench.describe()


def test_a_batch_followed_by_another_keeps_every_field_in_order_and_drops_the_oracle():
    bench = _bench(n_way=3, n_shot=1, n_query=2, n_unlabeled=2, n_ood=2)
    data = bench.train_stream[0].dataset
    first, _, _ = collate_episodes([data[0], data[1]])
    second, _, _ = collate_episodes([data[2]])
    merged = first.cat(second.without_oracle())
    assert len(merged) == 3 and merged.oracle is None
    for name in ("support_x", "support_y", "query_x", "query_y", "unlabeled_x"):
        parts = [getattr(first, name), getattr(second, name)]
        assert torch.equal(getattr(merged, name), torch.cat(parts)), name


def test_a_batch_moves_its_inputs_and_keeps_its_oracle_on_the_host():
    """The oracle is read on the host (metrics, the replay memory's episode indices): moving
    a batch to a device (here the ``meta`` device, standing in for a GPU) leaves it there."""
    bench = _bench(n_way=3, n_shot=1, n_query=2, n_unlabeled=2, n_ood=2)
    batch, _, _ = collate_episodes([bench.train_stream[0].dataset[i] for i in range(2)])
    moved = batch.to("meta", non_blocking=True)
    for name in ("support_x", "support_y", "query_x", "query_y", "unlabeled_x"):
        assert getattr(moved, name).device.type == "meta", name
        assert getattr(moved, name).shape == getattr(batch, name).shape, name
    assert moved.oracle is batch.oracle
    assert moved.oracle.episode_index.device.type == "cpu"


def test_avalanche_train_loader_keeps_the_collate():
    from avalanche.training.plugins import EvaluationPlugin

    from avalanche_sets.models.backbone import ConvBackbone
    from avalanche_sets.models.episodic import PrototypicalModel
    from avalanche_sets.training import EpisodicTemplate

    bench = _bench(n_way=3, n_shot=1, n_query=2, n_unlabeled=2, n_ood=2)
    model = PrototypicalModel(ConvBackbone(n_blocks=1, width=4, image_size=8))
    strategy = EpisodicTemplate(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        train_mb_size=2,
        evaluator=EvaluationPlugin(),
    )
    strategy.experience = bench.train_stream[0]
    strategy.adapted_dataset = bench.train_stream[0].dataset
    strategy.make_train_dataloader()
    x, y, t = next(iter(strategy.dataloader))
    assert isinstance(x, EpisodeBatch) and len(x) == 2
    assert y.shape == (2 * 3 * 2,) and t.shape == y.shape
    # The AvalancheDataset itself carries the episode collate.
    assert bench.train_stream[0].dataset.collate_fn is collate_episodes


def test_shared_pack_benchmark_default_order():
    if not (SHARED / "gtsrb.npz").is_file():
        pytest.skip(f"shared packs not found at {SHARED}")
    bench = sets_benchmark(
        "packs", root=SHARED, n_shot=1, tasks_per_domain=2, n_test_episodes=2, small_classes="drop"
    )
    assert bench.domain_names == list(SETS_MINI_ORDER)
    assert [d.name for d in bench.ood_sources] == ["ood_fish", "ood_omniglot", "ood_textures"]
