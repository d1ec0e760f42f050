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
"""


# The activations, losses, lookups and draws with hand-written Meta kernels
# (activation_loss_meta_kernels.cpp, lookup_meta_kernels.cpp,
# sampling_meta_kernels.cpp, and padding and unfold in
# layer_meta_kernels.cpp), forward and backward, on transposed and
# channels-last inputs whose layout the results follow on the CPU.
LOSSES_AND_LOOKUPS_SCRIPT = """
import json, sys
import torch
import torch.nn.functional as F

x = torch.randn(4, 3, 5, device="mydev").transpose(0, 2)
target = torch.rand(5, 3, 4, device="mydev")
image = torch.randn(2, 3, 4, 5, device="mydev").contiguous(memory_format=torch.channels_last)
prelu_weight = torch.full((3,), 0.25, device="mydev")


def run(t, target, image, prelu_weight):
    t = t.detach().requires_grad_()
    image = image.detach().requires_grad_()
    prelu_weight = prelu_weight.detach().requires_grad_()
    probabilities = t.sigmoid()
    results = {
        "logsigmoid": F.logsigmoid(t),
        "prelu": F.prelu(image, prelu_weight),
        "huber": F.huber_loss(t, target, reduction="none"),
        "huber_mean": F.huber_loss(t, target, delta=0.5),
        "bce": F.binary_cross_entropy(probabilities, target, reduction="none"),
        "bce_mean": F.binary_cross_entropy(probabilities, target),
        "bce_with_logits": F.binary_cross_entropy_with_logits(t, target),
        "count_nonzero": torch.count_nonzero(t > 0, dim=1),
        "count_nonzero_all": torch.count_nonzero(t > 0),
        "take": torch.take(t, torch.tensor([[0, 7], [3, 59]], device=t.device).t()),
        "searchsorted": torch.searchsorted(torch.linspace(-2, 2, 9, device=t.device), t.detach()),
        "searchsorted_int32": torch.searchsorted(
            torch.linspace(-2, 2, 9, device=t.device), t.detach(), right=True, out_int32=True
        ),
        "bucketize": torch.bucketize(t.detach(), torch.linspace(-2, 2, 9, device=t.device)),
        "addbmm": torch.addbmm(target[0], t.detach()[:2, :3, :3], t.detach()[:2, :3, :4]),
        "addr": torch.addr(target[0], t.detach()[0, :, 0], t.detach()[1, 0]),
        "logit": target.logit(eps=1e-6),
        "reflection_pad": F.pad(image.detach(), (1, 2, 2, 1), mode="reflect"),
        "unfold": F.unfold(image.detach(), 2, padding=1, stride=2),
        "randperm_sorted": torch.randperm(9, device=t.device).sort()[0],
        "multinomial_shape": torch.tensor(torch.multinomial(target[0], 2).shape),
    }
    loss = sum(
        results[name].float().sum()
        for name in ("logsigmoid", "prelu", "huber", "huber_mean", "bce", "bce_mean", "bce_with_logits")
    )
    loss.backward()
    results.update(grad=t.grad, image_grad=image.grad, prelu_weight_grad=prelu_weight.grad)
    return results


on_device = run(x, target, image, prelu_weight)
on_cpu = run(x.cpu(), target.cpu(), image.cpu(), prelu_weight.cpu())
"""


# A training step's backward through the layers whose Meta kernels
# layer_meta_kernels.cpp writes: convolution (contiguous, channels-last, 1-D,
# transposed), batch, layer and group norm, attention, dropout and the mse
# loss; gradients and their strides against the CPU's.
LAYER_BACKWARD_SCRIPT = """
import json, sys
import torch
import torch.nn.functional as F

torch.manual_seed(0)
image = torch.randn(2, 3, 6, 5, device="mydev")
kernel = torch.randn(4, 3, 3, 3, device="mydev")
sequence = torch.randn(2, 4, 7, 8, device="mydev")
norm_weight = torch.randn(8, device="mydev")
channel_weight = torch.randn(4, device="mydev")
keep = torch.rand(2, 4, 7, 8, device="mydev") > 0.3


