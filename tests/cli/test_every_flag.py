"""Every flag and setting of ``run`` and ``sweep`` changes what runs, or is refused.

Each case runs the command line in-process with the training loop replaced by a probe that
records what the run would train and evaluate (the benchmark's episodes, the strategy and its
plugins, the model's weights and layout, the loop's arguments, the loggers, the threads) and
stops. A case changes one flag or setting against a baseline command and says what must
follow: the computation and the run's folder (a setting that decides what a run computes), one
named aspect (a flag that says how or where it runs), or a clear error. The coverage tests fail
when a flag or a preset setting is added without a case.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from avalanche_sets import training
from avalanche_sets.cli import build_parser, main
from avalanche_sets.data.packs import save_pack
from avalanche_sets.data.synthetic import make_synthetic_domain
from avalanche_sets.models.backbone import resolve_precision
from avalanche_sets.presets import PRESET_SCHEMA

TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2", "--set", "n_query=2",
    "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4", "--set", "eval_mb_size=2",
    "--set", "interim_test_episodes=2",
]  # fmt: skip
DOMAINS = ["--set", "domains=['shapes','strokes']"]


def _set(args: list[str], item: str) -> list[str]:
    """``args`` with ``--set item``: replacing the same key's ``--set``, not repeating it."""
    key = item.split("=")[0]
    kept = list(args)
    for i, a in enumerate(args[:-1]):
        if a == "--set" and args[i + 1].split("=")[0] == key:
            kept[i + 1] = item
            return kept
    return [*kept, "--set", item]


class _Probed(Exception):
    def __init__(self, seen: dict) -> None:
        self.seen = seen


def _digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().float().contiguous().numpy().tobytes())
        h.update(str(tuple(t.shape)).encode())
    return h.hexdigest()[:16]


def _plain(obj) -> dict:
    scalar = (int, float, str, bool, type(None))
    return {
        k: v
        for k, v in sorted(vars(obj).items())
        if isinstance(v, scalar) or (isinstance(v, tuple) and all(isinstance(x, scalar) for x in v))
    }


def _episode(exp) -> str:
    ep = exp.dataset[0]
    return _digest(ep.support_x, ep.support_y, ep.query_x, ep.query_y, ep.unlabeled_x)


def _probe(strategy, bench, **kwargs):
    stream = getattr(bench, f"{kwargs['eval_stream']}_stream")
    model = strategy.model
    compute = {
        "bench": (
            bench.describe(),
            [len(e.dataset) for e in bench.train_stream],
            [len(e.dataset) for e in stream],
            [_episode(e) for e in bench.train_stream],
            [_episode(e) for e in stream],
            sorted((k, str(v)) for k, v in bench.settings.items() if k != "root"),
        ),
        "strategy": (
            type(strategy).__name__,
            strategy.train_mb_size,
            strategy.eval_mb_size,
            str(strategy.device),
            [(type(p).__name__, _plain(p)) for p in strategy.plugins],
            [g["lr"] for g in strategy.optimizer.param_groups],
        ),
        "model": (
            _digest(*model.state_dict().values()),
            [str(p.dtype) for p in model.parameters()],
            [
                p.is_contiguous(memory_format=torch.channels_last)
                for p in model.parameters()
                if p.dim() == 4
            ],
            [(type(m).__name__, _plain(m)) for m in model.modules()],
        ),
        "loop": (kwargs["eval_stream"], kwargs["interim_episodes"]),
    }
    raise _Probed(
        {
            "compute": compute,
            "folder": str(Path(kwargs["checkpoint_path"]).parent),
            "checkpoint_every": kwargs["checkpoint_every"],
            "log_every": [getattr(m, "every", None) for m in strategy.evaluator.metrics],
            "threads": torch.get_num_threads(),
            "loggers": sorted(
                type(lg).__name__ + str(getattr(getattr(lg, "file", None), "name", ""))
                for lg in strategy.evaluator.loggers
            ),
        }
    )


@pytest.fixture
def probe(monkeypatch, tmp_path):
    monkeypatch.setattr(training, "run_sets", _probe)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _run(args: list[str], out: Path) -> dict:
    with pytest.raises(_Probed) as got:
        main(["run", "--out", str(out), *args])
    return got.value.seen


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> tuple[Path, Path]:
    """Two folders of packs made from the synthetic domains: the same names, other images."""
    folders = []
    for seed in (0, 1):
        root = tmp_path_factory.mktemp(f"packs{seed}")
        for name in ("shapes", "strokes"):
            save_pack(make_synthetic_domain(name, seed=seed), root / f"{name}.npz")
        save_pack(make_synthetic_domain("rings", seed=seed), root / "ood_rings.npz")
        folders.append(root)
    return folders[0], folders[1]


