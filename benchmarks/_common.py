"""Shared helpers of the benchmark scripts: output folder, provenance header, JSON writing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED_PACKS = Path(
    os.environ.get("AVALANCHE_SETS_SHARED_DATA", ROOT.parent / "shared" / "data" / "sets-mini")
)


def package_env() -> dict[str, str]:
    """This process's environment with the checkout first on ``PYTHONPATH``, so a child process
    (``python -m avalanche_sets ...``) imports this checkout's package."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


def command_line() -> str:
    """This process's command line as typed from the repository root: ``python -m
    benchmarks.<name> ...`` for a benchmark script, ``python <argv[0]> ...`` otherwise."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None else ""
    program = f"-m {name}" if name.startswith("benchmarks.") else Path(sys.argv[0]).as_posix()
    return " ".join(["python", program, *sys.argv[1:]])


def provenance(seeds=None) -> dict:
    """``command``, ``date``, ``machine`` and ``seeds`` of a result file
    (:func:`avalanche_sets.runs.code.provenance`, with the script's command line)."""
    from avalanche_sets.runs.code import provenance as _provenance

    return _provenance(command=command_line(), seeds=seeds)


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


def splice_block(text: str, marker: str, block: str, *, where: Path | str = "README.md") -> str:
    """``text`` with what lies between ``<!-- marker:start -->`` and ``<!-- marker:end -->``
    replaced by ``block`` (a README block generated from result files)."""
    begin, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"{where} has no {begin.strip()} ... {end} markers")
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[:a] + block.strip() + "\n" + text[b:]


def read_block(text: str, marker: str) -> str:
    """What lies between the ``marker`` comments of ``text`` (see :func:`splice_block`)."""
    begin, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"no {begin.strip()} ... {end} markers")
    return text[text.index(begin) + len(begin) : text.index(end)]


def compress_png(path: str | Path) -> Path:
    """Rewrite the PNG at ``path`` with a palette of 256 colours (octree quantisation): a plot
    is flat colours, text and lines, so it looks the same at a third of the size; the committed
    pictures stay small (``tests/benchmarks/test_results_data.py`` checks every one is)."""
    from PIL import Image

    path = Path(path)
    with Image.open(path) as im:
        rgb = im.convert("RGB")
    rgb.quantize(256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
    return path


def save_figure(fig, path: str | Path, *, dpi: int) -> Path:
    """``fig.savefig(path, dpi=dpi)``, then :func:`compress_png` (every benchmark plot)."""
    fig.savefig(path, dpi=dpi)
    return compress_png(path)
