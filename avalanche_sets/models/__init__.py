"""Embedding network and prototype heads shared by ORDER and the baselines."""

from .backbone import (
    PIXEL_MEAN,
    PIXEL_STD,
    PRECISIONS,
    ConvBackbone,
    autocast_bf16,
    bf16_supported,
    check_precision,
    cpu_backbone,
    embed_episodes,
    paper_backbone,
    resolve_precision,
    to_input,
)
from .heads import (
    REFINE_MODES,
    MaskedSoftKMeans,
    episode_logits,
    proto_logits,
    prototypes,
    soft_kmeans_refine,
    squared_euclidean,
)

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
    "prototypes",
    "squared_euclidean",
    "proto_logits",
    "soft_kmeans_refine",
    "MaskedSoftKMeans",
    "episode_logits",
    "REFINE_MODES",
]
