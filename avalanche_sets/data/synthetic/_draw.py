"""The drawing kit every synthetic family uses: palettes, per-image jitter, the canvas of a chunk
of images, anti-aliased primitives, and the post-processing (colour jitter, illumination
gradient, a distractor, pixel noise) that turns a rendered chunk into uint8 images.

Geometry lives in continuous coordinates ``[-1, 1]^2``; images are drawn channels-first in
float32 and transposed once, at the end of :func:`_postprocess`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


# ----------------------------------------------------------------------------- palettes
def _palette(*colours: list[float]) -> np.ndarray:
    """``[n, 3]`` float32 RGB colours in ``[0, 1]``."""
    return np.array(colours, dtype=np.float32)


_SATURATED = _palette(  # red, green, blue, yellow, purple, cyan, orange, white
    [0.90, 0.15, 0.15], [0.15, 0.65, 0.20], [0.15, 0.30, 0.90], [0.95, 0.80, 0.10],
    [0.70, 0.20, 0.80], [0.10, 0.75, 0.80], [0.95, 0.50, 0.10], [0.95, 0.95, 0.95],
)  # fmt: skip
_MUTED = _palette([0.35, 0.35, 0.38], [0.45, 0.40, 0.30], [0.25, 0.35, 0.40], [0.40, 0.30, 0.38])
_INKS = _palette([0.05, 0.05, 0.08], [0.10, 0.10, 0.45], [0.40, 0.05, 0.05], [0.05, 0.30, 0.10])
_PAPERS = _palette([0.95, 0.93, 0.85], [0.88, 0.92, 0.95], [0.93, 0.90, 0.93])
_PASTELS = _palette(
    [0.95, 0.75, 0.75], [0.75, 0.90, 0.75], [0.75, 0.80, 0.95],
    [0.95, 0.92, 0.70], [0.85, 0.75, 0.92], [0.50, 0.50, 0.55],
)  # fmt: skip
_LIGHTS = _palette(
    [1.00, 0.35, 0.25], [0.30, 1.00, 0.40], [0.30, 0.50, 1.00],
    [1.00, 0.95, 0.30], [1.00, 0.40, 1.00], [0.30, 1.00, 1.00],
)  # fmt: skip
_DARKS = _palette([0.02, 0.02, 0.06], [0.06, 0.02, 0.02], [0.02, 0.05, 0.03])
_EARTH = _palette([0.55, 0.35, 0.20], [0.30, 0.45, 0.20], [0.75, 0.65, 0.45], [0.20, 0.25, 0.35])


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
