"""Command line: ``avalanche-sets {run,sweep,table,prepare,presets}`` (also ``python -m avalanche_sets``).

Examples::

    avalanche-sets run                                   # ORDER, quick preset, synthetic data
    avalanche-sets run --method mskm --preset cpu --root ../shared/data/sets-mini --seeds 0 1 2
    avalanche-sets sweep --methods order semi-er --preset cpu --root DATA --set n_shot=1,5
    avalanche-sets table runs/ --out results/table
    avalanche-sets prepare pack --folder my_images/ --out my_domain.npz --size 32
    avalanche-sets prepare torchvision --root ~/torchvision --out packs/tv   # 6 domains + OOD
    avalanche-sets presets cpu
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
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
    from .experiment import LOGGERS
    from .methods import method_names
    from .presets import preset_names

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
        sp.add_argument("--source", choices=["synthetic", "packs", "paper"])
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
        "--loggers", nargs="*", default=["progress"], choices=list(LOGGERS),
        help="loggers besides the run folder's log.txt: progress (default: one bar per "
        "domain), interactive (Avalanche's bars and metric values), csv, tensorboard",
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
    from .experiment import build_benchmark, run_experiment

    preset = _preset_from_args(args)
    seeds = args.seeds or preset["seeds"]
    strategy_overrides = _parse_sets(args.strategy_set, grid=False)
    from .methods import check_method

    check_method(args.method, preset, strategy_overrides)  # fail before loading any data
    bench = build_benchmark(preset, seed=seeds[0])
    print(bench.describe(), flush=True)
    from .visualize import plot_episodes

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
        )
        from .experiment import run_dir_name, run_table

        table = run_table(record).rstrip("\n")

        folder = Path(args.out) / run_dir_name(
            args.method, preset, seed, eval_stream=args.eval_stream,
            strategy_overrides=strategy_overrides,
        )  # fmt: skip
        print(
            f"\n{args.method}, seed {seed} ({record['seconds']:.0f} s, {record['status']}):\n{table}"
        )
        print(f"\n{'wrote' if record['status'] == 'ran' else 'finished before, in'} {folder}/")
        for name, what in _RUN_FILES:
            print(f"  {name:<20} {what}")
    return 0


_RUN_FILES = [
    ("result.json", "accuracy matrix, final accuracies with 95% CIs, settings"),
    ("run.json", "wall time, date, machine, command"),
    ("table.md", "the table above"),
    ("accuracy_matrix.png", "heatmap: accuracy on every domain after each training domain"),
    ("log.txt", "every metric value of the run (--verbose prints them)"),
]


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


def _one(job, wait: bool = False):
    """One run of a sweep → ``(method, seed, status, accuracy, seconds)``.

    ``status``: ``"ran"``, ``"finished before"`` (skipped), or ``"locked"`` (another process is
    running it; the sweep comes back to it with ``wait=True`` once its own runs are done).
    """
    method, preset, seed, out, eval_stream, strategy_overrides, every, verbose = job
    from .experiment import run_experiment
    from .run_folder import RunLockedError

    try:
        rec = run_experiment(
            method, preset, seed=seed, out_root=out, loggers=(), verbose=verbose,
            eval_stream=eval_stream,
            strategy_overrides=strategy_overrides, checkpoint_every=every, wait=wait,
        )  # fmt: skip
    except RunLockedError:
        return method, seed, "locked", float("nan"), float("nan")
    return method, seed, rec["status"], rec["result"]["mean_accuracy"], rec["seconds"]


def _one_waiting(job):
    return _one(job, wait=True)


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
    jobs = [
        (m, p, s, args.out, args.eval_stream, strategy_overrides, args.checkpoint_every,
         args.verbose)
        for m, p, s in _grid(args)
    ]  # fmt: skip
    from .methods import check_method

    for method, preset, *_ in jobs:  # every grid point, before the first run starts
        check_method(method, preset, strategy_overrides)
    print(f"sweep: {len(jobs)} runs into {args.out}/ (finished runs are skipped)", flush=True)
    results = _sweep_pass(args, jobs, _one)
    # Runs another process was running (another sweep on the same folder): wait for them and
    # report their results, without running them a second time.
    locked = [j for j, r in zip(jobs, results) if r[2] == "locked"]
    if locked:
        print(f"waiting for {len(locked)} run(s) held by another process", flush=True)
        again = iter(_sweep_pass(args, locked, _one_waiting))
        results = [next(again) if r[2] == "locked" else r for r in results]
    for method, seed, status, acc, secs in sorted(results, key=lambda r: r[:2]):
        print(f"{method:<24} seed {seed}: {100 * acc:6.2f}%  ({secs:.0f} s, {status})")
    return 0


def _sweep_pass(args, jobs: list, fn) -> list:
    """``fn`` over ``jobs`` locally (in order), in a process pool, or on Ray; results in order."""
    from tqdm import tqdm

    if args.ray_address:
        return _ray_pass(args.ray_address, jobs, fn)
    if args.jobs > 1:
        import multiprocessing as mp

        for j in jobs:
            j[1]["threads"] = 1  # one core per run
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            return list(tqdm(pool.imap(fn, jobs), total=len(jobs)))
    return [fn(j) for j in tqdm(jobs)]


def _ray_pass(address: str, jobs: list, fn) -> list:
    """``fn`` over ``jobs`` as Ray tasks (one CPU each, plus one GPU when the preset runs on
    CUDA); results in order. Connects to ``address`` (``local`` starts a cluster on this
    machine, ``auto`` joins the one ``ray start`` started) unless this process already is."""
    import ray
    from tqdm import tqdm

    from .experiment import run_dir_name

    results: list = [None] * len(jobs)
    todo = []
    for i, (method, preset, seed, out, eval_stream, overrides, *rest) in enumerate(jobs):
        where = {"eval_stream": eval_stream, "strategy_overrides": overrides}
        if (Path(out) / run_dir_name(method, preset, seed, **where) / "result.json").is_file():
            results[i] = fn(jobs[i])  # finished: read (and checked) here, no task needed
        else:
            # one core per task; the folder as an absolute path, the same on every worker of
            # one machine (on a cluster: a folder every node mounts at that path)
            job = (method, {**preset, "threads": 1}, seed, str(Path(out).resolve()),
                   eval_stream, overrides, *rest)  # fmt: skip
            todo.append((i, job, str(preset.get("device", "cpu")).startswith("cuda")))
    if not todo:
        return results
    connected_here = not ray.is_initialized()
    if connected_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        pending = {
            ray.remote(num_cpus=1, num_gpus=int(gpu))(fn).remote(job): i for i, job, gpu in todo
        }
        with tqdm(total=len(pending), desc="runs") as bar:
            while pending:  # report runs as they finish, in any order
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    results[pending.pop(ref)] = ray.get(ref)
                    bar.update(1)
        return results
    finally:
        if connected_here:
            ray.shutdown()


def _cmd_table(args) -> int:
    from .reporting import aggregate_results, find_results, write_table

    records = find_results(args.folders)
    if not records:
        print(f"error: no result.json under {args.folders}", file=sys.stderr)
        return 2
    rows = aggregate_results(records, by=args.by.split(","))
    text = write_table(rows, args.out)
    print(text)
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
        "prepare": _cmd_prepare,
        "presets": _cmd_presets,
    }[args.command]
    from .run_folder import RunLockedError

    try:
        return handler(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RunLockedError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
