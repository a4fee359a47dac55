"""The six in-distribution families of the synthetic benchmark (``shapes``, ``strokes``,
``gratings``, ``blobs``, ``tilings``, ``textures``): each draws its class parameters and renders
a chunk of images of given classes.
"""

from __future__ import annotations

import numpy as np

from ._draw import (
    _DARKS,
    _EARTH,
    _INKS,
    _LIGHTS,
    _MUTED,
    _PAPERS,
    _PASTELS,
    _SATURATED,
    _Canvas,
    _col,
    _Family,
    _Jitter,
    _mix,
    _Params,
    _pick_pair,
    _rotate,
    _soft,
    _square_wave,
)


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


_ID_FAMILIES: dict[str, _Family] = {
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
}