def _other_precision() -> str:
    auto = resolve_precision("auto", "cpu")
    return "fp32" if auto == "bf16" else "bf16"


# (base arguments, changed arguments, what must follow). "compute": the computation and the run
# folder differ; another aspect name: that aspect differs; "refused": exit status 2.
BASE = ["--method", "order", *TINY, *DOMAINS]
NO_TEST = [a for a in BASE if a != "n_test_episodes=2"]
NO_TEST = [a for i, a in enumerate(NO_TEST) if not (a == "--set" and NO_TEST[i + 1] == "--set")]
VALID = [*NO_TEST, "--eval-stream", "valid", "--set", "n_val_episodes=2"]
SETTING_CASES: dict[str, list[tuple[list[str], list[str], str]]] = {
    "source": [(BASE, [*BASE, "--set", "source=packs", "--root", "{packs0}"], "compute")],
    "image_size": [(BASE, _set(BASE, "image_size=16"), "compute")],
    "n_blocks": [(BASE, _set(BASE, "n_blocks=3"), "compute")],
    "width": [(BASE, _set(BASE, "width=6"), "compute")],
    "n_way": [(BASE, _set(BASE, "n_way=3"), "compute")],
    "n_shot": [(BASE, _set(BASE, "n_shot=2"), "compute")],
    "n_query": [(BASE, _set(BASE, "n_query=3"), "compute")],
    "n_unlabeled": [(BASE, _set(BASE, "n_unlabeled=3"), "compute")],
    "n_ood": [(BASE, _set(BASE, "n_ood=6"), "compute")],
    "tasks_per_domain": [(BASE, _set(BASE, "tasks_per_domain=6"), "compute")],
    "meta_batch": [(BASE, _set(BASE, "meta_batch=1"), "compute")],
    "n_val_episodes": [
        (BASE, _set(BASE, "n_val_episodes=3"), "refused"),  # the test stream is run
        (VALID, _set(VALID, "n_val_episodes=3"), "compute"),
    ],  # fmt: skip
    "n_test_episodes": [
        (BASE, _set(BASE, "n_test_episodes=3"), "compute"),
        (VALID, _set(VALID, "n_test_episodes=3"), "refused"),
    ],  # fmt: skip
    "eval_mb_size": [(BASE, _set(BASE, "eval_mb_size=1"), "compute")],
    "interim_test_episodes": [(BASE, _set(BASE, "interim_test_episodes=1"), "compute")],
    "lr": [
        (BASE, _set(BASE, "lr=0.01"), "compute"),
        (
            [*TINY, *DOMAINS, "--method", "semi-gpm"],
            [*TINY, *DOMAINS, "--method", "semi-gpm", "--set", "lr=0.01"],
            "refused",
        ),
    ],  # fmt: skip
    "mem_size": [
        (BASE, _set(BASE, "mem_size=5"), "compute"),
        (
            [*TINY, *DOMAINS, "--method", "mskm"],
            [*TINY, *DOMAINS, "--method", "mskm", "--set", "mem_size=5"],
            "refused",
        ),
        (
            [*TINY, *DOMAINS, "--method", "order-mi-only"],
            [*TINY, *DOMAINS, "--method", "order-mi-only", "--set", "mem_size=5"],
            "refused",
        ),
    ],  # fmt: skip
    "replay_batch": [
        (BASE, _set(BASE, "replay_batch=1"), "compute"),
        (
            [*TINY, *DOMAINS, "--method", "protonet"],
            [*TINY, *DOMAINS, "--method", "protonet", "--set", "replay_batch=1"],
            "refused",
        ),
    ],  # fmt: skip
    "seeds": [
        (BASE, _set(BASE, "seeds=[1]"), "compute"),
        (BASE, [*BASE, "--set", "seeds=[1]", "--seeds", "1"], "refused"),  # given twice
    ],
    "device": [
        (BASE, _set(BASE, "device=cuda"), "refused" if not torch.cuda.is_available() else "compute")
    ],  # fmt: skip
    "threads": [(BASE, _set(BASE, "threads=1"), "threads")],  # quick: 2 threads; own folder
    "small_classes": [(BASE, _set(BASE, "small_classes=drop"), "compute")],
    "precision": [(BASE, [*BASE, "--set", f"precision={_other_precision()}"], "compute")],
    "channels_last": [(BASE, _set(BASE, "channels_last=False"), "compute")],
    "root": [
        (BASE, [*BASE, "--root", "{packs0}"], "compute"),  # a folder of packs: read as packs
        (BASE, [*BASE, "--root", "{tmp}"], "refused"),  # no packs: the synthetic source reads none
        (
            [*BASE, "--set", "source=packs", "--root", "{packs0}"],
            [*BASE, "--set", "source=packs", "--root", "{packs1}"],
            "data",
        ),
        (
            [*BASE, "--set", "source=packs", "--root", "{packs0}"],
            [*BASE, "--source", "packs", "--set", "source=packs", "--root", "{packs0}"],
            "refused",
        ),
    ],  # fmt: skip
    "order": [
        (["--method", "order", *TINY], ["--method", "order", *TINY, "--set", "order=2"], "compute"),
        (BASE, [*BASE, "--order", "2"], "refused"),  # a custom domain order is set too
    ],  # fmt: skip
    "domains": [(BASE, [*TINY, "--set", "domains=['strokes','shapes']"], "compute")],
    "ood": [(BASE, _set(BASE, "ood=['lattices']"), "compute")],
}

