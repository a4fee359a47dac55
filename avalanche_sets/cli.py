"""Command line: ``avalanche-sets {run,sweep,table,heatmap,prepare,presets}`` (also
``python -m avalanche_sets``).

Examples::

    avalanche-sets run                                   # ORDER, quick preset, synthetic data
    avalanche-sets run --method mskm --preset cpu --root ../shared/data/sets-mini --seeds 0 1 2
    avalanche-sets sweep --methods order semi-er --preset cpu --root DATA --set n_shot=1,5
    avalanche-sets table runs/ --out results/table
    avalanche-sets heatmap benchmarks/results/runs/order      # draw the runs' heatmaps again
    avalanche-sets prepare pack --folder my_images/ --out my_domain.npz --size 32
    avalanche-sets prepare torchvision --root ~/torchvision --out packs/tv   # 6 domains + OOD
    avalanche-sets presets cpu
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser"]


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parse_sets(items: list[str] | None, *, grid: bool) -> dict:
    """``key=value`` (or ``key=v1,v2`` for a grid) → dict of values (lists for a grid)."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        parsed = _parse_value(value)
        if not grid:
            out[key] = parsed
        elif isinstance(parsed, tuple):  # n_shot=1,5 -> a grid over (1, 5)
            out[key] = list(parsed)
        elif isinstance(parsed, str) and "," in parsed:  # names=a,b
            out[key] = [_parse_value(v) for v in parsed.split(",")]
        else:  # one value (a list literal stays one value)
            out[key] = [parsed]
    return out


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # torch-free modules: the parser (and --help) must not wait for torch and Avalanche
    from .defaults import SOURCES
    from .methods import method_names
    from .presets import preset_names
    from .runs.folder import logger_argument

    p = argparse.ArgumentParser(
        prog="avalanche-sets",
        description="Semi-supervised meta-learning on evolving task distributions (SETS) and "
        "ORDER for Avalanche.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add_run_args(sp, many_methods: bool):
        if many_methods:
            sp.add_argument("--methods", nargs="+", default=["order"], choices=method_names())
        else:
            sp.add_argument("--method", default="order", choices=method_names())
        sp.add_argument("--preset", default="quick", choices=preset_names())
        sp.add_argument("--source", choices=list(SOURCES))
        sp.add_argument("--root", help="folder of domain packs or of the paper's datasets")
        sp.add_argument("--order", type=int, choices=[1, 2, 3], help="the paper's domain order")
        sp.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the preset's)")
        sp.add_argument("--out", default="runs", help="output folder (default: runs/)")
        sp.add_argument(
            "--set",
            action="append",
            metavar="KEY=VALUE",
            help="override a preset setting, e.g. --set n_shot=5 (sweep: --set n_ood=50,100)",
        )
        sp.add_argument(
            "--strategy-set",
            action="append",
            metavar="KEY=VALUE",
            help="strategy constructor argument, e.g. --strategy-set lam=1e-4",
        )
        sp.add_argument("--eval-stream", default="test", choices=["test", "valid"])
        sp.add_argument(
            "--checkpoint-every", type=_positive_int, default=50, metavar="N",
            help="checkpoint every N iterations and at every domain end (default 50); a "
            "killed run started again with the same command resumes from the newest good one",
        )  # fmt: skip
        sp.add_argument(
            "-v", "--verbose", action="store_true",
            help="also print every metric value on the terminal (they always go to the run "
            "folder's log.txt)",
        )  # fmt: skip

    run = sub.add_parser("run", help="run one method on one benchmark")
    add_run_args(run, many_methods=False)
    run.add_argument(
        "--loggers", nargs="*", default=["progress"], type=logger_argument, metavar="LOGGER",
        help="loggers besides the run folder's log.txt: progress (default: one bar per "
        "domain), interactive (Avalanche's bars and metric values), csv, tensorboard, wandb "
        "(offline unless WANDB_MODE says otherwise; pip install \"avalanche-sets[wandb]\")",
    )  # fmt: skip

    sweep = sub.add_parser("sweep", help="run a grid of methods x seeds x settings")
    add_run_args(sweep, many_methods=True)
    sweep.add_argument("--jobs", type=int, default=1, help="parallel runs (local processes)")
    sweep.add_argument(
        "--ray-address",
        help="run every run as a Ray task: local (a cluster on this machine), auto (the "
        "cluster `ray start` joined) or ray://host:10001",
    )

    table = sub.add_parser("table", help="aggregate run folders into tables with 95%% CIs")
    table.add_argument("folders", nargs="+", help="folders searched for result.json files")
    table.add_argument("--out", help="write <out>.md and <out>.csv")
    table.add_argument("--by", default="method", help="comma-separated grouping keys")

    heat = sub.add_parser(
        "heatmap",
        help="draw the accuracy-matrix heatmap of finished runs from their result.json",
        description="Write accuracy_matrix.png into every run folder under FOLDERS, from its "
        "result.json (the committed benchmark runs keep their records, not their pictures).",
    )
    heat.add_argument("folders", nargs="+", help="folders searched for result.json files")

    prep = sub.add_parser("prepare", help="build domain packs or cache the paper's datasets")
    psub = prep.add_subparsers(dest="what", required=True)
    pack = psub.add_parser("pack", help="build a .npz domain pack from an image folder")
    pack.add_argument("--folder", required=True, help="one sub-folder of images per class")
    pack.add_argument("--out", required=True, help="output .npz file")
    pack.add_argument("--size", type=int, default=32)
    pack.add_argument("--seed", type=int, default=0)
    paper = psub.add_parser("paper", help="resize and cache the paper's datasets")
    paper.add_argument("--root", required=True)
    paper.add_argument("--size", type=int, default=84)
    paper.add_argument("--names", nargs="*", help="datasets (default: all nine)")
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
    tv.add_argument("--size", type=_positive_int, default=32, help="image side (default 32)")
    tv.add_argument("--seed", type=int, default=0, help="class split / image draw seed")
    tv.add_argument("--min-per-class", type=_positive_int, default=20, metavar="N")
    tv.add_argument("--max-per-class", type=_positive_int, default=100, metavar="N")
    tv.add_argument(
        "--n-way",
        type=_positive_int,
        default=5,
        metavar="N",
        help="episode width every stream domain must support in train/val/test",
    )
    tv.add_argument("--download", action="store_true", help="download=True (needs internet)")
    tv.add_argument(
        "--skip-md5",
        action="store_true",
        help="read files whose md5 differs from torchvision's (no integrity check)",
    )

    pr = sub.add_parser("presets", help="print a preset as JSON (copy and edit it)")
    pr.add_argument("name", nargs="?", choices=preset_names())
    return p


def _preset_from_args(args, extra: dict | None = None) -> dict:
    from .presets import resolve_preset

    overrides = dict(_parse_sets(args.set, grid=False) if extra is None else extra)
    for key in ("source", "root", "order"):
        value = getattr(args, key, None)
        if value is not None:
            overrides[key] = value
    return resolve_preset(args.preset, **overrides)


def _cmd_run(args) -> int:
    preset = _preset_from_args(args)
    seeds = args.seeds or preset["seeds"]
    strategy_overrides = _parse_sets(args.strategy_set, grid=False)
    from .methods import check_method
    from .runs.experiment import build_benchmark, run_experiment
    from .runs.folder import RUN_FILES, run_folder
    from .runs.report import run_table
    from .visualize import plot_episodes

    # the one check of the method, before any data is loaded
    check_method(args.method, preset, strategy_overrides)
    bench = build_benchmark(preset, seed=seeds[0])  # described here, run below: built once
    print(bench.describe(), flush=True)
    picture = plot_episodes(bench, Path(args.out) / "episodes.png")
    print(f"one episode per domain: {picture}", flush=True)
    for seed in seeds:
        record = run_experiment(
            args.method,
            preset,
            seed=seed,
            out_root=args.out,
            loggers=tuple(args.loggers),
            verbose=args.verbose,
            eval_stream=args.eval_stream,
            strategy_overrides=strategy_overrides,
            checkpoint_every=args.checkpoint_every,
            benchmark=bench if seed == bench.seed else None,
            checked=True,
        )
        table = run_table(record).rstrip("\n")
        folder = run_folder(
            args.out, args.method, preset, seed, eval_stream=args.eval_stream,
            strategy_overrides=strategy_overrides,
        )  # fmt: skip
        print(
            f"\n{args.method}, seed {seed} ({record['seconds']:.0f} s, {record['status']}):\n{table}"
        )
        print(f"\n{'wrote' if record['status'] == 'ran' else 'finished before, in'} {folder}/")
        for name, what in RUN_FILES:
            print(f"  {name:<20} {what}")
    return 0


def _grid(args) -> list[tuple[str, dict, int]]:
    grid = _parse_sets(args.set, grid=True)
    keys = sorted(grid)
    runs = []
    for values in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        preset = _preset_from_args(args, dict(zip(keys, values)))
        for method in args.methods:
            for seed in args.seeds or preset["seeds"]:
                runs.append((method, preset, seed))
    return runs


def _cmd_sweep(args) -> int:
    if args.ray_address:
        try:
            import ray  # noqa: F401
        except ImportError:
            print(
                "error: --ray-address needs Ray: pip install 'avalanche-sets[ray]' (or "
                "scripts/install.sh, which installs it)",
                file=sys.stderr,
            )
            return 2
    strategy_overrides = _parse_sets(args.strategy_set, grid=False)
    grid = _grid(args)
    from .runs.sweep import RunSpec, check_specs, run_sweep

    specs = [
        RunSpec(m, p, s, args.out, eval_stream=args.eval_stream,
                strategy_overrides=strategy_overrides, checkpoint_every=args.checkpoint_every,
                verbose=args.verbose)
        for m, p, s in grid
    ]  # fmt: skip
    check_specs(specs)  # every grid point, before the first run starts
    print(f"sweep: {len(specs)} runs into {args.out}/ (finished runs are skipped)", flush=True)
    outcomes = run_sweep(specs, jobs=args.jobs, ray_address=args.ray_address, checked=True)
    for o in sorted(outcomes, key=lambda o: (o.spec.method, o.spec.seed)):
        print(
            f"{o.spec.method:<24} seed {o.spec.seed}: {100 * o.accuracy:6.2f}%  "
            f"({o.seconds:.0f} s, {o.status})"
        )
    return 0


def _cmd_table(args) -> int:
    from .runs.report import aggregate_results, find_results, write_table

    records = find_results(args.folders)
    if not records:
        print(f"error: no result.json under {args.folders}", file=sys.stderr)
        return 2
    rows = aggregate_results(records, by=args.by.split(","))
    text = write_table(rows, args.out)
    print(text)
    return 0


def _cmd_heatmap(args) -> int:
    from .runs.report import find_results, write_heatmap

    records = find_results(args.folders)
    if not records:
        print(f"error: no result.json under {args.folders}", file=sys.stderr)
        return 2
    for record in records:
        print(f"wrote {write_heatmap(record['_path'], record)}")
    return 0


def _cmd_prepare(args) -> int:
    if args.what == "pack":
        from .data.packs import build_pack_from_folder, load_pack

        path = build_pack_from_folder(args.folder, args.out, image_size=args.size, seed=args.seed)
        print(f"wrote {path}: {load_pack(path)!r}")
        return 0
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


def _cmd_presets(args) -> int:
    from .presets import PRESETS

    print(json.dumps(PRESETS if args.name is None else PRESETS[args.name], indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
        return handler(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`avalanche-sets presets | head`): stop quietly, as Unix tools
        # do, instead of a traceback; stdout goes to devnull so the interpreter's final flush
        # cannot raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the pipe
    except RuntimeError as err:
        from .runs.folder import RunLockedError  # loaded by the command that raised it

        if not isinstance(err, RunLockedError):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
