"""The first ops of a process: no Python import on the host thread.

torch registers Python Meta kernels over ATen's C++ ones, and the first of
them to run imports torch._dynamo (about a second). The device-kernel path
computes the output metadata with ATen's C++ Meta kernels instead (every
structured op, and a few others: csrc/aten/native_meta_kernels.h), and ops
whose result's shape depends on the data skip Meta kernels altogether;
these tests check that behaviour, not time."""

import json
import re

import pytest
import torch

from mydev_testing import assert_close_to_cpu, run_python

FIRST_OPS_SCRIPT = """
import copy, json, sys
import torch

x = torch.randn(4, 8, device="mydev")
y = x * 2
z = x + y
s = z.sum(dim=1)
p = torch.softmax(z, dim=-1)
mask = x > 0
filled = x.masked_fill(mask, 0.0)
equal = x == y / 2
picked = torch.where(mask, x, 0.0).clamp(-1, 1)
joined = torch.cat([picked, x.cumsum(1).tril()], dim=0)
normed = torch.nn.functional.layer_norm(x.abs(), (8,))
cpu_linear = torch.nn.Linear(8, 3)
linear = copy.deepcopy(cpu_linear).to("mydev")
out = torch.relu(linear(x))
loss = torch.nn.functional.cross_entropy(out, torch.tensor([0, 1, 2, 0], device="mydev"))
loss.backward()
h = x.cpu()
cpu_out = torch.relu(cpu_linear(h))
torch.nn.functional.cross_entropy(cpu_out, torch.tensor([0, 1, 2, 0])).backward()
print(json.dumps({
    "dynamo_imported": "torch._dynamo" in sys.modules,
    "y": (h * 2).tolist() == y.cpu().tolist(),
    "z": torch.allclose((h + h * 2), z.cpu()),
    "s": torch.allclose((h * 3).sum(dim=1), s.cpu(), atol=1e-5),
    "p": torch.allclose(torch.softmax(h * 3, dim=-1), p.cpu(), atol=1e-6),
    "masks": mask.cpu().tolist() == (h > 0).tolist() and equal.cpu().all().item(),
    "filled": filled.cpu().tolist() == h.masked_fill(h > 0, 0.0).tolist(),
    "normed": torch.allclose(normed.cpu(), torch.nn.functional.layer_norm(h.abs(), (8,)), atol=1e-5),
    "joined": torch.allclose(
        joined.cpu(), torch.cat([torch.where(h > 0, h, 0.0).clamp(-1, 1), h.cumsum(1).tril()]), atol=1e-6
    ) and joined.argmax(dim=1).tolist() == torch.cat(
        [torch.where(h > 0, h, 0.0).clamp(-1, 1), h.cumsum(1).tril()]
    ).argmax(dim=1).tolist(),
    "out": torch.allclose(cpu_out, out.cpu(), atol=1e-5),
    "grad": torch.allclose(cpu_linear.weight.grad, linear.weight.grad.cpu(), atol=1e-5),
}))
"""


def test_first_ops_of_a_plain_script_import_no_dynamo():
    result = run_python(FIRST_OPS_SCRIPT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "dynamo_imported": False,
        "y": True,
        "z": True,
        "s": True,
        "p": True,
        "masks": True,
        "filled": True,
        "joined": True,
        "normed": True,
        "out": True,
        "grad": True,
    }


# Ops beyond a program's first few: structured ones (from the generated
# table), the hand-written Meta kernels, and ops whose result's shape
# depends on the data (no Meta kernel runs; sympy is not imported either).
WIDER_OPS_SCRIPT = """
import json, sys
import torch
import torch.nn.functional as F

x = torch.randn(6, 5, device="mydev")
h = x.cpu()
flags = x > 0


def run(t):
    return {
        "sort": t.sort(dim=1)[0],
        "topk": t.topk(2)[1],
        "atan2": torch.atan2(t, t.flip(0)),
        "leaky_relu": F.leaky_relu(t, 0.1),
        "relu6": F.relu6(t),
        "hardtanh_backward": torch.ops.aten.hardtanh_backward(t, t, -0.5, 0.5),
        "cumprod": t.cumprod(1),
        "std": t.std(dim=0),
        "var_mean": torch.stack(torch.var_mean(t, dim=1, correction=0)),
        "roll": t.roll((1, -2), (0, 1)),
        "rolled_flat": t.roll(3),
        "flip": t.flip(0, 1),
        "isnan": t.log().isnan(),
        "logical_not": (t > 0).logical_not(),
        "logsumexp": t.logsumexp(1),
        "nonzero": (t > 0).nonzero(),
        "masked_select": t.masked_select(t > 0),
        "nan_to_num": t.log().nan_to_num(),
        "int_nan_to_num": (t > 0).long().nan_to_num(),
        "arange": torch.arange(7, device=t.device),
        "float_arange": torch.arange(0.0, 1.0, 0.3, device=t.device),
        "linspace": torch.linspace(-1, 1, 5, device=t.device),
        "logspace": torch.logspace(0, 2, 4, device=t.device),
        "eye": torch.eye(3, 4, device=t.device),
        "logical_and": torch.logical_and(t > 0, t < 1),
        "hardswish": F.hardswish(t),
        "dot": t[0].dot(t[1]),
        "batch_norm": F.batch_norm(t, None, None, training=True),
        "batch_norm_eval": F.batch_norm(t, t[0].abs(), t[1].abs() + 1, t[2], t[3]),
        "group_norm": F.group_norm(t.reshape(2, 3, 5), 3, t[0, :3], t[1, :3]),
        "conv2d": F.conv2d(t.reshape(1, 2, 3, 5), t[:4, :2].reshape(2, 2, 2, 1), t[5, :2], padding=1),
        "conv2d_channels_last_input": F.conv2d(
            t.reshape(1, 2, 3, 5).contiguous(memory_format=torch.channels_last), t[:4, :2].reshape(2, 2, 2, 1)
        ),
        "conv2d_channels_last_weight": F.conv2d(
            t.reshape(1, 2, 3, 5), t[:4, :2].reshape(2, 2, 2, 1).contiguous(memory_format=torch.channels_last)
        ),
        "conv1d": F.conv1d(t.reshape(2, 3, 5), t[:3, :2].reshape(1, 3, 2), stride=2),
        "conv_transpose2d": F.conv_transpose2d(t.reshape(1, 2, 3, 5), t[:2, :4].reshape(2, 1, 2, 2), stride=2),
        "conv3d": F.conv3d(t.reshape(1, 1, 2, 3, 5), t[0, :4].reshape(1, 1, 1, 2, 2)),
        "channels_last_batch_norm": F.batch_norm(
            t.reshape(1, 6, 5, 1).contiguous(memory_format=torch.channels_last), None, None, training=True
        ),
    }


on_device = run(x)
on_cpu = run(h)
print(json.dumps({
    "imported": sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules),
    "mismatched": sorted(
        name for name in on_cpu
        if not torch.allclose(on_device[name].cpu(), on_cpu[name], atol=1e-5, equal_nan=True)
        or on_device[name].stride() != on_cpu[name].stride()
    ),
}))
"""


