"""Episodes gathered on the training device from image pools that live there.

At the paper's scale (84 px, about 200 images per episode, two current and two replayed
episodes per iteration) copying every episode's images from host memory to a GPU would make
the data path, not the network, the limit. A :class:`DeviceEpisodeSampler` copies each
domain's uint8 images to the device **once** (:class:`DeviceImagePools`, shared by the train,
validation and test samplers of a stream) and then builds each episode by indexing those
pools on the device. Only the episode's indices (a few hundred integers) cross from the host.

Which images an episode holds is decided exactly as :class:`~.episodes.EpisodeSampler` decides
it (the same :meth:`~.episodes.EpisodeSampler.draw`), so with ``device="cpu"`` it gives the
very episodes the host sampler gives, tensor for tensor; the tests check it. Images stay uint8
until the backbone's input conversion, which runs on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .domain import Domain
from .episodes import Episode, EpisodeConfig, EpisodeSampler

__all__ = ["DeviceImagePools", "DeviceEpisodeSampler", "to_device"]


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """``t`` on ``device``. A host tensor bound for a GPU is copied from pinned memory without
    blocking the host (a pageable copy would wait for it); other copies are plain ``.to``."""
    if t.device == device:
        return t
    if t.is_cpu and torch.cuda.is_available() and device.type != t.device.type:
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


class DeviceImagePools:
    """Each domain's uint8 images ``[N, H, W, 3]`` as one tensor on ``device``, copied once.

    Args:
        device: where the pools live (``"cuda"``, ``"cuda:1"``, ``"cpu"``).

    A pool is keyed by the :class:`~.domain.Domain` object, so the samplers of one stream
    (train, validation and test draw from the same domain) share it.
    """

    def __init__(self, device: str | torch.device) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"image pools on {self.device} need CUDA, which this torch build or machine "
                "does not have; fix: use device='cpu' (or a machine with a GPU)"
            )
        self._pools: dict[int, tuple[Domain, Tensor]] = {}

    def images(self, domain: Domain) -> Tensor:
        """``domain``'s images on the device (copied on first use)."""
        hit = self._pools.get(id(domain))
        if hit is None or hit[0] is not domain:
            pool = torch.from_numpy(np.ascontiguousarray(domain.images)).to(self.device)
            hit = (domain, pool)
            self._pools[id(domain)] = hit
        return hit[1]

    @property
    def nbytes(self) -> int:
        """Bytes held on the device."""
        return sum(p.nbytes for _, p in self._pools.values())

    def __repr__(self) -> str:
        return (
            f"DeviceImagePools({self.device}, {len(self._pools)} domains, "
            f"{self.nbytes / 2**20:.1f} MiB)"
        )


class DeviceEpisodeSampler(EpisodeSampler):
    """An :class:`~.episodes.EpisodeSampler` whose episodes are gathered on a device.

    Args:
        domain, ood_sources, split, config, seed, small_classes: as
            :class:`~.episodes.EpisodeSampler` (the same checks, the same episodes).
        pools: the :class:`DeviceImagePools` to gather from; their device is the episodes'.

    ``sample(i)`` returns an :class:`~.episodes.Episode` whose images and labels are on
    ``pools.device``; its oracle (for metrics only) stays on the host, as small tensors.
    """

    def __init__(
        self,
        domain: Domain,
        ood_sources: Sequence[Domain] = (),
        *,
        pools: DeviceImagePools,
        split: str = "train",
        config: EpisodeConfig = EpisodeConfig(),  # noqa: B008 (frozen, as EpisodeSampler)
        seed: int = 0,
        small_classes: str = "error",
    ) -> None:
        super().__init__(
            domain,
            ood_sources,
            split=split,
            config=config,
            seed=seed,
            small_classes=small_classes,
        )
        self.pools = pools
        self.device = pools.device
        # One pool per source: the domain first, then the OOD sources in order, so that an
        # unlabeled image of source s (-1 for the domain) lives in pool s + 1.
        self._images = [pools.images(domain), *(pools.images(s) for s in self.ood_sources)]
        support_y, query_y = self._labels()
        self._support_y = torch.from_numpy(support_y).to(self.device)
        self._query_y = torch.from_numpy(query_y).to(self.device)

    def __repr__(self) -> str:
        return "Device" + super().__repr__()[:-1] + f", device={self.device})"

    def sample(self, index: int) -> Episode:
        """Episode ``index`` on the device: a pure function of ``(self.seed, index)``.

        Its indices cross to the device in one copy: the support and query rows, then the
        unlabeled rows grouped by source (domain first, then each OOD source) with their
        positions in the episode, so that each pool is read with one gather and the rows are
        put back in the episode's (shuffled) order with one scatter.
        """
        draw = self.draw(index)
        n_lab = draw.support_index.size + draw.query_index.size
        u_src = draw.unlabeled_source
        by_source = np.argsort(u_src, kind="stable")
        counts = np.bincount(u_src + 1, minlength=len(self._images)).tolist()
        packed = np.concatenate(
            [draw.support_index, draw.query_index, by_source, draw.unlabeled_index[by_source]]
        )
        on_device = to_device(torch.from_numpy(packed), self.device)
        lab_idx, positions, u_idx = on_device.split([n_lab, u_src.size, u_src.size])
        lab_x = self._images[0].index_select(0, lab_idx)
        grouped = torch.cat(
            [pool.index_select(0, i) for pool, i in zip(self._images, u_idx.split(counts))]
        )
        unlabeled_x = torch.empty_like(grouped)
        unlabeled_x[positions] = grouped
        n_support = draw.support_index.size
        return Episode(
            support_x=lab_x[:n_support],
            support_y=self._support_y.clone(),
            query_x=lab_x[n_support:],
            query_y=self._query_y.clone(),
            unlabeled_x=unlabeled_x,
            oracle=self._oracle(draw),
        )
