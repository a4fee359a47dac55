"""Learning curves per domain: each method trained on ONE domain alone, validated every N steps.

For every (method, domain, shot, seed, variant) the method is trained on a stream of that one
domain's training episodes (fresh episodes, ``iters × meta_batch`` of them) and, before training
and every ``--every`` iterations, evaluated on a **fixed** set of ``--val-episodes`` episodes from
the domain's *validation* classes. The evaluation episodes are drawn once from ``--eval-seed``
(default 0): the same episodes at every checkpoint, for every method and every training seed, so
two methods' accuracies can be compared per episode (paired). Each point records the mean episode
accuracy, its 95% CI (``avalanche_sets.metrics.ci95``), every episode's accuracy and a SHA-256
of the evaluated episodes' pixels and labels (the proof that they were the same episodes).

Variants: ``ood`` — the preset's protocol, the unlabeled set holds the preset's R OOD
distractors; ``clean`` — no distractors (R = 0, for training and evaluation), for the check of
Ren et al. 2018 ("refinement helps with clean U, the masked variant is robust with distractors").

Plateau: the first evaluated iteration whose accuracy is within ``--tolerance`` points (default
1) of the best accuracy over the *remaining* curve (that point and every later one): training
past it never gains more than the tolerance. Computed on the seed-averaged curve.

Methods: every name ``avalanche_sets.methods.build_strategy`` knows, plus ``soft-kmeans``
(ProtoNet prototypes refined by one plain soft k-means step over all unlabeled images: MSKM's
strategy with ``PrototypicalModel(refine="soft_kmeans")``).

Resumable: one JSON per curve in ``<out>/curves/`` written atomically after every evaluation,
next to a checkpoint of the learner; a rerun skips finished curves and continues unfinished ones
from their last evaluation point (same numbers as an uninterrupted run). ``--jobs 2`` runs two
curves at once, one thread each.

Outputs in ``--out`` (default ``benchmarks/results/learning_curves``): ``points.csv`` (every
point of every curve), ``summary.json`` (command, date, machine, seeds, load, plateau per
curve), ``README.md`` (method × domain: plateau iteration, best accuracy ± CI, final accuracy),
``curves_<shot>shot.png`` (one panel per domain, one line per method, CI bands) and, when the
curves allow them, ``checks.md``/``checks.csv``: the single-domain checks of each baseline
against its paper's direction (issue 11 §2), as paired per-episode Δ at the final point.

Examples::

    # MSKM and ProtoNet on every sets-mini domain, 5-shot, two curves at a time
    python -m benchmarks.learning_curves --methods mskm protonet --root ../shared/data/sets-mini \
        --shots 5 --iters 600 --every 50 --val-episodes 100 --jobs 2

    # the synthetic domains
    python -m benchmarks.learning_curves --source synthetic --methods mskm protonet --shots 5 \
        --out benchmarks/results/learning_curves_synthetic

    # Ren et al.'s check: clean unlabeled data and with distractors
    python -m benchmarks.learning_curves --methods protonet soft-kmeans mskm \
        --variants clean ood --domains tinyimagenet_animals --shots 1 5 --jobs 2

    # rebuild the tables, plots and checks from the stored curves only
    python -m benchmarks.learning_curves --report-only --out benchmarks/results/learning_curves
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from avalanche_sets.metrics import ci95
from avalanche_sets.presets import RunConfig
from benchmarks._common import RESULTS, SHARED_PACKS, provenance, save_figure

__all__ = [
    "CurveSpec",
    "VARIANTS",
    "EXTRA_METHODS",
    "parse_method",
    "CHECKS",
    "eval_iterations",
    "plateau_index",
    "curve_preset",
    "build_learner",
    "domain_experiences",
    "evaluate",
    "run_curve",
    "load_curves",
    "aggregate",
    "paired_delta",
    "verdict",
    "check_rows",
    "write_report",
    "run_specs",
]

VARIANTS = ("ood", "clean")
#: Methods this tool adds to ``build_strategy``'s: name -> PrototypicalModel refinement.
EXTRA_METHODS = {"soft-kmeans": "soft_kmeans"}
FORMAT = 1


# --------------------------------------------------------------------------- what a curve is
@dataclass(frozen=True)
class CurveSpec:
    """One learning curve: a method trained on one domain, at one shot, seed and variant."""

    method: str
    domain: str
    shot: int
    seed: int
    variant: str = "ood"

    @property
    def name(self) -> str:
        """File name stem; a method's options (``lst:inner_lr=0.1``) appear as ``lst@inner_lr=0.1``
        (no ``:``, which some file systems refuse)."""
        method = self.method.replace(":", "@")
        return f"{method}__{self.domain}__{self.shot}shot__seed{self.seed}__{self.variant}"


def eval_iterations(iters: int, every: int) -> list[int]:
    """The evaluated iterations: 0 (before training), every ``every``-th, and ``iters``."""
    if iters < 1 or every < 1:
        raise ValueError(f"iters and every must be positive, got iters={iters}, every={every}")
    points = list(range(0, iters + 1, every))
    return points if points[-1] == iters else [*points, iters]


def plateau_index(acc: Sequence[float], tolerance: float) -> int:
    """Index of the first point within ``tolerance`` of the best over the remaining curve.

    Point ``k`` qualifies when ``acc[k] >= max(acc[k:]) - tolerance``: no later point is better
    by more than the tolerance, so training past it gains at most the tolerance. (Comparing
    with the best *so far* would call the first point a plateau. The first qualifying point is
    also the first point within the tolerance of the whole curve's best, since every point up
    to the best one sees that best among the remaining ones.)
    """
    a = np.asarray(acc, dtype=float)
    if a.size == 0:
        raise ValueError("plateau of an empty curve")
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    best_after = np.maximum.accumulate(a[::-1])[::-1]  # best_after[k] = max(a[k:])
    return int(np.flatnonzero(a >= best_after - tolerance)[0])


def curve_preset(base: RunConfig, spec: CurveSpec, *, iters: int, val_episodes: int) -> dict:
    """The preset of one curve: one domain, ``iters`` meta-batches, R = 0 for ``clean``, the
    backbone precision resolved on this machine (``"auto"`` becomes ``"fp32"`` or ``"bf16"``)."""
    from avalanche_sets.presets import check_preset
    from avalanche_sets.runs.folder import run_precision

    if spec.variant not in VARIANTS:
        raise ValueError(f"unknown variant {spec.variant!r}; choose from {VARIANTS}")
    preset = {
        **base.as_dict(),
        "domains": [spec.domain],
        "n_shot": spec.shot,
        "tasks_per_domain": iters * base.meta_batch,
        "n_val_episodes": val_episodes,
        "n_test_episodes": 1,  # the test classes are not used here
    }
    preset.pop("order", None)
    if spec.variant == "clean":
        preset["n_ood"] = 0
    # what "auto" means on this machine, so that a curve's settings say what it computed in
    preset["precision"] = run_precision(preset)
    return check_preset(preset, name=f"curve {spec.name}")


def parse_method(name: str) -> tuple[str, dict]:
    """``"lst:inner_lr=0.01,n_stages=1"`` → ``("lst", {"inner_lr": 0.01, "n_stages": 1})``.

    A method name may carry strategy options after a colon (``key=value`` pairs separated by
    commas, values read as Python literals, else kept as strings), so that a curve of a
    changed setting sits beside the default's, under its own name, on the same episodes.

    Raises:
        ValueError: an option that is not ``key=value``.
    """
    import ast

    base, _, rest = name.partition(":")
    options: dict = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"method {name!r}: option {item!r} is not key=value")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return base, options


def build_learner(method: str, preset: dict, *, seed: int, plugins=None):
    """``build_strategy(method, ...)`` (with the options of a ``"name:key=value"`` method), or
    MSKM's strategy with a plain soft k-means head."""
    from avalanche_sets.methods import build_strategy, make_backbone

    base, options = parse_method(method)
    if base in EXTRA_METHODS:
        from avalanche_sets.models.episodic import PrototypicalModel

        torch.manual_seed(seed)  # the same backbone initialisation as build_strategy's
        model = PrototypicalModel(make_backbone(preset), refine=EXTRA_METHODS[base])
        return build_strategy("mskm", preset, seed=seed, plugins=plugins, model=model, **options)
    return build_strategy(base, preset, seed=seed, plugins=plugins, **options)


