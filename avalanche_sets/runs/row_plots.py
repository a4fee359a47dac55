"""Pictures of a table's rows (``avalanche-sets table --out``), each captioned with the protocol
the rows share.

:func:`write_row_plots` draws what :func:`~.report.aggregate_results` computed: each domain's
accuracy along the stream and the final accuracy per domain, with the data of each picture
beside it as CSV and its caption (:func:`~.report.protocol_lines`: the settings every row
shares, the data, the numeric path, the code) both under the picture and beside it as
markdown, so that a picture copied on its own still says what it shows. matplotlib loads in the
function that draws.
"""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import numpy as np

from .report import _domains, _labels, fit_title, protocol_lines, row_label

__all__ = ["write_row_plots"]


def _caption(fig, lines: list[str], width: int) -> float:
    """Write ``lines`` (wrapped to ``width`` characters) at the foot of ``fig``, growing the
    figure to hold them; returns the fraction of its height they take."""
    text = "\n".join(w for line in lines for w in textwrap.wrap(line, width))
    extra = 0.16 * (text.count("\n") + 1) + 0.15  # inches: 7-point lines
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + extra)
    fig.text(0.01, 0.01, text, fontsize=7, va="bottom", ha="left", family="monospace")
    return extra / (h + extra)


def _write_caption(png: Path, title: str, lines: list[str]) -> Path:
    """``<png stem>.md`` beside the picture: its title, the picture, its caption."""
    path = png.with_suffix(".md")
    path.write_text(f"# {title}\n\n![{title}]({png.name})\n\n" + "".join(f"{x}  \n" for x in lines))
    return path


def _stream_points(rows: list[dict], labels: list[str]) -> list[dict]:
    """Each row's accuracy on each domain from its own training to the end of the stream."""
    points = []
    for r in rows:
        if "matrix" not in r:  # the seeds' matrices differ in shape: no mean to draw
            continue
        m, h = np.asarray(r["matrix"]), np.asarray(r["matrix_ci95"])
        doms = list(r["per_domain"])
        one_row = m.shape[0] < len(doms)  # Joint: one row, every domain trained at once
        for j, dom in enumerate(doms):
            for i in [m.shape[0] - 1] if one_row else range(j, m.shape[0]):
                points.append({
                    "row": row_label(r, labels), "domain": dom,
                    "trained_at": "" if one_row else j + 1,
                    "after_domain": len(doms) if one_row else i + 1,
                    "accuracy_pct": 100 * m[i, j], "ci95_pct": 100 * h[i, j],
                    "seeds": r["seeds"],
                })  # fmt: skip
    return points


def _final_points(rows: list[dict], labels: list[str]) -> list[dict]:
    return [
        {"row": row_label(r, labels), "domain": d, "accuracy_pct": 100 * v,
         "ci95_pct": 100 * r["per_domain_ci95"][d], "ci_over": r["ci_over"],
         "seeds": r["seeds"]}
        for r in rows for d, v in r["per_domain"].items()
    ]  # fmt: skip


def _write_points(points: list[dict], path: Path) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(points[0]) if points else ["row"])
        w.writeheader()
        w.writerows(points)
    return path


def _seeds_note(rows: list[dict]) -> str:
    sets = {tuple(r["seed_list"]) for r in rows}
    if len(sets) == 1:
        seeds = sets.pop()
        return f"mean over seeds {', '.join(map(str, seeds))}" + (
            ", band: 95% t-interval over seeds" if len(seeds) > 1 else ""
        )
    return "means over each row's seeds: the table's seeds column"


