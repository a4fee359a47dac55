"""A run's file loggers: W&B offline, and TensorBoard, CSV and W&B continued by a resumed run.

An interrupted-and-resumed run must log every value once, at the step (Avalanche's
``clock.train_iterations``) an uninterrupted run logs it at: its TensorBoard scalars and CSV
rows are compared with an uninterrupted run's of the same seed.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets import training
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import CHECKPOINT_FILE, run_precision
from avalanche_sets.runs.record import RunRecord
from avalanche_sets.training.loggers import check_loggers
from avalanche_sets.training.loss_terms import LOSS_TERM_PREFIX

sys.path.insert(0, str(Path(__file__).parent))
from logger_records import csv_rows, history, records, tensorboard_scalars  # noqa: E402

torch.set_num_threads(1)

# two domains of 4 training iterations each (8 tasks, meta-batch 2)
PRESET = resolve_preset(
    "quick", tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2, n_query=2, n_unlabeled=2,
    n_ood=4, width=4, n_blocks=2, image_size=16, domains=["shapes", "strokes"], eval_mb_size=2,
)  # fmt: skip
ITERATIONS = 4


@pytest.fixture(autouse=True)
def offline_wandb(monkeypatch, tmp_path):
    """W&B never touches the network, nor the user's settings."""
    for key in ("WANDB_API_KEY", "WANDB_RUN_ID", "WANDB_PROJECT", "WANDB_ENTITY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))


#: Loss terms logged every 3 iterations of the run and at each domain's end: steps 3, 4, 6, 8.
LOG_EVERY = 3
TERM_STEPS = [3, ITERATIONS, 6, 2 * ITERATIONS]
#: ORDER's own options, given so that the W&B config must show them.
OPTIONS = {"lam": 2e-5}


class _SpreadTerm(SupervisedPlugin):
    """A plugin with its own loss term (``TERM``), as a user's method adds one."""

    TERM = "spread"

    def loss_term(self, strategy):
        state = strategy.iteration.state
        return None if state is None else 1e-3 * state.prototypes.float().pow(2).mean()


def _run(out: Path, loggers=("csv", "tensorboard", "wandb")) -> RunRecord:
    return run_experiment(
        "order", PRESET, seed=0, out_root=out, loggers=loggers, checkpoint_every=1,
        log_every=LOG_EVERY, strategy_overrides=OPTIONS, plugins=[_SpreadTerm()],
    )  # fmt: skip


class _Killed(Exception):
    """Stands in for a kill: the process stops where it is."""


class _Kill(SupervisedPlugin):
    """Raises at a point of the run: during the evaluation after the last domain (its epoch
    metrics and part of the evaluation are logged, after the last checkpoint), or in the middle
    of the last domain's training."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def after_eval_exp(self, strategy, **kwargs):
        if self.where == "evaluation" and strategy.clock.train_exp_counter == 2:
            raise _Killed

    def after_training_iteration(self, strategy, **kwargs):
        if self.where == "training" and strategy.clock.train_iterations == ITERATIONS + 2:
            raise _Killed


def _interrupted_then_resumed(
    out: Path, where: str, monkeypatch, loggers=("csv", "tensorboard", "wandb"), then=None,
    times: int = 1,
) -> dict:  # fmt: skip
    """Runs into ``out`` with ``loggers`` until :class:`_Kill` stops it at ``where`` (``times``
    times, each resuming the previous), then runs it again (with the loggers ``then``, default
    the same): it resumes and finishes."""
    real = training.run_sets

    def killed_run_sets(strategy, *args, **kwargs):
        strategy.plugins.append(_Kill(where))
        return real(strategy, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(training, "run_sets", killed_run_sets)
        for _ in range(times):
            with pytest.raises(_Killed):
                _run(out, loggers)
    (folder,) = {p.parent for p in out.rglob(CHECKPOINT_FILE)}
    assert not (folder / "result.json").exists()
    record = _run(out, loggers if then is None else then)
    assert len(record.provenance.resumes) == 1  # the finishing process resumed once
    return record


def _folder(out: Path) -> Path:
    (result,) = out.rglob("result.json")
    return result.parent


# Values that differ between two runs of one seed: wall time. (The epoch means of the domain a
# resumed run re-enters in its middle do not: their running state is in the checkpoint.)
_NOT_REPRODUCED = ("Time_Epoch",)
# Tags plotted at their own steps: the accuracy matrix by row, the loss terms by interval.
_OWN_STEPS = ("AccMatrix", LOSS_TERM_PREFIX)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("uninterrupted")
    for key, value in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"),
                       ("WANDB_DISABLE_GIT", "true"),
                       ("WANDB_CONFIG_DIR", str(tmp / "wandb-config"))):  # fmt: skip
        mp.setenv(key, value)
    try:
        _run(tmp / "runs")
    finally:
        mp.undo()
    return _folder(tmp / "runs")


def test_the_wandb_logger_writes_an_offline_run_with_the_runs_values(uninterrupted):
    """``--loggers wandb``: an offline W&B run in ``<run>/wandb/`` (no network), holding every
    metric at its step; the values read back are the ones ``result.json`` reports."""
    import json

    (log,) = (uninterrupted / "wandb").glob("offline-run-*/run-*.wandb")
    kinds = [r.WhichOneof("record_type") for r in records(log)]
    assert kinds[0] == "header" and "run" in kinds and kinds[-1] == "exit"
    (run,) = [r.run for r in records(log) if r.WhichOneof("record_type") == "run"]
    assert run.display_name == uninterrupted.name and run.project == "avalanche-sets"
    config = {c.key: json.loads(c.value_json) for c in run.config.update}
    assert config["method"] == "order" and config["tasks_per_domain"] == 8

    rows = {row["_step"]: row for row in history(log)}
    # a row per domain (its last iteration) and per interval of the loss terms
    assert sorted(rows) == TERM_STEPS
    assert [rows[s]["TrainingExperience"] for s in (ITERATIONS, 2 * ITERATIONS)] == [0, 1]
    final = json.loads((uninterrupted / "result.json").read_text())["result"]
    last = rows[2 * ITERATIONS]
    for j, acc in enumerate(final["final"]):
        assert last[f"EpisodeAcc/eval_phase/test_stream/Exp{j:03d}"] == pytest.approx(acc)
    assert 0 < last["Top1_Acc_Epoch/train_phase/train_stream"] <= 1


@pytest.mark.parametrize(
    "where, times", [("evaluation", 1), ("training", 1), ("evaluation", 2)]
)  # fmt: skip
def test_a_resumed_run_logs_every_value_once_at_the_uninterrupted_runs_steps(
    uninterrupted, tmp_path, monkeypatch, where, times
):
    """Stopped during the last evaluation (values at step 8 logged after the last checkpoint),
    in the middle of the last domain, or twice during the evaluation (the second process's
    event file is one the checkpoint never saw), then resumed."""
    _interrupted_then_resumed(tmp_path / "runs", where, monkeypatch, times=times)
    resumed = _folder(tmp_path / "runs")

    # TensorBoard: the same steps for every tag (none twice), the same values
    want, got = tensorboard_scalars(uninterrupted), tensorboard_scalars(resumed)
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        if not tag.startswith(_NOT_REPRODUCED):
            assert got[tag] == points, tag
    # every value at its domain's last iteration (AccMatrix is plotted by matrix row instead),
    # the loss terms at the end of each interval too
    steps = {s for t, points in got.items() if not t.startswith(_OWN_STEPS) for s, _ in points}
    assert steps == {ITERATIONS, 2 * ITERATIONS}
    assert {
        s for t, points in got.items() if t.startswith(LOSS_TERM_PREFIX) for s, _ in points
    } == set(TERM_STEPS)

    # CSV: the first process's rows are kept, none is written twice
    for name in ("training_results.csv", "eval_results.csv", "ood_split.csv"):
        want_rows, got_rows = csv_rows(uninterrupted, name), csv_rows(resumed, name)
        assert len(got_rows) == len(want_rows), name
        assert got_rows == want_rows, name
    rows = csv_rows(resumed, "training_results.csv")
    assert [(r["training_exp"], r["epoch"]) for r in rows] == [("0", "0"), ("1", "0")]
    assert all(float(r["training_accuracy"]) > 0 for r in rows)

    # W&B: one offline run (the stopped process's folder is replaced), each step once, with
    # the uninterrupted run's keys and values
    (log,) = (resumed / "wandb").glob("offline-run-*/run-*.wandb")
    got_rows, (want_log,) = (
        history(log),
        (uninterrupted / "wandb").glob("offline-run-*/run-*.wandb"),
    )
    want_rows = history(want_log)
    assert [r["_step"] for r in got_rows] == [r["_step"] for r in want_rows] == TERM_STEPS
    for a, b in zip(got_rows, want_rows):
        assert sorted(a) == sorted(b), a["_step"]
        skip = ("_runtime", "_timestamp", *_NOT_REPRODUCED)
        assert {k: v for k, v in a.items() if not k.startswith(skip)} == {
            k: v for k, v in b.items() if not k.startswith(skip)
        }, a["_step"]
    assert got_rows[-1]["TrainingExperience"] == 1  # the second domain, as counted


def test_a_checkpoint_without_the_epoch_metrics_state_resumes_with_a_note(
    uninterrupted, tmp_path, monkeypatch
):
    """A checkpoint written before the training metrics' running state was saved still
    resumes; ``log.txt`` says once that the resumed domain's epoch means cover only the
    iterations after the resume, and they do (the domain before it is untouched)."""
    import hashlib

    from avalanche_sets.training.checkpoint import _MAGIC, FORMAT_VERSION, _to_plain

    out = tmp_path / "runs"
    real = training.run_sets

    def killed_then_old(strategy, *args, **kwargs):  # the checkpoint as an older version wrote it
        strategy.plugins.append(_Kill("training"))
        try:
            return real(strategy, *args, **kwargs)
        finally:
            for path in (kwargs["checkpoint_path"], Path(f"{kwargs['checkpoint_path']}.prev")):
                state = training.read_checkpoint(path)
                del state["running_metrics"]
                buffer = io.BytesIO()
                torch.save(_to_plain(state, "the checkpoint"), buffer)
                payload = buffer.getvalue()
                digest = hashlib.sha256(payload).hexdigest().encode()
                path.write_bytes(b"%s %d %s\n" % (_MAGIC, FORMAT_VERSION, digest) + payload)

    with monkeypatch.context() as m:
        m.setattr(training, "run_sets", killed_then_old)
        with pytest.raises(_Killed):
            _run(out)
    _run(out)
    folder = _folder(out)
    log = (folder / "log.txt").read_text()
    notes = [line for line in log.splitlines() if "cover only the iterations after" in line]
    assert len(notes) == 1 and "Top1_Acc_Epoch, Loss_Epoch" in notes[0], notes
    got, want = (
        csv_rows(folder, "training_results.csv"),
        csv_rows(uninterrupted, "training_results.csv"),
    )
    assert got[0] == want[0]  # the domain finished before the checkpoint
    assert got[1]["training_loss"] != want[1]["training_loss"]  # 2 of its 4 iterations


def test_a_history_logger_added_on_resume_is_refused_a_terminal_one_is_not(tmp_path, monkeypatch):
    """A run stopped in its second domain with the terminal logger only: resumed with
    TensorBoard it is refused before anything is opened (``tb/`` would begin at the resume,
    the first domain missing); resumed with another terminal logger it finishes, resuming once."""
    out = tmp_path / "runs"
    real = training.run_sets

    def killed_run_sets(strategy, *args, **kwargs):
        strategy.plugins.append(_Kill("training"))
        return real(strategy, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(training, "run_sets", killed_run_sets)
        with pytest.raises(_Killed):
            _run(out, ("progress",))
    (folder,) = {p.parent for p in out.rglob(CHECKPOINT_FILE)}
    checkpoint = (folder / CHECKPOINT_FILE).read_bytes()
    with pytest.raises(ValueError, match=r"adds tensorboard .*--loggers progress \("):
        _run(out, ("tensorboard",))
    assert not (folder / "tb").exists()
    assert (folder / CHECKPOINT_FILE).read_bytes() == checkpoint
    record = _run(out, ("interactive",))
    assert len(record.provenance.resumes) == 1


def test_the_resume_message_counts_domains_from_1_as_the_progress_bars_do(
    tmp_path, monkeypatch, capsys
):
    """Stopped in the second of two domains, its checkpoint written after one iteration of it,
    the run resumes "at domain 2, iteration 1", as its progress bar names it "domain 2/2"."""
    out = tmp_path / "runs"
    _interrupted_then_resumed(out, "training", monkeypatch, ("progress",))
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("resuming ")]
    assert line.endswith(" at domain 2, iteration 1"), line
    assert line in (_folder(out) / "log.txt").read_text().splitlines()
    assert "domain 2/2" in err


def test_wandb_without_wandb_is_refused_before_anything_runs(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r'pip install "avalanche-sets\[wandb\]"'):
        _run(tmp_path / "runs", loggers=("wandb",))
    assert not (tmp_path / "runs").exists()  # refused before a folder or data was made
    with pytest.raises(ValueError, match="unknown logger"):
        check_loggers(["tensorbored"])


def test_the_run_logs_to_wandb_offline_unless_wandb_mode_says_otherwise(tmp_path, monkeypatch):
    """Without WANDB_MODE a run never needs the network (offline); with it, wandb decides.
    Nothing is started here: the W&B run begins at the first logged value."""
    from avalanche_sets.runs.experiment import evaluator
    from avalanche_sets.training import WandBLogger

    def wandb_mode():
        plugin = evaluator(("wandb",), tmp_path, log_file=io.StringIO())
        (logger,) = [x for x in plugin.loggers if isinstance(x, WandBLogger)]
        assert logger.init_kwargs["dir"] == str(tmp_path)
        assert logger.init_kwargs["name"] == tmp_path.name
        return logger.init_kwargs.get("mode")

    monkeypatch.delenv("WANDB_MODE")
    assert wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "online")
    assert wandb_mode() is None  # wandb reads WANDB_MODE itself
    assert not (tmp_path / "wandb").exists()


def _wandb_run(folder: Path) -> tuple[list[dict], dict]:
    """The history rows and the config of a run folder's (one) offline W&B run."""
    import json

    (log,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    (run,) = [r.run for r in records(log) if r.WhichOneof("record_type") == "run"]
    return history(log), {c.key: json.loads(c.value_json) for c in run.config.update}


def test_wandb_holds_every_value_tensorboard_holds_at_tensorboards_x(uninterrupted):
    """Same run, both loggers: every TensorBoard scalar is in the W&B history with the same
    values at the same x — the accuracy-matrix family (plotted at the matrix row, a step below
    W&B's current one) with its row in ``<family>_step``."""
    tb = tensorboard_scalars(uninterrupted)
    rows, _ = _wandb_run(uninterrupted)
    assert sorted(set(tb) - {k for row in rows for k in row}) == []
    for family in ("AccMatrix/", "AccMatrix_AvgAcc/", "AccMatrix_Forgetting/", "AccMatrix_BWT/"):
        assert any(t.startswith(family) for t in tb), family  # the values W&B used to drop
    for tag, points in tb.items():
        x_field = f"{tag.split('/', 1)[0]}_step"
        got = [(row.get(x_field, row["_step"]), row[tag]) for row in rows if tag in row]
        assert [x for x, _ in got] == [x for x, _ in points], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6), tag
    # the row's own x is logged at the clock's step, where the evaluation after that row ran
    bwt = [row for row in rows if "AccMatrix_BWT/eval_phase/test_stream" in row]
    assert [(r["_step"], r["AccMatrix_BWT_step"]) for r in bwt] == [(2 * ITERATIONS, 1)]


def test_the_wandb_config_holds_the_runs_resolved_settings(uninterrupted):
    """The precision that ran (the preset says ``auto``), the run's own seed (not the preset's
    list of seeds), the strategy options and the added plugins; the record's settings all."""
    import json

    _, config = _wandb_run(uninterrupted)
    assert PRESET.precision == "auto" and config["precision"] == run_precision(PRESET)
    assert config["precision"] in ("fp32", "bf16")
    assert config["seed"] == 0 and "seeds" not in config
    assert config["strategy_options"] == OPTIONS
    assert config["plugins"] == ["_SpreadTerm()"]
    record = json.loads((uninterrupted / "result.json").read_text())
    assert {k: config[k] for k in record["preset"]} == record["preset"]
    assert config["method"] == record["method"] and config["eval_stream"] == "test"


def test_the_loss_terms_reach_every_logger_and_the_run_log(uninterrupted):
    """meta, mi, ot (ORDER's, through its criterion) and a plugin's own ``spread`` term, as
    means over intervals of ``log_every`` iterations and each domain's end: the same values in
    TensorBoard, W&B, ``csv/loss_terms.csv`` and ``log.txt``."""
    import re

    tb = {
        tag[len(LOSS_TERM_PREFIX) :]: points
        for tag, points in tensorboard_scalars(uninterrupted).items()
        if tag.startswith(LOSS_TERM_PREFIX)
    }
    assert set(tb) == {"meta", "mi", "ot", "spread"}
    for term in ("meta", "mi", "spread"):  # every iteration has them
        assert [s for s, _ in tb[term]] == TERM_STEPS, term
    assert 2 * ITERATIONS in [s for s, _ in tb["ot"]]  # ot: only iterations that replay
    want = {(s, term): v for term, points in tb.items() for s, v in points}

    rows, _ = _wandb_run(uninterrupted)
    wandb = {
        (row["_step"], k[len(LOSS_TERM_PREFIX) :]): v
        for row in rows
        for k, v in row.items()
        if k.startswith(LOSS_TERM_PREFIX)
    }
    term_rows = csv_rows(uninterrupted, "loss_terms.csv")
    in_csv = {(int(r["step"]), r["term"]): float(r["value"]) for r in term_rows}
    assert {r["training_exp"] for r in term_rows} == {"0", "1"}
    log = (uninterrupted / "log.txt").read_text()
    in_log = {
        (int(step), term): float(value)
        for step, line in re.findall(r"^loss terms at iteration (\d+): (.*)$", log, re.M)
        for term, value in (pair.split("=") for pair in line.split())
    }
    for name, got, rel in (("W&B", wandb, 1e-6), ("CSV", in_csv, 1e-5), ("log.txt", in_log, 1e-3)):
        assert sorted(got) == sorted(want), name
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=rel, abs=1e-9), (name, key)


