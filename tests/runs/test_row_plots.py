"""The pictures of ``table --out`` a paper can print: one accuracy axis of 0–100% on every
panel, intervals clipped to it and said so, two-seed rows drawn as their seeds (no t-band),
equal rows both visible, a caption that says what every mark is, and the formats asked for."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from avalanche_sets.cli import main
from avalanche_sets.presets import PRESETS
from avalanche_sets.runs import report
from avalanche_sets.runs.record import Provenance, RunRecord, write_record
from avalanche_sets.runs.report import aggregate_results, find_results
from avalanche_sets.runs.row_plots import write_row_plots

DOMAINS = ["shapes", "strokes"]


def record(method: str, seed: int, finals: tuple[float, float], *, gamma=None) -> RunRecord:
    """A finished run whose final accuracies on the two domains are ``finals``; domain 0 was
    5 points better just after its own training. One seed's interval over test episodes: 5
    points per domain."""
    first = min(finals[0] + 0.05, 1.0)
    ep = np.repeat(np.array(finals)[:, None], 4, axis=1)
    return RunRecord(
        method=method, seed=seed, preset={**PRESETS["quick"], "precision": "fp32"},
        eval_stream="test", strategy_overrides={} if gamma is None else {"gamma": gamma},
        code={"version": "0.1.0", "commit": "a" * 40, "dirty": False,
              "torch": "2.4.0", "avalanche": "0.6.0"},
        numerics={"precision": "fp32", "device": "cpu", "threads": 1, "cpu_bf16": False},
        data={"source": "synthetic", "root": None, "content": "c0ffee"},
        result={
            "domains": DOMAINS, "matrix": [[first, None], list(finals)], "final": list(finals),
            "ci95": [[0.05, None], [0.05, 0.05]], "final_ci95": [0.05, 0.05],
            "episode_acc": ep.ravel().tolist(), "mean_accuracy": float(ep.mean()),
        },
        provenance=Provenance(seconds=1.0, command="test"),
    )  # fmt: skip


def runs(root: Path, method: str, finals: list[tuple[float, float]], **kw) -> None:
    for seed, f in enumerate(finals):
        folder = root / f"{method}{kw.get('gamma', '')}-{seed}"
        folder.mkdir(parents=True)
        write_record(folder, record(method, seed, f, **kw))


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved, by file name: its axes and the text it carries (caption included)."""
    from matplotlib.figure import Figure

    seen = {}
    savefig = Figure.savefig

    def keep(fig, path, **kw):
        seen[Path(path).name] = fig
        return savefig(fig, path, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    return seen


def _mixed(root: Path) -> list[dict]:
    """Rows of 5 seeds (one near 100%: its t-interval passes 100), 2 seeds and 1 seed."""
    runs(root, "order", [(0.99, 0.6), (0.80, 0.62), (0.99, 0.64), (0.85, 0.6), (0.99, 0.61)])
    runs(root, "mskm", [(0.5, 0.4), (0.7, 0.45)])
    runs(root, "semi-der", [(0.3, 0.97)])
    return aggregate_results(find_results([root]))


def _text(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts).replace("\n", " ")


def test_every_panel_shares_the_0_100_axis_and_intervals_are_clipped_and_said(tmp_path, drawn):
    rows = _mixed(tmp_path / "runs")
    order = next(r for r in rows if r["method"] == "order")
    assert 100 * (order["per_domain"]["shapes"] + order["per_domain_ci95"]["shapes"]) > 100
    write_row_plots(rows, tmp_path / "fig", caption_inside=True)
    stream, final = drawn["fig_stream.png"], drawn["fig_final.png"]
    panels = [ax for ax in stream.axes if ax.axison]
    assert len(panels) == 2
    for ax in [*panels, *final.axes]:
        assert ax.get_ylim() == (0.0, 100.0)
    assert panels[0].get_shared_y_axes().joined(panels[0], panels[1])
    # the 5-seed band on shapes reaches 100 and not beyond; its CSV keeps the unclipped value
    bands = [c for c in panels[0].collections if c.get_paths()]
    top = max(c.get_paths()[0].vertices[:, 1].max() for c in bands)
    assert top == pytest.approx(100.0)
    with open(tmp_path / "fig_final.csv") as f:
        point = next(
            p for p in csv.DictReader(f) if p["row"] == "order" and p["domain"] == "shapes"
        )
    assert float(point["high_pct"]) > 100 and float(point["high_drawn_pct"]) == 100
    bars = [ln for ln in final.axes[0].collections if ln.get_segments()]
    assert max(s[:, 1].max() for c in bars for s in c.get_segments()) == pytest.approx(100.0)
    for fig, md in ((stream, "fig_stream.md"), (final, "fig_final.md")):
        for body in (_text(fig), (tmp_path / md).read_text().replace("\n", " ")):
            assert "0–100%" in body and "Clipped: " in body
            assert "order, shapes" in body and "drawn to that bound" in body


def test_a_two_seed_row_shows_each_seed_and_no_t_band(tmp_path, drawn):
    rows = _mixed(tmp_path / "runs")
    write_row_plots(rows, tmp_path / "fig")
    shapes = drawn["fig_stream.png"].axes[0]
    mskm = next(ln for ln in shapes.get_lines() if ln.get_label() == "mskm")
    color = mskm.get_color()
    hollow = [ln for ln in shapes.get_lines()
              if ln.get_markerfacecolor() == "none" and ln.get_markeredgecolor() == color]  # fmt: skip
    # one set of markers per seed, at each seed's accuracy after domains 1 and 2
    assert sorted(tuple(np.round(ln.get_ydata(), 6)) for ln in hollow) == [(55, 50), (75, 70)]
    # no band in mskm's colour: the only bands are the 5-seed row's
    from matplotlib.colors import to_rgb

    band_colors = {to_rgb(c.get_facecolor()[0]) for c in shapes.collections if c.get_paths()
                   and len(c.get_facecolor())}  # fmt: skip
    assert to_rgb(color) not in band_colors and len(band_colors) == 1
    # the bars: two white-filled seed markers on each of mskm's bars, no error bar of its own
    final = drawn["fig_final.png"].axes[0]
    seeds = [ln for ln in final.get_lines() if ln.get_markerfacecolor() == "white"]
    assert sorted(v for ln in seeds for v in ln.get_ydata()) == pytest.approx(
        [40.0, 45.0, 50.0, 70.0]
    )


def test_equal_rows_of_one_method_are_both_visible(tmp_path, drawn):
    """Two rows of one method share its colour, marker and hatch and differ in dashes."""
    same = [(0.6, 0.5), (0.7, 0.55)]
    runs(tmp_path / "runs", "order", same)
    runs(tmp_path / "runs", "order", same, gamma=0.05)  # another row, the same values
    rows = aggregate_results(find_results([tmp_path / "runs"]))
    assert rows[0]["per_domain"] == rows[1]["per_domain"]
    write_row_plots(rows, tmp_path / "fig")
    shapes = drawn["fig_stream.png"].axes[0]
    a, b = (ln for ln in shapes.get_lines() if not ln.get_label().startswith("_"))
    assert a.get_marker() == b.get_marker() and a.get_linestyle() != b.get_linestyle()
    assert a.get_color() == b.get_color()
    assert list(a.get_ydata()) == list(b.get_ydata())
    assert all(xa < xb for xa, xb in zip(a.get_xdata(), b.get_xdata()))  # side by side
    patches = drawn["fig_final.png"].axes[0].patches
    assert len({p.get_hatch() for p in patches}) == 1  # the bars: the method's hatch
    assert len({p.get_linestyle() for p in patches}) == 2  # each row its edge dashes
    assert len({p.get_alpha() for p in patches}) == 2  # and shade


def test_the_caption_says_what_each_rows_marks_are(tmp_path, drawn):
    rows = _mixed(tmp_path / "runs")
    write_row_plots(rows, tmp_path / "fig", caption_inside=True)
    want = [
        "Rows of 3+ seeds — order (seeds 0, 1, 2, 3, 4)",
        "95% Student-t interval over seeds",
        "Rows of 2 seeds — mskm (seeds 0, 1)",
        "each seed's value, no interval drawn",
        "Rows of 1 seed — semi-der (seed 0)",
        "95% interval over that run's test episodes",
        "Protocol (every row): ",
        "Data: synthetic, content c0ffee.",
        "Code: every run was made by aaaaaaa.",
    ]
    for fig, md in (("fig_stream.png", "fig_stream.md"), ("fig_final.png", "fig_final.md")):
        for body in (_text(drawn[fig]), (tmp_path / md).read_text().replace("\n", " ")):
            for piece in want:
                assert piece in body, (md, piece)
    assert "shaded band" in _text(drawn["fig_stream.png"])
    assert "solid error bars" in _text(drawn["fig_final.png"])


def test_formats_writes_the_files_asked(tmp_path, capsys):
    runs(tmp_path / "runs", "order", [(0.6, 0.5), (0.7, 0.55)])
    out = tmp_path / "paper" / "t"
    assert (
        main(["table", str(tmp_path / "runs"), "--out", str(out), "--formats", "pdf", "svg"]) == 0
    )
    for fig in ("t_stream", "t_final"):
        assert (out.parent / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out.parent / f"{fig}.pdf").read_bytes()[:5] == b"%PDF-"
        assert b"<svg" in (out.parent / f"{fig}.svg").read_bytes()[:2000]
    assert main(["table", str(tmp_path / "runs"), "--out", str(tmp_path / "png" / "t")]) == 0
    assert sorted(p.suffix for p in (tmp_path / "png").glob("t_final.*")) == [".csv", ".md", ".png"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--out", "OUT", "--formats", "png", "jpg"], "unknown figure format(s) 'jpg'"),
        (["--formats", "pdf"], "add --out OUT"),
    ],
)
def test_a_bad_formats_flag_is_refused_before_reading_records(argv, says, tmp_path, capsys,
                                                             monkeypatch):  # fmt: skip
    def no_reading(*_):
        raise AssertionError("records were read")

    monkeypatch.setattr(report, "find_results", no_reading)
    argv = [a.replace("OUT", str(tmp_path / "t")) for a in argv]
    assert main(["table", str(tmp_path / "runs"), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert not list(tmp_path.glob("t*"))


def test_the_python_api_refuses_an_unknown_format_before_drawing(tmp_path):
    runs(tmp_path / "runs", "order", [(0.6, 0.5)])
    rows = aggregate_results(find_results([tmp_path / "runs"]))
    with pytest.raises(ValueError, match=r"'eps'.*png, pdf, svg"):
        write_row_plots(rows, tmp_path / "fig", formats=["png", "eps"])
    with pytest.raises(ValueError, match="list of names"):
        write_row_plots(rows, tmp_path / "fig", formats="pdf")
    assert not list(tmp_path.glob("fig*"))
    assert [p.name for p in write_row_plots(rows, tmp_path / "fig", formats=["svg"])][-2:] == [
        "fig_stream.svg",
        "fig_final.svg",
    ]
