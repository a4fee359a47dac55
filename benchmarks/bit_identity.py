"""Do two versions of the code give bit-identical result records? (a restructuring's check)

Runs ORDER, MSKM and Semi-ER on the ``quick`` preset in fp32 with one thread, as the command
line does (``python -m avalanche_sets run --method M --preset quick --set precision=fp32 --set
threads=1``), once with the code of a reference tree (``--reference DIR``: e.g. a checkout of
the commit before the change) and once with this checkout, side by side in one invocation,
and compares the SHA-256 of every ``result.json`` less what names the code, arithmetic and data
that made it (``code``, ``numerics``, ``data``: the commit differs between any two versions). A
record holds the accuracy matrix, every test episode's accuracy and the run's settings, so
equal hashes mean the change moved no number.

    git worktree add /tmp/before <commit>      # the code before the change
    python -m benchmarks.bit_identity --reference /tmp/before

Writes ``benchmarks/results/bit_identity/``: ``results.json`` (provenance, both trees'
commits, one record per method with both hashes) and ``README.md`` (the table). Exits 1 when a
hash differs. The hashes belong to this machine's arithmetic: another CPU may give other (but
again equal) hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import ROOT, header_md, out_dir, provenance, write_json

METHODS = ("order", "mskm", "semi-er")
SETTINGS = ("--preset", "quick", "--set", "precision=fp32", "--set", "threads=1")


def commit_of(tree: Path) -> str:
    """The tree's commit, with ``+changes`` when its package has uncommitted edits (what the
    runs executed); ``unknown`` outside a git checkout."""
    git = ["git", "-C", str(tree)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "unknown"
    status = subprocess.run(
        [*git, "status", "--porcelain", "--", "avalanche_sets"], capture_output=True, text=True
    )
    return head.stdout.strip() + ("+changes" if status.stdout.strip() else "")


def tree_env(tree: Path) -> dict[str, str]:
    """The environment of a child process that imports the package of ``tree`` (checked: an
    installed copy elsewhere must not answer instead)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run(
        [sys.executable, "-c", "import avalanche_sets; print(avalanche_sets.__file__)"],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the package of {tree} is shadowed by {where}")
    return env


def run_record(tree: Path, method: str, out: Path) -> tuple[str, Path]:
    """Run ``method`` with the package of ``tree``; the SHA-256 of its ``result.json`` and
    the record's path."""
    cmd = [sys.executable, "-m", "avalanche_sets", "run", "--method", method, *SETTINGS]
    cmd += ["--out", str(out), "--loggers"]
    subprocess.run(cmd, cwd=tree, env=tree_env(tree), check=True, capture_output=True, text=True)
    (record,) = out.rglob("result.json")
    return record_digest(record), record


#: What a record says about what made it, not what it computed: the commit differs between any
#: two versions of the code, and records of code older than these keys lack them.
MADE_BY = ("code", "numerics", "data")


def record_digest(path: Path) -> str:
    """The SHA-256 of a ``result.json`` without its :data:`MADE_BY` keys (canonical JSON):
    equal digests mean equal numbers, settings and identity."""
    record = {k: v for k, v in json.loads(path.read_text()).items() if k not in MADE_BY}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bit_identity", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--reference", type=Path, required=True, help="a checkout of the code to compare with"
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    args = parser.parse_args(argv)
    reference = args.reference.resolve()
    if not (reference / "avalanche_sets" / "__init__.py").is_file():
        parser.error(f"--reference {reference} holds no avalanche_sets package")
    prov = provenance(seeds=[0])
    trees = {"reference": commit_of(reference), "this": commit_of(ROOT)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bit_identity_") as tmp:
        for method in args.methods:
            hashes = {}
            for side, tree in (("reference", reference), ("this", ROOT)):
                hashes[side], _ = run_record(tree, method, Path(tmp) / side / method)
            same = hashes["reference"] == hashes["this"]
            rows.append({"method": method, **hashes, "identical": same})
            print(f"{method}: {'identical' if same else 'DIFFERENT'} ({hashes['this'][:12]})")
    out = out_dir("bit_identity")
    write_json(out / "results.json", {**prov, "trees": trees, "settings": SETTINGS, "runs": rows})
    lines = [
        header_md("Bit identity of result records across a code change", prov),
        f"Reference code: `{trees['reference']}`; this code: `{trees['this']}`; "
        f"settings: `{' '.join(SETTINGS)}`, seed 0.\n",
        "| method | reference SHA-256 | this SHA-256 | identical |",
        "|---|---|---|---|",
        *(
            f"| {r['method']} | `{r['reference'][:16]}…` | `{r['this'][:16]}…` | "
            f"{'yes' if r['identical'] else '**no**'} |"
            for r in rows
        ),
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
