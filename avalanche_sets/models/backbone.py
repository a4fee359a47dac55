"""Convolutional embedding network ``h_θ`` shared by ORDER and every baseline.

The paper (§5, following Ren et al. 2018) uses a stack of conv blocks — 3×3 convolution with
64 filters, BatchNorm, ReLU, 2×2 max-pool — and flattens the last feature map:

* :func:`paper_backbone`: 5 blocks of 64 filters on 84 px images → 64·2·2 = 256-d,
* :func:`cpu_backbone`: 4 blocks on 32 px images → 64·2·2 = 256-d (CPU presets).

Episodes store images as uint8 ``[n, H, W, 3]`` (channels last). :func:`to_input` turns them into
the network's float input in one cheap op chain; :func:`embed_episodes` forwards all the images
of an episode (support, query, unlabeled) in **one** backbone call (design §8).

Speed options (design §8): ``channels_last`` memory format and the backbone's ``precision``:
``"fp32"``, ``"bf16"`` (bfloat16 autocast of the backbone's forward) or ``"auto"`` (bf16 where
the device runs it natively — oneDNN with AVX-512 BF16 or AMX on CPU — fp32 otherwise, see
:func:`resolve_precision`). Embeddings always come back as float32, so the prototype
distances, heads, MI and OT terms computed from them stay in fp32.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor, nn

from ..defaults import PRECISIONS

__all__ = [
    "ConvBackbone",
    "paper_backbone",
    "cpu_backbone",
    "to_input",
    "bf16_supported",
    "autocast_bf16",
    "PRECISIONS",
    "check_precision",
    "resolve_precision",
    "embed_episodes",
    "PIXEL_MEAN",
    "PIXEL_STD",
]

#: Fixed per-channel normalisation of :func:`to_input`: ``x = (pixel / 255 - 0.5) / 0.5``, i.e.
#: pixels mapped to ``[-1, 1]``. Dataset-independent on purpose: SETS streams several domains
#: whose statistics differ, and BatchNorm after the first convolution absorbs any offset/scale.
PIXEL_MEAN = 0.5
PIXEL_STD = 0.5

#: Values of the backbone's ``precision`` setting (and of the presets' ``precision``).


class ConvBackbone(nn.Module):
    """``n_blocks`` × (3×3 conv with ``width`` filters, BatchNorm, ReLU, 2×2 max-pool), flattened.

    Args (keyword-only):
        n_blocks: number of conv blocks (each halves the spatial size, rounding down).
        width: filters per convolution.
        image_size: side of the (square) input images in pixels.
        in_channels: input channels (3 for RGB).
        channels_last: store the weights in ``torch.channels_last`` memory format and feed the
            input that way (faster convolutions on CPU with oneDNN, design §8). Numerically the
            same network.
        precision: ``"fp32"`` (default), ``"bf16"`` (the forward runs under bfloat16 autocast:
            convolutions, BatchNorm, ReLU and pooling in bf16; emulated, hence slow, where the
            device has no native bf16) or ``"auto"`` (bf16 where the input's device runs it
            natively, fp32 otherwise; decided per device type at forward time, see
            :func:`resolve_precision`).

    Attributes:
        out_dim: embedding size, ``width · s · s`` with ``s = image_size // 2**n_blocks``.
        feature_size: ``s``, the side of the last feature map.

    ``forward(x)`` accepts either the float input ``[n, in_channels, H, W]`` (e.g. from
    :func:`to_input`) or raw uint8 images ``[n, H, W, in_channels]`` (converted with
    :func:`to_input`), and returns float32 embeddings ``[n, out_dim]`` — also under bf16, so
    everything downstream of the backbone stays in fp32.

    Raises:
        ValueError: on non-positive sizes, an image too small for ``n_blocks`` pooling stages,
            or an unknown ``precision``.
    """

    def __init__(
        self,
        *,
        n_blocks: int = 4,
        width: int = 64,
        image_size: int = 32,
        in_channels: int = 3,
        channels_last: bool = False,
        precision: str = "fp32",
    ) -> None:
        super().__init__()
        check_precision(precision, where="ConvBackbone")
        for name, value in (
            ("n_blocks", n_blocks),
            ("width", width),
            ("image_size", image_size),
            ("in_channels", in_channels),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ConvBackbone: {name} must be a positive integer, got {value!r}")
        side = image_size // 2**n_blocks
        if side < 1:
            raise ValueError(
                f"ConvBackbone: image_size = {image_size} px is too small for n_blocks = "
                f"{n_blocks} 2x2 pooling stages (needs at least {2**n_blocks} px); use fewer "
                "blocks or larger images"
            )
        self.n_blocks = n_blocks
        self.width = width
        self.image_size = image_size
        self.in_channels = in_channels
        self.channels_last = bool(channels_last)
        self.precision = precision
        self.feature_size = side
        self.out_dim = width * side * side

        layers: list[nn.Module] = []
        channels = in_channels
        for _ in range(n_blocks):
            # Pooling before the ReLU: max-pooling commutes with any non-decreasing map, so the
            # block computes exactly conv → BN → ReLU → pool (values and gradients, bit for bit,
            # tests/models/test_backbone.py), with the ReLU on a 4× smaller map. Neither layer
            # has state, so the parameter names (and checkpoints) are those of the paper's order.
            layers += [
                nn.Conv2d(channels, width, kernel_size=3, padding=1),
                nn.BatchNorm2d(width),
                nn.MaxPool2d(2),
                nn.ReLU(inplace=True),
            ]
            channels = width
        self.features = nn.Sequential(*layers)
        if self.channels_last:
            self.to(memory_format=torch.channels_last)

    def extra_repr(self) -> str:
        return (
            f"n_blocks={self.n_blocks}, width={self.width}, image_size={self.image_size}, "
            f"out_dim={self.out_dim}, channels_last={self.channels_last}, "
            f"precision={self.precision!r}"
        )

    def uses_bf16(self, device_type: str = "cpu") -> bool:
        """Whether the forward on ``device_type`` runs under bf16 autocast."""
        return resolve_precision(self.precision, device_type) == "bf16"

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype == torch.uint8:
            x = to_input(x, channels_last=self.channels_last)
        elif self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"ConvBackbone expects [n, {self.in_channels}, H, W] float input or uint8 "
                f"[n, H, W, {self.in_channels}] images, got shape {tuple(x.shape)}"
            )
        if x.shape[-2] != self.image_size or x.shape[-1] != self.image_size:
            raise ValueError(
                f"ConvBackbone was built for {self.image_size} px images, got "
                f"{x.shape[-2]}x{x.shape[-1]}"
            )
        device_type = x.device.type
        if self.uses_bf16(device_type):
            # Only the backbone runs in bf16; the embedding leaves it as fp32 (below).
            with torch.autocast(device_type, dtype=torch.bfloat16):
                return self.features(x).flatten(1).float()
        return self.features(x).flatten(1).float()


def paper_backbone(
    image_size: int = 84, *, channels_last: bool = False, precision: str = "fp32"
) -> ConvBackbone:
    """The paper's embedding network: 5 blocks of 64 filters; 84 px → 256-d."""
    return ConvBackbone(
        n_blocks=5,
        width=64,
        image_size=image_size,
        channels_last=channels_last,
        precision=precision,
    )


