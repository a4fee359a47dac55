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

The package: :mod:`._draw` (palettes, the jittered canvas, anti-aliased primitives, the
post-processing every family shares), :mod:`._domains` (the six in-distribution families),
:mod:`._ood` (the three OOD families), :mod:`._build` (a domain from its arguments: generation
and cache).
"""

from ._build import (
    GENERATOR_VERSION,
    SYNTHETIC_DOMAINS,
    SYNTHETIC_ID_DOMAINS,
    SYNTHETIC_OOD_SOURCES,
    default_cache_dir,
    load_synthetic_domains,
    make_synthetic_domain,
)

__all__ = [
    "SYNTHETIC_ID_DOMAINS",
    "SYNTHETIC_OOD_SOURCES",
    "SYNTHETIC_DOMAINS",
    "GENERATOR_VERSION",
    "default_cache_dir",
    "make_synthetic_domain",
    "load_synthetic_domains",
]
