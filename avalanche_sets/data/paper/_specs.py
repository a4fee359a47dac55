"""The nine datasets: names, splits, figures and accepted layouts in search order."""

from __future__ import annotations

from functools import partial

from ...defaults import DEFAULT_OOD
from ...suggest import did_you_mean
from . import _archives as A
from . import _releases as R
from ._common import (
    Figures,
    Layout,
    PaperDataset,
    _norm,
    _rule_chen,
    _rule_random,
    _rule_tseng,
    _rule_vuorio,
    _Scan,
)

AUTHORS_ARCHIVE = (
    "the ORDER authors' processed archive, linked from https://github.com/joey-wang123/Semi-meta "
    "(https://drive.google.com/file/d/12Gh7GrfUiusIbnd_q4LEw8QjLpJMJyTR), unpacked into <root>"
)

_SPLIT_JSONS = ("train_labels.json", "val_labels.json", "test_labels.json")


def _authors(folder: str, *others: str, figures: Figures) -> Layout:
    """The authors' ``<folder>/{split}_labels.json`` + ``<folder>/{split}/<label>.pt``.

    ``figures``: what the authors kept (the paper's class counts), not the whole release.
    """
    return Layout(
        label=f"the authors' archive ({folder}/)",
        markers=(*_SPLIT_JSONS, "train/*.pt"),
        scan=A.scan_authors,
        bases=(folder, *others, ""),
        named=True,  # the same markers in every dataset's folder of the archive
        figures=figures,
    )


_OOD_SPLIT = (
    "OOD source: seeded random 60/20/20 class split so that the OOD classes seen in training "
    "and in evaluation are disjoint: sorted class names, "
    "np.random.default_rng(class_split_seed).permutation(C), first round(0.2 C) -> test, next "
    "round(0.2 C) -> val, the rest -> train (the paper does not state how it split them)"
)

_PLANTAE_DIRS = ("plantae", "Plantae", "inat2017_plantae", "inat2017", "iNat2017", "inaturalist")
_PLANTAE_FULL = Figures(
    classes=2101,
    images=158_407,
    source="iNaturalist 2017 train+val Plantae: 2,101 species, 158,407 images",
)
_PLANTAE_200 = Figures(
    classes=200, max_per_class=600, source="Tseng et al.'s 200 species, at most 600 images each"
)


def _unpacked(label: str, folder: str, scan: _Scan, **more) -> Layout:
    """A layout found by one folder that is also the dataset's own folder (``markers=(folder,)``,
    ``sub=folder``): the shape of most releases, written once instead of in every entry.
    ``more`` takes the other :class:`Layout` fields (``named``, ``figures``, ``bases``)."""
    return Layout(label=label, markers=(folder,), sub=folder, scan=scan, **more)


def _kept(classes: int, max_per_class: int | None = None) -> Figures:
    return Figures(classes, None, max_per_class, f"the paper uses {classes} of its classes")


