"""The backbone's ``precision`` setting: bf16 autocast inside the backbone only, fp32 outside it,
channels-last kept, fp32 identical to the path without the setting, ``auto`` follows the
device's native bf16 support, and the precision is part of a run's identity."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from avalanche_sets.data import sets_benchmark
from avalanche_sets.methods import build_strategy, make_backbone
from avalanche_sets.models import PRECISIONS, ConvBackbone, resolve_precision
from avalanche_sets.models import backbone as backbone_mod
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.presets import PRESET_SCHEMA, RunConfig, resolve_preset
from avalanche_sets.runs.experiment import run_settings
from avalanche_sets.runs.folder import record_identity, run_dir_name, run_identity, run_precision
from avalanche_sets.runs.record import read_record

TINY = dict(width=8, n_query=2, n_unlabeled=2, n_ood=4, tasks_per_domain=8, n_test_episodes=2)


def _images(n, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, size, size, 3), generator=g, dtype=torch.uint8)


def _record_dtypes(net: ConvBackbone) -> dict[str, list]:
    """Hooks recording the input memory format and output dtype of every layer of ``net``."""
    seen: dict[str, list] = {"out": [], "conv_in_channels_last": []}

    def hook(module, inputs, output):
        seen["out"].append((type(module).__name__, output.dtype))
        if isinstance(module, torch.nn.Conv2d):
            x = inputs[0]
            seen["conv_in_channels_last"].append(x.is_contiguous(memory_format=torch.channels_last))

    for m in net.features:
        m.register_forward_hook(hook)
    return seen


@pytest.mark.parametrize("train", [True, False])
def test_bf16_runs_the_backbone_layers_in_bf16_and_returns_fp32(train):
    torch.manual_seed(0)
    net = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True, precision="bf16")
    net.train(train)
    seen = _record_dtypes(net)
    with torch.set_grad_enabled(train):
        out = net(_images(4, 16))
    assert {dtype for _, dtype in seen["out"]} == {torch.bfloat16}, seen["out"]
    assert all(seen["conv_in_channels_last"])
    assert out.dtype == torch.float32
    # the parameters stay fp32 (autocast casts copies); gradients come back fp32
    if train:
        out.sum().backward()
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in net.parameters())


def test_fp32_runs_every_layer_in_fp32():
    net = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True, precision="fp32")
    seen = _record_dtypes(net)
    net(_images(4, 16))
    assert {dtype for _, dtype in seen["out"]} == {torch.float32}
    assert all(seen["conv_in_channels_last"])


def test_fp32_is_the_path_without_the_setting_bit_for_bit():
    torch.manual_seed(0)
    old = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True)
    new = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True, precision="fp32")
    new.load_state_dict(old.state_dict())
    x = _images(6, 16)
    assert torch.equal(old(x), new(x))
    bf = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True, precision="bf16")
    bf.load_state_dict(old.state_dict())
    y = bf(x)
    assert not torch.equal(old(x), y)  # bf16 really computes something else ...
    assert torch.allclose(old(x), y, rtol=0.1, atol=0.1)  # ... close to fp32


def test_heads_and_logits_stay_fp32_under_bf16():
    torch.manual_seed(0)
    bench = sets_benchmark(
        "synthetic", domains=["shapes"], n_query=2, n_unlabeled=3, n_ood=2, tasks_per_domain=2,
        n_test_episodes=1,
    )  # fmt: skip
    from avalanche_sets.data import collate_episodes

    batch = collate_episodes([bench.train_stream[0].dataset[i] for i in range(2)])[0]
    batch = batch.without_oracle()
    net = ConvBackbone(n_blocks=4, width=8, image_size=32, channels_last=True, precision="bf16")
    model = PrototypicalModel(net, refine="mskm")
    state = model.encode(batch)
    logits = model.classify(state)
    for t in (logits, state.support_emb, state.query_emb, state.unlabeled_emb, state.prototypes,
              state.refined_prototypes):  # fmt: skip
        assert t.dtype == torch.float32


def test_auto_follows_native_bf16_support(monkeypatch):
    net = ConvBackbone(n_blocks=2, width=8, image_size=16, channels_last=True, precision="auto")
    preset = resolve_preset("cpu", n_shot=1)
    assert preset.precision == "auto"
    monkeypatch.setattr(backbone_mod, "bf16_supported", lambda device_type="cpu": False)
    assert resolve_precision("auto") == "fp32" and not net.uses_bf16("cpu")
    seen = _record_dtypes(net)
    net(_images(2, 16))
    assert {dtype for _, dtype in seen["out"]} == {torch.float32}
    assert run_precision(preset) == "fp32"
    assert run_dir_name("mskm", preset, 0) == "mskm/packs-o1-5w1s-R50-seed0"
    monkeypatch.setattr(backbone_mod, "bf16_supported", lambda device_type="cpu": True)
    assert resolve_precision("auto") == "bf16" and net.uses_bf16("cpu")
    seen["out"].clear()
    net(_images(2, 16))
    assert {dtype for _, dtype in seen["out"]} == {torch.bfloat16}
    assert run_dir_name("mskm", preset, 0) == "mskm/packs-o1-5w1s-R50-seed0-bf16"
    # explicit settings mean themselves whatever the device says
    assert resolve_precision("fp32") == "fp32" and resolve_precision("bf16") == "bf16"


def test_precision_is_part_of_a_runs_identity_and_committed_records_name_it(monkeypatch):
    monkeypatch.setattr(backbone_mod, "bf16_supported", lambda device_type="cpu": True)
    runs = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "runs"
    path = runs / "mskm" / "packs-o1-5w1s-R50-seed0" / "result.json"
    if not path.is_file():
        pytest.skip("no committed runs")
    old = read_record(path.parent)
    assert old.preset["precision"] == "fp32"  # every record names its precision
    fp32 = resolve_preset("cpu", n_shot=1, precision="fp32", root="elsewhere")
    auto = resolve_preset("cpu", n_shot=1, root="elsewhere")
    # the committed packs records name no data content; a folder that is not there has none
    asked = run_settings("mskm", fp32)  # as a run asks it: the settings mskm reads
    assert record_identity(old) == run_identity("mskm", fp32, **asked, data=None)
    assert record_identity(old)["preset"]["precision"] == "fp32"
    assert run_identity("mskm", auto, data=None) != run_identity("mskm", fp32, data=None)
    assert run_identity("mskm", auto, data=None) == run_identity(
        "mskm", fp32.replace(precision="bf16"), data=None
    )
    assert run_dir_name("mskm", fp32, 0) == "mskm/packs-o1-5w1s-R50-seed0"
    assert run_dir_name("mskm", auto, 0) == "mskm/packs-o1-5w1s-R50-seed0-bf16"


def test_a_run_records_the_precision_it_resolved_to(tmp_path):
    from avalanche_sets.runs.experiment import run_experiment

    preset = resolve_preset("quick", precision="bf16", domains=["shapes"], **TINY)
    rec = run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())
    assert rec.preset["precision"] == "bf16"
    assert (tmp_path / run_dir_name("protonet", preset, 0) / "result.json").is_file()
    assert run_dir_name("protonet", preset, 0).endswith("-bf16")
    assert record_identity(rec) == run_identity(
        "protonet", preset, **run_settings("protonet", preset)
    )


@pytest.mark.parametrize("name", ["mskm", "order", "anil", "tpn", "lst", "semi-der"])
def test_every_kind_of_method_gets_the_presets_precision(name):
    for precision in ("fp32", "bf16"):
        preset = resolve_preset("quick", width=4, mem_size=4, precision=precision)
        strategy = build_strategy(name, preset, seed=0)
        assert strategy.model.backbone.precision == precision
        assert strategy.model.backbone.channels_last


def test_a_preset_without_the_setting_builds_no_backbone():
    preset = resolve_preset("quick").as_dict()
    del preset["precision"]
    with pytest.raises(ValueError, match=r"lacks setting\(s\) \['precision'\]"):
        RunConfig.of(preset)
    with pytest.raises(TypeError, match="RunConfig or a preset's name, got a dict"):
        make_backbone(preset)


def test_bad_precision_is_refused_early():
    with pytest.raises(ValueError, match=r"precision.*'auto'"):
        ConvBackbone(precision="fp16")
    with pytest.raises(ValueError, match="setting 'precision' must be one of"):
        resolve_preset("quick", precision="bfloat16")


def test_presets_know_the_backbones_precisions():
    ok, _ = PRESET_SCHEMA["precision"]
    assert all(ok(p) for p in PRECISIONS) and not ok("fp16")


def test_auto_without_native_bf16_trains_as_fp32_and_bf16_trains_otherwise(monkeypatch):
    from avalanche_sets import run_sets

    monkeypatch.setattr(backbone_mod, "bf16_supported", lambda device_type="cpu": False)
    bench = sets_benchmark("synthetic", domains=["shapes", "strokes"], n_query=2,
                           n_unlabeled=2, n_ood=4, tasks_per_domain=4, n_test_episodes=2)  # fmt: skip
    auto = resolve_preset("quick", width=4)
    results = {}
    for preset in (auto, auto.replace(precision="fp32"), auto.replace(precision="bf16")):
        torch.set_num_threads(1)
        strategy = build_strategy("mskm", preset, seed=0)
        acc = run_sets(strategy, bench).episode_acc
        results[preset.precision] = (acc, [p.detach().clone() for p in strategy.model.parameters()])
    (acc, weights), (acc_auto, weights_auto) = results["fp32"], results["auto"]
    assert acc == acc_auto and all(map(torch.equal, weights, weights_auto))
    assert not all(map(torch.equal, results["bf16"][1], weights))  # bf16 trains otherwise


def test_channels_last_false_is_a_contiguous_run_of_its_own_and_true_is_the_default():
    """The float-order noise control of the precision comparison (docs/results/speed.md): an NCHW backbone
    (same network, other summation order) whose runs never share a folder with the default."""
    base = resolve_preset("cpu", n_shot=1, precision="fp32", root="elsewhere")
    nchw = resolve_preset("cpu", n_shot=1, precision="fp32", root="elsewhere", channels_last=False)
    assert resolve_preset("cpu", n_shot=1, precision="fp32", root="elsewhere",
                          channels_last=True) == base  # fmt: skip
    assert make_backbone(base).channels_last and not make_backbone(nchw).channels_last
    conv = make_backbone(nchw).features[0].weight
    assert conv.is_contiguous() and not conv.is_contiguous(memory_format=torch.channels_last)
    assert run_dir_name("mskm", base, 0) == "mskm/packs-o1-5w1s-R50-seed0"
    assert run_dir_name("mskm", nchw, 0) == "mskm/packs-o1-5w1s-R50-seed0-channels_lastFalse"
    assert run_identity("mskm", nchw, data=None) != run_identity("mskm", base, data=None)
    with pytest.raises(ValueError, match="setting 'channels_last' must be True or False"):
        resolve_preset("cpu", channels_last="no")


def test_a_contiguous_backbone_computes_the_same_network_in_another_float_order():
    torch.manual_seed(0)
    last = ConvBackbone(n_blocks=4, width=8, channels_last=True).train()
    nchw = ConvBackbone(n_blocks=4, width=8, channels_last=False).train()
    nchw.load_state_dict(last.state_dict())
    x = _images(40)
    # The same function (summed in another order: whether the bits differ depends on the
    # CPU's kernels, so the precision comparison measured that on the runs themselves).
    torch.testing.assert_close(last(x), nchw(x), rtol=1e-4, atol=1e-5)
