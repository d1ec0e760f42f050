"""Ops routed straight to the device-kernel path, and the host views its
kernels share.

Structured ops with a C++ Meta kernel skip ATen's generic host-side kernel
(csrc/aten/structured_op_routing.cpp): sum.dim_IntList and
threshold_backward (whose out= overloads have other names than the
functional's), amax, linalg_vector_norm and index.Tensor among them. Their
results must match the CPU's in values, dtype, shape and strides, and their
errors in type and message. The kernels' arguments are host views that are
reused while the device tensor keeps its bytes and layout
(csrc/aten/host_view.h, sharedHostView): a tensor whose layout changes
between two queued ops must still be read with the layout of each op."""

import json
import re

import pytest
import torch

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, hold_stream, run_python

ROUTED = [
    "aten::sum.dim_IntList",
    "aten::threshold_backward",
    "aten::amax",
    "aten::linalg_vector_norm",
    "aten::index.Tensor",
]


@pytest.mark.parametrize("op", ROUTED)
def test_op_is_routed_to_the_device_kernel_path(op):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")


def _assert_same_as_cpu(actual, expected):
    assert_close_to_cpu(actual, expected, rtol=1e-5, atol=1e-5)
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())


CASES = {
    "sum(dim)": lambda x, i: x.sum(1),
    "sum(dims, keepdim)": lambda x, i: x.sum((0, 2), keepdim=True),
    "sum(dtype)": lambda x, i: x.sum(-1, dtype=torch.float64),
    "sum of a transpose": lambda x, i: x.transpose(0, 2).sum(0),
    "amax(-1)": lambda x, i: x.amax(-1),
    "amax(dims, keepdim)": lambda x, i: x.amax((0, 1), keepdim=True),
    "amax of a transpose": lambda x, i: x.transpose(1, 2).amax(1),
    "norm()": lambda x, i: x.norm(),
    "vector_norm(1, dim)": lambda x, i: torch.linalg.vector_norm(x, 1, dim=1),
    "vector_norm(inf, keepdim)": lambda x, i: torch.linalg.vector_norm(x, float("inf"), dim=(0, 2), keepdim=True),
    "vector_norm(3, dtype)": lambda x, i: torch.linalg.vector_norm(x, 3, dtype=torch.float64),
    "x[idx]": lambda x, i: x[i],
    "x[:, idx]": lambda x, i: x[:, i],
    "x[idx, :, idx]": lambda x, i: x[i, :, i],
    "x[None, idx]": lambda x, i: x[None, i],
    "x[int32 idx]": lambda x, i: x[:, :, i.int()],
    "x.t()[idx]": lambda x, i: x[0].t()[i],
    "x[mask]": lambda x, i: x[x > 0],
    "x[empty mask]": lambda x, i: x[x > 100],
}


@pytest.mark.parametrize("case", list(CASES))
def test_routed_op_matches_the_cpu(case):
    x = torch.randn(3, 4, 5, device="mydev")
    index = torch.tensor([2, -1, 0, 2], device="mydev")
    _assert_same_as_cpu(CASES[case](x, index), CASES[case](x.cpu(), index.cpu()))


def test_host_index_moves_to_the_device():
    x = torch.randn(4, 3, device="mydev")
    index = torch.tensor([3, 1])
    _assert_same_as_cpu(x[index], x.cpu()[index])


def test_threshold_backward_matches_the_cpu():
    x = torch.randn(6, 5, device="mydev", requires_grad=True)
    grad = torch.randn(6, 5, device="mydev")
    torch.relu(x).backward(grad)
    cpu_x = x.detach().cpu().requires_grad_()
    torch.relu(cpu_x).backward(grad.cpu())
    _assert_same_as_cpu(x.grad, cpu_x.grad)
    direct = torch.ops.aten.threshold_backward(grad, x.detach(), 0.5)
    _assert_same_as_cpu(direct, torch.ops.aten.threshold_backward(grad.cpu(), cpu_x.detach(), 0.5))


BAD_INPUTS = {
    "sum of a missing dim": lambda x, i: x.sum(7),
    "amax of a missing dim": lambda x, i: x.amax(5),
    "vector_norm of integers": lambda x, i: torch.linalg.vector_norm(x.long()),
    "float index": lambda x, i: x[i.float()],
    "too many indices": lambda x, i: x[i, i, i, i],
    "indices of unequal shapes": lambda x, i: x[i, i[:2]],
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_the_cpu_error(case):
    x = torch.randn(3, 4, 5, device="mydev")
    index = torch.tensor([0, 1, 2], device="mydev")
    with pytest.raises(Exception) as on_cpu:
        BAD_INPUTS[case](x.cpu(), index.cpu())
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).splitlines()[0])):
        BAD_INPUTS[case](x, index)
    assert_device_still_usable()


