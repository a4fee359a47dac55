import copy

import pytest
import torch

from avalanche_sets.models import (
    ConvBackbone,
    autocast_bf16,
    bf16_supported,
    cpu_backbone,
    embed_episodes,
    paper_backbone,
    to_input,
)


def _images(n, size, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, size, size, 3), generator=g, dtype=torch.uint8)


def _twin(net, **kwargs):
    """A copy of ``net`` (same weights and BN state) built with other options."""
    other = ConvBackbone(
        n_blocks=net.n_blocks, width=net.width, image_size=net.image_size, **kwargs
    )
    other.load_state_dict(net.state_dict())
    return other


def test_paper_backbone_dims():
    torch.manual_seed(0)
    net = paper_backbone()
    assert (net.n_blocks, net.width, net.image_size) == (5, 64, 84)
    assert net.feature_size == 2 and net.out_dim == 256
    out = net(_images(2, 84))
    assert out.shape == (2, 256) and out.dtype == torch.float32


@pytest.mark.parametrize("width,dim", [(64, 256), (32, 128)])
def test_cpu_backbone_dims(width, dim):
    torch.manual_seed(0)
    net = cpu_backbone(width=width)
    assert (net.n_blocks, net.image_size) == (4, 32)
    assert net.out_dim == dim
    assert net(_images(3, 32)).shape == (3, dim)
    # float input works too
    assert net(to_input(_images(3, 32))).shape == (3, dim)


def test_odd_image_size_floors():
    net = ConvBackbone(n_blocks=2, width=8, image_size=10)
    assert net.feature_size == 2 and net.out_dim == 32
    assert net(_images(2, 10)).shape == (2, 32)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_blocks=5, image_size=16),
        dict(n_blocks=4, image_size=15),
        dict(n_blocks=0),
        dict(width=0),
        dict(image_size=-3),
        dict(n_blocks=2.0),
    ],
)
def test_bad_configuration_raises(kwargs):
    with pytest.raises(ValueError):
        ConvBackbone(**kwargs)


def test_too_small_message_names_the_problem():
    with pytest.raises(ValueError, match="too small"):
        paper_backbone(image_size=16)


def test_wrong_input_raises():
    net = cpu_backbone(width=8)
    with pytest.raises(ValueError, match="32 px"):
        net(_images(2, 16))
    with pytest.raises(ValueError):
        net(torch.zeros(2, 1, 32, 32))
    with pytest.raises(ValueError):
        to_input(torch.zeros(2, 32, 32, 3))


def test_to_input_values_and_layout():
    img = _images(4, 8)
    x = to_input(img)
    ref = (img.permute(0, 3, 1, 2).float() / 255.0 - 0.5) / 0.5
    torch.testing.assert_close(x, ref)
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert x.min() >= -1 and x.max() <= 1
    y = to_input(img, channels_last=False)
    assert y.is_contiguous()
    torch.testing.assert_close(y, ref)


@pytest.mark.parametrize("train", [False, True])
def test_channels_last_matches_fp32(train):
    torch.manual_seed(0)
    net = cpu_backbone(width=16)
    fast = _twin(net, channels_last=True)
    assert fast.features[0].weight.is_contiguous(memory_format=torch.channels_last)
    net.train(train)
    fast.train(train)
    img = _images(6, 32)
    torch.testing.assert_close(fast(img), net(img), rtol=1e-4, atol=1e-4)


def _rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


def test_bf16_autocast_matches_fp32():
    torch.manual_seed(0)
    net = cpu_backbone(width=16).eval()
    fast = _twin(net, channels_last=True).eval()
    img = _images(4, 32)
    ref = net(img)
    # force=True: emulated where the CPU lacks native bf16, so numerics are checked everywhere
    with autocast_bf16(True, force=True) as active:
        out = fast(img)
    assert active
    assert out.dtype == torch.float32
    assert _rel_err(out, ref) < 5e-2


def test_bf16_native_path():
    if not bf16_supported():
        pytest.skip("no native bf16 on this CPU")
    torch.manual_seed(0)
    net = cpu_backbone(width=16).eval()
    img = _images(4, 32)
    ref = net(img)
    with autocast_bf16(True) as active:
        out = net(img)
    assert active and out.dtype == torch.float32
    assert _rel_err(out, ref) < 5e-2