# flags of `run`: (base, changed, what must follow); --set and the setting flags are above
RUN_FLAG_CASES: dict[str, list[tuple[list[str], list[str], str]]] = {
    "--method": [(BASE, [*TINY, *DOMAINS, "--method", "mskm"], "compute")],
    "--preset": [
        (
            BASE,
            [*BASE, "--preset", "paper", "--set", "source=synthetic", "--set", "device=cpu"],
            "compute",
        )
    ],  # fmt: skip
    "--source": [(BASE, [*BASE, "--source", "packs", "--root", "{packs0}"], "compute")],
    "--root": [
        (BASE, [*BASE, "--root", "{packs0}"], "compute"),
        (BASE, [*BASE, "--root", "{tmp}"], "refused"),
    ],
    "--order": [
        (["--method", "order", *TINY], ["--method", "order", *TINY, "--order", "3"], "compute")
    ],  # fmt: skip
    "--seeds": [(BASE, [*BASE, "--seeds", "4"], "compute")],
    "--out": [(BASE, [*BASE, "--out", "{tmp}/elsewhere"], "folder")],
    "--set": [(BASE, [*BASE, "--set", "n_shot=2", "--set", "n_shot=3"], "refused")],
    "--strategy-set": [
        (BASE, [*BASE, "--strategy-set", "lam=0.001"], "compute"),
        (
            [*TINY, *DOMAINS, "--method", "order-no-ot"],
            [*TINY, *DOMAINS, "--method", "order-no-ot", "--strategy-set", "beta=0.1"],
            "refused",
        ),
        (BASE, [*BASE, "--strategy-set", "lamda=0.001"], "refused"),
    ],  # fmt: skip
    "--eval-stream": [(NO_TEST, [*NO_TEST, "--eval-stream", "valid"], "compute")],
    "--checkpoint-every": [(BASE, [*BASE, "--checkpoint-every", "7"], "checkpoint_every")],
    "--verbose": [(BASE, [*BASE, "-v"], "loggers")],
    "--loggers": [(BASE, [*BASE, "--loggers", "csv"], "loggers")],
    "--log-every": [(BASE, [*BASE, "--log-every", "7"], "log_every")],
    "--tag": [(BASE, [*BASE, "--tag", "b"], "folder")],  # bad tags: tests/cli/test_tag.py
}


def _fill(args: list[str], packs: tuple[Path, Path], tmp: Path) -> list[str]:
    return [
        a.format(packs0=packs[0], packs1=packs[1], tmp=tmp) if "{" in a and "[" not in a else a
        for a in args
    ]


def _cases(table):
    return [
        pytest.param(key, base, changed, what, id=f"{key}-{i}")
        for key, cases in table.items()
        for i, (base, changed, what) in enumerate(cases)
    ]


