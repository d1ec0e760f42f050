"""Argument checks shared by the fused ops' kernels and fake kernels.

The same checks run in eager mode (before the C++ kernel, which checks again
for its direct C++ callers) and under ``torch.compile`` (in the fake kernel,
on fake tensors with possibly symbolic shapes), so that a bad call fails the
same way in both, naming the op and the argument:

    mydev::rms_norm: weight must have shape [hidden] = [4096], got [4095]

Wrong types and dtypes raise TypeError, wrong shapes and values ValueError,
wrong devices RuntimeError (as torch's own "Expected all tensors to be on the
same device").
"""

from typing import Sequence

import torch

from ..device_name import DEVICE_NAME

# The dtypes the kernels take; they compute in float32 whatever the input.
FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# "meta": the fake kernels also serve meta tensors (shape inference).
_DEVICE_TYPES = (DEVICE_NAME, "cpu", "meta")


def shape_str(shape: Sequence) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_activation(op: str, arg: str, t: object) -> None:
    """``t`` is a strided float32/bfloat16/float16 tensor on mydev or the CPU."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {arg} must be a Tensor, got {type(t).__name__}")
    if t.device.type not in _DEVICE_TYPES:
        raise RuntimeError(f"{op}: {arg} must be on mydev or the CPU, got {t.device}")
    if t.layout != torch.strided:
        raise TypeError(f"{op}: {arg} must be a strided (dense) tensor, got {t.layout}")
    if t.dtype not in FUSED_DTYPES:
        raise TypeError(f"{op}: {arg} must have dtype float32, bfloat16 or float16, got {t.dtype}")


def check_same_device(op: str, arg: str, t: torch.Tensor, ref_arg: str, ref: torch.Tensor) -> None:
    if t.device != ref.device:
        raise RuntimeError(f"{op}: {arg} must be on the same device as {ref_arg} ({ref.device}), got {t.device}")


def check_param_dtype(op: str, arg: str, t: torch.Tensor, x: torch.Tensor) -> None:
    """A parameter the kernel reads in float32: x's dtype or float32."""
    if t.dtype != x.dtype and t.dtype != torch.float32:
        raise TypeError(f"{op}: {arg} must have x's dtype ({x.dtype}) or float32, got {t.dtype}")


def check_like(op: str, arg: str, t: object, ref_arg: str, ref: torch.Tensor) -> None:
    """``t`` has ``ref``'s device, dtype and shape (gradients, swiglu's up)."""
    check_activation(op, arg, t)
    check_same_device(op, arg, t, ref_arg, ref)
    if t.dtype != ref.dtype:
        raise TypeError(f"{op}: {arg} must have {ref_arg}'s dtype ({ref.dtype}), got {t.dtype}")
    if t.shape != ref.shape:
        raise ValueError(f"{op}: {arg} must have {ref_arg}'s shape {shape_str(ref.shape)}, got {shape_str(t.shape)}")