def check_methods(methods: Sequence[str], preset: dict) -> None:
    """Refuse unknown methods and options before any data is loaded (names the closest)."""
    from avalanche_sets.methods import check_method

    for m in methods:
        base, options = parse_method(m)
        if base == "joint":
            raise ValueError("joint trains on every domain at once: it has no single-domain curve")
        check_method("mskm" if base in EXTRA_METHODS else base, preset, options)


def domain_experiences(preset: dict, *, seed: int, eval_seed: int):
    """``(train_exp, val_exp)`` of the preset's single domain.

    The data and the validation episodes come from ``eval_seed`` (the synthetic generator is
    seeded too, so every training seed sees the same domain); the training episodes from
    ``seed``.
    """
    from avalanche_sets.data import sets_benchmark
    from avalanche_sets.runs.experiment import build_benchmark

    fixed = build_benchmark(preset, seed=eval_seed)
    if seed == eval_seed:
        return fixed.train_stream[0], fixed.valid_stream[0]
    train = sets_benchmark(
        loaded=(fixed.domains, fixed.ood_sources),
        seed=seed,
        **{k: preset[k] for k in ("n_way", "n_shot", "n_query", "n_unlabeled", "n_ood")},
        tasks_per_domain=preset["tasks_per_domain"],
        n_val_episodes=1,
        n_test_episodes=1,
        small_classes=preset.get("small_classes", "error"),
    )
    return train.train_stream[0], fixed.valid_stream[0]


