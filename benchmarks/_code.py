"""Which code made a table: one sentence from the ``code`` of the records it reads.

Every generated results block (the main tables, the forgetting table, the demo) ends with the
commits of its records (:func:`code_md`), generated like its numbers, so a table never pools
runs of different code without saying so. A record's ``code`` is the one its run wrote
(:mod:`avalanche_sets.runs.code`), or, where its ``run.json`` says ``migrated`` (the committed
records older than ``code``), the commit that added the record with its present numbers: the
sentence says so, since the code that ran is that commit's or an older one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from avalanche_sets.runs.record import RunRecord

__all__ = ["code_md"]


def _commit(code: dict) -> str:
    commit = code.get("commit")
    text = "an unknown commit" if commit is None else f"`{commit[:7]}`"
    if code.get("dirty"):
        text += " with uncommitted changes"
    return text


def code_md(records: Iterable[RunRecord], *, what: str = "runs") -> str:
    """``"Code: the 24 runs were made by avalanche-sets 0.1.0 at `c39c8bb` (20 runs) and
    `8018a98` (4 runs)."``; ``what`` names the records."""
    records = list(records)
    codes = [rec.made_by for rec in records]
    if not codes:
        return ""
    commits = Counter(_commit(code) for code in codes)
    listed = [f"{c} ({n} {what if n > 1 else what.rstrip('s')})" for c, n in
              sorted(commits.items(), key=lambda cn: (-cn[1], cn[0]))]  # fmt: skip
    if len(listed) == 1:
        listed = list(commits)
    where = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
    versions = sorted({str(code.get("version")) for code in codes if code.get("version")})
    by = f" by avalanche-sets {', '.join(versions)}" if versions else ""
    migrated = sum(bool(rec.provenance and rec.provenance.migrated) for rec in records)
    note = ""
    if migrated:
        share = "" if migrated == len(codes) else f"{migrated} of them "
        note = (
            f" ({share}recovered from the repository's history: the commit that added the record "
            "with its present numbers, so the code that ran is that commit's or older)"
        )
    n = len(codes)
    whole = f"the {n} {what} were" if n > 1 else f"the {what.rstrip('s')} was"
    return f"*Code:* {whole} made{by} at {where}{note}.\n"
