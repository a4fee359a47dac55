"""The three OOD families of the synthetic benchmark (``rings``, ``lattices``, ``spirals``): the
out-of-distribution images of its episodes, drawn like the in-distribution families.
"""

from __future__ import annotations

import numpy as np

from ._draw import (
    _MUTED,
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
)

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


_OOD_FAMILIES: dict[str, _Family] = {
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
