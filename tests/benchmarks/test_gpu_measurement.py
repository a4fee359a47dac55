"""The arithmetic of the GPU benchmarks, checked on the CPU: which iterations ``gpu_step`` trains
(no pass may start past the stream's last task, on CUDA or not), how busy a profile says the
GPU was (each kernel counted once), and a host-gathered batch embedded where the model is."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType
from torch.autograd.profiler_util import Interval

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from benchmarks._gpu import busy_device_us, inductor_evidence, is_device_work
from benchmarks._timing import train_range
from benchmarks.gpu_step import CUDA_STAGES, STEP_RANGE, backbone_images, busy_share, schedule
from benchmarks.step_speed import backbone_flops

TINY = dict(source="synthetic", domains=["shapes"], image_size=16, n_blocks=2, width=4,
            n_ood=4, threads=1, device="cpu", precision="fp32")  # fmt: skip


@pytest.mark.parametrize("cuda", [True, False])
@pytest.mark.parametrize(
    ("warm", "iters", "round_"), [(10, 30, 4), (2, 2, 2), (0, 5, 3), (3, 1, 7)]
)
def test_every_pass_of_gpu_step_lies_inside_the_stream(cuda, warm, iters, round_):
    plan = schedule(warm=warm, iters=iters, round_=round_, cuda=cuda, meta_batch=2)
    assert plan["passes"] * round_ >= iters
    assert plan["timed"] == (warm, warm + plan["passes"] * round_)
    names = [*(CUDA_STAGES if cuda else ()), "parts"]
    assert list(plan["stages"]) == names
    # the passes follow each other without gap or overlap, each `round_` long ...
    end = plan["timed"][1]
    for name in names:
        start, stop = plan["stages"][name]
        assert (start, stop) == (end, end + round_), name
        end = stop
    # ... and the stream holds every task the last one trains on (meta-batch 2)
    assert plan["iterations"] == end
    assert plan["n_tasks"] == 2 * end


def test_the_last_pass_of_a_cuda_schedule_trains_on_a_stream_of_that_length():
    plan = schedule(warm=1, iters=1, round_=1, cuda=True, meta_batch=2)
    preset = resolve_preset("cpu", **TINY, tasks_per_domain=plan["n_tasks"])
    exp = build_benchmark(preset, seed=0).train_stream[0]
    strategy = build_strategy("protonet", preset, seed=0)
    train_range(strategy, exp, *plan["stages"]["parts"])  # raises past the last task
    with pytest.raises(ValueError):
        train_range(strategy, exp, plan["iterations"], plan["iterations"] + 1)


def test_bad_schedule_numbers_are_refused_by_name():
    with pytest.raises(ValueError, match="--round must be an integer >= 1"):
        schedule(warm=1, iters=2, round_=0, cuda=True, meta_batch=2)


def _event(device_type, start, end, self_device=0.0, activity="kernel", name="k"):
    return SimpleNamespace(
        name=name, device_type=device_type, time_range=Interval(start, end),
        self_device_time_total=self_device, activity_type=activity,
        is_user_annotation=activity.endswith("user_annotation"),
    )  # fmt: skip


def test_gpu_busy_counts_each_kernel_once_and_merges_overlapping_streams():
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        # the CPU operators that launched the kernels report their kernels' time too
        _event(cpu, 0, 100, self_device=40.0),
        _event(cpu, 100, 200, self_device=15.0),
        _event(cuda, 10, 30, self_device=20.0),  # stream 1
        _event(cuda, 20, 40, self_device=20.0),  # stream 2, overlapping: 10..40 busy = 30
        _event(cuda, 150, 160, self_device=10.0),
        _event(cuda, 170, 170, self_device=0.0),  # empty
    ]
    assert busy_device_us(events) == pytest.approx(40.0)
    assert busy_device_us([e for e in events if e.device_type == cpu]) == 0.0


def test_gpu_busy_leaves_out_annotation_ranges_drawn_on_the_gpu_timeline():
    cuda = DeviceType.CUDA
    work = [
        _event(cuda, 10, 20),
        _event(cuda, 80, 90, activity="gpu_memcpy"),
        _event(cuda, 95, 100, activity="gpu_memset"),
    ]
    # `enumerate(DataLoader)#...__next__` on the GPU: first kernel to last, the gap 20..80 too
    annotation = _event(cuda, 10, 90, self_device=80.0, activity="gpu_user_annotation")
    assert busy_device_us([*work, annotation]) == pytest.approx(25.0)
    assert busy_device_us([annotation]) == 0.0
    # an annotation known only by its flag (a torch without activity types) or only by its type
    flag_only = SimpleNamespace(**{**vars(annotation), "activity_type": None})
    type_only = SimpleNamespace(**{**vars(annotation), "is_user_annotation": False})
    assert busy_device_us([*work, flag_only, type_only]) == pytest.approx(25.0)
    # the heaviest-kernels listing keeps kernels and copies only
    assert [is_device_work(e) for e in (*work, annotation, flag_only, type_only)] == [
        True, True, True, False, False, False,
    ]  # fmt: skip
    assert not is_device_work(_event(DeviceType.CPU, 0, 10))


def test_a_host_batch_is_embedded_on_the_models_device():
    preset = resolve_preset("cpu", **TINY, tasks_per_domain=4)
    exp = build_benchmark(preset, seed=0).train_stream[0]
    strategy = build_strategy("protonet", preset, seed=0)
    # a stand-in for a GPU: the model on the meta device, the episodes in host memory
    strategy.model.to("meta")
    assert exp.dataset[0].support_x.device.type == "cpu"
    assert backbone_flops(strategy, exp, 0) > 0


def test_the_whole_run_is_computed_from_the_measured_parts():
    from benchmarks.paper_scale import whole_run_cost

    domains = [{"of": 2, "train_s": 1.0, "iterations": [0.1, 0.2, 0.3]}]
    cost = whole_run_cost(domains, [{"seconds": 3.0}], full_iterations=10, checkpoint_s=0.5,
                          checkpoint_every=4)  # fmt: skip
    # a domain: 1.0 s measured + 7 missing iterations at the median 0.2 s; 2 domains expected
    assert cost["training_s"] == pytest.approx(2 * (1.0 + 7 * 0.2))
    assert cost["evaluation_s"] == pytest.approx(2 * 3.0)
    assert cost["checkpoints"] == 2 * 3 + 2  # every 4 of 10 iterations, and after each domain
    assert cost["seconds"] == pytest.approx(4.8 + 6.0 + 8 * 0.5)
    assert cost["label"] == "computed" and cost["complete"] is False
    both = whole_run_cost([*domains, {**domains[0], "train_s": 2.0}], [{"seconds": 3.0}] * 2,
                          full_iterations=10, checkpoint_s=None, checkpoint_every=0)  # fmt: skip
    assert both["complete"] is True and both["checkpoints"] == 2
    assert both["training_s"] == pytest.approx((1.0 + 1.4) + (2.0 + 1.4))
    assert whole_run_cost([], [], full_iterations=10, checkpoint_s=None,
                          checkpoint_every=0)["seconds"] is None  # fmt: skip


def _order_plugin_classes() -> list[type]:
    """Every plugin class defined in ``avalanche_sets.order``'s modules."""
    import importlib
    import pkgutil

    from avalanche.core import BasePlugin

    import avalanche_sets.order as order_pkg

    found = []
    for info in pkgutil.iter_modules(order_pkg.__path__):
        mod = importlib.import_module(f"{order_pkg.__name__}.{info.name}")
        for obj in vars(mod).values():
            if (isinstance(obj, type) and issubclass(obj, BasePlugin)
                    and obj.__module__ == mod.__name__):  # fmt: skip
                found.append(obj)
    return found


