"""Tests of the synthetic offline benchmark (avalanche_sets.data.synthetic)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from avalanche_sets.data import synthetic
from avalanche_sets.data.domain import Domain
from avalanche_sets.data.episodes import EpisodeConfig, EpisodeSampler
from avalanche_sets.data.synthetic import (
    SYNTHETIC_ID_DOMAINS,
    SYNTHETIC_OOD_SOURCES,
    load_synthetic_domains,
    make_synthetic_domain,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def domains() -> dict[str, Domain]:
    """All 9 domains at the default size (a few seconds of CPU), generated once, not cached."""
    return load_synthetic_domains(cache=False)


def _small(name: str, **kw) -> Domain:
    kw = {"n_classes": 6, "images_per_class": 5, "cache": False, **kw}
    return make_synthetic_domain(name, **kw)


# ----------------------------------------------------------------------------- names, shapes
def test_names() -> None:
    assert len(SYNTHETIC_ID_DOMAINS) == 6
    assert len(SYNTHETIC_OOD_SOURCES) == 3
    assert len(set(SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES)) == 9


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError) as err:
        make_synthetic_domain("omniglot", cache=False)
    for name in SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES:
        assert name in str(err.value)
    with pytest.raises(ValueError):
        load_synthetic_domains(["shapes", "nope"], cache=False)


@pytest.mark.parametrize("kwargs", [{"image_size": 4}, {"n_classes": 1}, {"images_per_class": 1}])
def test_invalid_sizes(kwargs) -> None:
    with pytest.raises(ValueError):
        make_synthetic_domain("shapes", cache=False, **kwargs)


def test_shapes_dtypes_counts(domains: dict[str, Domain]) -> None:
    assert list(domains) == list(SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES)
    for name, dom in domains.items():
        n_classes = dom.n_classes
        assert n_classes >= (100 if name in SYNTHETIC_ID_DOMAINS else 60), name
        assert dom.images.dtype == np.uint8
        assert dom.images.shape == (n_classes * 40, 32, 32, 3)
        assert dom.part_sizes("all").min() >= 40
        assert len(set(dom.class_names)) == n_classes
        sizes = {s: dom.classes(s).size for s in ("train", "val", "test")}
        assert sizes == {
            "train": round(0.6 * n_classes),
            "val": round(0.2 * n_classes),
            "test": n_classes - round(0.6 * n_classes) - round(0.2 * n_classes),
        }
        # images are real pictures: they use the intensity range and are not all alike
        assert dom.images.std() > 15, name
        assert np.unique(dom.images.reshape(len(dom.images), -1)[:50], axis=0).shape[0] == 50


def test_episodes_with_ood(domains: dict[str, Domain]) -> None:
    """The default semi-supervised episode shape (Z = 10, R = 50) fits the generated pools."""
    ood = [domains[n] for n in SYNTHETIC_OOD_SOURCES]
    for name in SYNTHETIC_ID_DOMAINS:
        for split in ("train", "test"):
            sampler = EpisodeSampler(domains[name], ood, split=split, config=EpisodeConfig())
            ep = sampler.sample(0)
            assert ep.unlabeled_x.shape == (5 * 10 + 50, 32, 32, 3)
            assert int(ep.oracle.unlabeled_is_ood.sum()) == 50


@pytest.mark.parametrize("name", SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES)
def test_image_size_84(name: str) -> None:
    dom = _small(name, image_size=84)
    assert dom.images.shape == (30, 84, 84, 3)
    assert dom.images.dtype == np.uint8
    assert dom.images.std() > 15


# ----------------------------------------------------------------------------- determinism
def test_same_seed_identical_other_seed_different() -> None:
    a = _small("strokes", seed=3)
    b = _small("strokes", seed=3)
    c = _small("strokes", seed=4)
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.class_split, b.class_split)
    assert not np.array_equal(a.images, c.images)


def test_domains_do_not_share_images() -> None:
    a, b = _small("gratings"), _small("tilings")
    assert not np.array_equal(a.images, b.images)


# The fresh process imports just the generator, from these sources: empty package modules
# whose ``__path__`` points at them stand for the package's ``__init__`` modules.
_HASH_SNIPPET = """
import hashlib, sys, types
for pkg, path in (("avalanche_sets", "{root}"), ("avalanche_sets.data", "{root}/data")):
    module = types.ModuleType(pkg)
    module.__path__ = [path]
    sys.modules[pkg] = module
from avalanche_sets.data.synthetic import make_synthetic_domain
for name in {names!r}:
    d = make_synthetic_domain(name, seed=5, n_classes=6, images_per_class=5, cache=False)
    print(hashlib.sha256(d.images.tobytes() + d.class_split.tobytes()).hexdigest())