def cpu_backbone(
    image_size: int = 32, width: int = 64, *, channels_last: bool = False, precision: str = "fp32"
) -> ConvBackbone:
    """The CPU preset: 4 blocks of ``width`` filters; 32 px, 64 filters → 256-d."""
    return ConvBackbone(
        n_blocks=4,
        width=width,
        image_size=image_size,
        channels_last=channels_last,
        precision=precision,
    )


def to_input(images: Tensor, *, channels_last: bool = True) -> Tensor:
    """uint8 images ``[n, H, W, C]`` → float32 ``[n, C, H, W]`` normalised to ``[-1, 1]``.

    ``x = (pixel / 255 - PIXEL_MEAN) / PIXEL_STD`` with the fixed ``PIXEL_MEAN = PIXEL_STD = 0.5``.
    The permute is a view, so the result is in ``torch.channels_last`` memory format for free
    (one conversion + one fused scale/shift); with ``channels_last=False`` it is made
    NCHW-contiguous (one extra copy) for the plain fp32 path.
    """
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise ValueError(
            f"to_input expects uint8 images [n, H, W, C], got {images.dtype} {tuple(images.shape)}"
        )
    scale = 1.0 / (255.0 * PIXEL_STD)
    shift = PIXEL_MEAN / PIXEL_STD
    x = images.permute(0, 3, 1, 2).to(torch.float32).mul_(scale).sub_(shift)
    if not channels_last:
        x = x.contiguous()
    return x


_BF16_NATIVE: dict[str, bool] = {}


def bf16_supported(device_type: str = "cpu") -> bool:
    """Whether bfloat16 matmuls/convolutions run natively (fast) on this device.

    On CPU this asks oneDNN (AVX-512 BF16 or AMX); elsewhere false unless CUDA says so.
    The answer is cached per device type (it is asked on every forward of an ``"auto"``
    backbone).
    """
    if device_type not in _BF16_NATIVE:
        _BF16_NATIVE[device_type] = _ask_bf16_native(device_type)
    return _BF16_NATIVE[device_type]


