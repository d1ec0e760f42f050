"""Fused scaled-dot-product attention and convolution output layouts on mydev.

scaled_dot_product_attention takes the fused ("overrideable") op whenever the
CPU's flash kernel could run the inputs, with the layouts that op's Meta
kernel promises; the other cases take the math path. Convolutions produce
the CPU's output layout (channels-last in, channels-last out).
"""

import re

import pytest
import torch
import torch.nn.functional as F

from mydev_testing import BENCHMARKED_CONVOLUTIONS, assert_close_to_cpu, assert_device_still_usable

D = "mydev"
FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BACKWARD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"
MATH = "aten::_scaled_dot_product_attention_math"


def ops_run(fn):
    """Names of the ATen ops that ``fn()`` dispatched, and its result."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    return {event.name for event in prof.events()}, result


def qkv(batch=2, heads=4, q_len=16, kv_len=16, head_dim=8, dtype=torch.float32, layout="bhld", seed=0):
    """Query, key and value on the CPU. ``layout`` "blhd": [B, H, L, D]
    views of [B, L, H, D] storage, as a transformer's split heads are."""
    g = torch.Generator().manual_seed(seed)

    def make(length):
        if layout == "blhd":
            return torch.randn(batch, length, heads, head_dim, generator=g).to(dtype).transpose(1, 2)
        return torch.randn(batch, heads, length, head_dim, generator=g).to(dtype)

    return make(q_len), make(kv_len), make(kv_len)


def forward_backward(q, k, v, **kwargs):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.dtype).to(out.device)
    out.backward(grad)
    return out, (q.grad, k.grad, v.grad)


