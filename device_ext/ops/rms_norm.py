"""``mydev::rms_norm(Tensor x, Tensor weight, float eps) -> Tensor``

    out = x * rsqrt(mean(x ** 2, dim=-1, keepdim=True) + eps) * weight

x: [..., hidden], float32 / bfloat16 / float16; weight: [hidden], x's dtype
or float32 (the usual mixed-precision case: a float32 parameter normalizing
bfloat16 activations). The output has x's shape and dtype; the kernel computes
in float32. Backward: ``mydev::rms_norm_backward`` gives grad_x and grad_weight
in one fused kernel (grad_weight is reduced over rows deterministically).
"""

import torch
from torch import Tensor

from .. import _C
from ..device_name import DEVICE_NAME
from ._checks import check_activation, check_like, check_param_dtype, check_same_device, shape_str

OP = "mydev::rms_norm"
BACKWARD_OP = "mydev::rms_norm_backward"


def check_inputs(op: str, x: Tensor, weight: Tensor, eps: float) -> None:
    check_activation(op, "x", x)
    if x.dim() < 1:
        raise ValueError(f"{op}: x must have at least 1 dimension [..., hidden], got a 0-d tensor")
    check_activation(op, "weight", weight)
    check_same_device(op, "weight", weight, "x", x)
    check_param_dtype(op, "weight", weight, x)
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"{op}: weight must have shape [hidden] = [{x.shape[-1]}], got {shape_str(weight.shape)}")
    if not eps >= 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")


@torch.library.custom_op(OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm over the last dimension, in one fused kernel (see the module)."""
    check_inputs(OP, x, weight, eps)
    return _C._fused_rms_norm(x, weight, eps)


@rms_norm.register_fake
def _(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    check_inputs(OP, x, weight, eps)
    return x.new_empty(x.shape)


@torch.library.custom_op(BACKWARD_OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def rms_norm_backward(grad_out: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(grad_x, grad_weight) of rms_norm, in one fused kernel."""
    check_inputs(BACKWARD_OP, x, weight, eps)
    check_like(BACKWARD_OP, "grad_out", grad_out, "x", x)
    return _C._fused_rms_norm_backward(grad_out, x, weight, eps)


@rms_norm_backward.register_fake
def _(grad_out: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    check_inputs(BACKWARD_OP, x, weight, eps)
    check_like(BACKWARD_OP, "grad_out", grad_out, "x", x)
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _setup_context(ctx, inputs, output) -> None:
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad: Tensor):
    x, weight = ctx.saved_tensors
    if grad.dtype != x.dtype:  # a caller-supplied gradient of another dtype
        grad = grad.to(x.dtype)
    grad_x, grad_weight = rms_norm_backward(grad, x, weight, ctx.eps)
    return (grad_x if ctx.needs_input_grad[0] else None, grad_weight if ctx.needs_input_grad[1] else None, None)


rms_norm.register_autograd(_backward, setup_context=_setup_context)
