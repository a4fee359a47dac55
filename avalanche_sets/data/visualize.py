"""Pictures of episodes: one row each for support, query, unlabeled ID and unlabeled OOD."""

from __future__ import annotations

from pathlib import Path

__all__ = ["plot_episodes"]


def plot_episodes(
    benchmark, path: str | Path, *, stream: str = "train", index: int = 0, max_per_row: int = 12
) -> Path:
    """Save one episode of every domain of ``benchmark`` as a picture.

    Each domain gets four rows — support (labeled, with its class), query, unlabeled
    in-distribution and unlabeled OOD images (the split uses the episode's ground truth: this
    is a picture for people, not something a learner sees).
    """
    # matplotlib is heavy to import and only this picture needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    exps = list(getattr(benchmark, f"{stream}_stream"))
    rows = []
    for exp in exps:
        ep = exp.dataset[index]
        ood = ep.oracle.unlabeled_is_ood.numpy()
        u = ep.unlabeled_x.numpy()
        rows += [
            (f"{exp.domain_name}\nsupport", ep.support_x.numpy(), ep.support_y.numpy()),
            ("query", ep.query_x.numpy(), ep.query_y.numpy()),
            ("unlabeled ID", u[~ood], None),
            ("unlabeled OOD", u[ood], None),
        ]
    fig = Figure(figsize=(max_per_row * 0.75 + 1.6, len(rows) * 0.8))
    FigureCanvasAgg(fig)
    for r, (label, images, labels) in enumerate(rows):
        for c in range(max_per_row):
            ax = fig.add_subplot(len(rows), max_per_row + 1, r * (max_per_row + 1) + c + 2)
            ax.set_axis_off()
            if c < len(images):
                ax.imshow(images[c], interpolation="nearest")
                if labels is not None:
                    ax.set_title(str(int(labels[c])), fontsize=6, pad=1)
        ax = fig.add_subplot(len(rows), max_per_row + 1, r * (max_per_row + 1) + 1)
        ax.set_axis_off()
        ax.text(
            1.0,
            0.5,
            f"{label} ({len(images)})",
            ha="right",
            va="center",
            fontsize=7,
            transform=ax.transAxes,
        )
    fig.suptitle(
        f"one {stream} episode per domain (first {max_per_row} images of each set)", fontsize=9
    )
    fig.subplots_adjust(left=0.07, right=0.99, top=0.97, bottom=0.01, wspace=0.05, hspace=0.35)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
