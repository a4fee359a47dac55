"""Reads what a run's file loggers left, without the network: an offline W&B run's
``run-<id>.wandb`` file, the TensorBoard event files of ``tb/`` and the CSV files of ``csv/``."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

_MAGIC = b":W&B" + struct.pack("<H", 0xBEE1)
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: str | Path):
    """The ``wandb_internal_pb2.Record`` messages of a ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:6] == _MAGIC, f"{path}: not a W&B transaction log ({data[:7]!r})"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind in (_FULL, _FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def history(path: str | Path) -> list[dict]:
    """Every history row (``wandb.log``) of an offline run: ``{"_step": ..., name: value}``."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            row = {}
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                row[key] = json.loads(item.value_json)
            if record.history.HasField("step"):
                row.setdefault("_step", record.history.step.num)
            rows.append(row)
    return rows


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every TensorBoard scalar of a run folder's ``tb/`` (all its event files) as
    ``tag -> [(step, value), ...]`` in the order TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def csv_rows(folder: Path, name: str) -> list[dict]:
    """The rows of the CSV logger's file ``name`` in a run folder's ``csv/``."""
    with open(folder / "csv" / name) as f:
        return list(csv.DictReader(f))