def test_the_ood_split_reaches_every_logger_and_the_record(uninterrupted):
    """ORDER's OOD split against the oracle (``OOD_AUROC``, ``OOD_Precision``, ``OOD_Recall``
    of every domain and pooled over the stream), after each domain and at the final
    evaluation: the same values in TensorBoard, W&B, ``csv/ood_split.csv`` and ``log.txt``, the
    final ones in ``result.json``'s ``ood_split``."""
    import json
    import re

    tb = {t: p for t, p in tensorboard_scalars(uninterrupted).items() if t.startswith("OOD_")}
    names = {"AUROC": "auroc", "Precision": "precision", "Recall": "recall"}
    assert sorted(tb) == sorted(
        f"OOD_{m}/eval_phase/test_stream{e}" for m in names for e in ("/Exp000", "/Exp001", "")
    )
    assert all([s for s, _ in points] == [ITERATIONS, 2 * ITERATIONS] for points in tb.values())
    want = {(s, tag): v for tag, points in tb.items() for s, v in points}

    record = json.loads((uninterrupted / "result.json").read_text())["ood_split"]
    assert record["domains"] == ["shapes", "strokes"]
    for m, key in names.items():
        final = [
            want[(2 * ITERATIONS, f"OOD_{m}/eval_phase/test_stream/Exp{j:03d}")] for j in (0, 1)
        ]
        assert record[key] == pytest.approx(final, rel=1e-6), key
        pooled = want[(2 * ITERATIONS, f"OOD_{m}/eval_phase/test_stream")]
        assert record["pooled"][key] == pytest.approx(pooled, rel=1e-6), key

    rows = csv_rows(uninterrupted, "ood_split.csv")
    measure = {v: k for k, v in names.items()}
    in_csv = {
        (int(r["step"]), f"OOD_{measure[r['measure']]}/eval_phase/{r['stream']}_stream"
         + (f"/Exp{int(r['eval_exp']):03d}" if r["eval_exp"] else "")): float(r["value"])
        for r in rows
    }  # fmt: skip
    assert len(rows) == len(want) and {r["training_exp"] for r in rows} == {"0", "1"}
    wandb_rows, _ = _wandb_run(uninterrupted)
    wandb = {(r["_step"], k): v for r in wandb_rows for k, v in r.items() if k.startswith("OOD_")}
    log = (uninterrupted / "log.txt").read_text()
    in_log: dict[str, list[float]] = {}  # log.txt: 4 decimals, one line per evaluation
    for tag, value in re.findall(r"^\t(OOD_\S+) = ([\d.]+)$", log, re.M):
        in_log.setdefault(tag, []).append(float(value))
    assert sorted(in_log) == sorted(tb)
    for tag, points in tb.items():
        assert in_log[tag] == pytest.approx([v for _, v in points], abs=1e-4), tag
    for name, got in (("CSV", in_csv), ("W&B", wandb)):
        assert sorted(got) == sorted(want), name
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-5), (name, key)