def test_wider_ops_of_a_plain_script_import_neither_dynamo_nor_sympy():
    result = run_python(WIDER_OPS_SCRIPT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"imported": [], "mismatched": []}


def test_python_number_promotes_like_on_the_cpu():
    # `ints * 2.5` is float32 (a Python number promotes weakly), while a
    # 0-dim float64 tensor would make it float64: the metadata keeps the
    # difference.
    ints = torch.arange(6, device="mydev").reshape(2, 3)
    assert_close_to_cpu(ints * 2.5, torch.arange(6).reshape(2, 3) * 2.5, exact=True)
    assert (ints * 2.5).dtype == torch.float32
    dim0 = torch.tensor(2.5, dtype=torch.float64)
    assert_close_to_cpu(ints * dim0, torch.arange(6).reshape(2, 3) * dim0, exact=True)


def test_native_meta_kernel_errors_match_the_cpu():
    a = torch.ones(2, 3, device="mydev")
    b = torch.ones(4, 5, device="mydev")
    with pytest.raises(RuntimeError) as on_cpu:
        torch.mm(a.cpu(), b.cpu())
    with pytest.raises(RuntimeError, match=re.escape(str(on_cpu.value))):
        torch.mm(a, b)
    flags = torch.ones(3, dtype=torch.bool, device="mydev")
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torch.relu(flags)
    for mask, value, cpu_mask, cpu_value in (
        (a > 0, torch.ones(2, device="mydev"), a.cpu() > 0, torch.ones(2)),
        (a, 1.0, a.cpu(), 1.0),
        (b > 0, 1.0, b.cpu() > 0, 1.0),
    ):
        with pytest.raises(RuntimeError) as on_cpu:
            a.cpu().masked_fill(cpu_mask, cpu_value)
        with pytest.raises(RuntimeError, match=re.escape(str(on_cpu.value))):
            a.masked_fill(mask, value)
    # The process is still usable after.
    assert_close_to_cpu(torch.relu(a - 2) + a, torch.relu(torch.ones(2, 3) - 2) + 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.clone().masked_fill_(torch.ones(4, 2, 3, dtype=torch.bool, device=t.device), 0.0),
        lambda t: t.clone().masked_fill_(t > 0, torch.ones(2, device=t.device)),
        lambda t: t.clone().masked_fill_(t, 0.0),
        lambda t: t.roll((1, 2), (0,)),
        lambda t: t.roll((), ()),
        lambda t: t.flip(0, 0),
        lambda t: t.flip(2),
        lambda t: t.long().std(),
        lambda t: torch.var_mean(t, dim=3),
        lambda t: torch.nn.functional.hardtanh(t.bool()),
        lambda t: torch.nn.functional.hardtanh(t.to(torch.uint8), -1.0, 1.0),
    ],
    ids=[
        "masked_fill_-grows-self",
        "masked_fill_-value-not-0-dim",
        "masked_fill_-float-mask",
        "roll-shifts-dims-differ",
        "roll-no-shifts",
        "flip-repeated-dim",
        "flip-dim-out-of-range",
        "std-of-integers",
        "var_mean-dim-out-of-range",
        "hardtanh-bool",
        "hardtanh-uint8-negative-limit",
    ],
)
def test_hand_written_meta_kernel_errors_match_the_cpu(call):
    values = torch.randn(2, 3, device="mydev")
    with pytest.raises(Exception) as on_cpu:
        call(values.cpu())
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).splitlines()[0])):
        call(values)
    # The process is still usable after.
    assert_close_to_cpu(values.flip(1).roll(1, 0).std(dim=1), values.cpu().flip(1).roll(1, 0).std(dim=1))