# --------------------------------------------------------------------------- evaluation
def _digest_batch(h, mb_x) -> None:
    for t in (mb_x.support_x, mb_x.support_y, mb_x.query_x, mb_x.query_y, mb_x.unlabeled_x):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())


def evaluate(strategy, val_exp) -> tuple[np.ndarray, str]:
    """Every validation episode's accuracy and a SHA-256 of the episodes evaluated.

    Goes through Avalanche's ``strategy.eval`` (safe inside training: it saves and restores
    the training state), so each method evaluates as it does in a run.
    """
    from avalanche.core import SupervisedPlugin

    from avalanche_sets.metrics import episode_accuracies

    accs: list[float] = []
    h = hashlib.sha256()

    class _Collect(SupervisedPlugin):
        def after_eval_iteration(self, s, **kw):
            accs.extend(episode_accuracies(s.mb_output, s.mb_y, len(s.mb_x)).tolist())
            _digest_batch(h, s.mb_x)

    collector = _Collect()
    strategy.plugins.append(collector)
    try:
        strategy.eval([val_exp])
    finally:
        strategy.plugins.remove(collector)
    return np.asarray(accs), h.hexdigest()


def _point(iteration: int, acc: np.ndarray, digest: str) -> dict:
    return {
        "iteration": int(iteration),
        "mean": float(acc.mean()),
        "ci95": ci95(acc),
        "n_episodes": int(acc.size),
        "episodes_sha256": digest,
        "episode_acc": [round(float(a), 6) for a in acc],
    }


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- one curve
def _settings(preset: dict, *, iters: int, every: int, eval_seed: int) -> dict:
    keep = {k: v for k, v in preset.items() if k not in ("seeds", "threads", "root")}
    return json.loads(
        json.dumps({"preset": keep, "iters": iters, "every": every, "eval_seed": eval_seed})
    )


