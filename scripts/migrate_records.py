"""Migrate run records of result formats 1 and 2 to format 3, in place (run once).

Usage, from the repository root::

    python scripts/migrate_records.py [FOLDER ...]   # default: benchmarks/results

Every ``result.json`` under the folders that is older than format 3 is rewritten as a run of
today would have written it; nothing it recorded changes meaning:

* format 1 (one ``result.json``, no ``"format"`` key): the provenance (``seconds``, ``date``,
  ``machine``, ``command``, ...) moves to ``run.json``;
* ``result.forgetting``, ``result.average_forgetting`` and ``result.bwt`` are computed from the
  stored accuracy matrix by ``avalanche_sets.metrics.stats.forgetting_record`` (formats 1 and 2
  stored a forgetting that also counted the last domain, and no BWT): the values the library
  already read these records with;
* ``preset.precision`` is set to ``"fp32"`` where it is absent: the records written before the
  setting existed computed in fp32, the only precision there was;
* ``avalanche_sets`` (the version that wrote the record) is taken from ``code.version``.

A format-3 record is left as it is. Refuses a format-1 folder that already has a ``run.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from avalanche_sets.metrics import stats

#: The keys of a format-3 ``result.json``, in the order ``run_experiment`` writes them; a
#: format-1 record's other keys are its provenance (``run.json``).
RESULT_KEYS = (
    "format", "avalanche_sets", "method", "seed", "preset", "eval_stream", "strategy_overrides",
    "plugins", "code", "numerics", "data", "result",
)  # fmt: skip


def _json(data: dict) -> str:
    return json.dumps(data, indent=2) + "\n"


def _preset(preset: dict) -> dict:
    """``preset`` with ``precision`` where format-3 records hold it (before ``root`` and the
    other settings that are in no preset by default)."""
    if "precision" in preset:
        return preset
    out, placed = {}, False
    for key, value in preset.items():
        if key in ("root", "order", "domains", "ood", "channels_last") and not placed:
            out["precision"], placed = "fp32", True
        out[key] = value
    if not placed:
        out["precision"] = "fp32"
    return out


def migrate(folder: Path) -> bool:
    """Rewrite ``folder``'s record in format 3; False when it is in format 3 already."""
    path = folder / "result.json"
    rec = json.loads(path.read_text())
    fmt = rec.get("format", 1)
    if fmt == 3:
        return False
    if fmt not in (1, 2):
        raise SystemExit(f"{path}: result format {fmt!r} is neither 1 nor 2; not migrated")
    extra = sorted(set(rec) - set(RESULT_KEYS))
    if fmt == 2 and extra:
        raise SystemExit(f"{path}: format 2 with keys {extra} outside a result; not migrated")
    rec["format"] = 3
    rec.setdefault("avalanche_sets", (rec.get("code") or {}).get("version"))
    rec["preset"] = _preset(rec["preset"])
    rec["result"].update(stats.forgetting_record(rec["result"]["matrix"]))
    body = {k: rec[k] for k in RESULT_KEYS if k in rec}
    if fmt == 1:
        run = folder / "run.json"
        if run.exists():
            raise SystemExit(f"{run} exists beside a format-1 result.json; not migrated")
        provenance = {k: v for k, v in rec.items() if k not in RESULT_KEYS}
        run.write_text(_json(provenance))
    path.write_text(_json(body))
    return True


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("benchmarks/results")]
    done = 0
    for root in roots:
        for path in sorted(root.rglob("result.json")):
            done += migrate(path.parent)
    print(f"migrated {done} record(s) to result format 3")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
