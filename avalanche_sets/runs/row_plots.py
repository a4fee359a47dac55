"""Pictures of a table's rows (``avalanche-sets table --out``) that a paper can print, each
captioned with what every mark is and the protocol the rows share.

:func:`write_row_plots` draws what :func:`~.report.aggregate_results` computed: each domain's
accuracy along the stream and the final accuracy per domain. The rules that keep them
readable and honest:

* **one bounded axis**: accuracy runs 0–100% on every panel (shared); an interval that reaches
  past what an accuracy can take is drawn to the bound, and the caption names each one clipped
  with its unclipped range;
* **an interval only where it says something**: a row of at least :data:`MIN_SEEDS_FOR_BAND`
  seeds carries its 95% Student-t interval over seeds (a band, an error bar); a row of two seeds
  carries each seed's value as a hollow marker instead (its t-interval, t₀.₉₇₅ = 12.7, would
  cover the axis); a row of one seed carries the 95% interval over its test episodes (dotted
  error bars). The caption says which rows are which;
* **one look per method**: a method has one colour, marker and hatch in every figure of a
  project (:func:`.styles.method_style`, from its name, never from row order); rows of one
  method differ in their dashes (bars: edge dashes and shade); every row is offset slightly
  along x, so two rows with the same values sit side by side;
* **names a reader knows**: the legend names each row by :func:`.row_names.row_names` (the
  method, ``--label``; no hash unless two rows differ in nothing else).

The data of each picture is beside it as CSV (the unclipped interval, the clipped one and each
seed's value) and its caption (the marks, the seeds, :func:`~.report.protocol_lines`: the
settings every row shares, the data, the OOD sources, the domain order, the numeric path, the
code) beside it as markdown, where a paper takes its caption from; the picture itself carries
no title and no caption unless asked (``caption_inside``, ``table --caption-inside``).
matplotlib loads in the function that draws.
"""

from __future__ import annotations

import csv
import math
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from .figure_formats import check_formats
from .report import _domains, fit_title, protocol_lines
from .row_names import check_labels, row_method, row_names
from .styles import method_style, variant_dashes

__all__ = ["MIN_SEEDS_FOR_BAND", "TITLES", "write_row_plots"]

#: the fewest seeds whose Student-t interval is drawn (t₀.₉₇₅ is 4.3 for 3 seeds, 12.7 for 2)
MIN_SEEDS_FOR_BAND = 3
#: what an accuracy can take, in percent: the axis of every panel and the clip of an interval
BOUNDS = (0.0, 100.0)
_T2 = "t₀.₉₇₅ = 12.7 for 2 seeds"


def _caption(fig, lines: list[str], width: int) -> float:
    """Write ``lines`` (wrapped to ``width`` characters) at the foot of ``fig``, growing the
    figure to hold them; returns the fraction of its height they take."""
    text = "\n".join(w for line in lines for w in textwrap.wrap(line, width))
    extra = 0.125 * (text.count("\n") + 1) + 0.1  # inches: 7-point lines
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + extra)
    fig.text(0.01, 0.01, text, fontsize=7, va="bottom", ha="left", family="monospace")
    return extra / (h + extra)


def _write_caption(png: Path, title: str, lines: list[str]) -> Path:
    """``<png stem>.md`` beside the picture: its title, the picture, its caption."""
    path = png.with_suffix(".md")
    path.write_text(f"# {title}\n\n![{title}]({png.name})\n\n" + "".join(f"{x}  \n" for x in lines))
    return path


def _kind(row: dict) -> str:
    """What a row's marks are: ``seeds`` (a t-interval over seeds), ``each`` (each seed's
    value) or ``episodes`` (one seed: the interval over its test episodes)."""
    n = row["seeds"]
    return "seeds" if n >= MIN_SEEDS_FOR_BAND else "each" if n > 1 else "episodes"


def _interval(y: float, half: float, kind: str) -> tuple[float, float]:
    """The unclipped interval ``y ± half`` a row of ``kind`` draws; NaN where it draws none."""
    if kind == "each" or not math.isfinite(half):
        return math.nan, math.nan
    return y - half, y + half