def run_curve(
    spec: CurveSpec,
    *,
    base_preset: dict,
    iters: int,
    every: int,
    val_episodes: int,
    out: str | Path,
    eval_seed: int = 0,
    log=print,
) -> dict:
    """Compute (or finish, or skip when finished) one curve; returns its record.

    Writes ``<out>/curves/<spec.name>.json`` after every evaluation (atomically) and keeps a
    checkpoint of the learner beside it until the curve is finished.

    Raises:
        ValueError: the folder holds this curve computed with other settings.
    """
    from avalanche.core import SupervisedPlugin

    from avalanche_sets.runs.folder import machine_info
    from avalanche_sets.training.checkpoint import (
        load_latest_checkpoint,
        previous_checkpoint_path,
        save_checkpoint,
    )

    preset = curve_preset(base_preset, spec, iters=iters, val_episodes=val_episodes)
    settings = _settings(preset, iters=iters, every=every, eval_seed=eval_seed)
    folder = Path(out) / "curves"
    folder.mkdir(parents=True, exist_ok=True)
    path, ckpt = folder / f"{spec.name}.json", folder / f"{spec.name}.ckpt"
    if path.is_file():
        old = json.loads(path.read_text())
        if old["settings"] != settings:
            diff = [k for k in settings if old["settings"].get(k) != settings[k]]
            diff += [
                f"preset.{k}"
                for k in set(settings["preset"]) | set(old["settings"]["preset"])
                if settings["preset"].get(k) != old["settings"]["preset"].get(k)
            ]
            raise ValueError(
                f"{path} holds curve {spec.name} computed with other settings ({diff}); fix: "
                "pass another --out folder, or delete that file (and its .ckpt) to redo it"
            )
        if old["finished"]:
            log(f"{spec.name}: finished before, skipped")
            return old
    wanted = eval_iterations(iters, every)
    record = {
        "format": FORMAT,
        "spec": asdict(spec),
        "settings": settings,
        "points": [],
        "finished": False,
        "seconds": 0.0,
        "cpu_seconds": 0.0,
    }
    torch.set_num_threads(int(preset.get("threads", 1)))
    train_exp, val_exp = domain_experiences(preset, seed=spec.seed, eval_seed=eval_seed)
    # Wall time, and this process's CPU time: the cost on an idle core even on a shared machine.
    clock = {"before": 0.0, "cpu_before": 0.0, "start": time.perf_counter()}
    clock["cpu_start"] = time.process_time()

    def save_point(strategy, iteration: int) -> None:
        cpu = time.process_time()
        acc, digest = evaluate(strategy, val_exp)
        record["points"].append(
            {**_point(iteration, acc, digest), "eval_cpu_seconds": time.process_time() - cpu}
        )
        record["seconds"] = clock["before"] + time.perf_counter() - clock["start"]
        record["cpu_seconds"] = clock["cpu_before"] + time.process_time() - clock["cpu_start"]
        record["finished"] = iteration == iters
        if not record["finished"]:  # the checkpoint first: the JSON never runs ahead of it
            save_checkpoint(
                ckpt, strategy, position={"experience": 0, "iteration": iteration},
                extra={"record": record},
            )  # fmt: skip
        _write_json_atomic(path, record)
        eta = (
            f", ~{record['seconds'] / iteration * (iters - iteration):.0f} s left"
            if iteration
            else ""
        )
        log(
            f"{spec.name}: it {iteration}/{iters} acc {100 * acc.mean():.1f} ± "
            f"{100 * ci95(acc):.1f} ({record['seconds']:.0f} s, {record['cpu_seconds']:.0f} s CPU"
            f"{eta})"
        )

    class _EvalEvery(SupervisedPlugin):
        def after_training_iteration(self, strategy, **kw):
            done = strategy.exp_iteration + 1  # the template counts the iteration after plugins
            if done in wanted:
                save_point(strategy, done)

    strategy = build_learner(spec.method, preset, seed=spec.seed, plugins=[_EvalEvery()])
    start = 0
    restored = load_latest_checkpoint(ckpt, strategy) if ckpt.is_file() else None
    if restored is not None:
        record = restored["extra"]["record"]
        clock["before"], clock["cpu_before"] = record["seconds"], record["cpu_seconds"]
        start = restored["position"]["iteration"]
        log(f"{spec.name}: resuming at iteration {start}")
    else:
        save_point(strategy, 0)
    if start < iters:
        strategy.train(train_exp, eval_streams=[], start_iteration=start)
    if not record["finished"]:
        raise RuntimeError(f"{spec.name}: training ended before iteration {iters}")
    record.update(
        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        machine=machine_info(),
    )
    _write_json_atomic(path, record)
    for f in (ckpt, previous_checkpoint_path(ckpt)):
        f.unlink(missing_ok=True)
    return record


# --------------------------------------------------------------------------- aggregation
def load_curves(out: str | Path) -> list[dict]:
    """Every curve record in ``<out>/curves`` (finished or not), sorted by name."""
    folder = Path(out) / "curves"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def _key(rec: dict) -> tuple:
    s = rec["spec"]
    return (s["method"], s["domain"], s["shot"], s["variant"])