@pytest.mark.parametrize("layout", ["bhld", "blhd"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_fused_attention_matches_cpu_values_gradients_and_layout(layout, is_causal):
    cpu = qkv(layout=layout, kv_len=16 if is_causal else 24)
    ops, (out, grads) = ops_run(lambda: forward_backward(*(t.to(D) for t in cpu), is_causal=is_causal))
    assert FUSED in ops and FUSED_BACKWARD in ops and MATH not in ops
    ref_out, ref_grads = forward_backward(*cpu, is_causal=is_causal)
    assert_close_to_cpu(out, ref_out, rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(grads, ref_grads, rtol=1e-4, atol=1e-5)
    assert out.stride() == ref_out.stride()
    assert [g.stride() for g in grads] == [g.stride() for g in ref_grads]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_attention_in_reduced_precision(dtype):
    cpu = qkv(dtype=dtype, layout="blhd")
    ops, (out, grads) = ops_run(lambda: forward_backward(*(t.to(D) for t in cpu), is_causal=True))
    assert FUSED in ops
    ref_out, ref_grads = forward_backward(*cpu, is_causal=True)
    assert out.dtype == dtype
    assert_close_to_cpu(out, ref_out, rtol=2e-2, atol=2e-2)
    assert_close_to_cpu(grads, ref_grads, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("layout", ["bhld", "blhd"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("q_len", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [16, 33])
def test_short_query_attention_matches_cpu(q_len, is_causal, layout, dtype, head_dim):
    # A decode step's few query positions against a longer key/value cache
    # take mydev's short-query kernel; the backward is the flash one, fed
    # with that kernel's output and logsumexp. float32 heads take vector
    # loops (head_dim 33: a partial vector at the end of each row).
    cpu = qkv(q_len=q_len, kv_len=40, head_dim=head_dim, layout=layout, dtype=dtype)
    ops, (out, grads) = ops_run(lambda: forward_backward(*(t.to(D) for t in cpu), is_causal=is_causal))
    assert FUSED in ops and FUSED_BACKWARD in ops and MATH not in ops
    ref_out, ref_grads = forward_backward(*cpu, is_causal=is_causal)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert_close_to_cpu(out, ref_out, rtol=tol, atol=tol)
    assert_close_to_cpu(grads, ref_grads, rtol=10 * tol, atol=10 * tol)
    assert out.stride() == ref_out.stride()


def test_fused_attention_op_results_follow_its_meta_contract():
    q, k, v = (t.to(D) for t in qkv(layout="blhd"))
    out, logsumexp, *_rest, max_q, max_k, _seed, _offset, _debug = (
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v)
    )
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
            *(mode.from_tensor(t) for t in (q, k, v))
        )
    assert out.stride() == fake[0].stride() and logsumexp.stride() == fake[1].stride()
    assert logsumexp.shape == (2, 4, 16) and logsumexp.dtype == torch.float32
    assert (max_q, max_k) == (16, 16)


@pytest.mark.parametrize(
    "case, fused",
    [
        ("bool_mask", True),  # the CPU's flash kernel takes masks
        ("float_mask_with_grad", False),  # no gradient for the mask
        ("dropout", False),
        ("three_dims", False),
        ("grouped_query", False),  # the fused op has no enable_gqa
        ("float64", False),  # its logsumexp is float32 by contract
    ],
)
def test_attention_takes_the_fused_op_only_where_it_serves(case, fused):
    q, k, v = qkv()
    kwargs = {}
    if case == "float_mask_with_grad":
        kwargs["attn_mask"] = torch.randn(16, 16).requires_grad_()
    elif case == "bool_mask":
        kwargs["attn_mask"] = torch.rand(16, 16) > 0.3
    elif case == "dropout":
        kwargs["dropout_p"] = 0.5
    elif case == "three_dims":
        q, k, v = q[0], k[0], v[0]
    elif case == "grouped_query":
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True
    else:
        q, k, v = q.double(), k.double(), v.double()
    dev_kwargs = {name: (value.to(D) if isinstance(value, torch.Tensor) else value) for name, value in kwargs.items()}
    ops, out = ops_run(lambda: F.scaled_dot_product_attention(q.to(D), k.to(D), v.to(D), **dev_kwargs))
    assert (FUSED in ops) == fused
    if case == "dropout":
        assert out.shape == q.shape and out.device.type == D
        return
    assert_close_to_cpu(out, F.scaled_dot_product_attention(q, k, v, **kwargs), rtol=1e-5, atol=1e-5)


def test_fused_attention_bad_input_raises_and_the_device_recovers():
    q_cpu, k_cpu, v_cpu = qkv()
    with pytest.raises(RuntimeError) as cpu_error:
        F.scaled_dot_product_attention(q_cpu, k_cpu[..., :4], v_cpu)
    q, k, v = (t.to(D) for t in (q_cpu, k_cpu, v_cpu))
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(cpu_error.value))}$"):  # the CPU's error
        F.scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(RuntimeError, match="dropout"):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, dropout_p=0.5)
    assert_device_still_usable()


@pytest.mark.parametrize(
    "input_format, weight_format",
    [
        (torch.channels_last, torch.contiguous_format),
        (torch.contiguous_format, torch.channels_last),
        (torch.channels_last, torch.channels_last),
        (torch.contiguous_format, torch.contiguous_format),
    ],
)
def test_convolution_output_layout_and_gradients_match_cpu(input_format, weight_format):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 12, 12, generator=g).to(memory_format=input_format)
    w = torch.randn(6, 8, 3, 3, generator=g).to(memory_format=weight_format)

    def run(device):
        xd, wd = (t.to(device).requires_grad_() for t in (x, w))
        out = F.conv2d(xd, wd, padding=1)
        out.backward(torch.ones_like(out))
        return out, xd.grad, wd.grad

    dev, ref = run(D), run("cpu")
    assert_close_to_cpu(dev, ref, rtol=1e-4, atol=1e-4)
    assert [t.stride() for t in dev] == [t.stride() for t in ref]


@pytest.mark.parametrize("conv", BENCHMARKED_CONVOLUTIONS, ids=lambda conv: conv.name)
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_benchmarked_convolutions_match_cpu_values_gradients_and_strides(conv, memory_format):
    def run(device):
        # Made on the device itself (seeded generator there), then the same
        # values for the CPU.
        g = torch.Generator(device=D).manual_seed(0)
        tensors = [
            torch.randn(shape, device=D, generator=g)
            for shape in (conv.input_shape(size=10), conv.weight_shape, (conv.out_channels,))
        ]
        x, w, b = (t.to(device) for t in tensors)
        x = x.contiguous(memory_format=memory_format).requires_grad_()
        w = w.contiguous(memory_format=memory_format).requires_grad_()
        b.requires_grad_()
        out = conv(x, w, b)
        out.backward(torch.arange(out.numel(), dtype=out.dtype, device=device).reshape(out.shape) / out.numel())
        return out, x.grad, w.grad, b.grad

    dev, ref = run(D), run("cpu")
    assert_close_to_cpu(dev, ref, rtol=1e-4, atol=1e-4)
    assert [t.stride() for t in dev] == [t.stride() for t in ref]