def _point(r: dict, name: str, domain: str, y: float, half: float, each: list) -> dict:
    lo, hi = _interval(100 * y, 100 * half, _kind(r))
    return {
        "row": name, "domain": domain, "accuracy_pct": 100 * y, "ci95_pct": 100 * half,
        "interval": {"seeds": "t over seeds", "each": "none (each seed)",
                     "episodes": "over test episodes"}[_kind(r)],
        "low_pct": lo, "high_pct": hi,
        "low_drawn_pct": min(max(lo, BOUNDS[0]), BOUNDS[1]),
        "high_drawn_pct": min(max(hi, BOUNDS[0]), BOUNDS[1]),
        "each_seed_pct": " ".join(f"{100 * v:.10g}" for v in each),
        "seeds": " ".join(map(str, r["seed_list"])),
    }  # fmt: skip


def _stream_points(rows: list[dict], rnames: list[str]) -> list[dict]:
    """Each row's accuracy on each domain from its own training to the end of the stream."""
    points = []
    for r, name in zip(rows, rnames):
        if "matrix" not in r:  # the seeds' matrices differ in shape: no mean to draw
            continue
        m, h = np.asarray(r["matrix"]), np.asarray(r["matrix_ci95"])
        each = np.asarray(r.get("matrix_each", [r["matrix"]]), dtype=np.float64)
        doms = list(r["per_domain"])
        one_row = m.shape[0] < len(doms)  # Joint: one row, every domain trained at once
        for j, dom in enumerate(doms):
            for i in [m.shape[0] - 1] if one_row else range(j, m.shape[0]):
                p = _point(r, name, dom, m[i, j], h[i, j], list(each[:, i, j]))
                points.append({**p, "trained_at": "" if one_row else j + 1,
                               "after_domain": len(doms) if one_row else i + 1})  # fmt: skip
    return points


def _final_points(rows: list[dict], rnames: list[str]) -> list[dict]:
    return [
        {**_point(r, name, d, v, r["per_domain_ci95"][d],
                  r.get("per_domain_each", {}).get(d, [])), "ci_over": r["ci_over"]}
        for r, name in zip(rows, rnames) for d, v in r["per_domain"].items()
    ]  # fmt: skip


def _write_points(points: list[dict], path: Path) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(points[0]) if points else ["row"])
        w.writeheader()
        w.writerows(points)
    return path


def _clipped(points: list[dict], where) -> str:
    """The caption's line on the intervals drawn to a bound of :data:`BOUNDS`."""
    cut = [p for p in points
           if p["low_pct"] < BOUNDS[0] or p["high_pct"] > BOUNDS[1]]  # fmt: skip
    if not cut:
        return "No interval reaches past 0–100%: none is clipped."
    named = [f"{p['row']}, {where(p)} ({p['low_pct']:.1f} to {p['high_pct']:.1f})" for p in cut]
    more = f"; and {len(named) - 8} more (the CSV's low_pct/high_pct)" if len(named) > 8 else ""
    return (
        f"Clipped: {len(cut)} interval(s) reach past the 0–100% an accuracy can take and are "
        f"drawn to that bound: {'; '.join(named[:8])}{more}."
    )


def _marks(rows: list[dict], rnames: list[str], bars: bool) -> list[str]:
    """The caption's lines on what each row's marks are, one per kind of row present, each
    naming its rows and their seeds."""
    by_kind: dict[str, list[str]] = {}
    for r, name in zip(rows, rnames):
        seeds = ", ".join(map(str, r["seed_list"]))
        by_kind.setdefault(_kind(r), []).append(f"{name} (seed{'s' * (r['seeds'] > 1)} {seeds})")
    what = {
        "seeds": ("solid error bars" if bars else "shaded band (edges in the row's dashes; "
                  "a solid error bar on a single point)")
        + ": the 95% Student-t interval over seeds",
        "each": ("white markers on the bar" if bars else "hollow markers")
        + f": each seed's value, no interval drawn (a 2-seed t-interval is too wide to read: {_T2})",
        "episodes": "dotted error bars: the 95% interval over that run's test episodes (one seed: "
        "not over seeds)",
    }  # fmt: skip
    head = {"seeds": f"Rows of {MIN_SEEDS_FOR_BAND}+ seeds", "each": "Rows of 2 seeds",
            "episodes": "Rows of 1 seed"}  # fmt: skip
    return [f"{head[k]} — {'; '.join(by_kind[k])}: {what[k]}." for k in head if k in by_kind]