def aggregate(records: Sequence[dict], *, tolerance: float = 1.0) -> dict[tuple, dict]:
    """Seed-averaged curves per ``(method, domain, shot, variant)``, with their plateau.

    Per point, every episode's accuracy is averaged over the seeds (the episodes are the same
    for every seed) and the mean and 95% CI are taken over episodes. Only iterations every seed
    has reached are kept.

    Raises:
        ValueError: curves of one group were evaluated on different episodes.
    """
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        groups[_key(rec)].append(rec)
    out = {}
    for key, recs in sorted(groups.items()):
        common = set.intersection(*({p["iteration"] for p in r["points"]} for r in recs))
        its = sorted(common)
        if not its:
            continue
        per_it = []
        for it in its:
            pts = [next(p for p in r["points"] if p["iteration"] == it) for r in recs]
            if len({p["episodes_sha256"] for p in pts}) != 1:
                raise ValueError(f"curves {key} were evaluated on different episodes at it {it}")
            per_it.append(np.mean([p["episode_acc"] for p in pts], axis=0))
        means = [100 * float(a.mean()) for a in per_it]
        k = plateau_index(means, tolerance)
        best = int(np.argmax(means))
        out[key] = {
            "iterations": its,
            "mean": means,
            "ci95": [100 * ci95(a) for a in per_it],
            "episode_acc": [a.tolist() for a in per_it],
            "digest": recs[0]["points"][0]["episodes_sha256"],
            "seeds": sorted(r["spec"]["seed"] for r in recs),
            "finished": all(r["finished"] for r in recs),
            "plateau_iteration": its[k],
            "plateau_index": k,
            "best_index": best,
        }
    return out


# --------------------------------------------------------------------------- issue 11 §2 checks
@dataclass(frozen=True)
class Check:
    """``method_a − method_b`` is expected ``greater`` than 0 or ``within`` ±margin of 0."""

    name: str
    method_a: str
    method_b: str
    direction: str  # "greater" | "within"
    variants: tuple[str, ...]
    source: str


CHECKS = (
    Check("refinement helps with clean U", "soft-kmeans", "protonet", "greater", ("clean",),
          "Ren et al. 2018"),
    Check("masked refinement helps with clean U", "mskm", "protonet", "greater", ("clean",),
          "Ren et al. 2018"),
    Check("masked refinement helps with distractors", "mskm", "protonet", "greater", ("ood",),
          "Ren et al. 2018"),
    Check("masking is the robust variant with distractors", "mskm", "soft-kmeans", "greater",
          ("ood",), "Ren et al. 2018"),
    Check("TPN ≥ ProtoNet", "tpn", "protonet", "greater", VARIANTS, "Liu et al. 2019"),
    Check("LST ≥ MSKM", "lst", "mskm", "greater", VARIANTS, "Li et al. 2019"),
    Check("ANIL within a few points of ProtoNet", "anil", "protonet", "within", VARIANTS,
          "Raghu et al. 2020"),
)  # fmt: skip


def paired_delta(a: dict, b: dict, *, at: str = "final") -> tuple[float, float, int]:
    """Mean and 95% CI (points) of the per-episode differences ``a − b``, and the episodes.

    ``at``: ``"final"`` (each curve's last point) or ``"plateau"`` (each curve's plateau point).

    Raises:
        ValueError: the two curves were not evaluated on the same episodes.
    """
    if a["digest"] != b["digest"]:
        raise ValueError("paired Δ needs the same evaluation episodes; these curves differ")
    pick = {"final": lambda c: -1, "plateau": lambda c: c["plateau_index"]}[at]
    d = 100 * (np.asarray(a["episode_acc"][pick(a)]) - np.asarray(b["episode_acc"][pick(b)]))
    return float(d.mean()), ci95(d), int(d.size)


def verdict(direction: str, delta: float, ci: float, *, margin: float = 3.0) -> str:
    """``agree`` / ``contradict`` when the 95% CI lies wholly on one side, else ``inconclusive``.

    ``greater``: agree when ``Δ − CI > 0``, contradict when ``Δ + CI < 0``. ``within``: agree
    when the CI lies inside ``[−margin, margin]``, contradict when wholly outside it.
    """
    lo, hi = delta - ci, delta + ci
    if direction == "greater":
        return "agree" if lo > 0 else "contradict" if hi < 0 else "inconclusive"
    if direction == "within":
        if -margin <= lo and hi <= margin:
            return "agree"
        return "contradict" if hi < -margin or lo > margin else "inconclusive"
    raise ValueError(f"unknown direction {direction!r}; choose 'greater' or 'within'")


