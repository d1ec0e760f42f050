"""``mydev::rotary_embedding(Tensor x, Tensor cos, Tensor sin) -> Tensor``

Rotary position embedding, rotate-half convention (GPT-NeoX, Llama)::

    rotate_half(x) = cat(-x[..., h:], x[..., :h])      # h = head_dim // 2
    out = x * cos + rotate_half(x) * sin

x: [..., seq, head_dim] (at least 2-d, at most 9-d, head_dim even),
float32 / bfloat16 / float16. cos and sin: one shape and dtype (x's dtype or
float32), head_dim last, broadcasting to x's shape: [seq, head_dim] (one
table for every batch and head), [1, 1, seq, head_dim], or
[batch, 1, seq, head_dim] (per-sequence positions, as Hugging Face builds
them) for x [batch, heads, seq, head_dim]. The output has x's shape and
dtype; the kernel computes in float32.

Backward: ``mydev::rotary_embedding_backward`` computes grad_x in one fused
kernel. cos and sin are usually constant tables; if they do require grad,
their gradients are computed too (with eager ops: reductions over the
broadcast dimensions), so the op is fully differentiable.
"""

import torch
from torch import Tensor

from .. import _C
from ..device_name import DEVICE_NAME
from ._checks import check_activation, check_param_dtype, check_same_device, shape_str

OP = "mydev::rotary_embedding"
BACKWARD_OP = "mydev::rotary_embedding_backward"
MAX_DIMS = 9


def check_inputs(op: str, x_name: str, x: Tensor, cos: Tensor, sin: Tensor) -> None:
    check_activation(op, x_name, x)
    if x.dim() < 2 or x.dim() > MAX_DIMS:
        raise ValueError(
            f"{op}: {x_name} must have 2 to {MAX_DIMS} dimensions [..., seq, head_dim], got a {x.dim()}-d tensor"
        )
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"{op}: {x_name}'s last dimension (head_dim) must be even, got {head_dim}")
    for name, t in (("cos", cos), ("sin", sin)):
        check_activation(op, name, t)
        check_same_device(op, name, t, x_name, x)
        check_param_dtype(op, name, t, x)
        broadcasts = (
            1 <= t.dim() <= x.dim()
            and t.shape[-1] == head_dim
            and all(t.shape[-d] == 1 or t.shape[-d] == x.shape[-d] for d in range(1, t.dim() + 1))
        )
        if not broadcasts:
            raise ValueError(
                f"{op}: {name} must have shape [seq, head_dim] = [{x.shape[-2]}, {head_dim}] or "
                f"another shape that broadcasts to {x_name}'s shape {shape_str(x.shape)} with "
                f"head_dim last, got {shape_str(t.shape)}"
            )
    if sin.shape != cos.shape or sin.dtype != cos.dtype:
        raise ValueError(
            f"{op}: sin must have cos's shape {shape_str(cos.shape)} and dtype "
            f"{cos.dtype}, got {shape_str(sin.shape)} {sin.dtype}"
        )


@torch.library.custom_op(OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x * cos + rotate_half(x) * sin in one fused kernel (see the module)."""
    check_inputs(OP, "x", x, cos, sin)
    return _C._fused_rotary_embedding(x, cos, sin)


@rotary_embedding.register_fake
def _(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    check_inputs(OP, "x", x, cos, sin)
    return x.new_empty(x.shape)


@torch.library.custom_op(BACKWARD_OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def rotary_embedding_backward(grad_out: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """grad_x of rotary_embedding: grad * cos + rotate_half^T(grad * sin), fused."""
    check_inputs(BACKWARD_OP, "grad_out", grad_out, cos, sin)
    return _C._fused_rotary_embedding_backward(grad_out, cos, sin)


@rotary_embedding_backward.register_fake
def _(grad_out: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    check_inputs(BACKWARD_OP, "grad_out", grad_out, cos, sin)
    return grad_out.new_empty(grad_out.shape)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _setup_context(ctx, inputs, output) -> None:
    x, cos, sin = inputs
    # x is kept only for the (rare) gradients of cos and sin.
    cos_sin_grad = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
    ctx.save_for_backward(cos, sin, x if cos_sin_grad else None)
    ctx.x_dtype = x.dtype


def _backward(ctx, grad: Tensor):
    cos, sin, x = ctx.saved_tensors
    needs_x, needs_cos, needs_sin = ctx.needs_input_grad[:3]
    if grad.dtype != ctx.x_dtype:  # a caller-supplied gradient of another dtype
        grad = grad.to(ctx.x_dtype)
    grad_x = rotary_embedding_backward(grad, cos, sin) if needs_x else None
    grad_cos = grad_sin = None
    if needs_cos or needs_sin:
        # d out / d cos = x, d out / d sin = rotate_half(x), summed over the
        # dimensions cos and sin broadcast along; in float32, then their dtype.
        g = grad.float()
        if needs_cos:
            grad_cos = (g * x.float()).sum_to_size(cos.shape).to(cos.dtype)
        if needs_sin:
            grad_sin = (g * _rotate_half(x.float())).sum_to_size(sin.shape).to(sin.dtype)
    return grad_x, grad_cos, grad_sin


rotary_embedding.register_autograd(_backward, setup_context=_setup_context)
