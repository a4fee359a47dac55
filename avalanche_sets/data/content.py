"""The content hash of the data a run reads: the ``data.content`` of its record.

Two runs of the same settings on the same folder path compute different numbers when the folder's
files differ (a pack rebuilt, one image changed), and two copies of one folder at different paths
compute the same. A run's identity therefore holds what its ``--root`` *contains*
(:func:`data_content`), not where it is:

* ``packs``: every ``*.npz`` pack of the folder (name and bytes), plus the ``stream`` section of
  its ``manifest.json`` when it has one (it decides which pack is a domain and which an OOD
  source, and their order). The rest of the manifest (date, command) and ``README.md`` do not
  enter: preparing the same stream twice gives the same hash;
* ``paper``: every file under the folder, recursively (hidden files excepted);
* ``synthetic``: ``None`` — the images are generated, the preset and the code decide them.

The hash is computed from the files on every call rather than trusted from a manifest, which
could be stale after a pack is replaced; each file's SHA-256 is cached by its path, size and
modification time, in this process and in a small JSON file in the user's cache folder
(``$AVALANCHE_SETS_CACHE``, else ``$XDG_CACHE_HOME/avalanche-sets``, else
``~/.cache/avalanche-sets``), so a folder is read once and then only ``stat``-ed. A cache that
cannot be written is not needed: the hash is then computed again next time.

Standard library only (the command line computes it before it imports torch).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..defaults import FOLDER_SOURCES
from ..files import atomic_write

__all__ = ["PACKS_ENV", "data_root", "data_content", "folder_files", "files_content", "cache_file"]

PACKS_ENV = "AVALANCHE_SETS_PACKS"
"""The environment variable that names the ``packs`` source's folder when no root is given."""

_MANIFEST = "manifest.json"  # stream_folder.MANIFEST, which imports numpy
_CHUNK = 1 << 20
_memo: dict[tuple[str, int, int], str] = {}


def cache_file() -> Path:
    """Where file hashes are kept between processes (see the module's docstring)."""
    base = os.environ.get("AVALANCHE_SETS_CACHE")
    if base is None:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (
            str(Path(xdg) / "avalanche-sets")
            if xdg
            else str(Path.home() / ".cache" / "avalanche-sets")
        )
    return Path(base) / "content-hashes.json"


def folder_files(source: str, root: str | os.PathLike) -> list[Path]:
    """The files of ``root`` whose bytes enter the hash of a ``source`` folder, sorted."""
    root = Path(root)
    if source == "packs":
        return sorted(p for p in root.glob("*.npz") if p.is_file())
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def _file_hash(path: Path, disk: dict[str, list]) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _memo:
        return _memo[key]
    stored = disk.get(key[0])
    if stored is not None and stored[:2] == [st.st_size, st.st_mtime_ns]:
        digest = stored[2]
    else:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        disk[key[0]] = [st.st_size, st.st_mtime_ns, digest]
    _memo[key] = digest
    return digest


def _read_cache() -> dict[str, list]:
    try:
        data = json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def files_content(root: str | os.PathLike, files: Iterable[Path], extra: str = "") -> str:
    """``"sha256:<hex>"`` of ``files`` (their paths relative to ``root`` and their bytes) and
    ``extra`` (text that also decides what is read, e.g. a manifest's stream section)."""
    root = Path(root)
    disk = _read_cache()
    before = len(json.dumps(disk, sort_keys=True))
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.relative_to(root).as_posix()}\0{_file_hash(path, disk)}\n".encode())
    h.update(extra.encode())
    text = json.dumps(disk, sort_keys=True)
    if len(text) != before:  # new hashes: keep them for the next process
        try:
            cache_file().parent.mkdir(parents=True, exist_ok=True)
            atomic_write(cache_file(), text)
        except OSError:
            pass  # only a cache: the hash is computed again next time
    return "sha256:" + h.hexdigest()


def data_root(source: str, root: str | os.PathLike | None) -> str | os.PathLike | None:
    """The folder a ``source`` run reads: ``root``, else (``packs``) :data:`PACKS_ENV`'s value;
    ``None`` when there is none (the synthetic source, or a folder source without one)."""
    if source not in FOLDER_SOURCES:
        return None
    if root is None and source == "packs":
        return os.environ.get(PACKS_ENV)
    return root


def data_content(source: str, root: str | os.PathLike | None) -> str | None:
    """The content hash of the data a run of ``source`` on ``root`` reads (module docstring).

    ``None`` for ``synthetic`` and for a folder source without a folder (the benchmark refuses
    that run before it reads anything).

    Raises:
        ValueError: ``root`` is not a folder (names it).
    """
    if source not in FOLDER_SOURCES or root is None:
        return None
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValueError(
            f"the {source} source reads the folder {str(root)!r}, which does not exist or is not a "
            "folder; fix: pass --root <the data folder> (e.g. ../shared/data/sets-mini)"
        )
    extra = ""
    manifest = root / _MANIFEST
    if source == "packs" and manifest.is_file():
        try:
            stream = json.loads(manifest.read_text()).get("stream")
        except (ValueError, AttributeError):
            stream = None  # the benchmark names what is wrong with it when it reads it
        extra = json.dumps(stream, sort_keys=True)
    return files_content(root, folder_files(source, root), extra)