"""


def test_bit_identical_in_fresh_process() -> None:
    names = ["shapes", "textures", "spirals"]
    here = [
        hashlib.sha256(d.images.tobytes() + d.class_split.tobytes()).hexdigest()
        for d in (_small(name, seed=5) for name in names)
    ]
    root = Path(synthetic.__file__).resolve().parents[2]
    code = _HASH_SNIPPET.format(root=root.as_posix(), names=names)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == here


# ----------------------------------------------------------------------------- cache
def test_cache_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw = {"seed": 2, "n_classes": 5, "images_per_class": 4, "cache_dir": tmp_path}
    first = make_synthetic_domain("blobs", **kw)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].endswith(".npz"), files  # no temporary file left behind

    def fail(*args, **kwargs):
        raise AssertionError("a cached domain must not be generated again")

    monkeypatch.setattr(synthetic._build, "_generate", fail)
    second = make_synthetic_domain("blobs", **kw)
    np.testing.assert_array_equal(first.images, second.images)
    np.testing.assert_array_equal(first.labels, second.labels)
    np.testing.assert_array_equal(first.class_split, second.class_split)
    assert first.class_names == second.class_names
    for c in range(first.n_classes):
        np.testing.assert_array_equal(first.indices(c, "labeled"), second.indices(c, "labeled"))


def test_cache_key_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "env"))
    assert synthetic.default_cache_dir() == tmp_path / "env"
    make_synthetic_domain("rings", n_classes=4, images_per_class=3)
    make_synthetic_domain("rings", n_classes=4, images_per_class=3, seed=1)
    make_synthetic_domain("rings", n_classes=4, images_per_class=3, image_size=16)
    assert len(list((tmp_path / "env").glob("*.npz"))) == 3


def test_corrupt_cache_is_regenerated(tmp_path: Path) -> None:
    kw = {"n_classes": 4, "images_per_class": 3, "cache_dir": tmp_path}
    good = make_synthetic_domain("lattices", **kw)
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz file")
    with pytest.warns(UserWarning, match="unreadable"):
        again = make_synthetic_domain("lattices", **kw)
    np.testing.assert_array_equal(good.images, again.images)
    np.testing.assert_array_equal(make_synthetic_domain("lattices", **kw).images, good.images)


# ----------------------------------------------------------------------------- difficulty
def _prototype_accuracy(dom: Domain, n_episodes: int = 200) -> float:
    """Nearest-prototype (1-NN to the support image) accuracy on raw pixels in [0, 1]."""
    cfg = EpisodeConfig(n_way=5, n_shot=1, n_query=10, n_unlabeled=0, n_ood=0)
    sampler = EpisodeSampler(dom, split="test", config=cfg, seed=123)
    hits = 0
    for i in range(n_episodes):
        ep = sampler.sample(i)
        s = ep.support_x.numpy().reshape(cfg.n_way, -1).astype(np.float32) / 255
        q = ep.query_x.numpy().reshape(cfg.n_query_total, -1).astype(np.float32) / 255
        d2 = (q * q).sum(1)[:, None] - 2 * q @ s.T + (s * s).sum(1)[None]
        hits += int((d2.argmin(1) == ep.query_y.numpy()).sum())
    return hits / (n_episodes * cfg.n_query_total)


@pytest.mark.parametrize("name", SYNTHETIC_ID_DOMAINS)
def test_learnable_but_not_trivial(domains: dict[str, Domain], name: str) -> None:
    # Chance is 0.2 (5-way). The generator is tuned so that raw-pixel 1-shot nearest-prototype
    # accuracy lies around 0.5-0.7 on every ID domain (measured: 0.52-0.69 at 32 px, seeds
    # 0-2). The band [0.35, 0.85] asks for "clearly above chance" (classes carry real,
    # pixel-level signal, so the task is learnable) and "clearly below perfect" (jitter,
    # shared colour schemes and distractors defeat pixel matching, so a learned embedding has
    # room to improve), with a margin for the ~0.03 standard error of 20 test classes.
    acc = _prototype_accuracy(domains[name])
    assert 0.35 <= acc <= 0.85, f"{name}: raw-pixel 1-shot accuracy {acc:.3f}"


# ----------------------------------------------------------------------------- distinctness
def _image_statistics(images: np.ndarray) -> np.ndarray:
    """Per-image statistics: colour moments, saturation, edge energy, intensity quantiles."""
    x = images.astype(np.float32) / 255
    grey = x.mean(-1)
    grad = np.abs(np.diff(grey, axis=1)).mean((1, 2)) + np.abs(np.diff(grey, axis=2)).mean((1, 2))
    lap = np.abs(
        4 * grey[:, 1:-1, 1:-1]
        - grey[:, 2:, 1:-1]
        - grey[:, :-2, 1:-1]
        - grey[:, 1:-1, 2:]
        - grey[:, 1:-1, :-2]
    ).mean((1, 2))
    saturation = (x.max(-1) - x.min(-1)).mean((1, 2))
    quantiles = np.quantile(grey.reshape(len(x), -1), [0.05, 0.5, 0.95], axis=1).T
    return np.column_stack([x.mean((1, 2)), x.std((1, 2)), grad, lap, saturation, quantiles])


def test_domains_are_distinct(domains: dict[str, Domain]) -> None:
    """A 5-NN classifier on 12 per-image pixel statistics tells the 9 families apart.

    If the families only differed in content but not in low-level statistics, this would fail;
    a model that has adapted to one family therefore sees a real distribution shift at the next.
    """
    rng = np.random.default_rng(0)
    feats, owner = [], []
    for k, dom in enumerate(domains.values()):
        idx = rng.choice(len(dom.images), 300, replace=False)
        feats.append(_image_statistics(dom.images[idx]))
        owner.append(np.full(idx.size, k))
    x, y = np.concatenate(feats), np.concatenate(owner)
    perm = rng.permutation(len(x))
    x, y = x[perm], y[perm]
    half = len(x) // 2
    mu, sd = x[:half].mean(0), x[:half].std(0) + 1e-8
    z = (x - mu) / sd
    d2 = ((z[half:, None] - z[None, :half]) ** 2).sum(-1)
    votes = y[:half][np.argsort(d2, axis=1)[:, :5]]
    pred = np.array([np.bincount(v, minlength=len(domains)).argmax() for v in votes])
    truth = y[half:]
    assert (pred == truth).mean() >= 0.9
    for k, name in enumerate(domains):
        recall = (pred[truth == k] == k).mean()
        assert recall >= 0.75, f"{name}: recall {recall:.2f}"
