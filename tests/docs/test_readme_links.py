"""README.md works where it is shown: in the repository, on the documentation site and on the
package index, whose long description it is (pyproject.toml ``readme``).

Every link of the README is absolute; one into this project's repository or documentation site
(pyproject.toml's ``[project.urls]``, which mkdocs.yml's ``site_url`` repeats) points at a file
or page of this checkout; and the blocks ``python -m benchmarks.readme update`` writes into the
README are absolute too (:func:`benchmarks.readme.absolute_url`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import readme

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_MARKDOWN = re.compile(r"\]\(\s*<?([^)\s>]+)")  # [text](target) and ![alt](target)
_AUTOLINK = re.compile(r"<([a-z][a-z0-9+.-]*:[^>\s]+)>")
_HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)""")
_ABSOLUTE = re.compile(r"^(https?://|mailto:)")


def links(text: str) -> list[str]:
    """Every link target of a Markdown text (outside fenced code)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return [m.group(1) for rx in (_MARKDOWN, _AUTOLINK, _HTML) for m in rx.finditer(prose)]


def heading_ids(page: Path) -> set[str]:
    """The ids MkDocs' ``toc`` gives the headings of a Markdown page (its default slugify)."""
    titles = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", t).strip().lower()) for t in titles}


def checkout_path(url: str, urls: dict[str, str]) -> Path | None:
    """The file or folder of this checkout that ``url`` shows, ``None`` for another site's."""
    url = url.split("#", 1)[0]
    site, repo = urls["Documentation"], urls["Repository"] + "/"
    if url.startswith(site):
        page = url.removeprefix(site).rstrip("/")
        candidates = [ROOT / "docs" / f"{page}.md", ROOT / "docs" / page / "index.md"]
        return next((p for p in candidates if p.is_file()), candidates[0])
    if url.startswith(repo):
        kind, branch, path = (url.removeprefix(repo).split("/", 2) + ["", ""])[:3]
        assert kind in ("blob", "raw", "tree") and branch == "main", url
        return ROOT / path
    return None


def test_the_addresses_are_declared_once_and_agree():
    urls = readme.project_urls()
    assert urls["Documentation"].startswith("https://") and urls["Documentation"].endswith("/")
    assert urls["Repository"].startswith("https://") and not urls["Repository"].endswith("/")
    site_url = re.search(r"^site_url:\s*(\S+)", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert site_url and site_url.group(1) == urls["Documentation"]


def test_every_readme_link_is_absolute():
    relative = [t for t in links(README.read_text(encoding="utf-8")) if not _ABSOLUTE.match(t)]
    assert not relative, f"relative links (they break on the package index): {relative}"


def test_every_link_into_the_project_resolves_in_this_checkout():
    urls = readme.project_urls()
    ours = {t: checkout_path(t, urls) for t in links(README.read_text(encoding="utf-8"))}
    ours = {t: p for t, p in ours.items() if p is not None}
    assert len(ours) > 20  # the documentation table, the result pictures, the folders
    missing = [t for t, p in ours.items() if not p.exists()]
    assert not missing, f"README links to nothing in this checkout: {missing}"
    site = urls["Documentation"]
    anchors = [t for t, p in ours.items() if t.startswith(site) and "#" in t]
    assert anchors  # the install section's link to the pip route
    dangling = [t for t in anchors if t.split("#", 1)[1] not in heading_ids(ours[t])]
    assert not dangling, f"README links to headings that are not there: {dangling}"
    # and the generator would write each of them exactly so
    for target, path in ours.items():
        rel = path.relative_to(ROOT).as_posix() + ("/" if "/tree/" in target else "")
        anchor = "#" + target.split("#", 1)[1] if "#" in target else ""
        assert readme.absolute_url(rel + anchor, urls) == target, target


@pytest.mark.parametrize(
    "target, url",
    [
        ("docs/index.md", "https://site.example/"),
        ("docs/results/index.md", "https://site.example/results/"),
        ("docs/guide/cli.md#presets", "https://site.example/guide/cli/#presets"),
        ("docs/guide/reindex.md", "https://site.example/guide/reindex/"),
        ("CHANGELOG.md", "https://git.example/p/blob/main/CHANGELOG.md"),
        ("benchmarks/results/demo/", "https://git.example/p/tree/main/benchmarks/results/demo/"),
        ("benchmarks/x/a.png", "https://git.example/p/raw/main/benchmarks/x/a.png"),
    ],
)
def test_absolute_url(target, url):
    urls = {"Documentation": "https://site.example/", "Repository": "https://git.example/p"}
    assert readme.absolute_url(target, urls) == url


def test_generated_blocks_are_absolute_in_the_readme_and_relative_on_the_site():
    block = "[a](benchmarks/results/demo/README.md), ![b](docs/x.png), [c](https://e.org/d)"
    in_readme = readme.relink(block, readme.ROOT)
    assert links(in_readme)[:2] == [
        readme.absolute_url("benchmarks/results/demo/README.md"),
        readme.absolute_url("docs/x.png"),
    ]
    assert links(in_readme)[2] == "https://e.org/d"
    on_site = readme.relink(block, readme.DOCS / "results")
    assert links(on_site) == [
        "../../benchmarks/results/demo/README.md",
        "../x.png",
        "https://e.org/d",
    ]
