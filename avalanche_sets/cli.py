"""Command line: ``avalanche-sets {run,sweep,table,heatmap,prepare,presets}`` (also
``python -m avalanche_sets``).

Examples::

    avalanche-sets run                                   # ORDER, quick preset, synthetic data
    avalanche-sets run --method mskm --preset cpu --root ../shared/data/sets-mini --seeds 0 1 2
    avalanche-sets sweep --methods order semi-er --preset cpu --root DATA --set n_shot=1,5
    avalanche-sets table runs/ --vs mskm --out results/table   # + Δ, pictures
    avalanche-sets heatmap runs/order                     # draw the runs' heatmaps again
    avalanche-sets prepare pack --folder my_images/ --out my_domain.npz --size 32
    avalanche-sets prepare torchvision --root ~/torchvision --out packs/tv   # 6 domains + OOD
    avalanche-sets presets cpu
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

from .presets import PRESETS, RunConfig, command_config, preset_names, run_target
from .presets import parse_settings as _parse_sets  # as the benchmarks' scripts import it
from .runs.figure_formats import add_figure_arguments, figure_formats
from .runs.folder import RunLockedError, check_tag  # the standard library alone
from .runs.record import RunRecord
from .runs.table_layout import add_layout_arguments, check_layout, run_table
from .runs.table_metrics import add_metric_argument, table_metric  # the standard library alone
from .runs.terminal_warnings import one_line_warnings  # the standard library alone
from .training.loggers import check_loggers  # the standard library alone

__all__ = ["main", "build_parser"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _tag(text: str) -> str:
    """``--tag``: a non-empty name :func:`~avalanche_sets.runs.folder.check_tag` takes."""
    try:
        if not text:
            raise ValueError("--tag needs a name (an empty tag is no tag: leave --tag out)")
        return check_tag(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _logger(name: str) -> str:
    """``--loggers``: one name :func:`~avalanche_sets.training.loggers.check_loggers` takes."""
    try:
        return check_loggers([name])[0]
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser(*, list_methods: bool = True) -> argparse.ArgumentParser:
    """The command line's parser, one sub-parser per command. ``list_methods=False`` leaves the
    installed methods out of the ``run``/``sweep`` help (finding them reads every package's
    entry points: ``table`` does not need them). Loads no torch: ``--help`` answers at once."""
    p = argparse.ArgumentParser(
        prog="avalanche-sets",
        description="Semi-supervised meta-learning on evolving task distributions (SETS) and "
        "ORDER for Avalanche.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    methods_help = _methods_help(list_methods)
    _run_parser(sub, methods_help)
    _sweep_parser(sub, methods_help)
    _table_parser(sub)
    _heatmap_parser(sub)
    _prepare_parser(sub)
    _presets_parser(sub)
    return p


def _methods_help(list_methods: bool) -> str:
    """The help of ``--method``/``--methods``: the installed methods when ``list_methods``."""
    if list_methods:
        from .methods import method_names

        listed = f"{', '.join(method_names())} (built in or installed)"
    else:
        listed = "a built-in method or an installed one (an entry point's name)"
    own = "package.module:Class (see docs/guide/custom-method.md)"
    return f"{listed}; or a method class of your own: {own}"


def _add_run_arguments(sp: argparse.ArgumentParser, methods_help: str, *, many: bool) -> None:
    """The arguments ``run`` and ``sweep`` share: the method(s), the preset and its settings,
    the strategy options, the output folder, tag, checkpoints and verbosity."""
    from .defaults import SOURCES

    if many:
        sp.add_argument("--methods", nargs="+", default=["order"], metavar="METHOD",
                        help=methods_help)  # fmt: skip
    else:
        sp.add_argument("--method", default="order", help=methods_help)
    sp.add_argument("--preset", default="quick", choices=preset_names())
    sp.add_argument("--source", choices=list(SOURCES))
    sp.add_argument(
        "--root", help="folder of domain packs or of the paper's datasets (a folder of "
        "packs given to a preset that generates its data, quick, is read as --source packs)",
    )  # fmt: skip
    sp.add_argument("--order", type=int, choices=[1, 2, 3], help="the paper's domain order")
    sp.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the preset's)")
    sp.add_argument("--out", default="runs", help="output folder (default: runs/)")
    sp.add_argument(
        "--set", action="append", metavar="KEY=VALUE",
        help="override a preset setting, e.g. --set n_shot=5 (sweep: --set n_ood=50,100)",
    )  # fmt: skip
    sp.add_argument(
        "--strategy-set", action="append", metavar="KEY=VALUE",
        help="strategy option, typed by the method's signature, e.g. --strategy-set "
        "lam=1e-4 or use_ot=false (bools: true/false, yes/no, 1/0); METHOD:KEY=VALUE "
        "gives it to one method of a sweep only",
    )  # fmt: skip
    sp.add_argument("--eval-stream", default="test", choices=["test", "valid"])
    sp.add_argument(
        "--tag", type=_tag, metavar="NAME",
        help="keep these runs apart from the same runs untagged or otherwise tagged (part "
        "of their identity, a table column, folder suffix -tag_NAME), e.g. to run changed "
        "code beside the old runs",
    )  # fmt: skip
    sp.add_argument(
        "--checkpoint-every", type=_positive_int, default=50, metavar="N",
        help="checkpoint every N iterations and at every domain end (default 50); a "
        "killed run started again with the same command resumes from the newest good one",
    )  # fmt: skip
    sp.add_argument(
        "-v", "--verbose", action="store_true",
        help="also print every metric value on the terminal (they always go to the run "
        "folder's log.txt), and the traceback of an error building a method",
    )  # fmt: skip


def _run_parser(sub, methods_help: str) -> None:
    from .defaults import LOG_EVERY

    run = sub.add_parser("run", help="run one method on one benchmark")
    _add_run_arguments(run, methods_help, many=False)
    run.add_argument(
        "--loggers", nargs="*", default=["progress"], type=_logger, metavar="LOGGER",
        help="loggers besides the run folder's log.txt: progress (default: one bar per "
        "domain), interactive (Avalanche's bars and metric values), csv, tensorboard, wandb "
        "(offline unless WANDB_MODE says otherwise; pip install \"avalanche-sets[wandb]\")",
    )  # fmt: skip
    run.add_argument(
        "--log-every", type=_positive_int, default=LOG_EVERY, metavar="N",
        help="log the loss terms (meta, mi, ot, a plugin's own) as their means over N "
        f"training iterations, and at every domain end (default {LOG_EVERY})",
    )  # fmt: skip


def _sweep_parser(sub, methods_help: str) -> None:
    sweep = sub.add_parser("sweep", help="run a grid of methods x seeds x settings")
    _add_run_arguments(sweep, methods_help, many=True)
    sweep.add_argument("--jobs", type=int, default=1, help="parallel runs (local processes)")
    sweep.add_argument(
        "--ray-address",
        help="run every run as a Ray task: local (a cluster on this machine), auto (the "
        "cluster `ray start` joined) or ray://host:10001",
    )


def _folders_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs="+", help="folders searched for result.json files")


def _table_parser(sub) -> None:
    table = sub.add_parser(
        "table",
        help="one row per protocol of the run folders: mean over seeds with 95%% CIs, a "
        "paired Δ (--vs), pictures (--out)",
        description="Read every result.json under FOLDERS and print one row per protocol: "
        "runs that differ in anything but their seed (method, a preset setting, a strategy "
        "option, plugins, evaluation stream, data, numerics, code) are separate rows, the "
        "settings that differ between rows shown as columns; a seed twice in one row is "
        "refused. A footer says what every ± is.",
    )
    _folders_argument(table)
    add_figure_arguments(table)  # --out, --formats
    table.add_argument(
        "--by", default="method", metavar="KEYS",
        help="comma-separated settings that label and order the rows (default: method), e.g. "
        "method,n_shot; never merges rows that differ in another setting (those get columns)",
    )  # fmt: skip
    table.add_argument(
        "--vs", metavar="METHOD",
        help="add the paired Δ of every row against METHOD's row of the same setting (per seed "
        "on the same test episodes)",
    )  # fmt: skip
    add_metric_argument(table)  # --metric
    add_layout_arguments(table)  # --label, --format, --columns, --caption-inside
    table.add_argument(
        "--pool-code", action="store_true",
        help="let runs that differ only in the code that made them (commit, uncommitted "
        "changes) share a row; the row and the footer name the code versions",
    )  # fmt: skip


def _heatmap_parser(sub) -> None:
    heat = sub.add_parser(
        "heatmap",
        help="draw the accuracy-matrix heatmap of finished runs from their result.json",
        description="Write accuracy_matrix.png into every run folder under FOLDERS, from its "
        "result.json (the committed benchmark runs keep their records, not their pictures).",
    )
    _folders_argument(heat)


def _prepare_parser(sub) -> None:
    prep = sub.add_parser("prepare", help="build domain packs or cache the paper's datasets")
    psub = prep.add_subparsers(dest="what", required=True)
    _pack_parser(psub)
    _stream_parser(psub)
    _paper_parser(psub)
    _torchvision_parser(psub)


def _size_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=_positive_int, default=32, help="image side (default 32)")


def _pack_parser(psub) -> None:
    pack = psub.add_parser(
        "pack",
        help="build a .npz domain pack from an image folder",
        description="Build one .npz domain pack from an image folder with one sub-folder per "
        "class. N-way episodes draw N classes from each of train, val and test, so a stream "
        "domain needs at least 3N classes (15 for the default 5-way) and the split must leave N "
        "in every part: refused before any image is decoded otherwise. Classes with fewer "
        "images than the cpu preset's episodes need (16) are named in a warning.",
    )
    pack.add_argument("--folder", required=True, help="one sub-folder of images per class")
    pack.add_argument(
        "--skip-unreadable", action="store_true",
        help="leave out image files that cannot be decoded, naming them (default: refuse "
        "them, every one named in one pass)",
    )  # fmt: skip
    pack.add_argument("--out", required=True, help="output .npz file")
    _size_argument(pack)
    pack.add_argument("--seed", type=int, default=0, help="seed of the class split")
    pack.add_argument(
        "--split", default="0.6,0.2,0.2", metavar="TRAIN,VAL,TEST",
        help="class split: fractions of the classes adding up to 1 (default 0.6,0.2,0.2) or "
        "class counts adding up to the number of classes (e.g. 12,4,4)",
    )  # fmt: skip
    pack.add_argument(
        "--n-way", type=_positive_int, default=5, metavar="N",
        help="episode width the pack must support: at least N classes in each of train, val "
        "and test, 3N in all (default 5: 15 classes); 1 for a pack used only as an OOD source",
    )  # fmt: skip


def _stream_parser(psub) -> None:
    st = psub.add_parser(
        "stream",
        help="build a stream folder from your image folders and packs, the synthetic domains "
        "and OOD sources",
        description="Write one .npz pack per item into --out, with manifest.json (the stream's "
        "names, roles and order) and README.md; then: avalanche-sets run --preset cpu --root "
        "OUT. An ITEM is an image folder (one sub-folder per class, built as `prepare pack` "
        "does), a .npz domain pack, or synthetic:NAME with NAME one of shapes, strokes, "
        "gratings, blobs, tilings, textures, rings, lattices, spirals; NAME=ITEM names it in the "
        "stream (default: the folder, the pack's file name without ood_, the synthetic name). "
        "Every item is checked before anything is written.",
    )
    st.add_argument("--out", required=True, help="output folder (holding no other packs)")
    st.add_argument(
        "--domains", nargs="+", required=True, metavar="ITEM",
        help="stream domains, in stream order (each needs N classes in train, val and test)",
    )  # fmt: skip
    st.add_argument(
        "--ood", nargs="*", metavar="ITEM",
        help="OOD sources (default: synthetic:rings synthetic:lattices synthetic:spirals; "
        "none: --ood alone, then run with --set n_ood=0)",
    )  # fmt: skip
    _size_argument(st)
    st.add_argument(
        "--seed", type=int, metavar="S",
        help="seed of the image folders' class split and of the synthetic domains (default 0)",
    )  # fmt: skip
    st.add_argument(
        "--split", metavar="TRAIN,VAL,TEST",
        help="class split of the image folders: fractions (default 0.6,0.2,0.2) or class counts "
        "(e.g. 12,4,4); packs and synthetic domains keep their own",
    )  # fmt: skip
    st.add_argument(
        "--n-way", type=_positive_int, default=5, metavar="N",
        help="episode width: every stream domain needs N classes in each of train, val and test "
        "(3N in all; default 5), every OOD source one",
    )  # fmt: skip
    st.add_argument(
        "--skip-unreadable", action="store_true",
        help="leave out image files that cannot be decoded, listing them in the manifest "
        "(default: refuse them, every one named in one pass)",
    )  # fmt: skip


def _paper_parser(psub) -> None:
    paper = psub.add_parser("paper", help="resize and cache the paper's datasets")
    paper.add_argument("--root", required=True)
    paper.add_argument("--size", type=int, default=84)
    paper.add_argument("--names", nargs="*", help="datasets (default: all nine)")


def _torchvision_parser(psub) -> None:
    tv = psub.add_parser(
        "torchvision",
        help="build a stream of packs (6 domains + OOD) from torchvision datasets you have",
        description="Read torchvision datasets from their torchvision root (download=False "
        "unless --download) and write one .npz pack per dataset, manifest.json and README.md "
        "into --out; then: avalanche-sets run --preset cpu --root OUT. Datasets: cifar100, "
        "aircraft, flowers102, dtd, gtsrb, omniglot, svhn, food101, pets, eurosat.",
    )
    tv.add_argument("--root", required=True, help="torchvision root (root= of the datasets)")
    tv.add_argument("--out", required=True, help="output folder (holding no other packs)")
    tv.add_argument(
        "--domains", nargs="+", metavar="NAME",
        help="stream domains in order (default: cifar100 aircraft flowers102 dtd gtsrb omniglot)",
    )  # fmt: skip
    tv.add_argument(
        "--ood", nargs="*", metavar="NAME", help="OOD sources (default: svhn; none: --ood)"
    )
    _size_argument(tv)
    tv.add_argument("--seed", type=int, default=0, help="class split / image draw seed")
    tv.add_argument("--min-per-class", type=_positive_int, default=20, metavar="N")
    tv.add_argument("--max-per-class", type=_positive_int, default=100, metavar="N")
    tv.add_argument(
        "--n-way", type=_positive_int, default=5, metavar="N",
        help="episode width every stream domain must support in train/val/test",
    )  # fmt: skip
    tv.add_argument("--download", action="store_true", help="download=True (needs internet)")
    tv.add_argument(
        "--skip-md5", action="store_true",
        help="read files whose md5 differs from torchvision's (no integrity check)",
    )  # fmt: skip


def _presets_parser(sub) -> None:
    pr = sub.add_parser("presets", help="print a preset as JSON (copy and edit it)")
    pr.add_argument("name", nargs="?", choices=preset_names())


#: Preset settings with a flag of their own besides ``--set KEY=VALUE`` (``--seeds`` too picks
#: the seeds to run, and is not handed to the preset).
_PRESET_FLAGS = ("source", "root", "order")


def _given(args) -> set[str]:
    """The preset settings this command line sets: its ``--set`` keys and setting flags.

    Raises:
        ValueError: a setting given both by its flag and by ``--set`` (one would override the
            other unseen), or a repeated seed or method.
    """
    sets = set(_parse_sets(args.set, grid=True))
    flags = {k for k in (*_PRESET_FLAGS, "seeds") if getattr(args, k, None) is not None}
    both = sorted(sets & flags)
    if both:
        raise ValueError(
            f"{', '.join(both)} given both as --{both[0]} and as --set {both[0]}=...; fix: give "
            "each setting once"
        )
    for flag, values in (("--seeds", args.seeds), ("--methods", getattr(args, "methods", None))):
        if values and len(set(values)) < len(values):
            raise ValueError(f"{flag} names a value twice ({values}); fix: name each once")
    return sets | flags


def _preset_from_args(args, extra: dict | None = None) -> RunConfig:
    """The run's config (:func:`~avalanche_sets.presets.command_config`): the preset, its
    ``--set`` values (or ``extra``: one grid point) and setting flags, checked once here."""
    overrides = dict(_parse_sets(args.set, grid=False) if extra is None else extra)
    given = {k: getattr(args, k, None) for k in _PRESET_FLAGS}
    overrides.update({k: v for k, v in given.items() if v is not None})
    return command_config(args.preset, overrides)


def _cmd_run(args) -> int:
    given = _given(args)
    preset = _preset_from_args(args)
    seeds = args.seeds or list(preset.seeds)
    from .methods.check import strategy_set_options  # loads no torch

    strategy_overrides = strategy_set_options(args.strategy_set, [args.method])[args.method]
    from .data.visualize import plot_episodes
    from .runs.experiment import build_benchmark, check_run, run_experiment
    from .runs.folder import RUN_FILES, is_finished
    from .runs.report import run_table
    from .runs.run import Run

    # the one check of the method, its strategy built once, before any data loads or is described
    check_run(args.method, preset, strategy_overrides, seed=seeds[0], given=given,
              eval_stream=args.eval_stream)  # fmt: skip
    tag = args.tag or ""
    folders = {
        s: Run.of(args.method, preset, seed=s, eval_stream=args.eval_stream,
                  strategy_overrides=strategy_overrides, tag=tag).folder(args.out)
        for s in seeds
    }  # fmt: skip
    run = dict(
        out_root=args.out, loggers=tuple(args.loggers), verbose=args.verbose,
        eval_stream=args.eval_stream, strategy_overrides=strategy_overrides, tag=tag,
        checkpoint_every=args.checkpoint_every, log_every=args.log_every, checked=True,
    )  # fmt: skip
    # a finished run is checked (the loggers it wrote; same settings, data and code) before any
    # data loads: run_experiment reads only its record
    done = {s: run_experiment(args.method, preset, seed=s, **run)
            for s, folder in folders.items() if is_finished(folder)}  # fmt: skip
    bench = build_benchmark(preset, seed=seeds[0])  # described here, run below: built once
    print(bench.describe(), flush=True)
    picture = plot_episodes(bench, Path(args.out) / "episodes.png")
    print(f"one episode per domain: {picture}", flush=True)
    for seed in seeds:
        record = done.get(seed) or run_experiment(
            args.method, preset, seed=seed, **run,
            benchmark=bench if seed == bench.seed else None,
        )  # fmt: skip
        table = run_table(record).rstrip("\n")
        folder = folders[seed]
        print(f"\n{args.method}, seed {seed} ({record.seconds:.0f} s, {record.status}):"
              f"\n{table}")  # fmt: skip
        print(f"\n{'wrote' if record.status == 'ran' else 'finished before, in'} {folder}/")
        for name, what in RUN_FILES:
            print(f"  {name:<20} {what}")
    return 0


def _grid(args) -> list[tuple[str, RunConfig, int]]:
    grid = _parse_sets(args.set, grid=True)
    keys = sorted(grid)
    runs = []
    for values in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        preset = _preset_from_args(args, dict(zip(keys, values)))
        for method in args.methods:
            for seed in args.seeds or preset.seeds:
                runs.append((method, preset, seed))
    return runs


def _cmd_sweep(args) -> int:
    given = _given(args)
    if args.ray_address and args.jobs != 1:
        raise ValueError(
            f"--jobs {args.jobs} and --ray-address both say how to run in parallel, and Ray "
            "runs every run as its own task; fix: drop --jobs, or drop "
            "--ray-address to run --jobs local processes"
        )
    if args.ray_address:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("error: --ray-address needs Ray: pip install 'avalanche-sets[ray]' (or "
                  "scripts/install.sh, which installs it)", file=sys.stderr)  # fmt: skip
            return 2
    from .methods.check import strategy_set_options  # loads no torch

    strategy_overrides = strategy_set_options(args.strategy_set, args.methods)
    grid = _grid(args)
    from .runs.sweep import RunSpec, check_specs, run_sweep

    specs = [
        RunSpec(m, p, s, args.out, eval_stream=args.eval_stream,
                strategy_overrides=strategy_overrides[m], checkpoint_every=args.checkpoint_every,
                verbose=args.verbose, tag=args.tag or "")
        for m, p, s in grid
    ]  # fmt: skip
    specs = check_specs(specs, given=given)  # every grid point, before the first run starts
    print(f"sweep: {len(specs)} runs into {args.out}/ (finished runs are skipped)", flush=True)
    # runs in parallel take one thread each unless the command line sets threads
    outcomes = run_sweep(
        specs, jobs=args.jobs, ray_address=args.ray_address, checked=True,
        threads=None if "threads" in given else 1,
    )  # fmt: skip
    for o in sorted(outcomes, key=lambda o: (o.spec.method, o.spec.seed)):
        print(
            f"{o.spec.method:<24} seed {o.spec.seed}: {100 * o.accuracy:6.2f}%  "
            f"({o.seconds:.0f} s, {o.status})"
        )
    return 0


def _records(folders: list[str]) -> list[RunRecord]:
    """The run records under ``folders``; none is an error the caller reports."""
    from .runs.report import find_results

    records = find_results(folders)
    if not records:
        print(f"error: no result.json under {folders}", file=sys.stderr)
    return records


def _cmd_table(args) -> int:
    # before any record is read: the formats, the metric, the labels
    formats, metric, _ = figure_formats(args), table_metric(args), check_layout(args)
    records = _records(args.folders)
    if not records:
        return 2
    if wrote := run_table(args, records, formats, metric):
        print(wrote)
    return 0


def _cmd_heatmap(args) -> int:
    from .runs.report import write_heatmap

    records = _records(args.folders)
    if not records:
        return 2
    for record in records:
        print(f"wrote {write_heatmap(record.folder, record)}")
    return 0


def _cmd_prepare(args) -> int:
    if args.what == "pack":
        from .data.packs import build_pack_from_folder, load_pack
        from .data.splits import parse_split

        path = build_pack_from_folder(  # small classes named for the cpu preset's runs
            args.folder, args.out, image_size=args.size, seed=args.seed,
            split=parse_split(args.split), n_way=args.n_way, target=run_target(),
            skip_unreadable=args.skip_unreadable,
        )  # fmt: skip
        dom = load_pack(path)
        sizes = "/".join(str(dom.classes(s).size) for s in ("train", "val", "test"))
        use = (
            "an OOD source" if args.n_way == 1 else f"a stream domain of {args.n_way}-way episodes"
        )
        print(f"wrote {path}: {dom!r}\nclass split {sizes} (train/val/test): usable as {use}")
        return 0
    if args.what == "stream":
        return _prepare_stream(args)
    if args.what == "torchvision":
        from .data.prepare import DEFAULT_DOMAINS, DEFAULT_OOD, prepare_torchvision_stream

        domains = args.domains or list(DEFAULT_DOMAINS)
        ood = list(DEFAULT_OOD) if args.ood is None else args.ood
        command = (
            f"avalanche-sets prepare torchvision --root {args.root} --out {args.out} "
            f"--domains {' '.join(domains)} --ood {' '.join(ood)} --size {args.size} "
            f"--seed {args.seed} --min-per-class {args.min_per_class} --max-per-class "
            f"{args.max_per_class} --n-way {args.n_way}"
            + " --download" * args.download
            + " --skip-md5" * args.skip_md5
        )
        out = prepare_torchvision_stream(
            args.root, args.out, domains=domains, ood=ood,
            image_size=args.size, seed=args.seed, n_way=args.n_way,
            min_images_per_class=args.min_per_class, max_images_per_class=args.max_per_class,
            download=args.download, skip_md5=args.skip_md5,
            command=command,
        )  # fmt: skip
        manifest = json.loads((out / "manifest.json").read_text())
        for e in manifest["packs"]:
            print(f"wrote {out / e['pack']}: {e['role']}, {e['classes']} classes, "
                  f"{e['images']} images")  # fmt: skip
        print(f"manifest: {out / 'manifest.json'}\nrun on it: {manifest['run_command']}")
        return 0
    from .data.paper import PAPER_DATASETS, load_paper_domain

    for name in args.names or list(PAPER_DATASETS):
        dom = load_paper_domain(name, args.root, image_size=args.size)
        print(f"cached {name}: {dom!r}")
    return 0


def _prepare_stream(args) -> int:
    from .data import stream_folder as sf
    from .data.splits import parse_split

    domains = [sf.parse_stream_item(t) for t in args.domains]
    ood = [
        sf.parse_stream_item(t) for t in (sf.DEFAULT_STREAM_OOD if args.ood is None else args.ood)
    ]
    sf.check_split_and_seed(domains + ood, split=args.split, seed=args.seed)
    split = parse_split(args.split or "0.6,0.2,0.2")
    seed = 0 if args.seed is None else args.seed
    command = sf.prepare_command(
        args.out, args.domains, ood, image_size=args.size, n_way=args.n_way, seed=args.seed,
        split=args.split, skip_unreadable=args.skip_unreadable,
    )  # fmt: skip
    out = sf.prepare_stream(
        args.out, domains, ood, image_size=args.size, split=split, seed=seed,
        n_way=args.n_way, target=run_target(), command=command, skip_unreadable=args.skip_unreadable,
    )  # fmt: skip
    print("\n".join(sf.report(out)))
    return 0


def _cmd_presets(args) -> int:
    print(json.dumps(PRESETS if args.name is None else PRESETS[args.name], indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(list_methods=not argv or argv[0] in ("run", "sweep"))
    args = parser.parse_args(argv)
    handler = {
        "run": _cmd_run,
        "sweep": _cmd_sweep,
        "table": _cmd_table,
        "heatmap": _cmd_heatmap,
        "prepare": _cmd_prepare,
        "presets": _cmd_presets,
    }[args.command]
    try:
        with one_line_warnings():  # each as `warning: ...`, once per command
            return handler(args)
    except Exception as err:
        if (code := _exit_code(err, verbose=getattr(args, "verbose", False))) is None:
            raise  # a bug: its traceback is the report
        return code


def _exit_code(err: Exception, *, verbose: bool) -> int | None:
    """Print an error reported in one line and return the exit code (2; 3: a run folder another
    process holds; 141: a closed pipe), or ``None`` for an exception to raise as it is."""
    from .methods.build import building_error

    report = building_error(err, verbose=verbose)  # a method's construction raised it: any type
    if report is not None or isinstance(err, (ValueError, FileNotFoundError, RunLockedError)):
        print(report or f"error: {err}", file=sys.stderr)
        return 3 if isinstance(err, RunLockedError) else 2
    if isinstance(err, BrokenPipeError):
        # the reader went away (`presets | head`): stop quietly, as Unix tools do; stdout to
        # devnull so that the interpreter's final flush cannot raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the pipe
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