@pytest.mark.parametrize(("key", "base", "changed", "what"), _cases(SETTING_CASES | RUN_FLAG_CASES))
def test_a_flag_or_setting_changes_what_runs_or_is_refused(
    key, base, changed, what, probe, packs, tmp_path, capsys
):
    out = tmp_path / "runs"
    base_args, new_args = _fill(base, packs, tmp_path), _fill(changed, packs, tmp_path)
    before = _run(base_args, out)
    if what == "refused":
        assert main(["run", "--out", str(out), *new_args]) == 2
        err = capsys.readouterr().err
        assert "error:" in err and "fix" in err, err  # says what was wrong and what to do
        return
    after = _run(new_args, out)
    if what == "compute":  # what is computed, and the run's identity (its folder)
        assert after["compute"] != before["compute"]
        assert after["folder"] != before["folder"] or key in ("seeds", "--seeds")
    elif what == "data":  # where the data lives: other images, the same run name
        assert after["compute"]["bench"] != before["compute"]["bench"]
    else:  # how or where it runs: that aspect, and nothing it computes
        assert after[what] != before[what]
        assert after["compute"] == before["compute"]
        if what == "threads":  # another summation order, other numbers: another run's folder
            assert after["folder"] != before["folder"]


def test_every_preset_setting_has_a_case():
    assert set(PRESET_SCHEMA) == set(SETTING_CASES)


def _options(command: str) -> set[str]:
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    return {max(a.option_strings, key=len) for a in sub._actions if a.option_strings} - {"--help"}


def test_every_run_flag_has_a_case():
    setting_flags = {"--source", "--root", "--order", "--seeds"}
    assert _options("run") == set(RUN_FLAG_CASES) | setting_flags


# ---------------------------------------------------------------------------- sweep
class _Swept(Exception):
    pass


@pytest.fixture
def sweep_probe(monkeypatch):
    from avalanche_sets.runs import sweep

    seen = {}

    def fake(specs, **kwargs):
        seen.update(specs=specs, **kwargs)
        raise _Swept

    monkeypatch.setattr(sweep, "run_sweep", fake)
    return seen


def _sweep(args: list[str], seen: dict) -> dict:
    seen.clear()
    with pytest.raises(_Swept):
        main(["sweep", *TINY, *DOMAINS, *args])
    return dict(seen)


def test_sweep_flags_reach_the_sweep_or_are_refused(sweep_probe, tmp_path, capsys):
    """The flags ``run`` shares are walked above; those of its own here, up to the hand-over
    to :func:`run_sweep` (whose pool, Ray and threads tests are in tests/runs and tests/cli)."""
    base = _sweep(["--out", str(tmp_path)], sweep_probe)
    assert [s.method for s in base["specs"]] == ["order"] and base["jobs"] == 1
    assert base["ray_address"] is None and base["threads"] == 1  # one thread per parallel run
    methods = _sweep(["--methods", "mskm", "protonet", "--seeds", "0", "1"], sweep_probe)
    assert [(s.method, s.seed) for s in methods["specs"]] == [
        ("mskm", 0), ("mskm", 1), ("protonet", 0), ("protonet", 1)
    ]  # fmt: skip
    assert _sweep(["--jobs", "2"], sweep_probe)["jobs"] == 2
    assert _sweep(["--ray-address", "local"], sweep_probe)["ray_address"] == "local"
    # threads set on the command line are kept by parallel runs instead of one each
    assert _sweep(["--jobs", "2", "--set", "threads=2"], sweep_probe)["threads"] is None
    grid = _sweep(["--set", "n_shot=1,2"], sweep_probe)
    assert sorted(s.preset.n_shot for s in grid["specs"]) == [1, 2]
    for refused in (
        ["--jobs", "2", "--ray-address", "local"],  # two ways to run in parallel
        ["--methods", "mskm", "mskm"],  # a method twice
        ["--methods", "mskm", "--set", "mem_size=5"],  # a setting mskm does not read
        ["--root", str(tmp_path)],  # a folder the synthetic source does not read
    ):
        capsys.readouterr()
        assert main(["sweep", *TINY, *DOMAINS, *refused]) == 2, refused
        assert "fix" in capsys.readouterr().err


def test_every_sweep_flag_has_a_case():
    walked = {"--methods", "--jobs", "--ray-address"}
    shared = set(RUN_FLAG_CASES) - {"--method", "--loggers", "--log-every"} | {
        "--source",
        "--root",
        "--order",
        "--seeds",
    }
    assert _options("sweep") == walked | shared
