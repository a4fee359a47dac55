"""Give every committed run record that predates the ``code`` key its code, from git history.

    python -m benchmarks.recover_code            # rewrite the records that lack "code"
    python -m benchmarks.recover_code --check    # list them, change nothing (exit 1 if any)

A run's ``result.json`` names the code that made it (:mod:`avalanche_sets.runs.code`); records
committed before that key existed do not. For each of them the history of the repository says
which commit added the record *with its present numbers*: walking the file's commits from the
newest, the oldest commit of the unbroken run of versions whose numbers (method, seed, accuracy
matrix, final accuracies, mean) equal today's. A later commit that only rewrote another field
(a data path made relative, the format upgraded) is not the code that computed the numbers; a
commit that re-ran the record (other numbers) or re-added a deleted one is. The code that ran
is that commit's tree or an older one (a record is committed after its run), so the commit is an
upper bound on the code's age, marked ``"recovered": true``.

What else is filled is what the record itself proves, never a guess:

* ``code``: ``version`` read from ``avalanche_sets/__init__.py`` at that commit, ``commit``,
  ``dirty`` ``null`` (unknown), ``torch`` from the record's ``machine`` when it has one,
  ``avalanche`` ``null``;
* ``numerics``: ``precision`` from the record's preset (``null`` when it predates the setting),
  ``device`` from its preset, ``threads`` from its ``machine.torch_threads`` (else its preset),
  ``cpu_bf16`` ``null``;
* ``data``: the source and the folder its preset names, ``content`` ``null`` (the bytes it read
  were not recorded; :func:`~avalanche_sets.runs.folder.record_identity` says so).

Only ``result.json`` is rewritten (``run.json`` and the rest of the folder are left as they are),
and every record still reads with :func:`~avalanche_sets.runs.folder.read_record`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT

__all__ = ["numbers_of", "recovered_commit", "recovered_keys", "recover", "main"]

_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check
    )


def numbers_of(record: dict) -> str:
    """What a record computed, as one comparable string: method, seed, accuracy matrix, final
    per-domain accuracies and their mean (not the derived metrics, which a format upgrade may
    recompute, nor the settings' spelling)."""
    res = record.get("result") or {}
    kept = [record.get("method"), record.get("seed")]
    kept += [res.get(k) for k in ("matrix", "final", "mean_accuracy")]
    return json.dumps(kept)


def recovered_commit(repo: Path, path: str) -> str | None:
    """The commit that added ``path`` (relative to ``repo``) with its present numbers
    (:func:`numbers_of`), or ``None`` when the file has no history."""
    commits = _git(repo, "log", "--format=%H", "--", path).stdout.split()
    if not commits:
        return None
    now = numbers_of(json.loads((repo / path).read_text()))
    found = None
    for commit in commits:  # newest first
        shown = _git(repo, "show", f"{commit}:{path}", check=False)
        if shown.returncode != 0:  # the commit deleted it: older versions are another record
            break
        try:
            same = numbers_of(json.loads(shown.stdout)) == now
        except json.JSONDecodeError:
            same = False
        if not same:
            break
        found = commit
    return found


@cache
def _version_at(repo: Path, commit: str) -> str | None:
    shown = _git(repo, "show", f"{commit}:avalanche_sets/__init__.py", check=False)
    match = _VERSION.search(shown.stdout) if shown.returncode == 0 else None
    return match.group(1) if match else None


def recovered_keys(repo: Path, path: str, body: dict, run: dict) -> dict[str, Any]:
    """The ``code``, ``numerics`` and ``data`` of the record ``body`` at ``path`` (``run``: its
    ``run.json``, or ``{}``), from the history and from what the record holds."""
    from avalanche_sets.defaults import FOLDER_SOURCES

    commit = recovered_commit(repo, path)
    machine = body.get("machine") or run.get("machine") or {}
    preset = body.get("preset") or {}
    source = preset.get("source")
    return {
        "code": {
            "version": None if commit is None else _version_at(repo, commit),
            "commit": commit,
            "dirty": None,
            "recovered": True,
            "torch": machine.get("torch"),
            "avalanche": None,
        },
        "numerics": {
            "precision": preset.get("precision"),
            "device": None if "device" not in preset else str(preset["device"]).split(":")[0],
            "threads": machine.get("torch_threads", preset.get("threads")),
            "cpu_bf16": None,
        },
        "data": {
            "source": source,
            "root": preset.get("root") if source in FOLDER_SOURCES else None,
            "content": None,
        },
    }


def _with_keys(body: dict, keys: dict) -> dict:
    """``body`` with ``keys`` placed before its ``result`` (where a run writes them)."""
    out = {}
    for k, v in body.items():
        if k == "result":
            out.update(keys)
        out[k] = v
    out.update({k: v for k, v in keys.items() if k not in out})
    return out


def recover(repo: Path, results: Path, *, write: bool) -> list[Path]:
    """The tracked ``result.json`` files under ``results`` that lack ``code``; with ``write``,
    each rewritten with :func:`recovered_keys`."""
    listed = _git(repo, "ls-files", "--", str(results.relative_to(repo))).stdout.split()
    todo = []
    for rel in sorted(p for p in listed if p.endswith("/result.json")):
        path = repo / rel
        body = json.loads(path.read_text())
        if "code" in body:
            continue
        todo.append(path)
        if write:
            run_file = path.parent / "run.json"
            run = json.loads(run_file.read_text()) if run_file.is_file() else {}
            keys = recovered_keys(repo, rel, body, run)
            path.write_text(json.dumps(_with_keys(body, keys), indent=2) + "\n")
    return todo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="list the records, change nothing")
    args = ap.parse_args(argv)
    todo = recover(ROOT, RESULTS, write=not args.check)
    for path in todo:
        print(path.relative_to(ROOT))
    verb = "lack" if args.check else "given their recovered code:"
    print(f"{len(todo)} record(s) {verb}{' code' if args.check else ''}", file=sys.stderr)
    return 1 if args.check and todo else 0


if __name__ == "__main__":
    sys.exit(main())
