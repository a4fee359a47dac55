"""A procedurally generated, offline SETS benchmark: 6 in-distribution domains + 3 OOD sources.

Every domain is a *family* of RGB images drawn with vectorised numpy, deterministic from a
seed, at any image size (32 px by default; 84 px works too: all geometry lives in continuous
coordinates ``[-1, 1]^2`` and edges are anti-aliased to one pixel). Each class is defined by
class-level parameters drawn from a class RNG; each image is a random instance of its class
(translation, rotation, scale, per-part jitter, colour jitter, illumination gradient, pixel
noise and a random distractor), so that a task is learnable but not trivial: nearest-prototype
on raw pixels is well above chance and well below 100% on 5-way 1-shot episodes, which leaves
room for a learned embedding.

The families differ in structure and pixel statistics, so that a change of domain causes real
forgetting:

In-distribution domains (:data:`SYNTHETIC_ID_DOMAINS`)
    ``shapes``
        One filled silhouette (a polygon with 3-8 sides or a disc, deformed by low harmonics)
        in a saturated colour on a flat muted background. Class = silhouette × colour scheme.
    ``strokes``
        Glyph-like characters: 1-3 thick polylines in dark ink on light paper (Omniglot-like).
        Class = a fixed stroke template; every image moves the control points a little.
    ``gratings``
        Smooth sinusoidal gratings and plaids (one or two oriented components) in pastel
        colours filling the image. Class = frequencies × orientations × phases × colours.
    ``blobs``
        Constellations of 3-5 soft Gaussian light blobs on a dark background. Class = blob
        positions, sizes and colours.
    ``tilings``
        Hard-edged periodic tilings (checkerboards, stripes, brick walls, grids) in two
        saturated colours. Class = tiling type × periods × orientation × colours.
    ``textures``
        Band-pass filtered coloured noise with a class-specific spectrum (centre frequency,
        orientation, anisotropy) and a class-specific noise exemplar mixed with fresh noise.

OOD sources (:data:`SYNTHETIC_OOD_SOURCES`)
    ``rings``
        Concentric (elliptic) annuli around an off-centre point.
    ``lattices``
        Dot lattices (square, hexagonal or oblique), dots of one colour on a flat ground.
    ``spirals``
        Logarithmic or Archimedean spirals with 1-5 arms.

Use :func:`make_synthetic_domain` for one domain and :func:`load_synthetic_domains` for several.
Generated domains are cached as ``.npz`` files (keyed by every argument and the generator
version) under ``cache_dir``, ``$AVALANCHE_SETS_CACHE`` or ``~/.cache/avalanche_sets/synthetic``.
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .domain import SPLITS, Domain
from .files import atomic_write

__all__ = [
    "SYNTHETIC_ID_DOMAINS",
    "SYNTHETIC_OOD_SOURCES",
    "SYNTHETIC_DOMAINS",
    "GENERATOR_VERSION",
    "default_cache_dir",
    "make_synthetic_domain",
    "load_synthetic_domains",
]

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
SYNTHETIC_OOD_SOURCES: tuple[str, ...] = ("rings", "lattices", "spirals")
SYNTHETIC_DOMAINS: tuple[str, ...] = SYNTHETIC_ID_DOMAINS + SYNTHETIC_OOD_SOURCES

_DEFAULT_ID_CLASSES = 100
_DEFAULT_OOD_CLASSES = 60
_CHUNK = 256  # images rendered at once (bounds memory at 84 px); part of the RNG layout
_SPLIT_FRACTIONS = (0.6, 0.2, 0.2)

# ----------------------------------------------------------------------------- palettes
_SATURATED = np.array(
    [
        [0.90, 0.15, 0.15],  # red
        [0.15, 0.65, 0.20],  # green
        [0.15, 0.30, 0.90],  # blue
        [0.95, 0.80, 0.10],  # yellow
        [0.70, 0.20, 0.80],  # purple
        [0.10, 0.75, 0.80],  # cyan
        [0.95, 0.50, 0.10],  # orange
        [0.95, 0.95, 0.95],  # white
    ],
    dtype=np.float32,
)
_MUTED = np.array(
    [
        [0.35, 0.35, 0.38],
        [0.45, 0.40, 0.30],
        [0.25, 0.35, 0.40],
        [0.40, 0.30, 0.38],
    ],
    dtype=np.float32,
)
_INKS = np.array(
    [[0.05, 0.05, 0.08], [0.10, 0.10, 0.45], [0.40, 0.05, 0.05], [0.05, 0.30, 0.10]],
    dtype=np.float32,
)
_PAPERS = np.array(
    [[0.95, 0.93, 0.85], [0.88, 0.92, 0.95], [0.93, 0.90, 0.93]],
    dtype=np.float32,
)
_PASTELS = np.array(
    [
        [0.95, 0.75, 0.75],
        [0.75, 0.90, 0.75],
        [0.75, 0.80, 0.95],
        [0.95, 0.92, 0.70],
        [0.85, 0.75, 0.92],
        [0.50, 0.50, 0.55],
    ],
    dtype=np.float32,
)
_LIGHTS = np.array(
    [
        [1.00, 0.35, 0.25],
        [0.30, 1.00, 0.40],
        [0.30, 0.50, 1.00],
        [1.00, 0.95, 0.30],
        [1.00, 0.40, 1.00],
        [0.30, 1.00, 1.00],
    ],
    dtype=np.float32,
)
_DARKS = np.array(
    [[0.02, 0.02, 0.06], [0.06, 0.02, 0.02], [0.02, 0.05, 0.03]],
    dtype=np.float32,
)
_EARTH = np.array(
    [
        [0.55, 0.35, 0.20],
        [0.30, 0.45, 0.20],
        [0.75, 0.65, 0.45],
        [0.20, 0.25, 0.35],
    ],
    dtype=np.float32,
)


def _pick_pair(rng: np.random.Generator, n_classes: int, n_colours: int) -> np.ndarray:
    """``[C, 2]`` indices of two different colours of a palette."""
    a = rng.integers(0, n_colours, n_classes)
    b = (a + rng.integers(1, n_colours, n_classes)) % n_colours
    return np.stack([a, b], axis=1)


# ----------------------------------------------------------------------------- canvas
@dataclass
class _Jitter:
    """Per-image geometric and photometric jitter of one family."""

    shift: float = 0.15  # max translation, in units of the half image width
    rot: float = 15.0  # max rotation, degrees
    scale: tuple[float, float] = (0.9, 1.1)
    noise: float = 0.03  # pixel noise std (of [0, 1] intensities)
    gain: float = 0.06  # per-channel multiplicative colour jitter (std)
    offset: float = 0.04  # per-image brightness offset (std)
    gradient: float = 0.06  # max amplitude of a linear illumination gradient
    distractor: float = 0.5  # probability of one small random disc or bar


@dataclass
class _Canvas:
    """Pixel grid of a chunk of ``n`` images, in image coords (x, y) and object coords (u, v)."""

    x: np.ndarray  # [1, S, S]
    y: np.ndarray  # [1, S, S]
    u: np.ndarray  # [n, S, S]
    v: np.ndarray  # [n, S, S]
    pw: np.ndarray  # [n, 1, 1] width of one pixel in object units
    size: int
    n: int


def _canvas(rng: np.random.Generator, n: int, size: int, jit: _Jitter) -> _Canvas:
    g = ((np.arange(size, dtype=np.float32) + 0.5) / size * 2.0 - 1.0).astype(np.float32)
    y, x = np.meshgrid(g, g, indexing="ij")
    x, y = x[None], y[None]
    tx, ty = (rng.uniform(-jit.shift, jit.shift, (2, n, 1, 1))).astype(np.float32)
    th = np.deg2rad(rng.uniform(-jit.rot, jit.rot, (n, 1, 1))).astype(np.float32)
    sc = rng.uniform(*jit.scale, (n, 1, 1)).astype(np.float32)
    c, s = np.cos(th), np.sin(th)
    dx, dy = x - tx, y - ty
    u = (c * dx + s * dy) / sc
    v = (-s * dx + c * dy) / sc
    return _Canvas(x=x, y=y, u=u, v=v, pw=(2.0 / size) / sc, size=size, n=n)


def _soft(signed_dist: np.ndarray, pw: np.ndarray) -> np.ndarray:
    """Anti-aliased coverage of ``signed_dist < 0`` (one-pixel ramp)."""
    return np.clip(0.5 - signed_dist / pw, 0.0, 1.0)


def _col(c: np.ndarray) -> np.ndarray:
    """``[n, 3]`` colours -> ``[n, 3, 1, 1]`` for broadcasting against ``[n, 3, S, S]``.

    Images are channels-first while they are drawn (a broadcast over a last axis of length 3
    is several times slower in numpy) and transposed once at the end.
    """
    return c[:, :, None, None]


def _mix(bg: np.ndarray, fg: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Alpha-blend ``fg`` over ``bg``; colours ``[n, 3]`` or images, ``alpha`` ``[n, S, S]``."""
    a = alpha[:, None]
    bg = _col(bg) if bg.ndim == 2 else bg
    fg = _col(fg) if fg.ndim == 2 else fg
    return bg + (fg - bg) * a