PAPER_DATASETS: dict[str, PaperDataset] = {
    s.name: s
    for s in (
        PaperDataset(
            name="plantae",
            title="Plantae (iNaturalist 2017)",
            role="id",
            split_sizes=(100, 50, 50),
            split=(
                "Tseng et al. (ICLR 2020) 100/50/50: the 200 species with the most images, "
                "ordered by ascending image count (ties by name), at most 600 images each "
                "(seeded choice), index i -> train if i % 2 == 0, val if i % 4 == 1, test if "
                "i % 4 == 3. Their script breaks count ties in os.listdir order and picks the "
                "600 images unseeded: their exact split comes from their base/val/novel.json "
                "or the authors' archive"
            ),
            where=(
                f"{AUTHORS_ARCHIVE}; or http://vllab.ucmerced.edu/ym41608/projects/"
                "CrossDomainFewShot/filelists/plantae.tar.gz (Tseng et al., ICLR 2020, "
                "https://github.com/hytseng0509/CrossDomainFewShot); or iNaturalist 2017 "
                "train_val_images.tar.gz, https://github.com/visipedia/inat_comp/tree/master/2017 "
                "(Van Horn et al., CVPR 2018)"
            ),
            dirnames=_PLANTAE_DIRS,
            layouts=(
                _authors("Plantae", *_PLANTAE_DIRS, figures=_PLANTAE_200),
                Layout(
                    label="Tseng et al.'s processed folder (write_plantae_filelist.py output)",
                    markers=("images", "base.json", "val.json", "novel.json"),
                    scan=R.scan_tseng_json,
                    figures=_PLANTAE_200,
                ),
                _unpacked(
                    "Tseng et al.'s plantae.tar.gz unpacked (species folders)",
                    "Plantae",
                    R.scan_folder,
                    figures=_PLANTAE_FULL,
                ),
                _unpacked(
                    "iNaturalist 2017 train_val_images.tar.gz unpacked",
                    "train_val_images/Plantae",
                    R.scan_folder,
                    figures=_PLANTAE_FULL,
                ),
                _unpacked(
                    "torchvision INaturalist(version='2017')",
                    "2017/Plantae",
                    R.scan_folder,
                    figures=_PLANTAE_FULL,
                ),
                _unpacked(
                    "Tseng et al.'s processed images/ without its json files",
                    "images",
                    R.scan_folder,
                    named=True,
                    figures=_PLANTAE_200,
                ),
                Layout(
                    label="species folders directly in the dataset folder",
                    markers=(),
                    scan=R.scan_folder,
                    bases=(*_PLANTAE_DIRS, ""),
                    named=True,
                    figures=_PLANTAE_FULL,
                ),
            ),
            figures=_PLANTAE_FULL,
            max_images_per_class=600,
            rule=_rule_tseng,
        ),
        PaperDataset(
            name="cub",
            title="CUB-200-2011",
            role="id",
            split_sizes=(100, 50, 50),
            split=(
                "Chen et al. (ICLR 2019, 'A closer look at few-shot classification') 100/50/50: "
                "class folders sorted by name, index i -> train if i % 2 == 0, val if "
                "i % 4 == 1, test if i % 4 == 3 (their write_CUB_filelist.py rule; exact, and "
                "the class lists torchmeta ships)"
            ),
            where=(
                f"{AUTHORS_ARCHIVE}; or https://data.caltech.edu/records/65de6-vp158 "
                "(CUB_200_2011.tgz); Wah et al., Caltech CNS-TR-2011-001 / Welinder et al. 2010"
            ),
            dirnames=("cub", "CUB", "cub200", "CUB_200_2011", "cubirds200"),
            layouts=(
                _authors("CUB", "cub", "cub200", figures=_kept(200, 60)),
                Layout(
                    label="torchmeta's processed CUB (torchmeta.datasets.CUB)",
                    markers=("train_data.hdf5", *_SPLIT_JSONS),
                    scan=A.scan_torchmeta_splits,
                    named=True,
                ),
                _unpacked(
                    "CUB_200_2011.tgz unpacked (learn2learn: cubirds200/)",
                    "CUB_200_2011/images",
                    R.scan_folder,
                ),
                _unpacked(
                    "the release's images/ folder",
                    "images",
                    R.scan_folder,
                    named=True,
                ),
            ),
            figures=Figures(200, 11_788, 60, "CUB-200-2011: 200 classes, 11,788 images"),
            rule=_rule_chen,
        ),
        PaperDataset(
            name="miniimagenet",
            title="miniImageNet",
            role="id",
            split_sizes=(64, 16, 20),
            split="Ravi & Larochelle (ICLR 2017) 64/16/20, read from the data's own files",
            where=(
                f"{AUTHORS_ARCHIVE} (torchmeta's miniimagenet/); pickles: "
                "https://github.com/renmengye/few-shot-ssl-public (mini-imagenet-cache-*.pkl) "
                "or https://zenodo.org/record/7978538 (learn2learn's mirror); csv split: "
                "https://github.com/twitter/meta-learning-lstm/tree/master/data/miniImagenet "
                "with ImageNet images (https://image-net.org, registration required). "
                "Vinyals et al., NeurIPS 2016; Ravi & Larochelle, ICLR 2017"
            ),
            dirnames=(
                "miniimagenet",
                "mini-imagenet",
                "mini_imagenet",
                "miniImagenet",
                "miniImageNet",
                "mini_imagenet_full_size",
            ),
            layouts=(
                Layout(
                    label="torchmeta's processed miniImageNet (the authors' archive)",
                    markers=("train_data.hdf5", *_SPLIT_JSONS),
                    scan=partial(A.scan_torchmeta_splits, authors=True),
                    named=True,
                ),
                Layout(
                    label="the pickles of Ren et al. / torchmeta / learn2learn",
                    markers=("mini-imagenet-cache-train.pkl",),
                    scan=R.scan_mini_pickles,
                ),
                Layout(
                    label="Ravi & Larochelle's csv files (header filename,label or "
                    "filename,class) with images/",
                    markers=("train.csv", "images"),
                    scan=R.scan_mini_csv,
                    named=True,
                ),
                Layout(
                    label="split folders {train,val,test}/<wnid>/ (mini_imagenet_full_size)",
                    markers=("train/n*", "val/n*", "test/n*"),
                    scan=R.scan_split_folders,
                    named=True,
                ),
            ),
            figures=Figures(100, 60_000, 600, "miniImageNet: 100 classes of 600 images"),
            notes=(
                "The pickles are read with a restricted unpickler that accepts numpy arrays and "
                "plain containers only."
            ),
        ),
        PaperDataset(
            name="cifarfs",
            title="CIFAR-FS",
            role="id",
            split_sizes=(64, 16, 20),
            split=(
                "Bertinetto et al. (ICLR 2019) 64/16/20, from the split files shipped with the "
                "data; without them a seeded random 64/16/20 split (with a PaperSplitWarning)"
            ),
            where=(
                f"{AUTHORS_ARCHIVE} (torchmeta's cifar100/); or "
                "https://zenodo.org/record/7978538/files/cifar100.zip (learn2learn's CIFAR-FS "
                "archive, Bertinetto et al.'s r2d2 layout with their split files); CIFAR-100: "
                "Krizhevsky 2009, https://www.cs.toronto.edu/~kriz/cifar.html"
            ),
            dirnames=("cifarfs", "cifar-fs", "CIFAR-FS", "CIFARFS", "cifar_fs"),
            layouts=(
                Layout(
                    label="torchmeta's processed CIFAR-FS (the authors' archive)",
                    markers=("cifar100/data.hdf5", "cifar100/cifar-fs/train_labels.json"),
                    sub="cifar100",
                    scan=A.scan_torchmeta_cifarfs,
                ),
                Layout(
                    label="Bertinetto et al.'s r2d2 / learn2learn layout",
                    markers=("cifar100/data",),
                    sub="cifar100",
                    scan=R.scan_cifar_r2d2,
                ),
                Layout(
                    label="the cifar100/ folder itself (r2d2 layout)",
                    markers=("data", "splits/bertinetto"),
                    scan=R.scan_cifar_r2d2,
                    bases=("cifar100", ""),
                ),
                Layout(
                    label="learn2learn's processed split folders (processed/{train,val,test}/)",
                    markers=("processed/train", "processed/val", "processed/test"),
                    sub="processed",
                    scan=partial(
                        R.scan_split_folders, whose="Bertinetto et al. (2019, learn2learn's copy)"
                    ),
                ),
                Layout(
                    label="torchvision CIFAR100 (cifar-100-python/; no class split: warned)",
                    markers=("cifar-100-python/meta", "cifar-100-python/train"),
                    sub="cifar-100-python",
                    scan=R.scan_cifar100_python,
                ),
            ),
            figures=Figures(100, 60_000, 600, "CIFAR-100: 100 classes of 600 images"),
            rule=_rule_random((64, 16, 20)),
        ),
        PaperDataset(
            name="aircraft",
            title="FGVC-Aircraft",
            role="id",
            split_sizes=(70, 15, 15),
            split=(
                "Vuorio et al. (NeurIPS 2019, MMAML) 70/15/15: the variants of variants.txt "
                "shuffled by np.random.RandomState(123), first int(0.7 C) -> train, next "
                "int(0.15 C) -> val, rest -> test (their proc_aircraft.py rule; exact)"
            ),
            where=(
                f"{AUTHORS_ARCHIVE}; or https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/"
                "archives/fgvc-aircraft-2013b.tar.gz; Maji et al., arXiv:1306.5151, 2013"
            ),
            dirnames=(
                "aircraft",
                "fgvc_aircraft",
                "fgvc-aircraft",
                "FGVC-Aircraft",
                "fgvc-aircraft-2013b",
            ),
            layouts=(
                _authors("Aircraft", "aircraft", figures=_kept(100, 100)),
                Layout(
                    label="fgvc-aircraft-2013b.tar.gz unpacked (torchvision; learn2learn: "
                    "fgvc_aircraft/)",
                    markers=("fgvc-aircraft-2013b/data/images",),
                    sub="fgvc-aircraft-2013b/data",
                    scan=R.scan_aircraft,
                ),
                Layout(
                    label="the fgvc-aircraft-2013b/ folder itself",
                    markers=("data/images",),
                    sub="data",
                    scan=R.scan_aircraft,
                    named=True,
                ),
            ),
            figures=Figures(100, 10_000, 100, "FGVC-Aircraft 2013b: 100 variants of 100 images"),
            notes=(
                "The release has 100 variants (the paper says 102 categories). The 20-pixel "
                "copyright banner at the bottom of every image is cropped off before the "
                "centre crop."
            ),
            rule=_rule_vuorio,
        ),
        PaperDataset(
            name="butterfly",
            title="Butterfly-200",
            role="id",
            split_sizes=(100, 40, 45),
            split=(
                "ORDER appendix A: species with more than 50 images (185 of 200), random "
                "100/40/45 split. Without the authors' archive their draw is unknown, so: "
                "sorted species names, np.random.default_rng(class_split_seed).permutation(185), "
                "first 45 -> test, next 40 -> val, rest -> train. The release's "
                "Butterfly200_*_release.txt split images, not species, so they cannot be it"
            ),
            where=(
                f"{AUTHORS_ARCHIVE}; or Butterfly-200 from its authors: Chen et al., "
                "'Fine-grained representation learning and recognition by exploiting "
                "hierarchical semantic embedding', ACM Multimedia 2018 (download link in the "
                "paper / the authors' HSE project)"
            ),
            dirnames=("butterfly", "butterfly200", "Butterfly200", "Butterfly-200"),
            layouts=(
                _authors("Butterfly", "butterfly", figures=_kept(185)),
                _unpacked(
                    "the Butterfly-200 release (images_small/, species.txt, "
                    "Butterfly200_{train,val,test}_release.txt)",
                    "images_small",
                    R.scan_butterfly,
                ),
                _unpacked(
                    "the release with images/ instead of images_small/",
                    "images",
                    R.scan_butterfly,
                    named=True,
                ),
            ),
            figures=Figures(200, 25_279, None, "Butterfly-200: 200 species, 25,279 images"),
            rule=_rule_random((100, 40, 45), min_images=50),
        ),
        PaperDataset(
            name="omniglot",
            title="Omniglot",
            role="ood",
            split_sizes=(973, 325, 325),
            split=(
                "the paper follows Vinyals et al. (2016): their split is read exactly from "
                "torchmeta's vinyals_{train,val,test}_labels.json (1028/172/423); the zips carry "
                "no split, so from them: " + _OOD_SPLIT + "; 1623 characters -> 973/325/325 "
                "(warned)"
            ),
            where=(
                "https://github.com/brendenlake/omniglot (python/images_background.zip, "
                f"python/images_evaluation.zip); Lake et al., Science 2015; {AUTHORS_ARCHIVE} "
                "(torchmeta's omniglot/)"
            ),
            dirnames=("omniglot", "Omniglot"),
            layouts=(
                Layout(
                    label="torchmeta's processed Omniglot (the authors' archive)",
                    markers=("data.hdf5", "*_labels.json"),
                    scan=A.scan_torchmeta_omniglot,
                    named=True,
                ),
                Layout(
                    label="torchvision / learn2learn (omniglot-py/)",
                    markers=("omniglot-py/images_background",),
                    sub="omniglot-py",
                    scan=R.scan_omniglot_sets,
                ),
                Layout(
                    label="the two zips unpacked (images_background/, images_evaluation/)",
                    markers=("images_background",),
                    scan=R.scan_omniglot_sets,
                ),
            ),
            figures=Figures(1623, 32_460, 20, "Omniglot: 1,623 characters of 20 drawings"),
            rule=_rule_random((60, 20, 20)),
        ),
        PaperDataset(
            name="vggflower",
            title="VGG-Flower-102",
            role="ood",
            split_sizes=(62, 20, 20),
            split=_OOD_SPLIT + "; 102 classes -> 62/20/20",
            where=(
                f"{AUTHORS_ARCHIVE} (vgg_flower/); or "
                "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ (102flowers.tgz, "
                "imagelabels.mat); Nilsback & Zisserman, ICVGIP 2008"
            ),
            dirnames=("vggflower", "vgg_flower102", "flowers102", "vgg-flower", "102flowers"),
            layouts=(
                _authors("vgg_flower", "vggflower", figures=_kept(102, 258)),
                Layout(
                    label="torchvision Flowers102 (flowers-102/)",
                    markers=("flowers-102/jpg", "flowers-102/imagelabels.mat"),
                    sub="flowers-102",
                    scan=R.scan_flowers,
                ),
                Layout(
                    label="102flowers.tgz + imagelabels.mat (learn2learn: vgg_flower102/)",
                    markers=("jpg", "imagelabels.mat"),
                    scan=R.scan_flowers,
                ),
            ),
            figures=Figures(102, 8_189, 258, "Oxford Flowers-102: 102 classes, 8,189 images"),
            notes=(
                "The authors' loader turns VGG-Flower images grey (cv2 BGR2GRAY, replicated to "
                "three channels); here they keep their colours, as the paper describes no such "
                "step."
            ),
            rule=_rule_random((60, 20, 20)),
        ),
        PaperDataset(
            name="fish",
            title="WildFish",
            role="ood",
            split_sizes=(600, 200, 200),
            split=_OOD_SPLIT + "; 1000 species -> 600/200/200",
            where=(
                f"{AUTHORS_ARCHIVE} (fishprocess.pt); or WildFish (1000 species, 54,459 "
                "images): Zhuang et al., 'WildFish: a large benchmark for fish recognition in "
                "the wild', ACM Multimedia 2018, https://github.com/PeiqinZhuang/WildFish"
            ),
            dirnames=("fish", "wildfish", "WildFish"),
            layouts=(
                Layout(
                    label="the authors' archive (fishprocess.pt)",
                    markers=("fishprocess.pt",),
                    scan=A.scan_fishprocess,
                    bases=("", "fish", "wildfish", "WildFish"),
                ),
                Layout(
                    label="the release's WildFish_part1..4/ (flat Genus_species_N.jpg files)",
                    markers=("WildFish_part*",),
                    scan=R.scan_wildfish,
                ),
                Layout(
                    label="the release with its images/ wrapper (images/WildFish_part*/)",
                    markers=("images/WildFish_part*",),
                    sub="images",
                    scan=R.scan_wildfish,
                ),
                _unpacked(
                    "species folders images/<Genus_species>/",
                    "images",
                    R.scan_folder,
                    bases=("fish", "wildfish", "WildFish"),
                ),
            ),
            figures=Figures(1000, 54_459, None, "WildFish: 1,000 species, 54,459 images"),
            rule=_rule_random((60, 20, 20)),
        ),
    )
}