def test_loggers_a_finished_run_did_not_have_are_refused_with_the_fix(uninterrupted, tmp_path):
    """A finished run is not run again: a file logger it ran without would write nothing, so
    it is refused (naming the fix); the loggers it ran with are accepted."""
    import shutil

    out = tmp_path / "runs"
    root = next(p for p in uninterrupted.parents if p.name == "runs")
    folder = out / uninterrupted.relative_to(root)
    shutil.copytree(uninterrupted, folder)
    assert _run(out, loggers=("csv", "tensorboard", "wandb")).status == "finished before"
    shutil.rmtree(folder / "tb")
    with pytest.raises(ValueError, match=r"without the tensorboard logger.*tb/.*fix: .*--out"):
        _run(out, loggers=("csv", "tensorboard"))
    assert not (folder / "tb").exists()


def test_a_run_started_over_clears_the_offline_runs_an_earlier_attempt_left(tmp_path):
    """A run folder's ``wandb/`` is its own (``own_folder``, as ``run`` makes it): an attempt
    that starts from the beginning (no checkpoint) removes the offline runs of earlier attempts,
    so ``wandb sync`` uploads one run; a shared folder keeps every run."""
    from avalanche.evaluation.metric_results import MetricValue

    from avalanche_sets.training import WandBLogger

    def attempt(**kwargs) -> str:
        logger = WandBLogger(run_name="r", dir=tmp_path, mode="offline", **kwargs)
        logger.log_metrics([MetricValue(None, "a", 1.0, 1)])
        run_id = logger.state_dict()["id"]
        logger.close()
        return run_id

    def ids() -> list[str]:
        return sorted(p.name.rsplit("-", 1)[1] for p in (tmp_path / "wandb").glob("offline-run-*"))

    attempt(own_folder=True)
    second = attempt(own_folder=True)
    assert ids() == [second]
    third = attempt()
    assert ids() == sorted([second, third])