def _own_callbacks(cls: type) -> set[str]:
    """The events and ``loss_term`` a class of the package defines itself or inherits from
    another class of the package (not Avalanche's or the template's defaults)."""
    names = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("avalanche_sets.order"):
            names |= {n for n, v in vars(klass).items() if callable(v)
                      and (n.startswith(("before_", "after_")) or n == "loss_term")}  # fmt: skip
    return names


def test_every_callback_of_orders_plugins_is_timed_in_a_training_pass():
    from collections import defaultdict

    from benchmarks._timing import instrument

    preset = resolve_preset("cpu", **TINY, tasks_per_domain=16)
    exp = build_benchmark(preset, seed=0).train_stream[0]
    strategy = build_strategy("order", preset, seed=0, mem_size=4)
    plugins = strategy.order_plugins
    # the strategy holds every plugin class the package defines
    assert {type(p) for p in plugins} == set(_order_plugin_classes())
    assert any("after_forward" in _own_callbacks(type(p)) for p in plugins)  # the MI step
    sink: dict = defaultdict(list)
    for p in plugins:
        instrument(p, sink)
    train_range(strategy, exp, 0, 4)  # the memory fills, then replay, MI and OT run
    expected = {f"{type(p).__name__}.{cb}" for p in plugins for cb in _own_callbacks(type(p))}
    assert expected <= set(sink), sorted(expected - set(sink))


