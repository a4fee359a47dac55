"""What one training iteration would make a GPU do, counted on the CPU: kernel launches by part
of the step, host synchronisations by site, and ``torch._dynamo``'s graph breaks.

On a GPU, a step of many small kernels is bound by launching them and by the host waiting for
the device, not by arithmetic. Both can be counted without a GPU, on the code as it is:

* **kernel launches**: every ATen operator that reaches a backend kernel (a
  ``TorchDispatchMode``; views and operators that launch nothing, such as ``empty`` or
  ``detach``, left out), attributed to a part of the step (:data:`PARTS`: the innermost frame
  of the package's code, or of ``torch.optim`` / the data loader, that the operator ran under;
  operators run by the autograd engine count as ``backward``). The optimisers are made fused
  first, as on a CUDA run (:func:`~avalanche_sets.training.cuda_settings.default_adam`): one
  ``_fused_adam_`` per step instead of several operators per parameter. Package code that the
  table does not name shows as ``unmapped <file>:<function>``.
* **host synchronisations** (:mod:`benchmarks._sync_count`): the package's calls that read a
  tensor's value on the host, and its blocking copies of host data to the device; per
  iteration that logs nothing (the loss terms' logger reads its sums every ``--log-every``
  iterations: those steps are reported apart).
* **graph breaks**: ``torch._dynamo.explain`` of one training step (the strategy's
  ``training_step()`` if it has one, else the body of Avalanche's ``training_epoch`` from
  ``zero_grad`` to ``_after_update``), with ``trace_autograd_ops`` on so that the backward pass
  is traced too.

Setting: the ``paper`` preset's shapes on the synthetic source, one domain, R unlabeled OOD
images per episode; ``--warm`` iterations first (ORDER's memory full and replaying, every plugin
active), then one pass of ``--iters`` iterations counted. The counts of a CPU run stand for a
GPU's: the record of the H100 (``benchmarks/results/gpu_step``) calibrates them (the report's
last table, where the run's R has an H100 record).

    python -m benchmarks.gpu_launches          # writes benchmarks/results/gpu_launches
    python -m benchmarks.gpu_launches --out /tmp/l --set image_size=16 --set n_blocks=2 \\
        --set width=4 --warm 3 --iters 2          # smoke test
    python -m benchmarks.gpu_launches --package-path ../other-checkout   # count other code
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import fnmatch
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks._common import RESULTS, header_md, provenance, save_figure, write_json

__all__ = ["PARTS", "LaunchCounter", "count_method", "explain_step", "main", "make_fused"]

METHODS = ("protonet", "mskm", "order", "order-sync-free")
#: Rows that are a method with options: ORDER with the OT plan on the device (a fixed number of
#: Sinkhorn sweeps), the step a GPU captures whole; ``order`` solves the paper's exact plan on
#: the host.
VARIANTS = {"order-sync-free": ("order", {"ot_solver": "sinkhorn"})}

#: Parts of the step, by the package's file (relative to the package) and qualified function
#: name (``fnmatch`` patterns), first match wins. ``None``: a helper, attributed to its caller
#: (the next frame out). ``torch.optim`` and the data loader have their own rules
#: (:func:`part_of`).
PARTS: tuple[tuple[str, str, str | None], ...] = (
    # helpers, attributed to their callers
    ("functional/distance.py", "*", None),
    ("functional/mi.py", "GaussianConditional.*", None),
    ("functional/mi.py", "Critic.*", None),
    ("functional/mi.py", "club_upper_bound", None),
    ("functional/mi.py", "tuba_lower_bound", None),
    ("functional/mi.py", "pair_mask", None),
    ("functional/mi.py", "_*", None),
    ("functional/mi.py", "MIEstimator._*", None),
    ("training/iteration.py", "*", None),
    ("data/episodes.py", "EpisodeBatch.*", None),
    ("data/episodes.py", "_map_tensors", None),
    ("training/template.py", "*.forward", None),
    ("training/template.py", "*.training_step", None),
    ("training/template.py", "*._run_compiled_step", None),
    ("training/template.py", "*.optimizer_step", None),
    ("training/template.py", "*._after_training_iteration", None),
    ("training/template.py", "*._before_backward", None),
    # the parts
    ("models/backbone.py", "*", "backbone"),
    ("models/episodic.py", "*.encode", "backbone"),
    ("models/episodic.py", "*", "prototypes & refinement"),
    ("models/heads.py", "*", "prototypes & refinement"),
    ("functional/ood.py", "*", "OOD split"),
    ("order/ood_split.py", "*", "OOD split"),
    ("order/components.py", "PrototypeDistanceDetector.*", "OOD split"),
    ("order/mi_regularization.py", "*.pairs", "MI pairs"),
    ("functional/mi.py", "nearest_prototype", "MI pairs"),
    ("functional/mi.py", "pair_with_prototypes", "MI pairs"),
    ("order/mi_regularization.py", "*.after_forward", "MI fit"),
    ("order/mi_regularization.py", "*.estimator_on", "MI fit"),
    ("functional/mi.py", "MIEstimator.fit_step", "MI fit"),
    ("functional/mi.py", "MIEstimator.fit", "MI fit"),
    ("order/mi_regularization.py", "*.loss_term", "MI term"),
    ("functional/mi.py", "MIEstimator.bounds", "MI term"),
    ("functional/mi.py", "MIEstimator.episode_bounds", "MI term"),
    ("functional/ot.py", "*", "OT"),
    ("order/ot_loss.py", "*", "OT"),
    ("order/components.py", "OptimalTransport.*", "OT"),
    ("order/replay.py", "*", "replay"),
    ("functional/reservoir.py", "*", "replay"),
    ("training/episode_memory.py", "*", "replay"),
    ("training/template.py", "*._before_training_iteration", "replay"),
    ("training/template.py", "*.replace_batch", "replay"),
    ("training/template.py", "*._refuse_non_finite", "finite check"),
    ("training/template.py", "*._flag_non_finite", "finite check"),
    ("training/template.py", "*._deferred_state", "finite check"),
    ("training/template.py", "*.backward", "backward"),
    ("training/template.py", "*._zero_grad", "optimiser"),
    ("training/template.py", "*._let_go_of_the_graph", "loss"),
    ("training/template.py", "*.training_epoch", "data"),
    ("functional/fused_adam.py", "*", "optimiser"),
    ("training/template.py", "*.criterion", "loss"),
    ("training/template.py", "*.meta_term", "loss"),
    ("training/template.py", "*.plus_terms_of", "loss"),
    ("training/template.py", "*._record_term", "loss"),
    ("order/strategy.py", "*.criterion", "loss"),
    ("baselines/*", "*.criterion", "loss"),
    ("training/loss_terms.py", "*", "logging"),
    ("training/template.py", "*dataloader*", "data"),
    ("training/template.py", "_BudgetedLoader.*", "data"),
    ("data/*", "*", "data"),
)
#: Parts in the order of the step, for tables and the plot.
PART_ORDER = (
    "data", "replay", "backbone", "OOD split", "prototypes & refinement", "MI pairs",
    "MI fit", "MI term", "OT", "loss", "backward", "finite check", "optimiser", "logging",
)  # fmt: skip
#: Operators that launch no kernel on a GPU (allocation, aliasing, metadata, a scalar read: the
#: read is a copy, counted among the host synchronisations).
NO_KERNEL = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
     "lift_fresh", "_local_scalar_dense", "set_", "resize_", "alias", "_unsafe_view",
     "_reshape_alias", "is_pinned", "_pin_memory", "record_stream", "is_same_size",
     "_has_compatible_shallow_copy_type", "sym_size", "sym_stride", "sym_numel",
     "sym_storage_offset", "resize_as_"}
)  # fmt: skip
OPTIM = str(Path(torch.optim.__file__).parent)
#: Parts of code outside the package that the step runs, by a fragment of the file's path and
#: the function (first match wins): Avalanche's training loop and the data loaders.
OUTSIDE: tuple[tuple[str, str, str], ...] = (
    ("torch/utils/data/", "*", "data"),
    ("avalanche/benchmarks/utils/data_loader", "*", "data"),
    ("avalanche/training/templates/base_sgd.py", "_make_empty_loss", "loss"),
    ("avalanche/training/templates/base_sgd.py", "backward", "backward"),
    ("avalanche/training/templates/update_type/sgd_update.py", "training_epoch", "loss"),
)
LOGGING_FILES = ("training/loss_terms.py", "training/progress.py")
TOP_OPS = 20


def _rule(rel: str, qualname: str) -> tuple[bool, str | None]:
    for file, func, part in PARTS:
        if fnmatch.fnmatch(rel, file) and fnmatch.fnmatch(qualname, func):
            return True, part
    return False, None


def part_of(frame, root: str) -> str:
    """The part of the step the code at ``frame`` (and its callers) belongs to: the first
    frame, innermost first, that :data:`PARTS` or :data:`OUTSIDE` names (code under
    ``torch.optim`` is the ``optimiser``, or ``MI fit`` when the MI networks' fit runs it)."""
    optim = False
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name.startswith(OPTIM):
            optim = True
        elif name.startswith(root):
            rel = Path(name).relative_to(root).as_posix()
            qualname = code.co_qualname.split(".<locals>.")[0]  # a lambda is its function's
            known, part = _rule(rel, qualname)
            if optim:  # the first of the package's frames says whose optimiser it is
                return "MI fit" if part == "MI fit" else "optimiser"
            if not known:
                return f"unmapped {rel}:{qualname}"
            if part is not None:
                return part
        elif not optim:
            for fragment, func, part in OUTSIDE:
                if fragment in name and fnmatch.fnmatch(code.co_name, func):
                    return part
        frame = frame.f_back
    return "optimiser" if optim else "outside the package"


class LaunchCounter(TorchDispatchMode):
    """ATen operators that launch a kernel, by bucket (an iteration, or ``"between"`` for the
    data loader and the pass's set-up around the iterations), part and operator."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = root
        self.bucket: Any = "between"
        self.parts: dict[Any, collections.Counter] = collections.defaultdict(collections.Counter)
        self.ops: dict[Any, collections.Counter] = collections.defaultdict(collections.Counter)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not (func.is_view or name in NO_KERNEL or func.namespace == "profiler"):
            frame = sys._getframe(1)
            if torch._C._current_graph_task_id() != -1:
                part = part_of(frame, self.root)  # a backward of the MI networks' own fit
                part = "MI fit" if part == "MI fit" else "backward"
            else:
                part = part_of(frame, self.root)
            self.parts[self.bucket][part] += 1
            self.ops[self.bucket][name] += 1
        return func(*args, **(kwargs or {}))


def _optimisers(strategy) -> list[tuple[str, torch.optim.Optimizer]]:
    """The optimisers the strategy and its plugins hold (two attribute levels deep)."""
    found, seen = [], set()

    def visit(obj, path: str, depth: int) -> None:
        if isinstance(obj, torch.optim.Optimizer):
            if id(obj) not in seen:
                seen.add(id(obj))
                found.append((path, obj))
            return
        if depth == 0 or not hasattr(obj, "__dict__"):
            return
        for key, value in vars(obj).items():
            if isinstance(value, (torch.optim.Optimizer, torch.nn.Module)) or (
                depth > 1 and hasattr(value, "__dict__") and not isinstance(value, type)
            ):
                visit(value, f"{path}.{key}", depth - 1)

    visit(strategy.optimizer, "strategy.optimizer", 0)
    for plugin in strategy.plugins:
        visit(plugin, type(plugin).__name__, 2)
    return found


def make_fused(strategy) -> list[dict]:
    """Switch every optimiser of the strategy and its plugins that has a fused step (Adam, AdamW,
    SGD) to it, in place, as a CUDA run builds them; say what was found and done."""
    out = []
    for path, opt in _optimisers(strategy):
        fusable = "fused" in opt.defaults and not opt.defaults.get("differentiable", False)
        if fusable:
            opt.defaults["fused"], opt.defaults["foreach"] = True, False
            for group in opt.param_groups:
                group["fused"], group["foreach"] = True, False
            opt._step_supports_amp_scaling = True
        out.append({"where": path, "optimiser": type(opt).__name__, "fused": fusable})
    return out


@contextlib.contextmanager
def _iterations(strategy, counter: LaunchCounter | None, syncs, cuts: list):
    """Mark each training iteration's start and end: the counter's bucket, and ``cuts``
    (iteration, first sync event, end sync event) to cut the sync events by iteration."""
    before, after = strategy._before_training_iteration, strategy._after_training_iteration

    def start(**kwargs):
        cuts.append([strategy.exp_iteration, len(syncs.events), None])
        if counter is not None:
            counter.bucket = strategy.exp_iteration
        return before(**kwargs)

    def stop(**kwargs):
        out = after(**kwargs)
        cuts[-1][2] = len(syncs.events)
        if counter is not None:
            counter.bucket = "between"
        return out

    strategy._before_training_iteration, strategy._after_training_iteration = start, stop
    try:
        yield
    finally:
        del strategy._before_training_iteration, strategy._after_training_iteration


def _step_body(strategy, kwargs: dict) -> None:
    """One training step from ``zero_grad`` to ``_after_update``: the strategy's
    ``training_step()`` if it has one, else the body of Avalanche's ``training_epoch``."""
    s = strategy
    if hasattr(s, "training_step"):
        s.training_step()
        return
    s.optimizer.zero_grad()
    s.loss = s._make_empty_loss()
    s._before_forward(**kwargs)
    s.mb_output = s.forward()
    s._after_forward(**kwargs)
    s.loss += s.criterion()
    s._before_backward(**kwargs)
    s.backward()
    s._after_backward(**kwargs)
    s._before_update(**kwargs)
    s.optimizer_step()
    s._after_update(**kwargs)


def explain_step(strategy, exp, start: int, root: str) -> dict:
    """``torch._dynamo.explain`` of training iteration ``start`` (after its real
    ``_before_training_iteration``): graphs, breaks and the distinct break reasons with the
    package's line they happened at. Dynamo is reset afterwards."""
    import torch._dynamo as dynamo

    from benchmarks._timing import train_range

    s, found = strategy, {}

    def epoch(**kwargs):
        for s.mbatch in s.dataloader:  # noqa: B020 (Avalanche's own loop)
            if s._stop_training:
                break
            s._unpack_minibatch()
            s._before_training_iteration(**kwargs)
            if not found:
                with dynamo.config.patch(trace_autograd_ops=True):
                    found["explain"] = dynamo.explain(_step_body)(s, kwargs)
            else:
                _step_body(s, kwargs)
            s._after_training_iteration(**kwargs)

    s.training_epoch = epoch
    dynamo.reset()
    try:
        train_range(s, exp, start, start + 1)
    finally:
        del s.training_epoch
        dynamo.reset()
    ex = found["explain"]
    reasons: collections.Counter = collections.Counter()
    for r in ex.break_reasons:
        stack = list(r.user_stack or [])
        ours = [f for f in stack if f.filename.startswith(root)]
        f = (ours or stack or [None])[-1]
        site = "?" if f is None else f"{_short(f.filename, root)}:{f.lineno}"
        reasons[(r.reason.strip().splitlines()[0][:200], site)] += 1
    return {
        "entry": "training_step()" if hasattr(s, "training_step") else "training_epoch body",
        "trace_autograd_ops": True,
        "graph_count": ex.graph_count,
        "graph_break_count": ex.graph_break_count,
        "op_count": ex.op_count,
        "break_reasons": sum(reasons.values()),
        "reasons": [
            {"reason": reason, "site": site, "count": n}
            for (reason, site), n in reasons.most_common()
        ],
    }


def _short(filename: str, root: str) -> str:
    if filename.startswith(root):
        return "avalanche_sets/" + Path(filename).relative_to(root).as_posix()
    return filename.split("site-packages/")[-1]


def _evaluator(log_every: int):
    from avalanche_sets.training import silent_evaluator

    try:
        from avalanche_sets.training.loss_terms import LossTerms
    except ImportError:  # code without the loss terms' logger
        return silent_evaluator()
    return silent_evaluator(LossTerms(every=log_every))


def count_method(method: str, preset, exp, *, warm: int, iters: int, log_every: int,
                 explain: bool = True) -> dict:  # fmt: skip
    """Launches, host synchronisations and graph breaks of ``method`` over iterations
    ``[warm, warm + iters)`` of ``exp`` (one pass), then the graph breaks of the next one."""
    from avalanche_sets.methods import build_strategy
    from benchmarks._sync_count import counting_host_syncs, package_root
    from benchmarks._timing import train_range

    root = package_root()
    torch.manual_seed(0)
    name, options = VARIANTS.get(method, (method, {}))
    s = build_strategy(name, preset, seed=0, evaluator=_evaluator(log_every), **options)
    make_fused(s)
    train_range(s, exp, 0, warm)
    optimisers = make_fused(s)  # again: plugins build theirs at first use (MI networks)
    counter, cuts = LaunchCounter(root), []
    with counting_host_syncs(root) as syncs, _iterations(s, counter, syncs, cuts), counter:
        train_range(s, exp, warm, warm + iters)
    its = [c[0] for c in cuts]
    assert len(its) == iters, f"counted {len(its)} iterations, expected {iters}"
    per_it = {it: sum(counter.parts[it].values()) for it in its}
    parts: collections.Counter = collections.Counter()
    ops: collections.Counter = collections.Counter()
    for it in its:
        parts.update(counter.parts[it])
        ops.update(counter.ops[it])
    between = counter.parts["between"]
    # host synchronisations by iteration; a logging step is one whose logger read the device
    sync_its = []
    for it, a, b in cuts:
        events = syncs.events[a:b]
        logging = any(e.split(" ", 1)[1].startswith(LOGGING_FILES) for e in events)
        sync_its.append((it, logging, collections.Counter(events)))
    plain = [c for _, lg, c in sync_its if not lg]
    logging_steps = [c for _, lg, c in sync_its if lg]
    plain_sites: collections.Counter = sum(plain, collections.Counter())
    logging_sites: collections.Counter = sum(logging_steps, collections.Counter())
    n_plain = max(len(plain), 1)
    in_iterations = sum(per_it.values())
    row = {
        "method": method,
        "iterations": its,
        "launches": {
            "per_iteration": in_iterations / iters,
            "by_part": _ordered({k: v / iters for k, v in parts.items()}),
            "by_op_top20": {k: v / iters for k, v in ops.most_common(TOP_OPS)},
            "each_iteration": [per_it[it] for it in its],
            "between_iterations_per_iteration": sum(between.values()) / iters,
            "between_by_part": _ordered({k: v / iters for k, v in between.items()}),
            "pass_per_iteration": (in_iterations + sum(between.values())) / iters,
            "fused_optimiser_steps_per_iteration": ops["_fused_adam_"] / iters,
        },
        "optimisers": optimisers,
        "syncs": {
            "per_non_logging_iteration": sum(plain_sites.values()) / n_plain,
            "by_site": {k: v / n_plain for k, v in sorted(plain_sites.items())},
            "non_logging_iterations": len(plain),
            "logging_steps": len(logging_steps),
            # what a logging step reads beyond an iteration that logs nothing
            "logging_step_extra": {
                k: d
                for k in sorted(set(logging_sites) | set(plain_sites))
                if (d := logging_sites[k] / len(logging_steps) - plain_sites[k] / n_plain)
            }
            if logging_steps
            else {},
            "between_iterations": len(syncs.events) - sum(b - a for _, a, b in cuts),
        },
        "replays": getattr(getattr(s, "iteration", None), "replayed", None) is not None
        if name == "order"
        else None,
    }
    if explain:
        row["graph_breaks"] = explain_step(s, exp, warm + iters, root)
    return row


def _ordered(parts: dict) -> dict:
    known = [p for p in PART_ORDER if p in parts]
    rest = sorted(p for p in parts if p not in PART_ORDER)
    return {p: parts[p] for p in [*known, *rest]}


def _shapes(preset) -> dict:
    keys = ("image_size", "n_blocks", "width", "n_way", "n_shot", "n_query", "n_unlabeled",
            "n_ood", "meta_batch", "mem_size", "replay_batch", "precision", "device")  # fmt: skip
    return {k: getattr(preset, k) for k in keys if hasattr(preset, k)}


def h100_record(path: Path = RESULTS / "gpu_step" / "step_eager.json") -> dict:
    """The H100's kernel launches and copies per iteration by method (R, episodes on the
    device), from ``gpu_step``'s profile: CUDA API calls of a pass of iterations (the pass's
    set-up included) over its iterations; a count outside the profile's top host operators is
    ``None``."""
    if not path.exists():
        return {}
    d = json.loads(path.read_text())
    out = {}
    for r in d["rows"]:
        if r.get("variant") != "eager" or r.get("data") != "device" or not r.get("profile"):
            continue
        p = r["profile"]
        calls = {e["name"]: e["calls"] / p["iterations"] for e in p["top_host_ops"]}
        out[(r["method"], r["R"])] = {
            "cudaLaunchKernel": calls.get("cudaLaunchKernel"),
            "cudaLaunchKernelExC": calls.get("cudaLaunchKernelExC"),
            "cudaMemcpyAsync": calls.get("cudaMemcpyAsync"),
            "syncs_per_it": r.get("syncs_per_it"),
            "iterations": p["iterations"],
            "commit": (d["provenance"].get("code") or {}).get("commit"),
        }
    return out


def calibration(rows: list[dict], n_ood: int) -> list[dict]:
    """CPU counts of a pass over the H100's counts of the same methods and R."""
    record, out = h100_record(), []
    for r in rows:
        h = record.get((r["method"], n_ood))
        if h is None:
            continue
        cpu = r["launches"]["pass_per_iteration"]
        launch = h["cudaLaunchKernel"]
        ex = h["cudaLaunchKernelExC"]
        both = launch + ex if launch is not None and ex is not None else None
        out.append(
            {"method": r["method"], "cpu_ops_per_iteration_pass": cpu,
             "h100_cudaLaunchKernel": launch, "h100_cudaLaunchKernelExC": ex,
             "h100_cudaMemcpyAsync": h["cudaMemcpyAsync"],
             "ratio_to_cudaLaunchKernel": cpu / launch if launch else None,
             "ratio_to_all_launches": cpu / both if both else None,
             "cpu_syncs_per_iteration": r["syncs"]["per_non_logging_iteration"],
             "h100_syncs_per_iteration": h["syncs_per_it"], "h100_commit": h["commit"]}
        )  # fmt: skip
    return out


def _fmt(v, spec: str = ".1f") -> str:
    return "n/a" if v is None else format(v, spec)


def report(summary: dict, out: Path, stem: str) -> None:
    """``<stem>.md`` (tables) and ``<stem>.png`` (launches by part, stacked, per method)."""
    rows = summary["rows"]
    md = header_md(
        "Kernel launches, host synchronisations and graph breaks per step", summary["provenance"]
    )
    md += f"- shapes: {summary['shapes']}\n- bf16 native on this CPU: {summary['bf16_native']}\n"
    md += (
        f"- counted: iterations [{summary['warm']}, {summary['warm'] + summary['iters']}) in one "
        f"pass, after {summary['warm']} warm-up; loss terms logged every "
        f"{summary['log_every']} iterations\n- package: `{summary['package']}`\n\n"
    )
    parts = [p for p in PART_ORDER if any(p in r["launches"]["by_part"] for r in rows)]
    parts += sorted({p for r in rows for p in r["launches"]["by_part"]} - set(parts))
    md += "## Kernel launches per iteration, by part\n\n"
    md += "| part | " + " | ".join(r["method"] for r in rows) + " |\n"
    md += "|---|" + "---:|" * len(rows) + "\n"
    for p in parts:
        md += (
            f"| {p} | "
            + " | ".join(_fmt(r["launches"]["by_part"].get(p, 0.0)) for r in rows)
            + " |\n"
        )
    md += (
        "| **total** | "
        + " | ".join(f"**{r['launches']['per_iteration']:.1f}**" for r in rows)
        + " |\n"
    )
    md += (
        "| between iterations (data, pass set-up) | "
        + " | ".join(_fmt(r["launches"]["between_iterations_per_iteration"]) for r in rows)
        + " |\n"
    )
    md += (
        "| fused optimiser steps (`_fused_adam_`) | "
        + " | ".join(_fmt(r["launches"]["fused_optimiser_steps_per_iteration"]) for r in rows)
        + " |\n\n"
    )
    for r in rows:
        opts = ", ".join(
            f"{o['where']} ({o['optimiser']}, {'fused' if o['fused'] else 'not fused'})"
            for o in r["optimisers"]
        )
        md += (
            f"- {r['method']}: optimisers {opts}; top operators: "
            + ", ".join(f"`{k}` {v:.1f}" for k, v in list(r["launches"]["by_op_top20"].items())[:8])
            + "\n"
        )
    md += "\n## Host synchronisations per iteration that logs nothing, by site\n\n"
    for r in rows:
        sy = r["syncs"]
        md += (
            f"**{r['method']}**: {sy['per_non_logging_iteration']:.1f} per iteration "
            f"({sy['non_logging_iterations']} iterations; {sy['logging_steps']} logging steps, "
            "each adding "
            + (
                ", ".join(f"`{k}` × {v:g}" for k, v in sy["logging_step_extra"].items())
                or "nothing"
            )
            + ")\n\n"
        )
        if sy["by_site"]:
            md += "| call | site | per iteration |\n|---|---|---:|\n"
            for k, v in sy["by_site"].items():
                kind, site = k.split(" ", 1)
                md += f"| `{kind}` | `{site}` | {v:g} |\n"
            md += "\n"
    md += "## Graph breaks in one training step (`torch._dynamo.explain`, `trace_autograd_ops=True`)\n\n"
    for r in rows:
        g = r.get("graph_breaks")
        if g is None:
            continue
        md += (
            f"**{r['method']}** ({g['entry']}): {g['graph_count']} graphs, "
            f"{g['graph_break_count']} breaks ({g.get('break_reasons', 'n/a')} break reasons, "
            f"{len(g['reasons'])} distinct)\n\n"
        )
        if g["reasons"]:
            md += "| × | reason | site |\n|---:|---|---|\n"
            for x in g["reasons"][:15]:
                reason = x["reason"].replace("|", "\\|")
                md += f"| {x['count']} | {reason} | `{x['site']}` |\n"
            md += "\n"
    if summary["calibration"]:
        md += (
            "## Calibration against the H100 record (`benchmarks/results/gpu_step/step_eager.json`, "
            f"code `{summary['calibration'][0]['h100_commit']}`)\n\nCPU: operators of a whole pass (iterations, data, set-up) per iteration; H100: "
            "CUDA API calls of a profiled pass per iteration (eager, episodes on the device).\n\n"
            "| method | CPU ops | H100 cudaLaunchKernel | + ExC | memcpy | CPU / LaunchKernel | "
            "CPU / all launches | CPU syncs | H100 syncs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        )
        for c in summary["calibration"]:
            md += (
                f"| {c['method']} | {c['cpu_ops_per_iteration_pass']:.1f} | "
                f"{_fmt(c['h100_cudaLaunchKernel'])} | {_fmt(c['h100_cudaLaunchKernelExC'])} | "
                f"{_fmt(c['h100_cudaMemcpyAsync'])} | {_fmt(c['ratio_to_cudaLaunchKernel'], '.2f')} | "
                f"{_fmt(c['ratio_to_all_launches'], '.2f')} | {c['cpu_syncs_per_iteration']:.1f} | "
                f"{_fmt(c['h100_syncs_per_iteration'])} |\n"
            )
    md += f"\n![launches by part]({stem}.png)\n"
    (out / f"{stem}.md").write_text(md)
    _plot(rows, parts, out / f"{stem}.png")


def _plot(rows: list[dict], parts: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("tab20")
    bottom = [0.0] * len(rows)
    for i, p in enumerate(parts):
        ys = [r["launches"]["by_part"].get(p, 0.0) for r in rows]
        ax.bar(range(len(rows)), ys, 0.6, bottom=bottom, label=p, color=cmap(i % 20))
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["method"] for r in rows])
    ax.set_ylabel("kernel launches per iteration")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _provenance(package: str) -> dict:
    """:func:`benchmarks._common.provenance`; for an older package without it
    (``--package-path``), the same header fields with the package checkout's commit."""
    try:
        return provenance(seeds=[0])
    except ImportError:
        import datetime
        import os
        import platform
        import subprocess

        from benchmarks._common import command_line

        def git(*a: str) -> str:
            return subprocess.run(
                ["git", "-C", package, *a], capture_output=True, text=True
            ).stdout.strip()

        cpu = platform.processor() or platform.machine()
        with contextlib.suppress(OSError):
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        return {
            "command": command_line(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__,
                        "torch_threads": torch.get_num_threads()},
            "seeds": [0],
            "code": {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))},
        }  # fmt: skip


