"""Milliseconds per training iteration at the paper's scale on a GPU: ProtoNet, MSKM and ORDER.

Setting: the ``paper`` preset (84 px, 5 blocks of 64 filters, 5-way 1-shot, Q = 15, Z = 10,
meta-batch 2, bf16 autocast where the GPU has it) on the synthetic source at 84 px (no
download), one domain, R = 50 and R = 250. ORDER's memory is filled first, so replay, MI and OT
are all active. The configurations are interleaved in rounds so that drift hits them alike.

For each configuration (method × R × backbone variant × data path):

* median milliseconds per iteration, timed from the start of ORDER's replay to the end of the
  optimiser step, waiting for the GPU at both ends;
* ``data_wait``: the share of the wall time spent between two iterations of one pass (the
  loader gathering the next meta-batch and Avalanche moving it to the device);
* peak GPU memory of a solo pass; backbone TFLOP/s: the FLOPs (forward + backward) of the
  images the method's backbone embeds per iteration, counted by a hook on the backbone (ProtoNet
  embeds no unlabeled image; ORDER embeds its replayed tasks too), over the median;
* host synchronisations per iteration (CUDA's sync debug mode) and where they happen;
* ``gpu_busy``: ``busy_ms_per_it``, the milliseconds per iteration in which the GPU ran a
  kernel or a copy inside the profiled pass's training steps (each once, overlaps merged, the
  annotation ranges drawn on the GPU's timeline left out), over ``ms``, the median step of the
  timed rounds; ``gpu_busy_of_pass`` is the profiled pass's whole device work over that pass's
  wall time (set-up and profiler included), which is not the step's share; the pass's heaviest
  kernels and host operators;
* for a compiled backbone, ``inductor``: whether Inductor's kernels replaced ATen's batch-norm
  and max-pool kernels in the profile, with the calls and times of each;

and ORDER / MSKM as a ratio measured side by side, with every callback ORDER's plugins
override timed in a separate pass (which also counts the backbone's images). Variants: the backbone ``eager``, ``compile`` (``torch.compile``) and
``cudagraphs`` (``torch.compile(mode="reduce-overhead")``: CUDA graphs of the backbone; the
whole step cannot be one graph because the exact OT plan is solved on the host); data paths:
``device`` (image pools on the GPU, :class:`~avalanche_sets.data.DeviceEpisodeSampler`, what a
GPU preset uses) and ``host`` (episodes gathered in host memory and copied each iteration).

    python -m benchmarks.gpu_step            # on a GPU: writes benchmarks/results/gpu_step
    python -m benchmarks.gpu_step --device cpu --out /tmp/gpu_step --set image_size=16 \\
        --set n_blocks=2 --set width=8 --iters 2 --warm 2 --variants eager   # smoke test

Results are rewritten after every stage (built and warmed, timed, each configuration
profiled), so a run stopped by a time limit keeps what it measured; ``--stem NAME`` writes
``NAME.json`` and ``NAME.md`` only (a stage of ``scripts/gpu_check.sh``). Compiled variants may
keep up to 64 graphs per compiled function and fail rather than fall back to eager when they
need more; the summary reports ``torch._dynamo``'s counters.

The targets on one H100 (docs/guide/gpu.md): ORDER ≤ 15 ms per iteration at R = 50,
ORDER / MSKM ≤ 2.1, GPU busy ≥ 70 % of the step; the report says which are met.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import silent_evaluator
from benchmarks._common import RESULTS, header_md, provenance, save_figure
from benchmarks._gpu import (
    BUSY_COUNTS,
    BUSY_SHARE,
    StepClock,
    busy_device_us,
    compile_counters,
    device_clock,
    gpu_arguments,
    gpu_info,
    gpu_line,
    guard_recompiles,
    inductor_evidence,
    is_device_work,
    results_folder,
    write_json_atomic,
)
from benchmarks._timing import instrument, train_range
from benchmarks.step_speed import backbone_flops

__all__ = ["backbone_images", "busy_share", "main", "measure", "ratios", "schedule", "targets"]

METHODS = ("protonet", "mskm", "order")
VARIANTS = {
    "eager": None,
    "compile": "default",
    "cudagraphs": "reduce-overhead",
    "captured": "step",
}
#: ``captured``: the whole training step compiled as one graph
#: (:meth:`~avalanche_sets.training.EpisodicTemplate.compile_training_step`, a CUDA graph on a
#: GPU), with a fused Adam and, for ORDER, the sync-free OT plan (``ot_solver="sinkhorn"``): the
#: exact plan is solved on the host and cannot be inside a captured step.
CAPTURED_OPTIONS = {"order": {"ot_solver": "sinkhorn"}}
DATA_PATHS = ("device", "host")
TARGETS = {"order_ms_r50": 15.0, "order_over_mskm": 2.1, "gpu_busy": 0.70}
#: The passes after the timed rounds, in order: peak memory, host synchronisations and the
#: profiler need CUDA; the last ("parts": the backbone's images, ORDER's plugin callbacks) runs
#: on every device.
CUDA_STAGES = ("peak", "syncs", "busy")
TOP_ROWS = 12


def schedule(*, warm: int, iters: int, round_: int, cuda: bool, meta_batch: int) -> dict:
    """The iterations every configuration trains, and the tasks its stream must hold.

    ``[0, warm)`` warms up (fills ORDER's memory, compiles); the timed rounds follow,
    ``ceil(iters / round_)`` passes of ``round_`` iterations; then one pass of ``round_`` each
    for peak memory, host synchronisations and the profiler (CUDA only) and for ORDER's plugin
    callbacks. Every pass starts where the one before stopped, and the stream holds
    ``meta_batch`` tasks per iteration up to the last pass's end, so no pass starts past the
    last task.
    """
    for name, value in (("warm", warm), ("iters", iters), ("round", round_),
                        ("meta_batch", meta_batch)):  # fmt: skip
        if not isinstance(value, int) or value < (0 if name == "warm" else 1):
            least = 0 if name == "warm" else 1
            raise ValueError(f"gpu_step: --{name} must be an integer >= {least}, got {value!r}")
    passes = -(-iters // round_)
    it = warm + passes * round_
    timed = (warm, it)
    stages = {}
    for name in (*(CUDA_STAGES if cuda else ()), "parts"):
        stages[name] = (it, it + round_)
        it += round_
    return {"passes": passes, "timed": timed, "stages": stages, "iterations": it,
            "n_tasks": meta_batch * it}  # fmt: skip


def _sync_sites(strategy, exp, start: int, stop: int) -> tuple[float, dict]:
    """Host synchronisations per iteration over [start, stop) and their top call sites."""
    sites: Counter = Counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            train_range(strategy, exp, start, stop)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for w in caught:
        if "synchroniz" in str(w.message):
            sites[f"{w.filename.split('site-packages/')[-1]}:{w.lineno}"] += 1
    n = max(stop - start, 1)
    return sum(sites.values()) / n, dict(sites.most_common(10))


def _top(rows, key: str, n: int = TOP_ROWS) -> list[dict]:
    rows = sorted(rows, key=lambda e: getattr(e, key), reverse=True)[:n]
    return [{"name": e.key[:120], "calls": e.count, "ms": getattr(e, key) / 1e3} for e in rows]


#: The profiler range around each training step of the profiled pass (its CPU timeline).
STEP_RANGE = "gpu_step.step"


def _step_ranges(strategy):
    """Two plugins that open :data:`STEP_RANGE` at the start of each training iteration (the
    first plugin) and close it at its end (the last), each after waiting for the GPU, so that
    the range holds the step's device work and no other's."""
    from avalanche.core import SupervisedPlugin

    box = {}

    class _Open(SupervisedPlugin):
        def before_training_iteration(self, s, **kw):
            torch.cuda.synchronize()
            box["range"] = torch.profiler.record_function(STEP_RANGE)
            box["range"].__enter__()

    class _Close(SupervisedPlugin):
        def after_training_iteration(self, s, **kw):
            torch.cuda.synchronize()
            box.pop("range").__exit__(None, None, None)

    return _Open(), _Close()


def busy_share(events, *, iterations: int, step_ms: float, wall_us: float) -> dict:
    """The busy figures of a profiled pass of ``iterations`` steps: ``busy_ms_per_it`` (device
    work inside the :data:`STEP_RANGE` ranges, per iteration; ``None`` unless there is one
    range per iteration), ``gpu_busy`` (that over ``step_ms``, the timed rounds' median step)
    and ``gpu_busy_of_pass`` (all the pass's device work over its wall time ``wall_us``)."""
    from torch.autograd import DeviceType

    events = list(events)
    steps = [
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.name == STEP_RANGE and e.device_type == DeviceType.CPU
    ]
    busy_pass = busy_device_us(events)
    busy_ms = None
    if len(steps) == iterations:
        busy_ms = busy_device_us(events, steps) / iterations / 1e3
    return {
        "busy_ms_per_it": busy_ms,
        "gpu_busy": None if busy_ms is None else busy_ms / step_ms,
        "gpu_busy_of_pass": busy_pass / wall_us,
        "profile": {
            "iterations": iterations,
            "wall_ms": wall_us / 1e3,
            "steps_ms": sum(b - a for a, b in steps) / 1e3,
            "busy_ms_pass": busy_pass / 1e3,
        },
    }


def _gpu_busy(strategy, exp, start: int, stop: int, clock, step_ms: float, compiled: bool) -> dict:
    """How busy the GPU was in the training steps of iterations [start, stop) (profiler):
    ``busy_ms_per_it``, the device-busy time inside the steps (:func:`busy_device_us` clipped
    to :data:`STEP_RANGE`) per iteration, and ``gpu_busy``, that over ``step_ms`` (the median
    step of the timed rounds: the profiler slows the host, so the profiled steps' own wall time
    would make the share too small). ``gpu_busy_of_pass`` is the pass's whole device work over
    its wall time, set-up and profiler included. With the profile's heaviest kernels, the CPU
    operators that take the most host time (what keeps the GPU waiting) and, for a compiled
    backbone, whether Inductor replaced ATen's kernels (:func:`inductor_evidence`)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    opener, closer = _step_ranges(strategy)
    strategy.plugins.insert(0, opener)
    strategy.plugins.append(closer)
    try:
        t0 = clock()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            train_range(strategy, exp, start, stop)
            torch.cuda.synchronize()
        wall_us = (clock() - t0) * 1e6
    finally:
        strategy.plugins.remove(opener)
        strategy.plugins.remove(closer)
    avg = prof.key_averages()
    kernels = [e for e in avg if is_device_work(e)]
    host_ops = [e for e in avg if e.device_type == DeviceType.CPU]
    out = busy_share(prof.events(), iterations=stop - start, step_ms=step_ms, wall_us=wall_us)
    out["profile"]["top_kernels"] = _top(kernels, "self_device_time_total")
    out["profile"]["top_host_ops"] = _top(host_ops, "self_cpu_time_total")
    if compiled:
        out["inductor"] = inductor_evidence(kernels)
    return out


class _ImageCount:
    """Images the backbone embeds, summed over its calls (a forward pre-hook)."""

    def __init__(self, backbone) -> None:
        self.images = 0
        self._handle = backbone.register_forward_pre_hook(self._count)

    def _count(self, module, args) -> None:
        self.images += int(args[0].shape[0])

    def remove(self) -> None:
        self._handle.remove()


def backbone_images(strategy, exp, start: int, stop: int, sink: dict | None = None) -> float:
    """Images the strategy's backbone embeds per training iteration over [start, stop): what
    the method feeds it (ProtoNet: support and query; MSKM: the unlabeled set too; ORDER: its
    replayed tasks' as well), counted, not assumed."""
    count = _ImageCount(strategy.model.backbone)
    try:
        train_range(strategy, exp, start, stop)
    finally:
        count.remove()
    return count.images / max(stop - start, 1)


def flops_per_image(strategy, exp, it: int) -> float:
    """The backbone's forward + backward FLOPs per image, from one meta-batch of ``exp``
    (:func:`~benchmarks.step_speed.backbone_flops`, which embeds its support, query and
    unlabeled images)."""
    n = strategy.train_mb_size
    episodes = [exp.dataset[it * n + i] for i in range(n)]
    images = sum(e.support_x.shape[0] + e.query_x.shape[0] + e.unlabeled_x.shape[0]
                 for e in episodes)  # fmt: skip
    return backbone_flops(strategy, exp, it) / images


def _configs(args):
    for n_ood in args.n_ood:
        for data in args.data:
            for variant in args.variants:
                for method in args.methods:
                    yield n_ood, data, variant, method


class Recorder:
    """The summary, rewritten whole (JSON and Markdown) after every stage of the measurement,
    so that a run cut short by its time limit still leaves what it measured."""

    def __init__(self, out: Path, stem: str | None, summary: dict) -> None:
        self.out, self.stem, self.summary = out, stem, summary

    def update(self, stage: str, **fields) -> None:
        self.summary.update(fields)
        self.summary["stage"] = stage
        self.summary["compile_counters"] = compile_counters()
        self.summary["gpu_busy_counts"] = BUSY_COUNTS
        self.summary["gpu_busy_share"] = BUSY_SHARE
        rows = self.summary["rows"]
        self.summary["ratios"] = ratios(rows)
        cuda = self.summary["gpu"] is not None
        self.summary["targets"] = targets(rows, self.summary["ratios"]) if cuda else []
        json_name = "gpu_step.json" if self.stem is None else f"{self.stem}.json"
        write_json_atomic(self.out / json_name, self.summary)
        report(self.summary, self.out, self.stem, plot=stage == "done")
        print(f"[gpu_step] {stage}: results written to {self.out / json_name}", file=sys.stderr)


def measure(args, recorder: Recorder | None = None) -> list[dict]:
    device = args.device
    clock = device_clock(device)
    cuda = torch.device(device).type == "cuda"
    if any(VARIANTS[v] is not None for v in args.variants):
        guard_recompiles()
    benches, built, rows = {}, {}, []
    plan = None

    def record(stage: str, **fields) -> None:
        if recorder is not None:
            recorder.update(stage, rows=rows, schedule=plan, **fields)

    for n_ood, data, variant, method in _configs(args):
        if (n_ood, data) not in benches:
            preset = resolve_preset(
                "paper", source="synthetic", domains=[args.domain], n_ood=n_ood,
                device=device, **args.set,
            )  # fmt: skip
            plan = schedule(warm=args.warm, iters=args.iters, round_=args.round, cuda=cuda,
                            meta_batch=preset.meta_batch)  # fmt: skip
            preset = preset.replace(tasks_per_domain=plan["n_tasks"])
            # the host path: the same benchmark with its episodes gathered in host memory
            where = preset if data == "device" else preset.replace(device="cpu")
            benches[(n_ood, data)] = (preset, build_benchmark(where, seed=0).train_stream[0])
        preset, exp = benches[(n_ood, data)]
        torch.manual_seed(0)
        step = StepClock(clock)
        options = CAPTURED_OPTIONS.get(method, {}) if variant == "captured" else {}
        s = build_strategy(
            method, preset, seed=0, evaluator=silent_evaluator(), plugins=[step], **options
        )
        s.plugins.insert(0, step.head())  # the iteration starts before ORDER's replay
        if variant == "captured":
            if not s._skips_on_device():  # a CPU rehearsal: the fused Adam a CUDA run has
                s.optimizer = torch.optim.Adam(s.model.parameters(), lr=preset.lr, fused=True)
            s.compile_training_step(mode="reduce-overhead" if cuda else None)
        elif VARIANTS[variant] is not None:
            bb = s.model.backbone
            bb.features = torch.compile(bb.features, mode=VARIANTS[variant])
        built[(n_ood, data, variant, method)] = (s, step, exp)
        print(f"[gpu_step] built {method} R={n_ood} {variant} data={data}", file=sys.stderr)

    warm_s = {}
    for key, (s, step, exp) in built.items():  # fills ORDER's memory, compiles, warms allocators
        t0 = clock()
        train_range(s, exp, 0, args.warm)
        warm_s["/".join(map(str, key))] = clock() - t0
        step.t.clear()
    record("warmed", warm_seconds=warm_s)
    first, it = plan["timed"]
    for k in range(plan["passes"]):
        for s, _, exp in built.values():
            train_range(s, exp, first + k * args.round, first + (k + 1) * args.round)
        print(f"[gpu_step] round {k + 1}/{plan['passes']}", file=sys.stderr)

    for (n_ood, data, variant, method), (s, step, exp) in built.items():
        times, gaps = step.t["iteration"], step.t["gap"]
        row = {
            "method": method,
            "R": n_ood,
            "variant": variant,
            "data": data,
            "ms": 1e3 * statistics.median(times),
            "ms_all": [1e3 * t for t in times],
            "data_wait": sum(gaps) / (sum(gaps) + sum(times) * len(gaps) / len(times))
            if gaps
            else 0.0,
            "flops_per_image": flops_per_image(s, exp, it),
        }
        # the backbone's images per iteration are counted in the "parts" pass
        row.update(backbone_images_per_it=None, backbone_tflop=None, tflops=None)
        row.update(peak_gib=None, syncs_per_it=None, sync_sites={}, gpu_busy=None, profile=None)
        row.update(busy_ms_per_it=None, gpu_busy_of_pass=None)
        rows.append(row)
    record("timed")

    stages = plan["stages"]
    for row, (s, _step, exp) in zip(rows, built.values()):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            train_range(s, exp, *stages["peak"])
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
            row["syncs_per_it"], row["sync_sites"] = _sync_sites(s, exp, *stages["syncs"])
            compiled = VARIANTS[row["variant"]] is not None
            row.update(_gpu_busy(s, exp, *stages["busy"], clock, row["ms"], compiled))
        if row["variant"] == "captured":  # nothing can be timed or hooked inside the graph
            row["backbone_images_per_it"] = row["backbone_tflop"] = row["tflops"] = None
            row["captured_note"] = "one compiled step: callbacks and backbone hooks not timed"
            continue
        # a pass of its own: the backbone's images and ORDER's callbacks (the timer waits)
        sink: dict = defaultdict(list)
        for plugin in getattr(s, "order_plugins", []):
            instrument(plugin, sink, timer=clock)
        images = backbone_images(s, exp, *stages["parts"])
        row["backbone_images_per_it"] = images
        row["backbone_tflop"] = images * row["flops_per_image"] / 1e12
        row["tflops"] = row["backbone_tflop"] / (row["ms"] / 1e3)
        if sink:
            row["order_parts_ms"] = {k: 1e3 * statistics.median(v) for k, v in sink.items()}
        record(f"profiled {row['method']} R={row['R']} {row['variant']} data={row['data']}")
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """ORDER / MSKM per (R, variant, data), from the side-by-side medians."""
    by = {(r["method"], r["R"], r["variant"], r["data"]): r["ms"] for r in rows}
    out = []
    for (m, n_ood, variant, data), ms in by.items():
        if m == "order" and ("mskm", n_ood, variant, data) in by:
            out.append(
                {"R": n_ood, "variant": variant, "data": data,
                 "order_over_mskm": ms / by[("mskm", n_ood, variant, data)]}
            )  # fmt: skip
    return out


def targets(rows: list[dict], ratio_rows: list[dict]) -> list[dict]:
    """The GPU targets against the best configuration measured for each."""
    order50 = [r for r in rows if r["method"] == "order" and r["R"] == 50]
    out = []
    if order50:
        best = min(order50, key=lambda r: r["ms"])
        out.append(
            {"target": "ORDER ms per iteration at R = 50", "limit": f"<= {TARGETS['order_ms_r50']}",
             "measured": round(best["ms"], 2), "where": f"{best['variant']}, data {best['data']}",
             "met": best["ms"] <= TARGETS["order_ms_r50"]}
        )  # fmt: skip
        busy = [r for r in order50 if r["gpu_busy"] is not None]
        if busy:
            b = max(busy, key=lambda r: r["gpu_busy"])
            out.append(
                {"target": "GPU busy share of ORDER's step (R = 50)",
                 "limit": f">= {TARGETS['gpu_busy']:.0%}", "measured": round(b["gpu_busy"], 3),
                 "where": f"{b['variant']}, data {b['data']}",
                 "met": b["gpu_busy"] >= TARGETS["gpu_busy"]}
            )  # fmt: skip
    r50 = [r for r in ratio_rows if r["R"] == 50]
    if r50:
        best = min(r50, key=lambda r: r["order_over_mskm"])
        out.append(
            {"target": "ORDER / MSKM (R = 50)", "limit": f"<= {TARGETS['order_over_mskm']}",
             "measured": round(best["order_over_mskm"], 3),
             "where": f"{best['variant']}, data {best['data']}",
             "met": best["order_over_mskm"] <= TARGETS["order_over_mskm"]}
        )  # fmt: skip
    return out


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def report(summary: dict, out: Path, stem: str | None = None, *, plot: bool = True) -> None:
    """The Markdown summary (``README.md``, or ``<stem>.md``) and, with ``plot`` and no
    ``stem``, the bar chart."""
    rows, prov = summary["rows"], summary["provenance"]
    md = header_md("Training iteration at the paper's scale on a GPU", prov)
    md += gpu_line(summary["gpu"])
    md += f"- preset: `paper` on the synthetic source, overrides {summary['preset_overrides']}\n"
    md += f"- iterations timed per configuration: {summary['iters']} (after {summary['warm']} warm-up)\n"
    md += f"- stage reached: {summary.get('stage', 'n/a')}\n"
    counters = summary.get("compile_counters") or {}
    if counters:
        md += f"- torch.compile counters: {counters.get('stats', {})}\n"
    md += "\n"
    md += (
        "| method | R | backbone | data | ms / it (median) | data wait | GPU busy ms / it | "
        "GPU busy share of the step | syncs / it | peak GiB | backbone images / it | "
        "backbone TFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    for r in rows:
        md += (
            f"| {r['method']} | {r['R']} | {r['variant']} | {r['data']} | {r['ms']:.2f} | "
            f"{r['data_wait']:.1%} | {_fmt(r.get('busy_ms_per_it'), '.2f')} | "
            f"{_fmt(r['gpu_busy'], '.1%')} | "
            f"{_fmt(r['syncs_per_it'], '.1f')} | {_fmt(r['peak_gib'], '.2f')} | "
            f"{_fmt(r.get('backbone_images_per_it'), '.0f')} | {_fmt(r['tflops'], '.1f')} |\n"
        )
    md += (
        "\nGPU busy: the milliseconds per iteration in which a kernel or a copy ran inside the "
        "profiled pass's training steps, over the median step of the timed rounds (ms / it). "
        "Backbone TFLOP/s: the FLOPs of the images the backbone embedded per iteration (counted) "
        "over the median step.\n"
    )
    inductor = [r for r in rows if r.get("inductor")]
    if inductor:
        md += "\nDid Inductor replace the backbone's ATen kernels (compiled variants)?\n\n"
        md += "| method | R | backbone | data | replaced | Inductor kernels | ATen batch-norm / max-pool kernels |\n"
        md += "|---|---|---|---|---|---|---|\n"
        for r in inductor:
            ev = r["inductor"]
            md += (
                f"| {r['method']} | {r['R']} | {r['variant']} | {r['data']} | "
                f"{'yes' if ev['inductor_replaced_backbone'] else '**no**'} | "
                f"{ev['inductor']['calls']} calls, {ev['inductor']['ms']:.2f} ms | "
                f"{ev['aten_backbone']['calls']} calls, {ev['aten_backbone']['ms']:.2f} ms |\n"
            )
    md += "\n| R | backbone | data | ORDER / MSKM |\n|---|---|---|---|\n"
    for r in summary["ratios"]:
        md += f"| {r['R']} | {r['variant']} | {r['data']} | {r['order_over_mskm']:.2f} |\n"
    if summary["gpu"] is None:
        md += "\nNo GPU: the targets (on one H100) are not judged.\n"
    else:
        md += "\n**Targets** (best configuration measured for each):\n\n"
        md += "| target | limit | measured | where | met |\n|---|---|---|---|---|\n"
        for t in summary["targets"]:
            met = "yes" if t["met"] else "no"
            md += f"| {t['target']} | {t['limit']} | {t['measured']} | {t['where']} | {met} |\n"
    parts = [r for r in rows if "order_parts_ms" in r]
    if parts:
        md += (
            "\nORDER's plugin callbacks, every one a plugin overrides (median ms per call, a pass "
            "with a device-waiting timer; `before_training_exp` runs once per pass):\n\n"
        )
        md += "| R | backbone | data | callback | ms |\n|---|---|---|---|---|\n"
        for r in parts:
            for k, v in r["order_parts_ms"].items():
                md += f"| {r['R']} | {r['variant']} | {r['data']} | {k} | {v:.2f} |\n"
    sites = [r for r in rows if r["sync_sites"]]
    if sites:
        md += "\nWhere ORDER's step synchronises with the host (eager, data on the device):\n\n"
        for r in sites:
            if r["method"] == "order" and r["variant"] == "eager" and r["data"] == "device":
                md += (
                    f"- R = {r['R']}: "
                    + ", ".join(f"`{k}` × {v}" for k, v in r["sync_sites"].items())
                    + "\n"
                )
    profiled = [r for r in rows if r.get("profile")]
    for r in profiled:
        p = r["profile"]
        md += (
            f"\nProfile of {r['method']} R = {r['R']} {r['variant']} data {r['data']} "
            f"({p['iterations']} iterations, {p['wall_ms']:.1f} ms): heaviest kernels, then the "
            "host operators taking the most CPU time\n\n| kind | name | calls | ms |\n"
            "|---|---|---|---|\n"
        )
        for kind in ("top_kernels", "top_host_ops"):
            for e in p[kind][:6]:
                md += f"| {kind[4:]} | `{e['name'][:70]}` | {e['calls']} | {e['ms']:.2f} |\n"
    if stem is not None:
        (out / f"{stem}.md").write_text(md)
        return
    md += "\n![ms per iteration](gpu_step.png)\n"
    (out / "README.md").write_text(md)
    if plot and rows:
        _plot(rows, out)


def _plot(rows: list[dict], out) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(r["R"], r["variant"], r["data"]) for r in rows})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(keys)), 3.6))
    width = 0.8 / max(len(methods), 1)
    for j, m in enumerate(methods):
        ys = [
            next(
                (
                    r["ms"]
                    for r in rows
                    if (r["R"], r["variant"], r["data"]) == k and r["method"] == m
                ),
                0,
            )
            for k in keys
        ]
        ax.bar([i + j * width for i in range(len(keys))], ys, width, label=m)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(keys))])
    ax.set_xticklabels([f"R={k[0]}\n{k[1]}\n{k[2]}" for k in keys], fontsize=8)
    ax.set_ylabel("ms per iteration (median)")
    ax.axhline(TARGETS["order_ms_r50"], color="grey", ls="--", lw=1, label="ORDER target (R=50)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "gpu_step.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_step", description=__doc__.split("\n")[0]
    )
    gpu_arguments(ap)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--n-ood", nargs="+", type=int, default=[50, 250])
    ap.add_argument("--variants", nargs="+", default=["eager", "compile"], choices=list(VARIANTS))
    ap.add_argument("--data", nargs="+", default=["device", "host"], choices=DATA_PATHS)
    ap.add_argument("--iters", type=int, default=30, help="timed iterations per configuration")
    ap.add_argument("--warm", type=int, default=10, help="warm-up iterations (fill the memory)")
    ap.add_argument("--round", type=int, default=4, help="iterations per interleaved pass")
    ap.add_argument("--domain", default="shapes", help="the synthetic domain trained on")
    ap.add_argument(
        "--stem", default=None,
        help="write <stem>.json and <stem>.md (no plot) instead of gpu_step.json, README.md "
        "and gpu_step.png: one stage of a prepared device run",
    )  # fmt: skip
    args = ap.parse_args(argv)
    # bad numbers fail here, before any data is built
    schedule(warm=args.warm, iters=args.iters, round_=args.round, cuda=False, meta_batch=1)
    out = results_folder(args, RESULTS / "gpu_step")
    t0 = time.perf_counter()
    summary = {
        "provenance": provenance(seeds=[0]),
        "gpu": gpu_info(args.device),
        "preset_overrides": {"source": "synthetic", "domains": [args.domain], **args.set},
        "iters": args.iters,
        "warm": args.warm,
        "rows": [],
    }
    recorder = Recorder(out, args.stem, summary)
    recorder.update("started")
    measure(args, recorder)
    recorder.update("done", seconds=time.perf_counter() - t0)
    print((out / ("README.md" if args.stem is None else f"{args.stem}.md")).read_text())


if __name__ == "__main__":
    main()
