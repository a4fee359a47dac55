"""Migrate the committed run records once: every ``code`` names the library package's content
hash, and none carries ``recovered``.

    python scripts/migrate_records_once.py            # rewrite benchmarks/results/**/result.json
    python scripts/migrate_records_once.py --check    # say what it would change, write nothing

For each committed ``result.json`` under ``benchmarks/results/`` (``git ls-files``):

* ``code.package``: where the record lacks one, the content hash of the ``avalanche_sets/``
  package at the record's ``code.commit``, computed exactly as
  :func:`avalanche_sets.runs.code.tree_fingerprint` computes it for a checkout of that commit
  (the commit's tracked files of ``avalanche_sets/``, written by ``git archive`` into a
  temporary folder and hashed there: ``__pycache__`` and ``*.pyc`` are never tracked);
* ``code.recovered`` is dropped (from ``run.json``'s copy of ``code`` too);
* the record's ``run.json`` gains ``"migrated"``: which script filled which keys and from
  where (``code.package`` from the repository's history: the package at ``code.commit``, the
  commit that added the record with its present numbers, so the code that ran is that
  commit's or older).

``data.content`` is left as it is: the packs records name no content, and nothing records the
hash of the packs they read (see the commit message). Key order and the JSON layout of every
file are kept (``indent=2``, a final newline), so the diff is the migration and nothing else.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from avalanche_sets.runs.code import tree_fingerprint  # noqa: E402

BY = "scripts/migrate_records_once.py"
CODE_FROM = (
    "the repository's history: the avalanche_sets package at code.commit, the commit that "
    "added this record with its present numbers (the code that ran is that commit's or older)"
)


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout


@functools.cache
def package_at(commit: str) -> str:
    """The content hash of ``avalanche_sets/`` as a checkout of ``commit`` holds it."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "pkg.tar"
        archive.write_bytes(_git("archive", "--format=tar", commit, "avalanche_sets"))
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "tree", filter="data")
        return tree_fingerprint(Path(tmp) / "tree" / "avalanche_sets")


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2) + "\n"


def migrate(path: Path, *, write: bool) -> list[str]:
    """What the migration fills in the record ``path`` (written when ``write``)."""
    text = path.read_text()
    rec = json.loads(text)
    if _dump(rec) != text:
        raise SystemExit(f"{path}: not in the layout records are written in; migrate by hand")
    code = rec["code"]
    filled = []
    if not code.get("package"):
        if not code.get("commit"):
            raise SystemExit(f"{path}: names no commit, so no package hash can be computed")
        new = {}
        for key, value in code.items():  # package after dirty, where a run writes it
            if key == "recovered":
                continue
            new[key] = value
            if key == "dirty":
                new["package"] = package_at(code["commit"])
        rec["code"] = new
        filled.append("code.package")
    else:
        rec["code"] = {k: v for k, v in code.items() if k != "recovered"}
    run = path.parent / "run.json"
    prov = json.loads(run.read_text())
    if _dump(prov) != run.read_text():
        raise SystemExit(f"{run}: not in the layout records are written in")
    before = json.loads(json.dumps(prov))
    if isinstance(prov.get("code"), dict):  # the provenance's copy of the run's code
        prov["code"] = {k: v for k, v in prov["code"].items() if k != "recovered"}
    if filled:
        prov["migrated"] = {"by": BY, "filled": filled, "code_from": CODE_FROM}
    if rec["code"] == code and prov == before:
        return []
    if write:
        path.write_text(_dump(rec))
        run.write_text(_dump(prov))
    return filled or ["(recovered dropped)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing")
    args = ap.parse_args()
    listed = _git("ls-files", "benchmarks/results").decode().split()
    paths = [ROOT / p for p in listed if p.endswith("/result.json") or p == "result.json"]
    changed = 0
    for path in sorted(paths):
        what = migrate(path, write=not args.check)
        if what:
            changed += 1
            print(f"{path.relative_to(ROOT)}: {', '.join(what)}")
    print(f"{changed} of {len(paths)} records {'to migrate' if args.check else 'migrated'}")


if __name__ == "__main__":
    main()