def _ask_bf16_native(device_type: str) -> bool:
    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device_type != "cpu":
        return False
    try:
        return bool(
            torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
        )
    except (AttributeError, RuntimeError):  # pragma: no cover - depends on the torch build
        return False


def check_precision(precision: str, *, where: str = "precision") -> str:
    """Raise a ValueError unless ``precision`` is one of :data:`PRECISIONS`; return it."""
    if precision not in PRECISIONS:
        raise ValueError(
            f"{where}: precision must be one of {list(PRECISIONS)}, got {precision!r}; fix: "
            "'auto' (bf16 where the device runs it natively, else fp32) or 'fp32' (exact)"
        )
    return precision


def resolve_precision(precision: str, device_type: str = "cpu") -> str:
    """What ``precision`` means on ``device_type``: ``"fp32"`` or ``"bf16"``.

    ``"auto"`` is ``"bf16"`` exactly where :func:`bf16_supported` reports native bf16 (on CPU:
    oneDNN with AVX-512 BF16 or AMX), ``"fp32"`` otherwise; ``"fp32"`` and ``"bf16"`` mean
    themselves. Runs record the resolved value, since bf16 changes the numbers.
    """
    check_precision(precision)
    if precision == "auto":
        return "bf16" if bf16_supported(device_type) else "fp32"
    return precision


_warned_no_bf16: set[str] = set()


@contextlib.contextmanager
def autocast_bf16(
    enabled: bool = True, *, device_type: str = "cpu", force: bool = False
) -> Iterator[bool]:
    """Context: ``torch.autocast(device_type, dtype=torch.bfloat16)`` when enabled and supported.

    Where the hardware lacks native bf16 (see :func:`bf16_supported`) the block runs in plain
    fp32 instead — emulated bf16 would be slower and less accurate — with a one-time warning.
    ``force=True`` autocasts anyway (for numerical tests). Yields whether autocast is active.

    Keep distance/MI/OT computations in fp32: :class:`ConvBackbone` returns float32 embeddings
    and :mod:`avalanche_sets.models.heads` disables autocast internally.
    """
    active = bool(enabled) and (force or bf16_supported(device_type))
    if enabled and not active and device_type not in _warned_no_bf16:
        _warned_no_bf16.add(device_type)
        warnings.warn(
            f"bf16 autocast requested but this {device_type} has no native bfloat16 support; "
            "running in float32",
            RuntimeWarning,
            stacklevel=3,
        )
    if active:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            yield True
    else:
        yield False


def embed_episodes(backbone: nn.Module, parts: Sequence[Tensor]) -> list[Tensor]:
    """Embed several image sets — e.g. an episode's support, query and unlabeled — in ONE call.

    Args:
        backbone: maps float ``[n, C, H, W]`` (or uint8 ``[n, H, W, C]``) to ``[n, d]``.
        parts: uint8 tensors ``[..., n_i, H, W, C]`` with the same image shape; leading
            dimensions (e.g. the meta-batch ``B`` of an :class:`EpisodeBatch`) may differ per
            part and are kept. Empty parts (``n_i = 0``, e.g. no unlabeled set) are fine.

    Returns:
        float32 embeddings ``[..., n_i, d]``, one per part, in order.

    All images are concatenated, converted once (:func:`to_input`, in the backbone's memory
    format) and forwarded together, then split (design §8). In training mode BatchNorm therefore
    normalises with the statistics of *all* the images at once (support, query and unlabeled,
    over the whole meta-batch) — that is the intended training behaviour; in eval mode (running
    statistics) the result equals embedding each part separately.
    """
    if len(parts) == 0:
        return []
    image_shape = parts[0].shape[-3:]
    for p in parts:
        if p.dtype != torch.uint8 or p.dim() < 4 or p.shape[-3:] != image_shape:
            raise ValueError(
                "embed_episodes expects uint8 image tensors [..., n, H, W, C] of one image "
                f"shape, got {[(str(q.dtype), tuple(q.shape)) for q in parts]}"
            )
    lead = [p.shape[:-3] for p in parts]
    counts = [math.prod(s) for s in lead]
    flat = torch.cat([p.reshape(-1, *image_shape) for p in parts])
    channels_last = bool(getattr(backbone, "channels_last", True))
    emb = backbone(to_input(flat, channels_last=channels_last)).float()
    return [e.reshape(*s, emb.shape[-1]) for e, s in zip(emb.split(counts), lead)]