def _styles(rows: list[dict]) -> list[dict]:
    """Each row's look: its method's colour, marker and hatch (:func:`.styles.method_style`),
    its dashes by its place among its method's rows (:func:`.styles.variant_dashes`)."""
    methods = [row_method(r) for r in rows]
    dashes = variant_dashes(methods)
    return [
        {**method_style(m)._asdict(), "ls": ls, "first": ls == dashes[methods.index(m)]}
        for m, ls in zip(methods, dashes)
    ]


def _save(fig, base: Path, formats: tuple[str, ...]) -> list[Path]:
    """``fig`` as ``base.<format>`` for each format (no date inside: a re-made picture of the
    same rows is the same file)."""
    import matplotlib

    paths = []
    with matplotlib.rc_context({"svg.hashsalt": "avalanche-sets"}):
        for fmt in formats:
            path = base.with_name(f"{base.name}.{fmt}")
            meta = {"png": {}, "pdf": {"CreationDate": None}, "svg": {"Date": None}}[fmt]
            fig.savefig(path, dpi=150, metadata=meta)
            paths.append(path)
    return paths


def _draw_stream(fig, rows, names, styles, domains, stream) -> None:
    cols = min(len(domains), 3)
    axes = fig.subplots((len(domains) + cols - 1) // cols, cols, squeeze=False, sharey=True)
    for ax in axes.flat[len(domains) :]:
        ax.axis("off")
    step = min(0.08, 0.5 / max(len(names), 1))
    for ax, dom in zip(axes.flat, domains):
        for k, name in enumerate(names):
            pts = [p for p in stream if p["row"] == name and p["domain"] == dom]
            if not pts:
                continue
            st, kind = styles[k], _kind(rows[k])
            x = np.array([p["after_domain"] for p in pts]) + (k - (len(names) - 1) / 2) * step
            y, lo, hi = (np.array([p[c] for p in pts])
                         for c in ("accuracy_pct", "low_drawn_pct", "high_drawn_pct"))  # fmt: skip
            joint = pts[0]["trained_at"] == ""
            ax.plot(x, y, color=st["color"], marker="*" if joint else st["marker"],
                    ls="" if joint else st["ls"], ms=11 if joint else 5, lw=1.4,
                    label=names[name], clip_on=False, zorder=3)  # fmt: skip
            if kind == "seeds" and len(x) > 1:
                ax.fill_between(x, lo, hi, color=st["color"], alpha=0.12, lw=0)
                for edge in (lo, hi):
                    ax.plot(x, edge, color=st["color"], ls=st["ls"], lw=0.6, alpha=0.7)
            elif kind != "each" and np.isfinite(lo).any():  # one seed, or a single point
                eb = ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="none", ecolor=st["color"],
                                 capsize=2.5, lw=0.9)  # fmt: skip
                eb[2][0].set_linestyle(":" if kind == "episodes" else "-")
            else:
                for v in zip(*(p["each_seed_pct"].split() for p in pts)):
                    ax.plot(x, np.array(v, dtype=float), ls="", marker=st["marker"], ms=4,
                            mfc="none", mec=st["color"], mew=0.8, clip_on=False, zorder=2)  # fmt: skip
        ax.set_title(fit_title(dom, 40), fontsize=10)
        ax.set_xlabel("after training domain #")
        ax.set_ylabel("test accuracy (%)")
        ax.set_xticks(range(1, len(domains) + 1))
        ax.set_xlim(0.5, len(domains) + 0.5)
        ax.set_ylim(*BOUNDS)
        ax.set_yticks(range(0, 101, 20))
        ax.grid(alpha=0.3)


