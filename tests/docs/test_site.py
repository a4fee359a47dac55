"""The documentation site builds strictly and renders in a real browser.

The build is ``mkdocs build --strict`` on ``mkdocs.yml`` (a broken link, a missing anchor or an
unresolved API reference fails it). The browser is Chromium from the system packages
(``scripts/install.sh`` installs it), driven headless by Playwright; it opens the built home page
and the main results page from a local HTTP server and checks that the headline tables are there
and that every picture on the page loaded. The screenshots go to ``$AVALANCHE_SETS_SCREENSHOTS``
when that is set (else next to the built site). ``AVALANCHE_SETS_NO_BROWSER=1`` skips the browser
tests on a machine without Chromium; nothing else skips them.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("AVALANCHE_SETS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [  # a closed network: no background connections, no sandbox as root
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def test_the_site_builds_strictly_with_every_page(site):
    for page in ("index.html", "getting-started/index.html", "results/index.html",
                 "guide/custom-method/index.html", "reference/order/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    # the API reference is generated from the docstrings, not an empty page
    order = (site / "reference/order/index.html").read_text()
    assert "OrderStrategy" in order and "MIRegularizationPlugin" in order
    # no docstring shows a raw Sphinx role (docs/hooks.py turns them into code)
    for page in (site / "reference").rglob("index.html"):
        assert not re.search(r":(class|meth|func|mod):<code>", page.read_text()), page
    # the guide's code is the tested example's, included by the snippets extension
    guide = (site / "guide/custom-method/index.html").read_text()
    assert "PrototypeSpreadPlugin" in guide and "loss_term" in guide
    assert "TaskReplayPlugin" in guide and "copy_episodes" in guide  # the replay example
    assert "--8&lt;--" not in guide and "8 &lt; --" not in guide
    # a result folder a page links to is part of the site, with the pictures it shows
    assert (site / "benchmarks/results/forgetting_converged/index.html").is_file()
    assert (site / "benchmarks/results/forgetting_converged/stream_5shot.png").is_file()


def test_a_link_to_a_missing_repository_file_fails_the_build():
    hooks = _hooks()
    page = ROOT / "docs" / "guide" / "data.md"
    path, fragment = hooks._resolve(page, "../../benchmarks/reproduce.py#L1")
    assert path == ROOT / "benchmarks" / "reproduce.py" and fragment == "L1"
    assert hooks._resolve(page, "episodes.md#episodes") is None  # inside docs: MkDocs checks it
    assert hooks._resolve(page, "https://example.org/x") is None
    with pytest.raises(hooks.PluginError, match="does not have"):
        hooks._resolve(page, "../../benchmarks/no_such_script.py")
    with pytest.raises(hooks.PluginError, match="folder without a README"):
        hooks._resolve(page, "../../examples/")
    with pytest.raises(hooks.PluginError, match="leaves the repository"):
        hooks._resolve(page, "../../../outside.md")


def test_broken_links_are_reported_together(tmp_path, monkeypatch):
    # a repository of three files: a page with two broken links and a good one
    hooks = _hooks()
    monkeypatch.setattr(hooks, "REPO", tmp_path)
    monkeypatch.setattr(hooks, "DOCS", tmp_path / "docs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "README.md").write_text("![plot](plot.png) [script](run.py)\n")
    (tmp_path / "bench" / "plot.png").write_bytes(b"png")
    (tmp_path / "bench" / "run.py").write_text("")
    page = tmp_path / "docs" / "page.md"
    page.write_text("[ok](../bench/)\n```\n[in code](../not_a_link.md)\n```\n")
    # followed through the linked README: its picture and script are part of the site
    assert hooks._repository_files([page]) == {
        tmp_path / "bench" / n for n in ("README.md", "plot.png", "run.py")
    }
    page.write_text("[a](../no_a.md) [b](../no_b.png) [ok](../bench/run.py)\n")
    with pytest.raises(hooks.PluginError, match=r"2 broken link\(s\)"):
        hooks._repository_files([page])


# ------------------------------------------------------------------------------ browser
def _browser():
    if os.environ.get("AVALANCHE_SETS_NO_BROWSER") == "1":
        pytest.skip("AVALANCHE_SETS_NO_BROWSER=1")
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: scripts/install.sh installs it (apt-get install "
            "chromium); set AVALANCHE_SETS_CHROMIUM to another binary, or "
            "AVALANCHE_SETS_NO_BROWSER=1 to skip the browser tests"
        )
    from playwright.sync_api import sync_playwright

    return sync_playwright()


@contextlib.contextmanager
def _serve(directory: Path):
    """A local HTTP server of ``directory``; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def served(site):
    with _serve(site) as url:
        yield url


