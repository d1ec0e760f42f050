"""The first ops of a process: no Python import on the host thread.

torch registers Python Meta kernels over ATen's C++ ones, and the first of
them to run imports torch._dynamo (about a second). The device-kernel path
computes the output metadata of a program's usual first ops with ATen's C++
Meta kernels instead (csrc/aten/native_meta_kernels.h); these tests check
that behaviour, not time."""

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