def check_rows(curves: dict[tuple, dict], *, at: str = "final", margin: float = 3.0) -> list:
    """One row per check, domain, shot and variant for which both methods have a curve.

    A method with options (``"lst:inner_lr=0.01"``, :func:`parse_method`) gets the checks of
    its base method, in a row of its own. Each row also gives the Δ between the two curves'
    plateau points (``delta_plateau``), beside the one at ``at`` that decides the verdict.
    """
    rows = []
    for c in CHECKS:
        for m, dom, shot, var in sorted(curves):
            if parse_method(m)[0] != c.method_a or var not in c.variants:
                continue
            other = curves.get((c.method_b, dom, shot, var))
            if other is None:
                continue
            mine = curves[(m, dom, shot, var)]
            if mine["digest"] != other["digest"]:  # said in the table, never silently dropped
                delta, ci, n = float("nan"), float("nan"), 0
                d_plateau, ci_plateau = float("nan"), float("nan")
                said = "not paired: the curves were evaluated on different episodes"
            else:
                delta, ci, n = paired_delta(mine, other, at=at)
                d_plateau, ci_plateau, _ = paired_delta(mine, other, at="plateau")
                said = verdict(c.direction, delta, ci, margin=margin)
            expected = (
                f"{m} > {c.method_b}" if c.direction == "greater"
                else f"−{margin:g} ≤ {m} − {c.method_b} ≤ {margin:g}"
            )  # fmt: skip
            rows.append(
                {
                    "check": f"{c.name} ({c.source})",
                    "domain": dom,
                    "shot": shot,
                    "variant": var,
                    "expected": expected,
                    "delta": delta,
                    "ci95": ci,
                    "episodes": n,
                    "verdict": said,
                    "delta_plateau": d_plateau,
                    "ci95_plateau": ci_plateau,
                }
            )
    return rows


# --------------------------------------------------------------------------- report
def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["empty"])
        w.writeheader()
        w.writerows(rows)