def _draw_final(ax, rows, names, styles, domains, final) -> None:
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        st, kind = styles[k], _kind(rows[k])
        pts = {p["domain"]: p for p in final if p["row"] == name}
        ds = [d for d in domains if d in pts]
        xs = np.array([domains.index(d) + (k - (len(names) - 1) / 2) * width for d in ds])
        ys, lo, hi = (np.array([pts[d][c] for d in ds])
                      for c in ("accuracy_pct", "low_drawn_pct", "high_drawn_pct"))  # fmt: skip
        ax.bar(xs, ys, width * 0.92, color=st["color"], alpha=0.8 if st["first"] else 0.45,
               edgecolor="black", lw=0.8, ls=st["ls"], hatch=st["hatch"],
               label=names[name])  # fmt: skip
        if kind == "each":
            each = [np.array(pts[d]["each_seed_pct"].split(), dtype=float) for d in ds]
            for x, vs in zip(xs, each):
                off = np.linspace(-width / 5, width / 5, len(vs))
                ax.plot(x + off, vs, ls="", marker=st["marker"], ms=4.5, mfc="white",
                        mec="black", mew=0.8, clip_on=False, zorder=3)  # fmt: skip
        elif np.isfinite(lo).any():
            eb = ax.errorbar(xs, ys, yerr=[ys - lo, hi - ys], fmt="none", ecolor="black",
                             capsize=2.5, lw=0.9)  # fmt: skip
            if kind == "episodes":
                eb[2][0].set_linestyle(":")
    ax.set_xticks(range(len(domains)), [fit_title(d, 16) for d in domains], fontsize=8)
    ax.set_ylabel("final test accuracy (%)")
    ax.set_ylim(*BOUNDS)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(alpha=0.3, axis="y")


TITLES = (
    "Each domain's accuracy from its own training to the end of the stream (mean over each "
    "row's seeds; marks: caption); a falling line is forgetting",
    "Final accuracy per domain after the whole stream (mean over each row's seeds; marks: caption)",
)
"""The pictures' titles: the heading of their ``.md`` caption, in the picture only on request."""


def _captions(rows: list[dict], rnames: list[str], stream: list, final: list) -> list[list]:
    """The caption lines of the stream picture and of the bars picture."""
    protocol = protocol_lines(rows)
    joint = any(p["trained_at"] == "" for p in stream)
    look = ("each method in its own colour and marker (the same in every figure of these "
            "methods), rows of one method in their own dashes")  # fmt: skip
    return [
        ["Lines: each row's mean accuracy on the panel's domain after training domain #x, "
         f"{look}, offset slightly along x so that equal rows stay side by side."
         + (" Star: a row trained on every domain at once (a one-row matrix, e.g. Joint), at "
            "the end of the stream." if joint else ""),
         *_marks(rows, rnames, bars=False),
         "Axis: test accuracy 0–100% on every panel (shared). "
         + _clipped(stream, lambda p: f"{p['domain']} after #{p['after_domain']}"),
         *protocol],
        ["Bars: each row's final accuracy on each domain, the mean over its seeds, each method "
         "in its own colour and hatch (the same in every figure), rows of one method in their "
         "own edge dashes and shade.",
         *_marks(rows, rnames, bars=True),
         "Axis: final test accuracy 0–100%. " + _clipped(final, lambda p: p["domain"]),
         *protocol],
    ]  # fmt: skip


