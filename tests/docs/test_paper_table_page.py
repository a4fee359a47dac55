"""The commands of ``docs/guide/paper-table.md`` run as the page shows them, and make what it
says they make (tiny settings: about a minute)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from avalanche_sets.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "paper-table.md"


def page_commands(text: str) -> list[list[str]]:
    """The ``avalanche-sets`` commands of the page's ``bash`` blocks, continuation lines
    joined, as argument lists without the program name."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                argv = shlex.split(line)
                assert argv[0] == "avalanche-sets", line
                commands.append(argv[1:])
    return commands


def test_the_page_finds_its_commands():
    commands = page_commands(PAGE.read_text())
    assert [c[:1] for c in commands] == [["sweep"], ["table"], ["table"]]
    assert "--vs" in commands[1] and "--out" in commands[1]


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