def _plot(curves: dict[tuple, dict], shot: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in curves if k[2] == shot]
    domains = sorted({k[1] for k in keys})
    methods = sorted({k[0] for k in keys})
    cols = min(3, len(domains))
    rows = math.ceil(len(domains) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(max(6, 5 * cols), 3.6 * rows + 0.6), squeeze=False
    )
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    for ax, dom in zip(axes.flat, domains):
        for m, d, _, var in sorted(k for k in keys if k[1] == dom):
            c = curves[(m, d, shot, var)]
            x, y, e = np.array(c["iterations"]), np.array(c["mean"]), np.array(c["ci95"])
            style = "-" if var == "ood" else "--"
            ax.plot(x, y, style, color=colors[m], label=f"{m} ({var})", lw=1.6)
            ax.fill_between(x, y - e, y + e, color=colors[m], alpha=0.15, lw=0)
            k = c["plateau_index"]
            ax.plot(x[k], y[k], "o", color=colors[m], ms=6, mec="black", mew=0.6)
        ax.set_title(dom)
        ax.set_xlabel("training iterations")
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(domains) :]:
        ax.axis("off")
    fig.suptitle(
        f"{shot}-shot learning curves, each method trained on one domain alone\n"
        "(fixed validation episodes, 95% CI bands, dot = plateau)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _delta_text(row: dict) -> str:
    return "—" if math.isnan(row["delta"]) else f"{row['delta']:+.1f} ± {row['ci95']:.1f}"


def write_report(
    out: str | Path,
    *,
    tolerance: float = 1.0,
    at: str = "final",
    margin: float = 3.0,
    prov: dict | None = None,
) -> dict:
    """Write ``points.csv``, ``summary.json``, ``README.md``, plots and the checks table."""
    out = Path(out)
    records = load_curves(out)
    if not records:
        raise ValueError(f"no curves in {out / 'curves'}; run some first")
    points = [
        {
            **rec["spec"],
            "iteration": p["iteration"],
            "accuracy": 100 * p["mean"],
            "ci95": 100 * p["ci95"],
            "n_episodes": p["n_episodes"],
            "episodes_sha256": p["episodes_sha256"],
        }
        for rec in records
        for p in rec["points"]
    ]
    _write_csv(out / "points.csv", points)
    curves = aggregate(records, tolerance=tolerance)
    definition = (
        f"plateau = the first evaluated iteration whose seed-averaged validation accuracy is "
        f"within {tolerance:g} point(s) of the best accuracy over the remaining curve (that "
        "point and every later one)"
    )
    summary = {
        **(prov or provenance()),
        "load_average": list(os.getloadavg()),
        "plateau_definition": definition,
        "tolerance_points": tolerance,
        "seeds": sorted({r["spec"]["seed"] for r in records}),
        "settings": sorted({json.dumps(r["settings"], sort_keys=True) for r in records}),
        "curves": [
            {
                "method": k[0], "domain": k[1], "shot": k[2], "variant": k[3],
                "seeds": c["seeds"], "finished": c["finished"],
                "plateau_iteration": c["plateau_iteration"],
                "best_accuracy": c["mean"][c["best_index"]],
                "best_ci95": c["ci95"][c["best_index"]],
                "best_iteration": c["iterations"][c["best_index"]],
                "final_iteration": c["iterations"][-1],
                "final_accuracy": c["mean"][-1], "final_ci95": c["ci95"][-1],
            }
            for k, c in curves.items()
        ],
    }  # fmt: skip
    summary["settings"] = [json.loads(s) for s in summary["settings"]]
    for what in ("seconds", "cpu_seconds"):
        spent = [r[what] for r in records if r["finished"]]
        summary[f"{what}_per_curve"] = {
            "median": float(np.median(spent)) if spent else None,
            "max": max(spent) if spent else None,
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    m = summary["machine"]
    # runs recorded before the setting existed computed in fp32 (the only precision there was)
    precisions = ", ".join(
        sorted({st["preset"].get("precision", "fp32") for st in summary["settings"]})
    )
    md = (
        "# Learning curves per domain\n\n"
        f"- command: `{summary['command']}`\n- date: {summary['date']}\n"
        f"- machine: {m['cpu']} ({m['cores']} cores), torch {m['torch']}, load average "
        f"{', '.join(f'{x:.1f}' for x in summary['load_average'])}\n"
        f"- seeds: {summary['seeds']}\n- backbone precision: {precisions}\n- {definition}.\n\n"
        "Accuracy in % on fixed validation-class episodes (the same for every method, seed and "
        "checkpoint), mean ± 95% CI over episodes; *ood*: the preset's distractors in the "
        "unlabeled set, *clean*: none.\n\n"
        "| method | domain | shot | variant | plateau iteration | best accuracy | "
        "final accuracy | seeds |\n|---|---|---:|---|---:|---:|---:|---|\n"
    )
    for s in summary["curves"]:
        unfinished = "" if s["finished"] else " (unfinished)"
        md += (
            f"| {s['method']} | {s['domain']} | {s['shot']} | {s['variant']} | "
            f"{s['plateau_iteration']} | {s['best_accuracy']:.1f} ± {s['best_ci95']:.1f} "
            f"(it {s['best_iteration']}) | {s['final_accuracy']:.1f} ± {s['final_ci95']:.1f} "
            f"(it {s['final_iteration']}){unfinished} | {s['seeds']} |\n"
        )
    for shot in sorted({k[2] for k in curves}):
        _plot(curves, shot, out / f"curves_{shot}shot.png")
        md += f"\n![{shot}-shot curves](curves_{shot}shot.png)\n"
    rows = check_rows(curves, at=at, margin=margin)
    if rows:
        _write_csv(out / "checks.csv", rows)
        checks = (
            f"# Single-domain checks against each method's paper\n\n{definition}.\n\n"
            f"Δ = paired per-episode difference at the {at} point (points, mean ± 95% CI over "
            "the same validation episodes). *agree*/*contradict*: the CI lies wholly on the "
            "expected/opposite side; *inconclusive*: it straddles the boundary. The last column "
            "pairs each curve's plateau point instead (for a curve that falls after its "
            "plateau, the better of its two chances).\n\n"
            "| check | domain | shot | variant | expected | measured Δ | verdict | "
            "Δ at the plateaus |\n|---|---|---:|---|---|---:|---|---:|\n"
        )
        for r in rows:
            plateau = {"delta": r["delta_plateau"], "ci95": r["ci95_plateau"]}
            checks += (
                f"| {r['check']} | {r['domain']} | {r['shot']} | {r['variant']} | "
                f"{r['expected']} | {_delta_text(r)} | {r['verdict']} | {_delta_text(plateau)} |\n"
            )
        (out / "checks.md").write_text(checks)
        md += "\nSingle-domain checks against each method's paper: [checks.md](checks.md)\n"
    (out / "README.md").write_text(md)
    return summary


# --------------------------------------------------------------------------- command line
def _worker(job: dict) -> str:
    torch.set_num_threads(1)
    spec = CurveSpec(**job.pop("spec"))
    run_curve(spec, **job, log=lambda s: print(s, flush=True))
    return spec.name


def run_specs(
    specs: Sequence[CurveSpec],
    base: RunConfig,
    *,
    iters: int,
    every: int,
    val_episodes: int,
    out: str | Path,
    eval_seed: int = 0,
    jobs: int = 1,
) -> None:
    """Compute (or finish, or skip) every curve of ``specs`` into ``out``, ``jobs`` at a time."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    todo = [
        {
            "spec": asdict(s),
            "base_preset": base,
            "iters": iters,
            "every": every,
            "val_episodes": val_episodes,
            "out": str(out),
            "eval_seed": eval_seed,
        }
        for s in specs
    ]
    print(f"{len(specs)} curve(s) -> {out}", flush=True)
    if jobs == 1:
        for i, job in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {_worker(job)} done", flush=True)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")  # no fork after torch has started its threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_worker, job) for job in todo]
        for i, fut in enumerate(as_completed(futures), 1):
            print(f"[{i}/{len(todo)}] {fut.result()} done", flush=True)


def _domain_names(preset: RunConfig) -> list[str]:
    from avalanche_sets.data.benchmark import load_source

    ids, _ = load_source(preset.source, root=preset.root, image_size=preset.image_size, seed=0)
    return [d.name for d in ids]


def main(argv: Sequence[str] | None = None) -> None:
    from avalanche_sets.presets import resolve_preset

    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.learning_curves",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--methods", nargs="+", default=["mskm", "protonet"])
    ap.add_argument("--source", choices=("packs", "synthetic"), default="packs")
    ap.add_argument("--root", default=str(SHARED_PACKS), help="folder of the sets-mini packs")
    ap.add_argument("--preset", default="cpu", help="episode shape, backbone, lr (default cpu)")
    ap.add_argument("--domains", nargs="+", help="default: every domain of the source")
    ap.add_argument("--shots", nargs="+", type=int, default=[5])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=["ood"])
    ap.add_argument("--clean", action="store_true", help="shorthand for --variants clean")
    ap.add_argument("--iters", type=int, default=600, help="training iterations per curve")
    ap.add_argument("--every", type=int, default=50, help="iterations between evaluations")
    ap.add_argument("--val-episodes", type=int, default=100)
    ap.add_argument("--eval-seed", type=int, default=0, help="seed of the validation episodes")
    ap.add_argument("--image-size", type=int, help="override the preset's image size")
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16"),
                    help="override the preset's backbone precision (cpu preset: auto)")  # fmt: skip
    ap.add_argument("--tolerance", type=float, default=1.0, help="plateau tolerance (points)")
    ap.add_argument("--at", choices=("final", "plateau"), default="final",
                    help="point of the paired Δ in the checks table")  # fmt: skip
    ap.add_argument("--anil-margin", type=float, default=3.0, help="'a few points' for ANIL")
    ap.add_argument("--jobs", type=int, default=1, help="curves in parallel (one thread each)")
    ap.add_argument("--out", help="default benchmarks/results/learning_curves[_synthetic]")
    ap.add_argument("--report-only", action="store_true", help="only rebuild the outputs")
    args = ap.parse_args(argv)
    suffix = "" if args.source == "packs" else f"_{args.source}"
    out = Path(args.out) if args.out else RESULTS / f"learning_curves{suffix}"
    if args.report_only:
        prov = provenance()
        write_report(out, tolerance=args.tolerance, at=args.at, margin=args.anil_margin, prov=prov)
        print(f"report written to {out}")
        return
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    overrides = {
        "source": args.source,
        "image_size": args.image_size,
        "precision": args.precision,
        "threads": 1,
    }
    if args.source == "packs":
        overrides["root"] = args.root
    base = resolve_preset(args.preset, **overrides)
    check_methods(args.methods, base)
    eval_iterations(args.iters, args.every)
    variants = ["clean"] if args.clean else args.variants
    domains = args.domains or _domain_names(base)
    known = _domain_names(base) if args.domains else domains
    unknown = [d for d in domains if d not in known]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown} for source {args.source}; valid: {known}")
    specs = [
        CurveSpec(m, d, k, s, v)
        for d in domains for k in args.shots for v in variants for s in args.seeds
        for m in args.methods
    ]  # fmt: skip
    for spec in specs:  # every preset is checked before anything is trained
        curve_preset(base, spec, iters=args.iters, val_episodes=args.val_episodes)
    prov = provenance(seeds=args.seeds)
    prov["load_average_start"] = list(os.getloadavg())
    run_specs(
        specs, base, iters=args.iters, every=args.every, val_episodes=args.val_episodes,
        out=out, eval_seed=args.eval_seed, jobs=args.jobs,
    )  # fmt: skip
    write_report(out, tolerance=args.tolerance, at=args.at, margin=args.anil_margin, prov=prov)
    print(f"report written to {out}")


if __name__ == "__main__":
    main()