def run(image, kernel, sequence, norm_weight, channel_weight, keep):
    leaves = {
        name: t.detach().clone().requires_grad_()
        for name, t in dict(
            image=image,
            image_cl=image.contiguous(memory_format=torch.channels_last),
            kernel=kernel,
            sequence=sequence,
            norm_weight=norm_weight,
            channel_weight=channel_weight,
        ).items()
    }
    features = F.conv2d(leaves["image"], leaves["kernel"], padding=1)
    features_cl = F.conv2d(leaves["image_cl"], leaves["kernel"], stride=2)
    line = F.conv1d(leaves["image"].flatten(2), leaves["kernel"].flatten(2)[..., :3])
    upsampled = F.conv_transpose2d(leaves["image"], leaves["kernel"].transpose(0, 1), stride=2)
    normalized = (
        F.batch_norm(features, None, None, leaves["channel_weight"], leaves["channel_weight"], training=True)
        + F.batch_norm(features_cl, torch.zeros(4, device=features.device), torch.ones(4, device=features.device),
                       leaves["channel_weight"], None, training=True).mean()
        + F.group_norm(features, 2, leaves["channel_weight"], leaves["channel_weight"])
    )
    attention = F.scaled_dot_product_attention(
        leaves["sequence"], leaves["sequence"] * 2, leaves["sequence"].tanh(), is_causal=True
    )
    tokens = F.layer_norm(attention, (8,), leaves["norm_weight"], leaves["norm_weight"])
    dropped = torch.ops.aten.native_dropout_backward(tokens, keep, 2.0)
    loss = (
        normalized.square().mean()
        + line.square().mean()
        + upsampled.square().mean()
        + F.mse_loss(dropped, leaves["sequence"])
        + F.layer_norm(tokens, (8,)).sum()
    )
    loss.backward()
    return {f"{name}.grad": leaf.grad for name, leaf in leaves.items()}


on_device = run(image, kernel, sequence, norm_weight, channel_weight, keep)
on_cpu = run(image.cpu(), kernel.cpu(), sequence.cpu(), norm_weight.cpu(), channel_weight.cpu(), keep.cpu())
"""


# The utilities of a training loop around its optimizer: gradient clipping
# (by norm and by value), GradScaler's unscale and an EMA of the weights,
# through the _foreach_* ops (foreach_meta_kernels.cpp), in place and
# functional.
TRAINING_UTILITIES_SCRIPT = """
import json, sys
import torch

torch.manual_seed(0)
params = [torch.randn(3, 4, device="mydev"), torch.randn(5, device="mydev")]
grads = [torch.randn(3, 4, device="mydev") * 3, torch.randn(5, device="mydev") * 3]


