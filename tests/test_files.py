"""``atomic_write``: the one atomic writer of the package (run records, checkpoints, packs,
caches) — a reader sees the old file or the whole new one, never a torn one."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from avalanche_sets.files import atomic_write
from avalanche_sets.runs.folder import atomic_write as folder_atomic_write


def test_text_bytes_and_writer_functions_are_written_whole(tmp_path):
    assert atomic_write(tmp_path / "a" / "t.txt", "héllo\n") == tmp_path / "a" / "t.txt"
    assert (tmp_path / "a" / "t.txt").read_bytes() == "héllo\n".encode()
    atomic_write(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    atomic_write(tmp_path / "c.bin", lambda f: f.write(b"from a writer"))
    assert (tmp_path / "c.bin").read_bytes() == b"from a writer"
    assert stat.S_IMODE((tmp_path / "c.bin").stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b.bin", "c.bin", "t.txt"]
    assert folder_atomic_write is atomic_write  # the run folder uses the same one


def test_a_failing_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("old\n")

    def torn(f):
        f.write(b"half of the new")
        raise OSError("disk full")

    for single_writer in (False, True):
        with pytest.raises(OSError, match="disk full"):
            atomic_write(path, torn, single_writer=single_writer)
        assert path.read_text() == "old\n"
        assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_previous_copy_and_single_writer_temporary_name(tmp_path):
    path, prev = tmp_path / "checkpoint.pt", tmp_path / "checkpoint.pt.prev"
    atomic_write(path, b"one", previous=prev, single_writer=True)
    assert not prev.exists()  # nothing to keep yet
    # a temporary file left by a killed writer is overwritten, not left behind
    (tmp_path / "checkpoint.pt.tmp").write_bytes(b"left by a killed process")
    atomic_write(path, b"two", previous=prev, single_writer=True)
    assert path.read_bytes() == b"two" and prev.read_bytes() == b"one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "checkpoint.pt.prev"]


def test_other_content_is_refused_by_type(tmp_path):
    with pytest.raises(TypeError, match="content must be str, bytes or a function"):
        atomic_write(tmp_path / "x", 3)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_the_writer_is_a_ground_floor_room_of_the_standard_library():
    """Run folders, checkpoints and packs all import it: it imports none of them, nor torch."""
    code = (
        "import sys, avalanche_sets.files; "
        "print(sorted(m for m in sys.modules if m.startswith(('torch', 'numpy', 'avalanche'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["['avalanche_sets',", "'avalanche_sets.files']"]
