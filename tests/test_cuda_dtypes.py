"""cuda's dtype coverage on mydev: dtypes cuda's kernels support and the
CPU's do not, checked against the CPU computing in a wider dtype."""

import pytest
import torch
import torch.nn.functional as F

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, run_python

DEV = "mydev"


def _beyond_cpu_pairs():
    """(OpInfo, dtype) pairs cuda supports and the CPU does not
    (dtypesIfCUDA minus dtypes), from PyTorch's OpInfo database."""
    from torch.testing._internal.common_methods_invocations import op_db

    return [
        (op, dtype)
        for op in op_db
        for dtype in sorted(set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu")), key=str)
    ]


# Ops with no CPU kernel at any dtype (cuda-only fused attention): there is
# nothing on the CPU to compute them with.
_CUDA_ONLY_OPS = {"torch.ops.aten._flash_attention_forward", "torch.ops.aten._efficient_attention_forward"}


def test_the_opinfo_database_lists_99_pairs_over_70_ops():
    pairs = _beyond_cpu_pairs()
    assert len(pairs) == 99
    assert len({op.full_name for op, _ in pairs}) == 70


@pytest.mark.parametrize(
    "op,dtype",
    [
        pytest.param(op, dtype, id=f"{op.full_name}-{str(dtype)[6:]}")
        for op, dtype in _beyond_cpu_pairs()
        if op.full_name not in _CUDA_ONLY_OPS
    ],
)
def test_opinfo_samples_match_the_widened_cpu(op, dtype):
    from device_ext.conformance.results import Status
    from device_ext.conformance.runner import RunOptions, run_op

    result = run_op(op, dtype, RunOptions(max_samples=4))
    assert result.status in (Status.PASS, Status.SKIPPED), (result.status, result.reason)
    if result.status == Status.SKIPPED:
        # Only values that are not reproducible, or a CPU reference that
        # does not exist at any width (complex nansum): never "the CPU raises".
        assert result.op.startswith(("nansum", "nanmean", "nn.functional.rrelu")), result.skip_reasons


def test_histc_of_integers_as_a_moe_router_calls_it():
    experts = torch.tensor([0, 3, 3, 1, 7, 7, 7, 2], dtype=torch.int32)
    counts = torch.histc(experts.to(DEV), bins=8, min=0, max=7)
    assert counts.dtype == torch.int32
    assert_close_to_cpu(counts, torch.histc(experts.double(), bins=8, min=0, max=7).int())
    # min == max: the data's range, as on cuda
    data = torch.randint(-5, 20, (100,), dtype=torch.int64, device=DEV)
    expected = torch.histc(data.cpu().double(), bins=6).long()
    assert_close_to_cpu(torch.histc(data, bins=6), expected)
    for dtype in (torch.uint8, torch.int8, torch.int16):
        made_on_device = torch.randint(0, 100, (64,), device=DEV).to(dtype)
        assert_close_to_cpu(
            torch.histc(made_on_device, bins=10, min=0, max=99),
            torch.histc(made_on_device.cpu().double(), bins=10, min=0, max=99).to(dtype),
        )


@pytest.mark.parametrize("fn", [torch.exp, torch.sin, torch.sqrt, torch.sigmoid, torch.tanh, torch.angle])
def test_complex32_math(fn):
    x = torch.randn(16, dtype=torch.complex64, device=DEV).to(torch.complex32)
    result = fn(x)
    expected = fn(x.cpu().to(torch.complex64))
    expected = expected.to(torch.complex32 if expected.is_complex() else torch.float16)
    assert_close_to_cpu(result, expected)


def test_complex32_in_place_and_out():
    x = torch.randn(8, dtype=torch.complex64).to(torch.complex32)
    on_device = x.to(DEV)
    on_device.exp_()
    assert_close_to_cpu(on_device, x.to(torch.complex64).exp().to(torch.complex32))
    out = torch.empty(8, dtype=torch.complex32, device=DEV)
    torch.sum(x.to(DEV).view(2, 4), dim=1, out=out[:2])
    assert_close_to_cpu(out[:2], x.to(torch.complex64).view(2, 4).sum(1).to(torch.complex32))


def test_complex32_convolution():
    x = torch.randn(1, 2, 8, 8, dtype=torch.complex64).to(torch.complex32)
    w = torch.randn(3, 2, 3, 3, dtype=torch.complex64).to(torch.complex32)
    expected = F.conv2d(x.to(torch.complex64), w.to(torch.complex64)).to(torch.complex32)
    assert_close_to_cpu(F.conv2d(x.to(DEV), w.to(DEV)), expected, atol=1e-2, rtol=1e-2)


def test_half_fft_pooling_and_losses():
    x = torch.randn(2, 16, dtype=torch.float16, device=DEV)
    assert_close_to_cpu(torch.fft.rfft(x), torch.fft.rfft(x.cpu().float()).to(torch.complex32))
    v = torch.randn(1, 2, 4, 4, 4, dtype=torch.bfloat16, device=DEV, requires_grad=True)
    v_cpu = v.detach().cpu().float().requires_grad_()
    F.avg_pool3d(v, 2).sum().backward()
    F.avg_pool3d(v_cpu, 2).sum().backward()
    assert_close_to_cpu(F.avg_pool3d(v, 2), F.avg_pool3d(v_cpu, 2).to(torch.bfloat16))
    assert_close_to_cpu(v.grad, v_cpu.grad.to(torch.bfloat16))
    scores, target = torch.randn(4, 5, dtype=torch.float16), torch.tensor([0, 4, 2, 1])
    assert_close_to_cpu(
        F.multi_margin_loss(scores.to(DEV), target.to(DEV)),
        F.multi_margin_loss(scores.float(), target).half(),
    )


def test_bool_abs_and_trace():
    b = torch.rand(4, 4, device=DEV) > 0.5
    assert_close_to_cpu(b.abs(), b.cpu())
    assert_close_to_cpu(torch.trace(b), torch.trace(b.cpu().to(torch.uint8)))
    assert_close_to_cpu(F.softsign(b), F.softsign(b.cpu().to(torch.uint8)))


def test_complex_nansum_counts_nan_as_zero():
    z = torch.randn(3, 4, dtype=torch.complex64)
    z[0, 1] = complex(float("nan"), 1.0)
    z[2, 3] = complex(1.0, float("nan"))
    expected = torch.where(z.isnan(), torch.zeros_like(z), z)
    assert_close_to_cpu(torch.nansum(z.to(DEV)), expected.sum())
    assert_close_to_cpu(torch.nansum(z.to(DEV), dim=1), expected.sum(1))
    assert_close_to_cpu(torch.nanmean(z.to(DEV), dim=1), expected.sum(1) / (~z.isnan()).sum(1))


def test_bad_input_keeps_the_cpu_error():
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(torch.arange(4, dtype=torch.int32, device=DEV), bins=-1).cpu()
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.arange(4, dtype=torch.int32, device=DEV), bins=4, min=3, max=1).cpu()
    torch.mydev.synchronize()
    assert_device_still_usable()


def test_moe_router_script_in_a_fresh_process():
    result = run_python(
        """
        import torch
        logits = torch.randn(32, 8, device="mydev")
        top = logits.topk(2, dim=-1).indices.flatten().to(torch.int32)
        tokens_per_expert = torch.histc(top, bins=8, min=0, max=7)
        ref = torch.bincount(top.cpu().long(), minlength=8).to(torch.int32)
        assert torch.equal(tokens_per_expert.cpu(), ref), (tokens_per_expert, ref)
        print(tokens_per_expert.dtype, int(tokens_per_expert.sum()))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["torch.int32", "64"]
