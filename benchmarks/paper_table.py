"""The pictures the paper-table guide shows, made by the guide's own commands.

Runs the ``avalanche-sets`` commands of ``docs/guide/paper-table.md`` (its ``bash`` blocks) in
a temporary folder, as a reader would, and keeps what ``table --out results/paper`` drew: the
two pictures (palette PNGs), their data (CSV) and their captions (markdown). The guide shows
them with their captions in its generated block ``paper-figures``, written here too.

    python -m benchmarks.paper_table

Writes ``benchmarks/results/paper_table/``: ``README.md``, ``paper_stream.png/.csv/.md``,
``paper_final.png/.csv/.md``; and the guide's ``paper-figures`` block.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from benchmarks._common import ROOT, compress_png, header_md, out_dir, provenance, splice_block

PAGE = ROOT / "docs" / "guide" / "paper-table.md"
#: what the guide's ``table --out results/paper`` writes that is kept, per picture
KEPT = [f"paper_{fig}.{ext}" for fig in ("stream", "final") for ext in ("png", "csv", "md")]


def page_commands(text: str) -> list[list[str]]:
    """The ``avalanche-sets`` commands of the page's ``bash`` blocks, continuation lines
    joined, as argument lists without the program name."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                argv = shlex.split(line)
                if argv[0] != "avalanche-sets":
                    raise ValueError(f"{PAGE.name}: not an avalanche-sets command: {line}")
                commands.append(argv[1:])
    return commands


def caption_lines(md: str) -> list[str]:
    """The caption of a picture's markdown (``<out>_stream.md``): the lines after the picture."""
    lines = md.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("!["))
    return [x.rstrip() for x in lines[at + 1 :] if x.strip()]


FIGURES = ROOT / "benchmarks" / "results" / "paper_table"
"""Where the guide's committed pictures and their captions live."""


def figures_block(folder: Path = FIGURES, base: Path = PAGE.parent) -> str:
    """The guide's ``paper-figures`` block: each committed picture with its caption, linked
    relative to the folder ``base`` (the guide's; the root for ``benchmarks.readme``)."""
    rel = os.path.relpath(folder, base)
    parts = []
    for fig in ("stream", "final"):
        md = (folder / f"paper_{fig}.md").read_text()
        title = md.splitlines()[0].removeprefix("# ")
        lines = "".join(f"{x}  \n" for x in caption_lines(md))
        parts.append(f"![{title}]({rel}/paper_{fig}.png)\n\n{lines}")
    return "\n".join(parts)


def main() -> int:
    from avalanche_sets.cli import main as cli

    folder = out_dir("paper_table")
    prov = provenance(seeds=[0, 1])
    commands = page_commands(PAGE.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        here = Path.cwd()
        os.chdir(tmp)
        try:
            for argv in commands:
                with redirect_stdout(StringIO()):
                    if cli(argv) != 0:
                        raise SystemExit(f"avalanche-sets {shlex.join(argv)} failed")
        finally:
            os.chdir(here)
        for name in KEPT:
            shutil.copyfile(Path(tmp) / "results" / name, folder / name)
    for name in KEPT:
        if name.endswith(".png"):
            compress_png(folder / name)
    listed = "\n".join(f"    avalanche-sets {shlex.join(a)}" for a in commands)
    (folder / "README.md").write_text(
        header_md("The paper-table guide's pictures", prov)
        + f"Made by the commands of the paper-table guide (`{PAGE.relative_to(ROOT)}`), run in "
        f"a fresh folder:\n\n{listed}\n\n"
        + "".join(f"- [{n}]({n})\n" for n in KEPT)
        + "\nThe guide shows them with their captions (its `paper-figures` block, written by "
        "this script); `tests/docs/test_paper_table_page.py` checks that the block is these "
        "captions and that the guide's commands still draw captions of the same lines.\n"
    )
    PAGE.write_text(splice_block(PAGE.read_text(), "paper-figures", figures_block(folder),
                                 where=PAGE))  # fmt: skip
    print(f"wrote {folder} and the paper-figures block of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