def test_autocast_fallback_and_disabled():
    with autocast_bf16(False) as active:
        assert not active
        assert not torch.is_autocast_enabled("cpu")
    if bf16_supported():
        pytest.skip("native bf16 available: no fallback to test")
    with pytest.warns(RuntimeWarning, match="bfloat16"), autocast_bf16(True) as active:
        assert not active
        assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("channels_last", [False, True])
def test_embed_episodes_equals_separate(channels_last):
    torch.manual_seed(0)
    net = cpu_backbone(width=8, channels_last=channels_last)
    net.train()
    net(_images(16, 32, seed=5))  # move BN running stats away from their init
    net.eval()  # eval: running stats, so one joint forward == separate forwards
    support, query, unlabeled = _images(5, 32, 1), _images(10, 32, 2), _images(7, 32, 3)
    embs = embed_episodes(net, [support, query, unlabeled])
    assert [e.shape for e in embs] == [(5, 32), (10, 32), (7, 32)]
    for e, part in zip(embs, (support, query, unlabeled)):
        torch.testing.assert_close(e, net(part), rtol=1e-4, atol=1e-5)


def test_embed_episodes_batch_dims_and_empty_part():
    torch.manual_seed(0)
    net = cpu_backbone(width=8).eval()
    support = _images(2 * 3, 32, 1).reshape(2, 3, 32, 32, 3)
    query = _images(2 * 4, 32, 2).reshape(2, 4, 32, 32, 3)
    empty = torch.zeros(2, 0, 32, 32, 3, dtype=torch.uint8)
    s, q, u = embed_episodes(net, (support, query, empty))
    assert s.shape == (2, 3, 32) and q.shape == (2, 4, 32) and u.shape == (2, 0, 32)
    torch.testing.assert_close(q[1], net(query[1]), rtol=1e-4, atol=1e-5)
    assert embed_episodes(net, []) == []


def test_embed_episodes_single_forward_gradients():
    """In train mode one forward serves all parts; gradients reach the weights."""
    torch.manual_seed(0)
    net = cpu_backbone(width=8).train()
    calls = []
    net.register_forward_hook(lambda *_: calls.append(1))
    s, q, u = embed_episodes(net, [_images(5, 32, 1), _images(5, 32, 2), _images(5, 32, 3)])
    assert len(calls) == 1
    (s.sum() + q.sum() + u.sum()).backward()
    assert net.features[0].weight.grad is not None


def test_embed_episodes_rejects_mismatched_parts():
    net = cpu_backbone(width=8)
    with pytest.raises(ValueError):
        embed_episodes(net, [_images(2, 32), _images(2, 16)])
    with pytest.raises(ValueError):
        embed_episodes(net, [_images(2, 32).float()])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_pool_before_relu_is_the_papers_block_bit_for_bit(precision):
    """The blocks pool before the ReLU (cheaper); values and gradients equal the paper's
    conv → BN → ReLU → pool order exactly, and the parameter names are unchanged."""
    torch.manual_seed(0)
    net = ConvBackbone(n_blocks=3, width=8, image_size=16, channels_last=True, precision=precision)
    layers = list(net.features)
    assert [type(m).__name__ for m in layers[:4]] == ["Conv2d", "BatchNorm2d", "MaxPool2d", "ReLU"]
    paper = copy.deepcopy(net)
    for i in range(0, len(layers), 4):  # swap back to conv, BN, ReLU, pool
        paper.features[i + 2], paper.features[i + 3] = (
            torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2),
        )  # fmt: skip
    assert list(paper.state_dict()) == list(net.state_dict())
    x = _images(12, 16)
    out_new, out_old = net(x), paper(x)
    assert torch.equal(out_new, out_old)
    w = torch.randn_like(out_new)
    (out_new * w).sum().backward()
    (out_old * w).sum().backward()
    for (name, a), b in zip(net.named_parameters(), paper.parameters()):
        assert torch.equal(a.grad, b.grad), name
    for a, b in zip(net.buffers(), paper.buffers()):
        assert torch.equal(a, b)
