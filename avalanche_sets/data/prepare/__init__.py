"""From public torchvision datasets to a SETS stream of domain packs.

:func:`prepare_torchvision_stream` reads datasets a user already has in a torchvision root (the
folder passed as ``root=`` to :mod:`torchvision.datasets`), through torchvision's own dataset
classes, and writes one ``.npz`` domain pack per dataset (format:
:mod:`avalanche_sets.data.packs`) plus ``manifest.json`` and ``README.md`` into an output
folder. ``avalanche-sets run --preset cpu --root <out>`` then runs on them::

    avalanche-sets prepare torchvision --root ~/torchvision --out packs/tv
    avalanche-sets run --preset cpu --root packs/tv

Nothing is downloaded unless ``download=True`` (CLI ``--download``), which passes
``download=True`` to torchvision for machines with internet access.

**The stream.** :data:`DEFAULT_DOMAINS` (six in-distribution domains, written as
``<name>.npz``) and :data:`DEFAULT_OOD` (OOD sources, written as ``ood_<name>.npz``, the prefix
by which the ``packs`` source tells OOD packs apart). Any dataset of :data:`TORCHVISION_SOURCES`
can take either role.

**The rules** (those of ``../shared/data/sets-mini``):

* every official part of a dataset that :data:`TORCHVISION_SOURCES` lists is read (e.g.
  CIFAR-100 train + test) and classes are merged by name; the official image splits are not
  kept, SETS splits *classes*;
* classes with fewer than ``min_images_per_class`` images (20) are left out, with a warning
  naming them; at most ``max_images_per_class`` (100) images per class are kept, drawn with a
  seeded generator (``np.random.default_rng([seed, crc32(name)])``);
* images: RGB (grey replicated), centre-cropped to a square, resized with Pillow LANCZOS to
  ``image_size``, uint8; labels sorted by class;
* class split: :func:`~avalanche_sets.data.packs.split_classes` ``(C, split, seed)``, i.e. the
  first ``round(0.2 C)`` classes of ``default_rng(seed).permutation(C)`` to test, the next to
  val, the rest to train (at least 5 in val/test when ``C >= 20``). A stream domain needs at
  least ``n_way`` classes in every split (an OOD source at least one), checked before any
  image is decoded.

**Integrity.** torchvision verifies the md5 of the files of CIFAR-100, Omniglot (its zip),
Flowers-102 (the ``.mat`` files) and SVHN even with ``download=False``. ``skip_md5=True`` (CLI
``--skip-md5``) reads such files as they are, e.g. an Omniglot folder whose zip was deleted:
the md5 check of that dataset's torchvision module is replaced by "the file exists" while the
dataset object is built.

The package: :mod:`._sources` (the torchvision datasets it reads and the checks of their
names), :mod:`._read` (dataset objects, labels and images out of a torchvision root),
:mod:`._build` (a domain pack per dataset, and the stream folder with its manifest).
"""

from ._build import (
    OOD_PREFIX,
    build_torchvision_pack,
    check_class_split,
    prepare_torchvision_stream,
)
from ._read import (
    DatasetNotFoundError,
    collect_labels,
    decode_images,
    open_torchvision_parts,
    pil_to_array,
    select_images,
)
from ._sources import (
    DEFAULT_DOMAINS,
    DEFAULT_OOD,
    TORCHVISION_SOURCES,
    TorchvisionSource,
    check_stream_names,
)

__all__ = [
    "TorchvisionSource",
    "TORCHVISION_SOURCES",
    "DEFAULT_DOMAINS",
    "DEFAULT_OOD",
    "OOD_PREFIX",
    "DatasetNotFoundError",
    "prepare_torchvision_stream",
    "check_stream_names",
    "check_class_split",
    "open_torchvision_parts",
    "collect_labels",
    "select_images",
    "pil_to_array",
    "decode_images",
    "build_torchvision_pack",
]