def _set(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _import_package_from(checkout: Path) -> None:
    """Import ``avalanche_sets`` from ``checkout`` (its submodules follow from there), before
    anything imports this checkout's."""
    import importlib.util

    if "avalanche_sets" in sys.modules:
        raise SystemExit("--package-path: avalanche_sets is already imported")
    init = checkout.resolve() / "avalanche_sets" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--package-path: no avalanche_sets package in {checkout}")
    spec = importlib.util.spec_from_file_location(
        "avalanche_sets", init, submodule_search_locations=[str(init.parent)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["avalanche_sets"] = module
    spec.loader.exec_module(module)


def main(argv: list[str] | None = None) -> dict:
    """Count every method of ``--methods`` and write ``<stem>.json``, ``<stem>.md`` and
    ``<stem>.png`` into ``--out``; returns the summary."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_launches", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--n-ood", type=int, default=50, help="R, unlabeled OOD images per episode")
    ap.add_argument("--warm", type=int, default=6, help="iterations before counting")
    ap.add_argument("--iters", type=int, default=4, help="iterations counted (one pass)")
    ap.add_argument("--log-every", type=int, default=4, help="loss terms logged every N")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--domain", default="shapes")
    ap.add_argument("--no-explain", action="store_true", help="skip the graph breaks")
    ap.add_argument("--set", action="append", default=[], type=_set, metavar="KEY=VALUE",
                    help="a preset override (tiny shapes for a test)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu_launches")
    ap.add_argument("--stem", default="gpu_launches")
    ap.add_argument(
        "--package-path", default=None,
        help="import avalanche_sets from this checkout instead (count another commit's code)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.package_path is not None:
        _import_package_from(Path(args.package_path))
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs.experiment import build_benchmark
    from benchmarks._sync_count import package_root

    overrides = dict(args.set)
    overrides.setdefault("threads", args.threads)
    overrides.setdefault("n_ood", args.n_ood)
    preset = resolve_preset(
        "paper", source="synthetic", domains=[args.domain], device="cpu",
        precision=args.precision, **overrides,
    )  # fmt: skip
    n_iter = args.warm + args.iters + 1
    preset = preset.replace(tasks_per_domain=preset.meta_batch * n_iter)
    exp = build_benchmark(preset, seed=0).train_stream[0]
    prov = _provenance(str(Path(package_root()).parent))  # before the counts: fails early
    t0 = time.perf_counter()
    rows = []
    for method in args.methods:
        rows.append(
            count_method(
                method,
                preset,
                exp,
                warm=args.warm,
                iters=args.iters,
                log_every=args.log_every,
                explain=not args.no_explain,
            )  # fmt: skip
        )
        print(f"[gpu_launches] {method}: {rows[-1]['launches']['per_iteration']:.1f} launches, "
              f"{rows[-1]['syncs']['per_non_logging_iteration']:.1f} syncs per iteration",
              file=sys.stderr)  # fmt: skip
    summary = {
        "provenance": prov,
        "package": package_root(),
        "bf16_native": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
        "shapes": _shapes(preset),
        "preset_overrides": {"source": "synthetic", "domains": [args.domain], **overrides},
        "warm": args.warm,
        "iters": args.iters,
        "log_every": args.log_every,
        "rows": rows,
        "calibration": calibration(rows, preset.n_ood) if not args.set else [],
        "seconds": time.perf_counter() - t0,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.stem}.json", summary)
    report(summary, args.out, args.stem)
    print((args.out / f"{args.stem}.md").read_text())
    return summary


if __name__ == "__main__":
    main()