def test_index_out_of_range_raises_at_the_next_synchronize():
    # As on cuda: the bound is checked by the kernel, and the error surfaces
    # at the next synchronizing call, with the CPU kernel's type and message.
    x = torch.randn(3, device="mydev")
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 3"):
        x[torch.tensor([7], device="mydev")]
        torch.mydev.synchronize()
    assert_device_still_usable()


def test_queued_ops_read_each_their_own_layout_of_a_tensor():
    # While the stream is held, the same tensor (same bytes) is used with
    # three layouts and as input and output of one op; a host view shared
    # between those kernels would read the last layout for all of them.
    x = torch.arange(12.0, device="mydev").reshape(3, 4)
    expected_x = torch.arange(12.0).reshape(3, 4)
    # Made before the hold: a copy between host and device waits for the stream.
    index, cpu_index = torch.tensor([1, 0], device="mydev"), torch.tensor([1, 0])
    results, expected = [], []
    with hold_stream():
        results.append(x * 2)
        expected.append(expected_x * 2)
        x.t_()
        expected_x.t_()
        results.append(x * 2)
        expected.append(expected_x * 2)
        x.as_strided_((2, 2), (1, 4), 1)
        expected_x.as_strided_((2, 2), (1, 4), 1)
        results.append(x[index])
        expected.append(expected_x[cpu_index])
        x.add_(x)
        expected_x.add_(expected_x)
        results.append(x.amax(0))
        expected.append(expected_x.amax(0))
    for actual, reference in zip(results, expected):
        _assert_same_as_cpu(actual, reference)
    _assert_same_as_cpu(x, expected_x)


def test_same_bytes_as_another_dtype():
    x = torch.randn(8, device="mydev")
    as_ints = x.view(torch.int32)
    assert_close_to_cpu(as_ints + 0, x.cpu().view(torch.int32), exact=True)
    assert_close_to_cpu(x + 0, x.cpu(), exact=True)


def test_empty_tensors_are_not_one_tensor_to_the_kernels():
    # Empty tensors share an address, and often a layout: shared host views
    # made them one tensor to ATen, whose overlap checks then refused a
    # stack of two and whose linalg_qr resized its input with its empty Q.
    a, b = torch.empty(0, 1, 0, device="mydev"), torch.empty(0, 1, 0, device="mydev")
    _assert_same_as_cpu(torch.stack([a, b]), torch.stack([a.cpu(), b.cpu()]))
    empty = torch.empty(0, 5, 0, device="mydev")
    for actual, reference in zip(torch.linalg.qr(empty), torch.linalg.qr(empty.cpu())):
        _assert_same_as_cpu(actual, reference)
    values = torch.randn(3, 5, device="mydev")
    nothing = torch.zeros(3, 5, dtype=torch.bool, device="mydev")
    _assert_same_as_cpu(values[nothing], values.cpu()[nothing.cpu()])
    torch.mydev.synchronize()
    assert_device_still_usable()


@pytest.mark.parametrize(
    "product",
    [
        lambda a, b: torch.mm(a, b),
        lambda a, b: torch.bmm(a[None], b[None]),
        lambda a, b: torch.addmm(a, a, b),
        lambda a, b: torch.addmm(b, a, a),
        lambda a, b: a.addmm_(a, b),
        lambda a, b: torch.mm(a, b, out=torch.empty_like(a)),
    ],
    ids=["mm", "bmm", "addmm", "addmm_self", "addmm_", "mm_out"],
)
def test_products_of_two_dtypes_raise_the_cpu_error_at_the_call(product):
    # The Meta kernels take them; the CPU kernels refuse them. The error must
    # come at the call, as on the CPU and cuda, not from the stream later.
    a, b = torch.randn(3, 3, device="mydev"), torch.randn(3, 3, dtype=torch.float64, device="mydev")
    with pytest.raises(RuntimeError) as cpu_error:
        product(a.cpu(), b.cpu())
    with pytest.raises(RuntimeError) as error:
        product(a, b)
    assert str(error.value) == str(cpu_error.value)
    torch.mydev.synchronize()
    assert_device_still_usable()


CHAIN_SCRIPT = """
import json, sys
import torch

x = torch.randn(4, 6, device="mydev")
index = torch.tensor([3, 0], device="mydev")
h = x.cpu()
print(json.dumps({
    "dynamo_imported": "torch._dynamo" in sys.modules,
    "sum": torch.allclose(x.sum(1).cpu(), h.sum(1), atol=1e-5),
    "amax": torch.equal(x.amax(-1).cpu(), h.amax(-1)),
    "norm": torch.allclose(x.norm().cpu(), h.norm()),
    "index": torch.equal(x[index].cpu(), h[index.cpu()]),
}))
"""


def test_a_plain_script_runs_the_routed_ops_without_python_meta_kernels():
    result = run_python(CHAIN_SCRIPT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"dynamo_imported": False, "sum": True, "amax": True, "norm": True, "index": True}