#: The paper's domain orders (section 5 and appendix C).
PAPER_ORDERS: dict[int, list[str]] = {
    1: ["plantae", "cub", "miniimagenet", "cifarfs", "aircraft", "butterfly"],
    2: ["butterfly", "cub", "cifarfs", "plantae", "miniimagenet", "aircraft"],
    3: ["cub", "cifarfs", "plantae", "miniimagenet", "butterfly", "aircraft"],
}
#: The six in-distribution domains (order 1).
PAPER_ID: list[str] = list(PAPER_ORDERS[1])
#: The OOD sources, mixed equally in every episode.
PAPER_OOD: list[str] = list(DEFAULT_OOD["paper"])


_ALIASES: dict[str, str] = {}
for _s in PAPER_DATASETS.values():
    for _a in (_s.name, _s.title, *_s.dirnames):
        _ALIASES[_norm(_a)] = _s.name
_ALIASES.update(
    {
        "cub2002011": "cub",
        "cubirds": "cub",
        "fgvcaircraft": "aircraft",
        "vggflower102": "vggflower",
        "vggflowers": "vggflower",
        "oxfordflowers102": "vggflower",
        "flowers": "vggflower",
        "inaturalistplantae": "plantae",
        "inaturalist2017": "plantae",
    }
)


def paper_dataset(name: str) -> PaperDataset:
    """The spec of a paper dataset by canonical name or a common spelling (``"CIFAR-FS"``)."""
    key = _ALIASES.get(_norm(name))
    if key is None:
        hint = did_you_mean(_norm(name), _ALIASES)
        for alias, canonical in _ALIASES.items():  # the hint names the dataset, not a spelling
            hint = hint.replace(f"'{alias}'", f"'{canonical}'")
        raise ValueError(
            f"unknown paper dataset {name!r}{hint} (choose one of {sorted(PAPER_DATASETS)})"
        )
    return PAPER_DATASETS[key]