def _screenshot_dir(site: Path) -> Path:
    folder = Path(os.environ.get("AVALANCHE_SETS_SCREENSHOTS", site.parent / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _render(url: str, shot: Path) -> dict:
    """Open ``url`` in headless Chromium; the page's tables, pictures and a screenshot."""
    with _browser() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url, wait_until="load")
            page.screenshot(path=str(shot), full_page=True)
            return {
                "tables": page.eval_on_selector_all(
                    "article table", "ts => ts.map(t => t.innerText)"
                ),
                "images": page.eval_on_selector_all(
                    "article img",
                    "is => is.map(i => ({src: i.getAttribute('src'), done: i.complete, "
                    "width: i.naturalWidth}))",
                ),
                "title": page.title(),
                "text": page.inner_text("article"),
            }
        finally:
            browser.close()


def _assert_pictures_loaded(rendered: dict, at_least: int) -> None:
    images = rendered["images"]
    assert len(images) >= at_least, images
    broken = [i["src"] for i in images if not (i["done"] and i["width"] > 0)]
    assert not broken, f"pictures that did not render: {broken}"


def test_the_home_page_renders_the_headline_table_and_its_pictures(site, served):
    shot = _screenshot_dir(site) / "home.png"
    rendered = _render(served + "/", shot)
    tables = rendered["tables"]
    headline = [t for t in tables if "paper 5-shot" in t and "order" in t]
    assert len(headline) >= 2, f"Tables 2 and 3 are missing from the home page: {tables}"
    assert re.search(r"order\s+\d+\.\d\d ± \d", headline[0]), headline[0]
    _assert_pictures_loaded(rendered, at_least=2)  # the demo's heatmap and the stream plot
    assert shot.stat().st_size > 50_000


def test_the_results_page_renders_its_tables_and_pictures(site, served):
    shot = _screenshot_dir(site) / "results.png"
    rendered = _render(served + "/results/", shot)
    tables = rendered["tables"]
    assert any("semi-der" in t and "paper 5-shot" in t for t in tables), tables
    assert any("forgetting (pts)" in t for t in tables), tables
    _assert_pictures_loaded(rendered, at_least=3)
    assert shot.stat().st_size > 50_000


def test_the_paper_table_guide_shows_its_pictures_with_their_captions(site, served):
    shot = _screenshot_dir(site) / "paper-table.png"
    rendered = _render(served + "/guide/paper-table/", shot)
    _assert_pictures_loaded(rendered, at_least=2)
    shown = {i["src"].rsplit("/", 1)[-1] for i in rendered["images"]}
    assert {"paper_stream.png", "paper_final.png"} <= shown, shown
    text = rendered["text"]
    for piece in ("Axis: test accuracy 0–100% on every panel (shared).",
                  "Axis: final test accuracy 0–100%.",
                  "Rows of 2 seeds — mskm (seeds 0, 1); order (seeds 0, 1): hollow markers",
                  "white markers on the bar: each seed's value, no interval drawn",
                  "Protocol (every row): source synthetic", "Code: every run was made by ",
                  "\\begin{tabular}{lcc}", "ORDER & $65.24 \\pm 2.58$"):  # fmt: skip
        assert piece in text, piece  # the pictures, their captions, the LaTeX Table 2


def test_a_missing_picture_is_caught(site, served, tmp_path):
    # the check above would fail on a page whose picture does not load: prove it on a copy
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "benchmarks/results/forgetting_converged/stream_5shot.png").unlink()

    with _serve(copy) as url:
        rendered = _render(url + "/", tmp_path / "x.png")
    with pytest.raises(AssertionError, match="did not render"):
        _assert_pictures_loaded(rendered, at_least=2)
