"""Wall time of ``avalanche-sets table`` on 1,000 run records (target: < 1 s).

Writes ``--records`` synthetic run folders (``result.json`` + ``run.json`` in the record schema:
``code``, ``numerics``, ``data``; the ``cpu`` preset's six domains, a 6 × 6 accuracy matrix,
100 test episodes per domain) into a temporary folder — 10 methods × 20 settings (``n_shot``,
``lr``) × 5 seeds by default: 200 rows — and times the command as a fresh process
(``python -m avalanche_sets table DIR``, this checkout first on ``PYTHONPATH``), plain and with
``--vs``, ``--repeats`` times each, interleaved. Each process also reports whether torch or
scipy was imported on the way. Wall min / median / max and the median CPU seconds of the
process (user + system); the load averages are recorded since the machine may be shared.

    python -m benchmarks.table_speed [--records 1000] [--repeats 7]

Writes ``benchmarks/results/table_speed/``: ``results.json`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from avalanche_sets.presets import PRESETS
from avalanche_sets.runs.record import Provenance, RunRecord, write_record
from benchmarks import _methods
from benchmarks._common import header_md, out_dir, package_env, provenance, write_json

#: Ten method names the synthetic records carry (the registry's first ten built-ins).
METHODS = _methods.names()[:10]
DOMAINS = ["cifar100", "aircraft", "flowers102", "dtd", "gtsrb", "omniglot"]
EPISODES = 100

# a table run, its modules listed after it finished: one line of JSON
PROBE = (
    "import json, sys\n"
    "from avalanche_sets.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps({'code': code, 'loaded': sorted(m for m in ('torch', 'avalanche', 'scipy',"
    " 'matplotlib') if m in sys.modules)}))\n"
)


def synthetic_record(method: str, seed: int, n_shot: int, lr: float, rng) -> RunRecord:
    """The record (``result.json`` and ``run.json``) of one made-up finished run."""
    n = len(DOMAINS)
    ep = rng.uniform(0.3, 0.9, (n, EPISODES))
    matrix = np.tril(rng.uniform(0.3, 0.9, (n, n))) + np.triu(np.full((n, n), 0.2), 1)
    matrix[-1] = ep.mean(axis=1)
    ci = np.full((n, n), 0.03)
    return RunRecord(
        method=method, seed=seed,
        preset={**PRESETS["cpu"], "n_shot": n_shot, "lr": lr, "precision": "fp32"},
        eval_stream="test", strategy_overrides={},
        code={"version": "0.1.0", "commit": "0" * 40, "dirty": False,
              "torch": "2.4.0", "avalanche": "0.6.0"},
        numerics={"precision": "fp32", "device": "cpu", "threads": 1, "cpu_bf16": False},
        data={"source": "packs", "root": "data/sets-mini", "content": "f" * 64},
        result={
            "domains": DOMAINS, "matrix": matrix.tolist(), "ci95": ci.tolist(),
            "final": matrix[-1].tolist(), "final_ci95": ci[-1].tolist(),
            "episode_acc": ep.ravel().tolist(), "mean_accuracy": float(ep.mean()),
            "mean_ci95": 0.01,
        },
        provenance=Provenance(seconds=60.0, command="synthetic", date="2026-01-01T00:00:00+00:00"),
    )  # fmt: skip


def write_runs(root: Path, n_records: int) -> int:
    """``n_records`` run folders under ``root`` (methods × settings × seeds); the rows."""
    rng = np.random.default_rng(0)
    settings = [(k, lr) for k in (1, 5, 10, 20) for lr in (1e-3, 3e-4, 1e-4, 3e-5, 1e-5)]
    written, rows = 0, set()
    for seed in itertools.count():  # 200 runs per seed: 1,000 records are 5 seeds
        for method in METHODS:
            for k, lr in settings:
                if written == n_records:
                    return len(rows)
                folder = root / method / f"k{k}-lr{lr}-seed{seed}"
                folder.mkdir(parents=True)
                write_record(folder, synthetic_record(method, seed, k, lr, rng))
                written += 1
                rows.add((method, k, lr))
    raise AssertionError("unreachable")


def timed(argv: list[str]) -> tuple[float, float, dict]:
    """Wall and CPU (user + system) seconds of one table process, and what it reported."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], env=package_env(),
                          capture_output=True, text=True, check=True)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.table_speed", description=__doc__)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        n_rows = write_runs(runs, args.records)
        commands = {
            "avalanche-sets table RUNS": ["table", str(runs)],
            "avalanche-sets table RUNS --vs mskm": ["table", str(runs), "--vs", "mskm"],
        }
        for argv in commands.values():  # warm the file cache
            timed(argv)
        times: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        loaded: dict[str, list[str]] = {}
        for _ in range(args.repeats):
            for name, argv in commands.items():
                wall, cpu, got = timed(argv)
                assert got["code"] == 0, got
                times[name].append(wall)
                cpus[name].append(cpu)
                loaded[name] = got["loaded"]
    rows = [
        {"command": k, "min_s": min(v), "median_s": statistics.median(v), "max_s": max(v),
         "all_s": v, "cpu_median_s": statistics.median(cpus[k]), "cpu_all_s": cpus[k],
         "loaded": loaded[k]}
        for k, v in times.items()
    ]  # fmt: skip
    prov = provenance()
    prov["load_average_1_5_15"] = {"start": load_start, "end": os.getloadavg()}
    out = out_dir("table_speed")
    write_json(out / "results.json", {**prov, "records": args.records, "table_rows": n_rows,
                                      "repeats": args.repeats, "rows": rows})  # fmt: skip
    load = prov["load_average_1_5_15"]
    md = header_md("`avalanche-sets table` on many run records", prov)
    md += (
        f"- {args.records} synthetic run records ({n_rows} table rows, 6 domains, "
        f"{EPISODES} test episodes per domain each), written by `benchmarks/table_speed.py`\n"
        f"- load averages (1, 5, 15 min): {tuple(round(x, 2) for x in load['start'])} at the "
        f"start, {tuple(round(x, 2) for x in load['end'])} at the end\n"
        f"- each command a fresh process, {args.repeats} interleaved repeats after one warm-up; "
        "wall seconds (min / median / max) and the process's CPU seconds (user + system, less "
        "sensitive to a shared machine's load); target < 1 s\n\n"
        "| command | min s | median s | max s | CPU s (median) | heavy modules loaded |\n"
        "|---|---:|---:|---:|---:|---|\n"
    )
    md += "".join(
        f"| `{r['command']}` | {r['min_s']:.2f} | {r['median_s']:.2f} | {r['max_s']:.2f} | "
        f"{r['cpu_median_s']:.2f} | "
        f"{', '.join(r['loaded']) or 'none'} |\n"
        for r in rows
    )
    (out / "README.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
