"""What ORDER's replay memory costs in a checkpoint: tasks as pixels vs. tasks as indices.

A paper-like memory — ``--tasks`` (200, the paper's M) episodes of the paper's shape (5-way
1-shot, Q = 15, Z = 10, R = 50: 180 images an episode) at ``--image-size`` (84) px, drawn by the
real sampler of a synthetic domain, each with float32 features of ``|S| + |U|`` rows of the
paper backbone's 256 dimensions (zeros: their values do not change their size) — is put in a
:class:`~avalanche_sets.order.FeatureReservoirReplayPlugin` twice: once holding every task's
uint8 images (how a task no sampler can regenerate is stored), once holding each task as its
episode index (:class:`~avalanche_sets.order.replay.EpisodeSource`, how a task the stream's
sampler drew is stored). Each memory's ``state_dict()`` is written the way
:func:`~avalanche_sets.training.save_checkpoint` writes a checkpoint (plain-data conversion,
``torch.save`` to memory, SHA-256 of the payload, atomic write with fsync), and the bytes and
the seconds of that write are recorded (best of ``--repeats``).

    python -m benchmarks.memory_checkpoint [--tasks 200] [--image-size 84] [--repeats 3]

Writes ``benchmarks/results/memory_checkpoint/``: ``results.json`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import tempfile
import time
from pathlib import Path

import torch

from avalanche_sets.defaults import MEM_SIZE
from avalanche_sets.files import atomic_write
from avalanche_sets.order import FeatureReservoirReplayPlugin
from avalanche_sets.order.replay import EpisodeSource, MemoryTask
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training.checkpoint import _to_plain
from benchmarks._common import header_md, out_dir, provenance, write_json

FEATURE_DIM = 256  # the paper backbone at 84 px: 64 filters x 2 x 2


def filled_memory(tasks: int, image_size: int) -> tuple[FeatureReservoirReplayPlugin, dict]:
    """A memory of ``tasks`` episodes of one synthetic domain, stored as indices."""
    preset = resolve_preset(
        "paper", source="synthetic", image_size=image_size, tasks_per_domain=tasks,
        domains=["shapes"], n_val_episodes=1, n_test_episodes=1, device="cpu",
    )  # fmt: skip
    exp = build_benchmark(preset, seed=0).train_stream[0]
    sampler = exp.sampler
    plugin = FeatureReservoirReplayPlugin(mem_size=tasks, replay_batch=2, seed=0)
    for i in range(tasks):
        episode = sampler.sample(i)
        n_feat = episode.support_x.shape[0] + episode.unlabeled_x.shape[0]
        plugin.reservoir.offer(
            MemoryTask(
                source=EpisodeSource(experience=0, index=i, sampler=repr(sampler)),
                sampler=sampler,
                support_y=episode.support_y,
                query_y=episode.query_y,
                unlabeled_id=torch.ones(episode.unlabeled_x.shape[0], dtype=torch.bool),
                features=torch.zeros(n_feat, FEATURE_DIM),
            )
        )
    shape = {
        "images_per_episode": int(n_feat + episode.query_x.shape[0]),
        "image_size": image_size,
        "feature_rows": int(n_feat),
        "feature_dim": FEATURE_DIM,
        "config": repr(sampler.config),
    }
    return plugin, shape


def with_images(plugin: FeatureReservoirReplayPlugin) -> FeatureReservoirReplayPlugin:
    """The same memory holding every task's images."""
    out = FeatureReservoirReplayPlugin(mem_size=plugin.mem_size, replay_batch=2, seed=0)
    for task in plugin.tasks:
        out.reservoir.offer(task.with_images())
    return out


def checkpoint_cost(plugin: FeatureReservoirReplayPlugin, folder: Path, repeats: int) -> dict:
    """Bytes and best seconds of writing the memory's state as a checkpoint writes it."""
    best = float("inf")
    size = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        buffer = io.BytesIO()
        torch.save(_to_plain({"memory": plugin.state_dict()}, "the memory"), buffer)
        payload = buffer.getvalue()
        header = hashlib.sha256(payload).hexdigest().encode() + b"\n"
        atomic_write(folder / "memory.ckpt", header + payload, single_writer=True)
        best = min(best, time.perf_counter() - t0)
        size = len(header) + len(payload)
        del buffer, payload
    return {"bytes": size, "save_seconds": round(best, 4), "memory_bytes": plugin.memory_bytes()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.memory_checkpoint", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--tasks", type=int, default=MEM_SIZE)
    parser.add_argument("--image-size", type=int, default=84)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    prov = provenance(seeds=[0])
    by_index, shape = filled_memory(args.tasks, args.image_size)
    by_pixels = with_images(by_index)
    for a, b in zip(by_index.tasks, by_pixels.tasks):  # the same pixels either way
        assert all(torch.equal(x, y) for x, y in zip(a.images(), b.images()))
    with tempfile.TemporaryDirectory(prefix="memory_checkpoint_") as tmp:
        rows = {
            "pixels": checkpoint_cost(by_pixels, Path(tmp), args.repeats),
            "indices": checkpoint_cost(by_index, Path(tmp), args.repeats),
        }
    ratio = rows["pixels"]["bytes"] / rows["indices"]["bytes"]
    out = out_dir("memory_checkpoint")
    write_json(
        out / "results.json",
        {**prov, "tasks": args.tasks, "shape": shape, "repeats": args.repeats, "memory": rows,
         "size_ratio": round(ratio, 1)},
    )  # fmt: skip
    mb = lambda n: f"{n / 1e6:,.1f} MB"  # noqa: E731
    lines = [
        header_md("The replay memory in a checkpoint: pixels vs. indices", prov),
        f"{args.tasks} tasks of {shape['images_per_episode']} images at {args.image_size} px "
        f"(5-way 1-shot, Q = 15, Z = 10, R = 50) from the synthetic `shapes` sampler; features "
        f"{shape['feature_rows']} x {FEATURE_DIM} float32 per task (every unlabeled image counted as U_id: an upper bound). The memory's state written "
        "as a checkpoint writes it (plain data, `torch.save`, SHA-256, atomic write with "
        f"fsync), best of {args.repeats}. The CPU's write time; a GPU run adds the copy of the "
        "pixels to the host.\n",
        "| memory tasks stored as | checkpoint bytes | save time | memory held |",
        "|---|---|---|---|",
        *(
            f"| {name} | {mb(r['bytes'])} | {r['save_seconds']:.3f} s | {mb(r['memory_bytes'])} |"
            for name, r in rows.items()
        ),
        f"\nThe checkpoint's memory is {ratio:,.0f}x smaller as indices.",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-6:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