def _stream_figure(rows, names, styles, domains, stream, caption: list | None):
    """The stream picture; ``caption``: its lines, drawn under it with its title (else
    neither)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: pictures only
    from matplotlib.figure import Figure

    cols = min(len(domains), 3)
    n_panels = (len(domains) + cols - 1) // cols
    fig = Figure(figsize=(5 * cols, 3.8 * n_panels + 1.8))  # the legend under the panels
    FigureCanvasAgg(fig)
    _draw_stream(fig, rows, names, styles, domains, stream)
    handles = {h.get_label(): h for ax in fig.axes for h in ax.get_lines()
               if not h.get_label().startswith("_")}  # fmt: skip
    foot = 0.0 if caption is None else _caption(fig, caption, 13 * 5 * cols)
    fig.legend(list(handles.values()), list(handles), loc="lower center", fontsize=8,
               ncol=min(len(handles), 3), frameon=False, bbox_to_anchor=(0.5, foot))  # fmt: skip
    legend_rows = (len(handles) + 2) // 3 * max(n.count("\n") + 1 for n in names.values())
    if caption is not None:
        fig.suptitle(fit_title(TITLES[0], 30 * cols))
    legend = min(0.03 * legend_rows + 0.02, 0.4) * (1 - foot)
    fig.tight_layout(rect=(0, foot + legend, 1, 1))
    return fig


def _final_figure(rows, names, styles, domains, final, caption: list | None):
    """The bars picture; ``caption`` as :func:`_stream_figure`'s."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.0, 0.9 * len(domains) * max(len(rows), 2) * 0.5 + 3), 5.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_final(ax, rows, names, styles, domains, final)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False,
              ncol=min(len(names), 3))  # fmt: skip
    foot = 0.0
    if caption is not None:
        ax.set_title(fit_title(TITLES[1], int(11 * fig.get_figwidth())), fontsize=10)
        foot = _caption(fig, caption, int(13 * fig.get_figwidth()))
    fig.tight_layout(rect=(0, foot, 1, 1))
    return fig


def write_row_plots(
    rows: list[dict],
    out: str | Path,
    *,
    formats: Iterable[str] = ("png",),
    labels: Mapping[str, str] | None = None,
    caption_inside: bool = False,
) -> list[Path]:
    """Pictures of a table's rows, each with the data it plots beside it as CSV:

    * ``<out>_stream.png`` / ``.csv`` — one panel per domain: each row's accuracy on it from
      its own training to the end of the stream (the mean over seeds; a one-row matrix such as
      Joint's is a star at the end);
    * ``<out>_final.png`` / ``.csv`` — the final accuracy on every domain per row (bars).

    Both on an accuracy axis of 0–100% (every panel the same), intervals clipped to it; the
    marks of a row depend on its seeds (module docstring): the Student-t interval over seeds
    from :data:`MIN_SEEDS_FOR_BAND` seeds, each seed's value for two, the interval over test
    episodes for one. Each picture's caption (the marks of each kind of row with its rows and
    seeds, the axis, the intervals clipped, and :func:`~.report.protocol_lines`) is beside it
    as ``<out>_stream.md`` / ``<out>_final.md`` (title, picture, caption); ``caption_inside``
    draws the title and caption into the picture too (a paper sets its own). Rows are named by
    :func:`.row_names.row_names` with ``labels`` (``--label``), styled by method
    (:mod:`.styles`); long names wrap (:func:`~.report.fit_title`).

    ``formats``: the files of each picture (:data:`.figure_formats.FORMATS`): PNG always, and
    ``"pdf"`` / ``"svg"`` when named. Returns the pictures' PNGs, their data, their captions,
    then any PDF/SVG copies.

    Raises:
        ValueError: an unknown format (before anything is drawn), a ``labels`` key no row has
            (:func:`.row_names.check_labels`).
    """
    formats = check_formats(formats)
    check_labels(rows, labels or {})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    domains, rnames, styles = _domains(rows), row_names(rows, labels), _styles(rows)
    names = {n: fit_title(n, 40) for n in rnames}
    stream, final = _stream_points(rows, rnames), _final_points(rows, rnames)
    data = [_write_points(stream, out.with_name(out.name + "_stream.csv")),
            _write_points(final, out.with_name(out.name + "_final.csv"))]  # fmt: skip
    captions = _captions(rows, rnames, stream, final)
    inside = captions if caption_inside else [None, None]
    figs = [_stream_figure(rows, names, styles, domains, stream, inside[0]),
            _final_figure(rows, names, styles, domains, final, inside[1])]  # fmt: skip
    pictures = [_save(fig, out.with_name(f"{out.name}_{part}"), formats)
                for fig, part in zip(figs, ("stream", "final"))]  # fmt: skip
    pngs = [p[0] for p in pictures]
    written = [_write_caption(png, t, c) for png, t, c in zip(pngs, TITLES, captions)]
    return [*pngs, *data, *written, *(p for pics in pictures for p in pics[1:])]
