"""The commands of ``docs/guide/paper-table.md`` run as the page shows them, and make what it
says they make (tiny settings: about a minute)."""

from __future__ import annotations

import re
import struct

from avalanche_sets.cli import main
from benchmarks._common import read_block
from benchmarks.paper_table import PAGE, caption_lines, figures_block, page_commands

FIGURES = PAGE.parents[2] / "benchmarks" / "results" / "paper_table"
#: caption lines that name this machine or this checkout (the preset's threads, the commit)
MACHINE_LINES = ("Protocol (every row): ", "Numerics: ", "Code: ")


def test_the_page_finds_its_commands():
    commands = page_commands(PAGE.read_text())
    assert [c[:1] for c in commands] == [["sweep"], ["table"], ["table"]]
    assert "--vs" in commands[1] and "--out" in commands[1] and "--formats" in commands[1]


def test_the_pages_commands_run_and_write_what_it_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for argv in page_commands(PAGE.read_text()):
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "Δ vs mskm (pts)" in out and "| order |" in out and "(reference)" in out
    assert "95% Student-t interval over seeds (n = 2)" in out
    text = PAGE.read_text()
    for name in re.findall(r"`(results/paper[\w.]*)`", text):
        assert (tmp_path / name).is_file(), name
    assert "[seeds ± " in out and "no seed-level claim can be made" in out
    assert "Protocol (every row): " in out and "tasks_per_domain 4" in out
    for name in ("paper.md", "paper.csv", "paper.json", "paper_stream.png", "paper_stream.csv",
                 "paper_stream.md", "paper_final.png", "paper_final.csv",
                 "paper_final.md"):  # fmt: skip
        assert (tmp_path / "results" / name).is_file(), name
    # the committed pictures are what these commands draw: the same caption, but for the lines
    # that name the machine and the code (python -m benchmarks.paper_table makes them again)
    for fig in ("paper_stream.md", "paper_final.md"):
        fresh, committed = (caption_lines((d / fig).read_text())
                            for d in (tmp_path / "results", FIGURES))  # fmt: skip
        assert [x for x in fresh if not x.startswith(MACHINE_LINES)] == [
            x for x in committed if not x.startswith(MACHINE_LINES)
        ], fig
    for fig in ("paper_stream.pdf", "paper_final.pdf"):  # --formats png pdf
        assert (tmp_path / "results" / fig).read_bytes()[:5] == b"%PDF-"


def test_the_page_shows_the_committed_pictures_with_their_captions():
    assert read_block(PAGE.read_text(), "paper-figures").strip() == figures_block(FIGURES).strip()
    for fig in ("paper_stream", "paper_final"):
        head = (FIGURES / f"{fig}.png").read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", head[16:24])
        assert width > 800 and height > 800, (fig, width, height)
        caption = " ".join(caption_lines((FIGURES / f"{fig}.md").read_text()))
        for piece in ("0–100%", "Rows of 2 seeds — mskm (seeds 0, 1); order (seeds 0, 1)",
                      "each seed's value, no interval drawn", "t₀.₉₇₅ = 12.7",
                      "Protocol (every row): source synthetic", "tasks_per_domain 4",
                      "Data: synthetic", "Code: every run was made by "):  # fmt: skip
            assert piece in caption, (fig, piece)