def _rotate(u: np.ndarray, v: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(theta)[:, None, None], np.sin(theta)[:, None, None]
    return c * u + s * v, -s * u + c * v


def _square_wave(t: np.ndarray, ramp: np.ndarray) -> np.ndarray:
    """Anti-aliased square wave in ``[-1, 1]`` of period 2 in ``t`` (``ramp``: pixel in t)."""
    return np.clip(np.sin(np.pi * t) / (np.pi * ramp), -1.0, 1.0)


# ----------------------------------------------------------------------------- families
_Params = dict[str, np.ndarray]


@dataclass
class _Family:
    description: str
    class_params: Callable[[np.random.Generator, int, int], _Params]
    render: Callable[[_Canvas, _Params, np.random.Generator], np.ndarray]
    jitter: _Jitter


# shapes ----------------------------------------------------------------------
def _shapes_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    # few colour schemes (4 x 3), so that colour alone does not solve an episode
    pair = np.stack([rng.integers(0, 4, n), rng.integers(0, 3, n)], 1)
    return {
        "sides": rng.choice(np.array([0, 3, 4, 5, 6, 8]), n).astype(np.float32),
        "r0": rng.uniform(0.45, 0.7, n).astype(np.float32),
        "amp": (rng.uniform(0.0, 0.2, (n, 3)) * (rng.random((n, 3)) < 0.6)).astype(np.float32),
        "phase": rng.uniform(0, 2 * np.pi, (n, 3)).astype(np.float32),
        "fg": _SATURATED[pair[:, 0]],
        "bg": _MUTED[pair[:, 1]],
    }


def _shapes_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    rho = np.sqrt(cv.u**2 + cv.v**2)
    phi = np.arctan2(cv.v, cv.u)
    k = p["sides"][:, None, None]
    poly = np.where(k > 0, np.cos(np.pi / np.maximum(k, 1)), 1.0)
    sector = 2 * np.pi / np.maximum(k, 1)
    local = np.mod(phi, sector) - sector / 2
    radius = np.where(k > 0, poly / np.cos(local), 1.0)
    for j, h in enumerate((2, 3, 5)):
        amp = p["amp"][:, j, None, None] * rng.uniform(0.7, 1.3, (cv.n, 1, 1)).astype(np.float32)
        radius = radius * (1 + amp * np.cos(h * phi + p["phase"][:, j, None, None]))
    radius = radius * p["r0"][:, None, None]
    return _mix(p["bg"], p["fg"], _soft(rho - radius, cv.pw))


# strokes ---------------------------------------------------------------------
_MAX_STROKES, _POINTS = 3, 3


def _strokes_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    pts = np.empty((n, _MAX_STROKES, _POINTS, 2), dtype=np.float32)
    pts[:, :, 0] = rng.uniform(-0.6, 0.6, (n, _MAX_STROKES, 2))
    for i in range(1, _POINTS):
        ang = rng.uniform(0, 2 * np.pi, (n, _MAX_STROKES))
        step = rng.uniform(0.45, 0.9, (n, _MAX_STROKES, 1))
        d = np.stack([np.cos(ang), np.sin(ang)], -1) * step
        pts[:, :, i] = np.clip(pts[:, :, i - 1] + d, -0.75, 0.75)
    n_strokes = rng.integers(1, _MAX_STROKES + 1, n)
    active = np.arange(_MAX_STROKES)[None] < n_strokes[:, None]
    return {
        "pts": pts,
        "active": active.astype(np.float32),
        "width": rng.uniform(0.07, 0.13, n).astype(np.float32),
        "ink": _INKS[rng.integers(0, len(_INKS), n)],
        "paper": _PAPERS[rng.integers(0, len(_PAPERS), n)],
    }


def _segment_distance(u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance from every pixel to segments ``a-b`` (``a``, ``b``: ``[n, 2]``)."""
    ax, ay = a[:, 0, None, None], a[:, 1, None, None]
    bx, by = b[:, 0, None, None], b[:, 1, None, None]
    dx, dy = bx - ax, by - ay
    t = np.clip(((u - ax) * dx + (v - ay) * dy) / (dx * dx + dy * dy + 1e-8), 0.0, 1.0)
    return np.sqrt((u - ax - t * dx) ** 2 + (v - ay - t * dy) ** 2)


def _strokes_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    pts = p["pts"] + rng.normal(0, 0.05, p["pts"].shape).astype(np.float32)
    dist = np.full(cv.u.shape, np.inf, dtype=np.float32)
    for s in range(_MAX_STROKES):
        far = np.where(p["active"][:, s, None, None] > 0, 0.0, np.inf).astype(np.float32)
        for i in range(_POINTS - 1):
            d = _segment_distance(cv.u, cv.v, pts[:, s, i], pts[:, s, i + 1]) + far
            np.minimum(dist, d, out=dist)
    width = (p["width"] * rng.uniform(0.8, 1.25, cv.n)).astype(np.float32)[:, None, None]
    return _mix(p["paper"], p["ink"], _soft(dist - width / 2, cv.pw))


# gratings --------------------------------------------------------------------
def _gratings_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    pair = _pick_pair(rng, n, len(_PASTELS))
    return {
        "theta": rng.uniform(0, np.pi, (n, 2)).astype(np.float32),
        "freq": rng.uniform(0.8, 3.5, (n, 2)).astype(np.float32),
        "phase": rng.uniform(0, 2 * np.pi, (n, 2)).astype(np.float32),
        "w2": (rng.uniform(0.5, 1.0, n) * (rng.random(n) < 0.6)).astype(np.float32),
        "c0": _PASTELS[pair[:, 0]],
        "c1": _PASTELS[pair[:, 1]],
    }


def _gratings_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    total = np.zeros(cv.u.shape, dtype=np.float32)
    for j in range(2):
        u, _ = _rotate(cv.u, cv.v, p["theta"][:, j])
        ph = p["phase"][:, j] + rng.normal(0, 0.9, cv.n).astype(np.float32)
        f = p["freq"][:, j] * rng.uniform(0.93, 1.07, cv.n).astype(np.float32)
        w = np.float32(1.0) if j == 0 else p["w2"][:, None, None]
        total += w * np.sin(np.pi * f[:, None, None] * u + ph[:, None, None])
    val = 0.5 + 0.5 * total / (1.0 + p["w2"][:, None, None])
    return _mix(p["c0"], p["c1"], val)


# blobs -----------------------------------------------------------------------
_BLOBS = 5


def _blobs_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    count = rng.integers(3, _BLOBS + 1, n)
    return {
        "pos": rng.uniform(-0.6, 0.6, (n, _BLOBS, 2)).astype(np.float32),
        "sigma": rng.uniform(0.12, 0.28, (n, _BLOBS)).astype(np.float32),
        "amp": (rng.uniform(0.6, 1.0, (n, _BLOBS)) * (np.arange(_BLOBS) < count[:, None])).astype(
            np.float32
        ),
        "colour": _LIGHTS[rng.integers(0, len(_LIGHTS), (n, _BLOBS))],
        "bg": _DARKS[rng.integers(0, len(_DARKS), n)],
    }


def _blobs_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    img = np.repeat(_col(p["bg"]), cv.size, 2).repeat(cv.size, 3)
    pos = p["pos"] + rng.normal(0, 0.12, p["pos"].shape).astype(np.float32)
    sig = p["sigma"] * rng.uniform(0.85, 1.15, p["sigma"].shape).astype(np.float32)
    amp = p["amp"] * rng.uniform(0.75, 1.25, p["amp"].shape).astype(np.float32)
    for k in range(_BLOBS):
        r2 = (cv.u - pos[:, k, 0, None, None]) ** 2 + (cv.v - pos[:, k, 1, None, None]) ** 2
        g = amp[:, k, None, None] * np.exp(-r2 / (2 * sig[:, k, None, None] ** 2))
        img += g[:, None] * _col(p["colour"][:, k])
    return img


# tilings ---------------------------------------------------------------------
def _tilings_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    pair = _pick_pair(rng, n, 4)  # red, green, blue, yellow: 12 ordered colour pairs
    return {
        "kind": rng.integers(0, 4, n).astype(np.float32),  # checker, stripes, bricks, grid
        "freq": rng.uniform(1.0, 2.6, (n, 2)).astype(np.float32),  # cells per unit
        "theta": rng.uniform(0, np.pi, n).astype(np.float32),
        "offset": rng.uniform(0, 2, (n, 2)).astype(np.float32),
        "c0": _SATURATED[pair[:, 0]],
        "c1": _SATURATED[pair[:, 1]],
    }


def _tilings_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    u, v = _rotate(cv.u, cv.v, p["theta"])
    off = p["offset"] + rng.normal(0, 0.85, p["offset"].shape).astype(np.float32)
    fx, fy = p["freq"][:, 0, None, None], p["freq"][:, 1, None, None]
    a = u * fx + off[:, 0, None, None]
    b = v * fy + off[:, 1, None, None]
    ra, rb = cv.pw * fx, cv.pw * fy
    sa, sb = _square_wave(a, ra), _square_wave(b, rb)
    checker = sa * sb
    stripes = sa
    row = np.floor(b / 2.0)
    brick_a = a / 2.0 + 0.5 * np.mod(row, 2.0)  # one brick per 2 units of a, offset rows
    mortar = np.minimum(
        np.abs(brick_a - np.round(brick_a)) / (ra / 2.0 + 1e-8),
        np.abs(b / 2.0 - np.round(b / 2.0)) / (rb / 2.0 + 1e-8),
    )
    bricks = np.clip(mortar - 1.5, -1.0, 1.0)
    grid_d = np.minimum(
        np.abs(a / 2.0 - np.round(a / 2.0)) / (ra / 2.0 + 1e-8),
        np.abs(b / 2.0 - np.round(b / 2.0)) / (rb / 2.0 + 1e-8),
    )
    grid = np.clip(grid_d - 2.0, -1.0, 1.0)
    kind = p["kind"][:, None, None]
    val = np.select([kind == 0, kind == 1, kind == 2], [checker, stripes, bricks], grid)
    return _mix(p["c0"], p["c1"], 0.5 + 0.5 * val)


# textures --------------------------------------------------------------------
def _freq_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    fy = np.fft.fftfreq(size).astype(np.float32) * size  # cycles per image
    fx = np.fft.rfftfreq(size).astype(np.float32) * size
    return np.meshgrid(fy, fx, indexing="ij")


def _textures_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    pair = _pick_pair(rng, n, len(_EARTH))  # 12 ordered pairs: colour is a weak cue
    return {
        "f0": rng.uniform(2.0, 7.0, n).astype(np.float32),
        "theta": rng.uniform(0, np.pi, n).astype(np.float32),
        "aniso": rng.uniform(0.0, 1.0, n).astype(np.float32),
        "bw": rng.uniform(0.3, 0.6, n).astype(np.float32),
        "alpha": rng.uniform(0.65, 0.85, n).astype(np.float32),
        # the class exemplar: white noise, at the rendering size
        "template": rng.standard_normal((n, size, size)).astype(np.float32),
        "c0": _EARTH[pair[:, 0]],
        "c1": _EARTH[pair[:, 1]],
    }


def _textures_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    size, n = cv.size, cv.n
    ky, kx = _freq_grid(size)
    ky, kx = ky[None], kx[None]
    rad = np.sqrt(kx**2 + ky**2) + 1e-6
    ang = np.arctan2(ky, kx)
    f0, th = p["f0"][:, None, None], p["theta"][:, None, None]
    band = np.exp(-0.5 * (np.log(rad / f0) / p["bw"][:, None, None]) ** 2)
    orient = np.cos(ang - th) ** 2  # symmetric in +-k, as a real field's spectrum must be
    filt = band * (1 - p["aniso"][:, None, None] + p["aniso"][:, None, None] * orient**4)
    filt[:, 0, 0] = 0.0
    shift = rng.normal(0, 0.04 * size, (n, 2)).astype(np.float32)
    phase = np.exp(
        -2j * np.pi * (ky * shift[:, 0, None, None] + kx * shift[:, 1, None, None]) / size
    )
    tmpl = np.fft.rfft2(p["template"]) * phase
    fresh = np.fft.rfft2(rng.standard_normal((n, size, size)).astype(np.float32))
    a = p["alpha"][:, None, None]
    field = np.fft.irfft2(filt * (a * tmpl + np.sqrt(1 - a**2) * fresh), s=(size, size))
    field = (field / (field.std(axis=(1, 2), keepdims=True) + 1e-6)).astype(np.float32)
    val = 1.0 / (1.0 + np.exp(-1.6 * field))
    return _mix(p["c0"], p["c1"], val)


# rings (OOD) -----------------------------------------------------------------
_RINGS = 4


def _rings_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    count = rng.integers(2, _RINGS + 1, n)
    return {
        "centre": rng.uniform(-0.25, 0.25, (n, 2)).astype(np.float32),
        "aspect": rng.uniform(0.65, 1.0, n).astype(np.float32),
        "radius": np.sort(rng.uniform(0.12, 0.9, (n, _RINGS)), 1).astype(np.float32),
        "width": rng.uniform(0.04, 0.12, (n, _RINGS)).astype(np.float32),
        "active": (np.arange(_RINGS) < count[:, None]).astype(np.float32),
        "colour": _SATURATED[rng.integers(0, len(_SATURATED), (n, _RINGS))],
        "bg": _MUTED[rng.integers(0, len(_MUTED), n)] * 0.6,
    }


def _rings_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    u = cv.u - p["centre"][:, 0, None, None]
    v = (cv.v - p["centre"][:, 1, None, None]) / p["aspect"][:, None, None]
    rho = np.sqrt(u * u + v * v)
    img = np.repeat(_col(p["bg"]), cv.size, 2).repeat(cv.size, 3)
    radius = p["radius"] * rng.uniform(0.92, 1.08, p["radius"].shape).astype(np.float32)
    for k in range(_RINGS):
        d = np.abs(rho - radius[:, k, None, None]) - p["width"][:, k, None, None]
        alpha = _soft(d, cv.pw) * p["active"][:, k, None, None]
        img = _mix(img, p["colour"][:, k], alpha)
    return img


# lattices (OOD) --------------------------------------------------------------
def _lattices_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    spacing = rng.uniform(0.25, 0.5, n)
    angle = rng.choice(np.array([np.pi / 2, np.pi / 3, 0.0]), n)
    angle = np.where(angle == 0.0, rng.uniform(np.pi / 4, np.pi / 2, n), angle)
    pair = _pick_pair(rng, n, len(_SATURATED))
    return {
        "spacing": spacing.astype(np.float32),
        "angle": angle.astype(np.float32),
        "theta": rng.uniform(0, np.pi, n).astype(np.float32),
        "dot": (spacing * rng.uniform(0.15, 0.35, n)).astype(np.float32),
        "c0": _SATURATED[pair[:, 0]] * 0.5,
        "c1": _SATURATED[pair[:, 1]],
    }


def _lattices_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    u, v = _rotate(cv.u, cv.v, p["theta"])
    sp, ang = p["spacing"][:, None, None], p["angle"][:, None, None]
    # basis e1 = sp (1, 0), e2 = sp (cos a, sin a); lattice coords (a, b)
    off = rng.uniform(0, 1, (cv.n, 2, 1, 1)).astype(np.float32)
    b = v / (sp * np.sin(ang)) + off[:, 1]
    a = (u - b * sp * np.cos(ang)) / sp + off[:, 0]
    fa, fb = a - np.round(a), b - np.round(b)
    dx = sp * (fa + fb * np.cos(ang))
    dy = sp * fb * np.sin(ang)
    dist = np.sqrt(dx * dx + dy * dy)
    return _mix(p["c0"], p["c1"], _soft(dist - p["dot"][:, None, None], cv.pw))


# spirals (OOD) ---------------------------------------------------------------
def _spirals_params(rng: np.random.Generator, n: int, size: int) -> _Params:
    pair = _pick_pair(rng, n, len(_PASTELS))
    return {
        "arms": rng.integers(1, 6, n).astype(np.float32),
        "tight": (rng.uniform(2.0, 7.0, n) * rng.choice(np.array([-1.0, 1.0]), n)).astype(
            np.float32
        ),
        "log": (rng.random(n) < 0.5).astype(np.float32),
        "c0": _PASTELS[pair[:, 0]] * 0.8,
        "c1": _SATURATED[rng.integers(0, len(_SATURATED), n)],
    }


def _spirals_render(cv: _Canvas, p: _Params, rng: np.random.Generator) -> np.ndarray:
    rho = np.sqrt(cv.u**2 + cv.v**2) + 1e-3
    phi = np.arctan2(cv.v, cv.u)
    lg = p["log"][:, None, None]
    radial = lg * np.log(rho) + (1 - lg) * 2.0 * rho
    t = p["arms"][:, None, None] * phi + p["tight"][:, None, None] * radial
    # ramp: how far t moves per pixel, to anti-alias the arms
    ramp = (np.abs(p["tight"][:, None, None]) * (lg / rho + (1 - lg) * 2.0)) * cv.pw
    ramp = ramp + p["arms"][:, None, None] * cv.pw / rho
    val = np.clip(np.sin(t) / (ramp + 1e-3), -1.0, 1.0)
    return _mix(p["c0"], p["c1"], 0.5 + 0.5 * val)


_FAMILIES: dict[str, _Family] = {
    "shapes": _Family(
        "filled silhouettes (polygons/discs with harmonic deformations) on flat backgrounds",
        _shapes_params,
        _shapes_render,
        _Jitter(shift=0.3, rot=30.0, scale=(0.75, 1.2), gain=0.1),
    ),
    "strokes": _Family(
        "glyph-like ink polylines on light paper",
        _strokes_params,
        _strokes_render,
        _Jitter(shift=0.15, rot=12.0, scale=(0.85, 1.1)),
    ),
    "gratings": _Family(
        "smooth oriented sinusoidal gratings and plaids in pastel colours",
        _gratings_params,
        _gratings_render,
        _Jitter(shift=0.0, rot=8.0, scale=(0.95, 1.05)),
    ),
    "blobs": _Family(
        "constellations of soft Gaussian light blobs on a dark background",
        _blobs_params,
        _blobs_render,
        _Jitter(shift=0.2, rot=30.0, scale=(0.85, 1.15)),
    ),
    "tilings": _Family(
        "hard-edged checkerboards, stripes, brick walls and grids in saturated colours",
        _tilings_params,
        _tilings_render,
        _Jitter(shift=0.0, rot=8.0, scale=(0.92, 1.08)),
    ),
    "textures": _Family(
        "band-pass filtered coloured noise with class-specific spectra and exemplars",
        _textures_params,
        _textures_render,
        _Jitter(shift=0.0, rot=0.0, scale=(1.0, 1.0), distractor=0.3),
    ),
    "rings": _Family(
        "concentric elliptic annuli around an off-centre point",
        _rings_params,
        _rings_render,
        _Jitter(shift=0.1, rot=20.0, scale=(0.9, 1.1)),
    ),
    "lattices": _Family(
        "dot lattices (square, hexagonal, oblique)",
        _lattices_params,
        _lattices_render,
        _Jitter(shift=0.0, rot=10.0, scale=(0.9, 1.1)),
    ),
    "spirals": _Family(
        "logarithmic and Archimedean spirals with 1-5 arms",
        _spirals_params,
        _spirals_render,
        _Jitter(shift=0.1, rot=30.0, scale=(0.9, 1.1)),
    ),
}


# ----------------------------------------------------------------------------- post-processing
def _postprocess(
    img: np.ndarray, cv: _Canvas, rng: np.random.Generator, jit: _Jitter
) -> np.ndarray:
    """Colour jitter, illumination gradient, a distractor and pixel noise; returns uint8."""
    n = cv.n
    gain = 1.0 + rng.normal(0, jit.gain, (n, 3, 1, 1)).astype(np.float32)
    offset = rng.normal(0, jit.offset, (n, 1, 1, 1)).astype(np.float32)
    gx, gy = rng.uniform(-jit.gradient, jit.gradient, (2, n, 1, 1)).astype(np.float32)
    img = img * gain
    img += offset + (gx * cv.x + gy * cv.y)[:, None]

    # one distractor: a small disc or a short bar in a random colour, at a random place
    present = rng.random(n) < jit.distractor
    centre = rng.uniform(-0.8, 0.8, (n, 2, 1, 1)).astype(np.float32)
    radius = rng.uniform(0.06, 0.14, (n, 1, 1)).astype(np.float32)
    bar = rng.random((n, 1, 1)) < 0.5
    ang = rng.uniform(0, np.pi, n).astype(np.float32)
    colour = rng.uniform(0, 1, (n, 3)).astype(np.float32)
    dx, dy = cv.x - centre[:, 0], cv.y - centre[:, 1]
    along, across = _rotate(dx, dy, ang)
    d_disc = np.sqrt(dx * dx + dy * dy) - radius
    d_bar = np.maximum(np.abs(along) - 2.0 * radius, np.abs(across) - 0.3 * radius)
    pw = np.float32(2.0 / cv.size)
    alpha = _soft(np.where(bar, d_bar, d_disc), pw) * present[:, None, None]
    img = _mix(img, colour, alpha)

    # pixel noise: uniform with std ``jit.noise`` (random bytes are ~8x cheaper than normals;
    # uniform bytes have std 256 / sqrt(12)); the + 0.5 rounds to nearest on the uint8 cast
    noise = np.frombuffer(rng.bytes(img.size), dtype=np.uint8).reshape(img.shape)
    scale = np.float32(jit.noise * 255.0 * np.sqrt(12.0) / 256.0)
    img *= np.float32(255.0)
    img += noise * scale + np.float32(0.5 - 127.5 * scale)
    np.clip(img, np.float32(0.0), np.float32(255.0), out=img)
    return img.astype(np.uint8).transpose(0, 2, 3, 1)


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