def run(params, grads):
    params = [p.clone().requires_grad_() for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    results = {"total_norm": torch.nn.utils.clip_grad_norm_(params, 1.0)}
    results.update({f"clipped_by_norm.{i}": p.grad.clone() for i, p in enumerate(params)})
    torch.nn.utils.clip_grad_value_(params, 0.1)
    results.update({f"clipped_by_value.{i}": p.grad for i, p in enumerate(params)})
    inv_scale = torch.full((1,), 0.5, device=grads[0].device)
    finite_inf, nonfinite_inf = torch.zeros(1, device=inv_scale.device), torch.zeros(1, device=inv_scale.device)
    unscaled = [g.clone() for g in grads]
    torch._amp_foreach_non_finite_check_and_unscale_(unscaled, finite_inf, inv_scale)
    torch._amp_foreach_non_finite_check_and_unscale_([grads[1].log()], nonfinite_inf, inv_scale)
    results.update({f"unscaled.{i}": g for i, g in enumerate(unscaled)})
    results.update(finite_inf=finite_inf, nonfinite_inf=nonfinite_inf)
    ema = [p.detach().clone() for p in params]
    torch._foreach_lerp_(ema, grads, 0.1)
    torch._foreach_mul_(ema, 0.9)
    torch._foreach_add_(ema, grads, alpha=-0.5)
    torch._foreach_addcmul_(ema, grads, grads, value=0.01)
    results.update({f"ema.{i}": e for i, e in enumerate(ema)})
    results.update({f"doubled.{i}": t for i, t in enumerate(torch._foreach_mul(grads, 2.0))})
    results.update({f"magnitude.{i}": t for i, t in enumerate(torch._foreach_sqrt(torch._foreach_mul(grads, grads)))})
    results.update({f"ratio.{i}": t for i, t in enumerate(torch._foreach_div(grads, ema))})
    return results


on_device = run(params, grads)
on_cpu = run([p.cpu() for p in params], [g.cpu() for g in grads])
"""


# What each script above ends with: its results on the device against the
# CPU's (values within the tolerances, strides and dtypes equal), and which
# of the modules a Python Meta kernel imports were imported.
COMPARE_WITH_THE_CPU = """
print(json.dumps({{
    "imported": sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules),
    "mismatched": sorted(
        name for name in on_cpu
        if not torch.allclose(on_device[name].cpu(), on_cpu[name], atol={atol}, rtol={rtol}, equal_nan=True)
        or on_device[name].stride() != on_cpu[name].stride()
        or on_device[name].dtype != on_cpu[name].dtype
    ),
}}))
"""


@pytest.mark.parametrize(
    "script, tolerance",
    [
        (WIDER_OPS_SCRIPT, 1e-5),
        (LOSSES_AND_LOOKUPS_SCRIPT, 1e-5),
        (LAYER_BACKWARD_SCRIPT, 1e-4),
        (TRAINING_UTILITIES_SCRIPT, 1e-5),
    ],
    ids=["wider-ops", "losses-and-lookups", "layer-backward", "training-utilities"],
)
def test_ops_of_a_plain_script_match_the_cpu_and_import_neither_dynamo_nor_sympy(script, tolerance):
    result = run_python(script + COMPARE_WITH_THE_CPU.format(atol=tolerance, rtol=tolerance))
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
        lambda t: torch.nn.functional.logsigmoid(t.long()),
        lambda t: torch.nn.functional.huber_loss(t, t, delta=0.0),
        lambda t: torch.ops.aten.binary_cross_entropy(t.sigmoid(), t.sigmoid().double()),
        lambda t: torch.take(t, torch.zeros(2, dtype=torch.int32, device=t.device)),
        lambda t: torch.searchsorted(t[0, 0], t),
        lambda t: torch.bucketize(t, t),
        lambda t: torch.addbmm(t, t.unsqueeze(0), t.unsqueeze(0)),
        lambda t: torch.count_nonzero(t, dim=(0, 0)),
        lambda t: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            t.expand(1, 1, 2, 3), t.expand(1, 1, 2, 3), t[:, :2].expand(1, 1, 2, 2), 0.0, False
        ),
        lambda t: torch.ops.aten.convolution_backward(
            t.expand(1, 1, 2, 3),
            t.expand(1, 1, 2, 3),
            t.double().expand(1, 1, 1, 1),
            None,
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
            [True, True, False],
        ),
        lambda t: torch.ops.aten.mse_loss_backward(t, t.long(), t, 1),
        lambda t: torch.multinomial(t.abs(), 4),
        lambda t: torch.nn.functional.pad(t.expand(1, 2, 3), (3, 0), mode="reflect"),
        lambda t: torch.nn.functional.unfold(t.expand(1, 1, 2, 3), 3),
        lambda t: torch.addr(t, t, t[0]),
        lambda t: torch._foreach_add_([t.clone(), t.clone()], [t]),
        lambda t: torch._foreach_mul_([t.clone()], t),
        lambda t: torch._foreach_add_([t.clone()], [t[0, :2]]),
        lambda t: torch._foreach_add_([t.long()], [t]),
        lambda t: torch._foreach_div([t], [t, t]),
        lambda t: torch._amp_foreach_non_finite_check_and_unscale_([t.clone()], t.new_zeros(2), t.new_ones(1)),
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
        "logsigmoid-of-integers",
        "huber_loss-delta-zero",
        "binary_cross_entropy-target-dtype",
        "take-int32-index",
        "searchsorted-0-dim-boundaries",
        "bucketize-2-d-boundaries",
        "addbmm-shapes-disagree",
        "count_nonzero-repeated-dim",
        "flash-attention-head-sizes-differ",
        "convolution_backward-dtypes-differ",
        "mse_loss_backward-of-integers",
        "multinomial-more-samples-than-categories",
        "reflection_pad-as-wide-as-the-input",
        "unfold-kernel-larger-than-the-input",
        "addr-2-d-vector",
        "foreach-lists-of-different-lengths",
        "foreach-tensor-not-0-dim",
        "foreach-shapes-disagree",
        "foreach-in-place-float-into-long",
        "foreach-functional-lists-of-different-lengths",
        "amp-unscale-found_inf-two-elements",
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