def test_the_busy_share_is_the_steps_device_work_per_iteration_over_the_timed_step():
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        # two profiled steps, 0..100 and 300..400 on the host's timeline (the profiler slows
        # them: the timed rounds' median step is 50)
        _event(cpu, 0, 100, name=STEP_RANGE),
        _event(cpu, 300, 400, name=STEP_RANGE),
        _event(cuda, 10, 30),  # 20 inside the first step
        _event(cuda, 90, 120),  # 10 inside, 20 outside
        _event(cuda, 200, 260),  # between the steps (the next meta-batch gathered): left out
        _event(cuda, 310, 340),  # 30 inside the second step
    ]
    out = busy_share(events, iterations=2, step_ms=0.050, wall_us=500.0)
    assert out["busy_ms_per_it"] == pytest.approx((20 + 10 + 30) / 2 / 1e3)
    assert out["gpu_busy"] == pytest.approx(30 / 50)  # over the timed step, not the pass
    assert out["gpu_busy_of_pass"] == pytest.approx((20 + 30 + 60 + 30) / 500)
    assert out["profile"]["steps_ms"] == pytest.approx(0.2)
    # without one step range per iteration there is no share of the step to give
    assert busy_share(events[1:], iterations=2, step_ms=0.05, wall_us=500.0)["gpu_busy"] is None
    assert busy_device_us(events, [(0, 100), (50, 150)]) == pytest.approx(50.0)  # merged windows


def _row(key, count, ms):
    return SimpleNamespace(key=key, count=count, self_device_time_total=1e3 * ms)


def test_inductor_replaced_the_backbone_only_when_atens_kernels_are_gone():
    aten = [
        _row("void at::native::batch_norm_collect_statistics_channels_last_kernel<...>", 20, 6.1),
        _row("void at::native::(anonymous namespace)::max_pool_forward_nhwc<...>", 20, 6.9),
    ]
    adam = _row("void at::native::multi_tensor_apply_kernel<...FusedAdamMathFunctor...>", 4, 0.2)
    triton = [_row("triton_poi_fused_convolution_relu_0", 20, 3.0),
              _row("triton_red_fused__native_batch_norm_legit_functional_1", 20, 4.0)]  # fmt: skip
    # what the committed compile record shows: ATen's kernels, no Inductor kernel
    kept = inductor_evidence([*aten, adam])
    assert kept["inductor_replaced_backbone"] is False
    assert kept["aten_backbone"]["calls"] == 40 and kept["inductor"]["calls"] == 0
    mixed = inductor_evidence([*aten, *triton])
    assert mixed["inductor_replaced_backbone"] is False and mixed["inductor"]["ms"] == 7.0
    replaced = inductor_evidence([*triton, adam])
    assert replaced["inductor_replaced_backbone"] is True
    assert replaced["aten_backbone"]["calls"] == 0


def test_the_backbone_images_are_those_each_method_embeds():
    s, q, z, r = 5, 5 * 2, 5 * 2, 4  # 5-way 1-shot, 2 queries and 2 unlabeled per class, R = 4
    preset = resolve_preset("cpu", **TINY, n_query=2, n_unlabeled=2, tasks_per_domain=24)
    exp = build_benchmark(preset, seed=0).train_stream[0]
    mb, episode = preset.meta_batch, s + q + z + r
    expected = {"protonet": mb * (s + q), "mskm": mb * episode, "order": 2 * mb * episode}
    for method, images in expected.items():
        strategy = build_strategy(method, preset, seed=0, mem_size=4) if method == "order" else (
            build_strategy(method, preset, seed=0))  # fmt: skip
        train_range(strategy, exp, 0, 4)  # ORDER's memory fills: it replays from here on
        assert backbone_images(strategy, exp, 4, 6) == images, method


def test_the_whole_run_scales_the_mean_cycle_with_the_data_path_not_the_median_step():
    from benchmarks.paper_scale import SETTLE, mean_cycle, whole_run_cost

    warm = [1.4, 0.7] + [0.05] * (SETTLE - 2)  # the process's warm-up, measured but not scaled
    its = [*warm, 0.04, 0.04, 0.04, 0.10]  # median step 0.04, mean 0.055
    gaps = [0.003] * (len(its) - 1)  # the data path between two iterations
    assert mean_cycle(its, gaps) == pytest.approx(0.055 + 0.003)
    domain = {"of": 1, "train_s": 3.0, "iterations": its, "gaps": gaps}
    cost = whole_run_cost([domain], [], full_iterations=100, checkpoint_s=None,
                          checkpoint_every=0)  # fmt: skip
    assert cost["training_s"] == pytest.approx(3.0 + (100 - len(its)) * 0.058)
    assert "mean cycle" in cost["per_iteration"]
