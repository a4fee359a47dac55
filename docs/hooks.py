"""MkDocs hooks: links from the documentation to files of the repository.

A page under ``docs/`` links to repository files with ordinary relative paths
(``../../benchmarks/results/demo/README.md``), so the same Markdown works on GitHub. MkDocs only
knows files under ``docs/``; this hook

* collects every repository file a page links to outside ``docs/`` (and, for a linked Markdown
  file such as a result folder's ``README.md``, the files that one links to in turn), and adds
  it to the site at its repository path (``benchmarks/results/demo/README.md`` becomes the page
  ``benchmarks/results/demo/``; a picture or a script is copied as it is);
* rewrites those links to the added files, so MkDocs validates them like any other link;
* fails the build (:class:`~mkdocs.exceptions.PluginError`) for a link to a file the repository
  does not have, and for a link that leaves the repository.

A link to a folder goes to its ``README.md``; a folder without one is an error.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

#: a Markdown link or image: ``[text](target)`` / ``![alt](target "title")``
LINK = re.compile(r"(\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
FENCE = re.compile(r"^(```|~~~)")


def _lines(text: str):
    """``(line, in_code)`` for every line of ``text`` (with its end): ``in_code`` for a fence
    line and what a fence encloses, where a link is not a link."""
    fenced = False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            yield line, True
        else:
            yield line, fenced


def _links(text: str) -> list[str]:
    """Targets of the Markdown links of ``text`` outside fenced code blocks."""
    return [m.group(2) for line, code in _lines(text) if not code for m in LINK.finditer(line)]


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith(("#", "/"))


def _resolve(source: Path, target: str) -> tuple[Path, str] | None:
    """The repository file ``target`` (relative to ``source``) names, and its fragment; None for
    an external link or one that stays inside ``docs/``. Raises for a missing file."""
    if _is_external(target):
        return None
    path, _, fragment = target.partition("#")
    resolved = Path(os.path.normpath(source.parent / path))
    if resolved == DOCS or DOCS in resolved.parents:
        return None
    if REPO not in resolved.parents:
        raise PluginError(f"{source.relative_to(REPO)}: the link {target!r} leaves the repository")
    if resolved.is_dir():
        if not (resolved / "README.md").is_file():
            raise PluginError(
                f"{source.relative_to(REPO)}: the link {target!r} names a folder without a "
                "README.md; link to a file in it"
            )
        resolved = resolved / "README.md"
    if not resolved.is_file():
        raise PluginError(
            f"{source.relative_to(REPO)}: the link {target!r} names "
            f"{resolved.relative_to(REPO)}, which the repository does not have"
        )
    return resolved, fragment


def _repository_files(pages: list[Path]) -> set[Path]:
    """Every repository file outside ``docs/`` that ``pages`` link to, followed through linked
    Markdown files. Raises one error naming every broken link."""
    found: set[Path] = set()
    errors: list[str] = []
    todo = list(pages)
    while todo:
        source = todo.pop()
        for target in _links(source.read_text(encoding="utf-8")):
            try:
                hit = _resolve(source, target)
            except PluginError as err:
                errors.append(str(err))
                continue
            if hit is not None and hit[0] not in found:
                found.add(hit[0])
                if hit[0].suffix == ".md":
                    todo.append(hit[0])
    if errors:
        raise PluginError(f"{len(errors)} broken link(s):\n  " + "\n  ".join(sorted(errors)))
    return found


def on_files(files: Files, config) -> Files:
    pages = [Path(f.abs_src_path) for f in files.documentation_pages() if f.abs_src_path]
    for path in sorted(_repository_files(pages)):
        rel = path.relative_to(REPO).as_posix()
        added = File(
            rel, src_dir=str(REPO), dest_dir=config["site_dir"],
            use_directory_urls=config["use_directory_urls"],
        )  # fmt: skip
        if added.is_documentation_page():
            added.inclusion = InclusionLevel.NOT_IN_NAV
        files.append(added)
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    source = Path(page.file.abs_src_path)
    if DOCS not in source.parents:  # a repository page: its links already fit the site
        return markdown
    here = posixpath.dirname(page.file.src_uri)

    def rewrite(m: re.Match) -> str:
        hit = _resolve(source, m.group(2))
        if hit is None:
            return m.group(0)
        path, fragment = hit
        target = posixpath.relpath(path.relative_to(REPO).as_posix(), here or ".")
        return f"{m.group(1)}{target}{'#' + fragment if fragment else ''}{m.group(3)}"

    return "".join(line if code else LINK.sub(rewrite, line) for line, code in _lines(markdown))


#: a Sphinx cross-reference role as it reaches the HTML: ``:class:`~a.b.C``` -> ``:class:<code>~a.b.C</code>``
ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|ref):<code>(~?)\.?([^<]+)</code>")


def on_page_content(html: str, page, config, files: Files) -> str:
    """Docstrings cite names with Sphinx roles; the API pages show the name as code (the last
    component for ``~a.b.C``, as Sphinx does)."""
    return ROLE.sub(
        lambda m: f"<code>{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}</code>", html
    )
