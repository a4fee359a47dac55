from PIL import Image

from avalanche_sets import sets_benchmark
from avalanche_sets.data.visualize import plot_episodes


def test_plot_episodes_one_block_per_domain(tmp_path):
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "blobs"], n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=2, n_test_episodes=2,
    )  # fmt: skip
    path = plot_episodes(bench, tmp_path / "eps.png", stream="test")
    w, h = Image.open(path).size
    assert w > 400 and h > 2 * 4 * 50  # 2 domains x 4 rows
