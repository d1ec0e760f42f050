"""``mydev::swiglu(Tensor gate, Tensor up) -> Tensor``

    out = silu(gate) * up = gate * sigmoid(gate) * up

gate and up: one shape and one dtype (float32 / bfloat16 / float16); any
shape, no broadcasting. The output has their shape and dtype; the kernel
computes in float32. Backward: ``mydev::swiglu_backward`` gives grad_gate and
grad_up in one fused kernel.
"""

import torch
from torch import Tensor

from .. import _C
from ..device_name import DEVICE_NAME
from ._checks import check_activation, check_like

OP = "mydev::swiglu"
BACKWARD_OP = "mydev::swiglu_backward"


def check_inputs(op: str, gate: Tensor, up: Tensor) -> None:
    check_activation(op, "gate", gate)
    check_like(op, "up", up, "gate", gate)


@torch.library.custom_op(OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up in one fused kernel (see the module)."""
    check_inputs(OP, gate, up)
    return _C._fused_swiglu(gate, up)


@swiglu.register_fake
def _(gate: Tensor, up: Tensor) -> Tensor:
    check_inputs(OP, gate, up)
    return gate.new_empty(gate.shape)


@torch.library.custom_op(BACKWARD_OP, mutates_args=(), device_types=(DEVICE_NAME, "cpu"))
def swiglu_backward(grad_out: Tensor, gate: Tensor, up: Tensor) -> tuple[Tensor, Tensor]:
    """(grad_gate, grad_up) of swiglu, in one fused kernel."""
    check_inputs(BACKWARD_OP, gate, up)
    check_like(BACKWARD_OP, "grad_out", grad_out, "gate", gate)
    return _C._fused_swiglu_backward(grad_out, gate, up)


@swiglu_backward.register_fake
def _(grad_out: Tensor, gate: Tensor, up: Tensor) -> tuple[Tensor, Tensor]:
    check_inputs(BACKWARD_OP, gate, up)
    check_like(BACKWARD_OP, "grad_out", grad_out, "gate", gate)
    return gate.new_empty(gate.shape), gate.new_empty(gate.shape)


def _setup_context(ctx, inputs, output) -> None:
    gate, up = inputs
    ctx.save_for_backward(gate, up)


def _backward(ctx, grad: Tensor):
    gate, up = ctx.saved_tensors
    if grad.dtype != gate.dtype:
        grad = grad.to(gate.dtype)
    grad_gate, grad_up = swiglu_backward(grad, gate, up)
    return (grad_gate if ctx.needs_input_grad[0] else None, grad_up if ctx.needs_input_grad[1] else None)


swiglu.register_autograd(_backward, setup_context=_setup_context)
