"""Shared helpers of the benchmark scripts: output folder, provenance header, JSON writing."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED_PACKS = Path(
    os.environ.get("AVALANCHE_SETS_SHARED_DATA", ROOT.parent / "shared" / "data" / "sets-mini")
)


def provenance(seeds=None) -> dict:
    from avalanche_sets.experiment import machine_info

    return {
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "seeds": seeds,
    }


def artefact_name(artefact: str, source: str | None = None) -> str:
    """The results folder name of an artefact: ``table2``, or ``table2_synthetic`` when it was
    run on another data source than its preset's (``reproduce.py --source synthetic``)."""
    return artefact if source is None else f"{artefact}_{source}"


def out_dir(artefact: str) -> Path:
    d = RESULTS / artefact
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def header_md(title: str, prov: dict) -> str:
    m = prov["machine"]
    return (
        f"# {title}\n\n"
        f"- command: `{prov['command']}`\n- date: {prov['date']}\n"
        f"- machine: {m['cpu']} ({m['cores']} cores), torch {m['torch']}, "
        f"{m['torch_threads']} thread(s)\n- seeds: {prov['seeds']}\n\n"
    )