def write_row_plots(rows: list[dict], out: str | Path) -> list[Path]:
    """Pictures of a table's rows, each with the data it plots beside it as CSV:

    * ``<out>_stream.png`` / ``.csv`` — one panel per domain: each row's accuracy on it from
      its own training to the end of the stream (the mean over seeds, a band of the 95%
      t-interval over seeds; a one-row matrix such as Joint's is a star at the end);
    * ``<out>_final.png`` / ``.csv`` — the final accuracy on every domain per row (error bars:
      the 95% interval over seeds, or over test episodes for one seed).

    Each picture carries :func:`~.report.protocol_lines` under it and beside it as
    ``<out>_stream.md`` / ``<out>_final.md`` (title, picture, caption). Long row names wrap
    (:func:`~.report.fit_title`). Returns the six paths: the pictures, their data, their
    captions.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: pictures only
    from matplotlib.figure import Figure

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    labels, domains = _labels(rows), _domains(rows)
    names = {row_label(r, labels): fit_title(row_label(r, labels), 40) for r in rows}
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    stream, final = _stream_points(rows, labels), _final_points(rows, labels)
    paths = [_write_points(stream, out.with_name(out.name + "_stream.csv")),
             _write_points(final, out.with_name(out.name + "_final.csv"))]  # fmt: skip

    cols = min(len(domains), 3)
    n_panels = (len(domains) + cols - 1) // cols
    fig = Figure(figsize=(5 * cols, 3.8 * n_panels + 1.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_panels, cols, squeeze=False)
    for ax in axes.flat[len(domains) :]:
        ax.axis("off")
    for ax, dom in zip(axes.flat, domains):
        for name in names:
            pts = [p for p in stream if p["row"] == name and p["domain"] == dom]
            if not pts:
                continue
            x = np.array([p["after_domain"] for p in pts])
            y, e = (np.array([p[k] for p in pts]) for k in ("accuracy_pct", "ci95_pct"))
            joint = pts[0]["trained_at"] == ""
            style = {"marker": "*", "markersize": 12, "ls": ""} if joint else {"marker": "o"}
            ax.plot(x, y, color=colors[name], label=names[name], **style)
            ax.fill_between(x, y - e, y + e, color=colors[name], alpha=0.15, lw=0)
        ax.set_title(fit_title(dom, 40), fontsize=10)
        ax.set_xlabel("after training domain #")
        ax.set_ylabel("test accuracy (%)")
        ax.set_xticks(range(1, len(domains) + 1))
        ax.set_ylim(max(ax.get_ylim()[0], 0), min(ax.get_ylim()[1], 100))
        ax.grid(alpha=0.3)
    handles = {h.get_label(): h for ax in axes.flat for h in ax.get_lines()
               if not h.get_label().startswith("_")}  # fmt: skip
    caption = protocol_lines(rows)
    foot = _caption(fig, caption, 13 * 5 * cols)
    fig.legend(list(handles.values()), list(handles), loc="lower center", fontsize=8,
               ncol=min(len(handles), 3), frameon=False, bbox_to_anchor=(0.5, foot))  # fmt: skip
    legend_rows = (len(handles) + 2) // 3 * max(n.count("\n") + 1 for n in names.values())
    titles = [
        "Each domain's accuracy from its own training to the end of the stream "
        f"({_seeds_note(rows)}); a falling line is forgetting",
        f"Final accuracy per domain after the whole stream ({_seeds_note(rows)})",
    ]
    fig.suptitle(fit_title(titles[0], 30 * cols))
    legend = min(0.03 * legend_rows + 0.02, 0.4) * (1 - foot)
    fig.tight_layout(rect=(0, foot + legend, 1, 1))
    paths.insert(0, out.with_name(out.name + "_stream.png"))
    fig.savefig(paths[0], dpi=110)

    fig = Figure(figsize=(max(6.0, 0.9 * len(domains) * max(len(rows), 2) * 0.5 + 3), 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        pts = {p["domain"]: p for p in final if p["row"] == name}
        xs = [j + (k - (len(names) - 1) / 2) * width for j, d in enumerate(domains) if d in pts]
        ys = [pts[d]["accuracy_pct"] for d in domains if d in pts]
        es = [np.nan_to_num(pts[d]["ci95_pct"]) for d in domains if d in pts]
        ax.bar(xs, ys, width, yerr=es, capsize=2, color=colors[name], label=names[name])
    ax.set_xticks(range(len(domains)), [fit_title(d, 16) for d in domains], fontsize=8)
    ax.set_ylabel("final test accuracy (%)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    ax.set_title(fit_title(titles[1], int(11 * fig.get_figwidth())), fontsize=10)
    foot = _caption(fig, caption, int(13 * fig.get_figwidth()))
    fig.tight_layout(rect=(0, foot, 1, 1))
    paths.insert(1, out.with_name(out.name + "_final.png"))
    fig.savefig(paths[1], dpi=110)
    return paths + [_write_caption(png, title, caption) for png, title in zip(paths, titles)]
