"""The running-time benchmark: interleaved timing of real training iterations, and its report."""

from benchmarks import running_time


def test_times_every_method_for_the_asked_iterations():
    times = running_time.time_methods(
        ("mskm", "order"), n_ood=5, iters=4, warm=2, source="synthetic"
    )
    assert set(times) == {"mskm", "order"}
    for ts in times.values():
        assert len(ts) == 4  # the warm-up is not timed
        assert all(t > 0 for t in ts)


def test_report_gives_ratios_to_mskm_and_the_papers(tmp_path):
    saved = {
        "command": "x", "date": "d", "seeds": [0], "source": "synthetic", "iters": 4, "warm": 2,
        "machine": {"cpu": "c", "cores": 2, "torch": "t", "torch_threads": 1},
        "rows": [
            {"R": 50, "method": "mskm", "median_s_per_iter": 0.5, "iqr_s": 0.1, "iterations": 4},
            {"R": 50, "method": "order", "median_s_per_iter": 1.0, "iqr_s": 0.1, "iterations": 4},
        ],
    }  # fmt: skip
    running_time.report(saved, tmp_path)
    md = (tmp_path / "README.md").read_text()
    assert "| 50 | mskm | 100 (IQR 20) | 1.00 | 43 | 1.00 |" in md
    assert "| 50 | order | 200 (IQR 20) | 2.00 | 71 | 1.65 |" in md
    assert (tmp_path / "running_time.png").stat().st_size > 0
