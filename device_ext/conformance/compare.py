"""Comparing what the device returned with what the CPU returned.

Every function here returns None when the two agree and otherwise a one-line
description of the first difference, which becomes the cause in the report.
Outputs can be tensors, (named) tuples and lists of them, Python scalars,
None, dtypes, devices, sizes; they are walked with torch's pytree so both
sides must also have the same structure."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree

from .policy import ToleranceFn

# The lines of assert_close's message that say by how much values differ.
_DIFFERENCE_LINES = ("Mismatched elements", "Greatest absolute difference", "Greatest relative difference")


def _same_device(expected: Any, actual: Any, device_type: str) -> bool:
    """Whether `actual` is where the device's result belongs: on the device
    when the CPU result is on the CPU, otherwise where the CPU's was (e.g.
    "meta")."""
    expected_type = expected.type if isinstance(expected, torch.device) else expected.device.type
    actual_type = actual.type if isinstance(actual, torch.device) else actual.device.type
    wanted = device_type if expected_type == "cpu" else expected_type
    return actual_type == wanted


def _assert_close_message(error: AssertionError) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    picked = [line for line in lines if line.startswith(_DIFFERENCE_LINES)]
    return "; ".join(picked or lines[:2])


def _significant_strides(tensor: torch.Tensor) -> Tuple[Optional[int], ...]:
    """Strides that say something about the layout: those of dimensions of
    size 1 (never stepped over) do not, nor any of an empty tensor."""
    if tensor.numel() == 0:
        return ()
    return tuple(None if size == 1 else stride for size, stride in zip(tensor.shape, tensor.stride()))


def _compare_tensors(
    expected: torch.Tensor,
    actual: torch.Tensor,
    tolerance_for: ToleranceFn,
    device_type: Optional[str],
    values: bool,
    strides: bool = False,
) -> Optional[str]:
    if device_type is not None and not _same_device(expected, actual, device_type):
        return f"on device {actual.device}, CPU result on {expected.device} (expected {device_type})"
    if expected.dtype != actual.dtype:
        return f"dtype {actual.dtype}, CPU gives {expected.dtype}"
    if expected.shape != actual.shape:
        return f"shape {tuple(actual.shape)}, CPU gives {tuple(expected.shape)}"
    if expected.layout != actual.layout:
        return f"layout {actual.layout}, CPU gives {expected.layout}"
    if strides and expected.layout == torch.strided and _significant_strides(expected) != _significant_strides(actual):
        return f"strides {actual.stride()}, CPU gives {expected.stride()}"
    if not values or expected.device.type == "meta":
        return None
    tolerance = tolerance_for(expected.dtype)
    try:
        torch.testing.assert_close(
            actual.detach().cpu(),
            expected.detach(),
            rtol=tolerance.rtol,
            atol=tolerance.atol,
            equal_nan=True,
            check_device=False,  # checked above: the device's result must not be on the CPU
            check_stride=False,  # as PyTorch's own CPU comparison: strides are not semantics
        )
    except AssertionError as error:
        return f"values differ: {_assert_close_message(error)} (atol {tolerance.atol:g}, rtol {tolerance.rtol:g})"
    return None


def _compare_scalars(expected: Any, actual: Any, tolerance_for: ToleranceFn, values: bool) -> Optional[str]:
    if type(expected) is not type(actual):
        return f"{type(actual).__name__} {actual!r}, CPU gives {type(expected).__name__} {expected!r}"
    if not values or expected == actual:
        return None
    if isinstance(expected, float) and math.isnan(expected) and math.isnan(actual):
        return None
    if isinstance(expected, (float, complex)):
        # Python floats are doubles, whatever dtype produced them.
        tolerance = tolerance_for(torch.float64)
        if abs(expected - actual) <= tolerance.atol + tolerance.rtol * abs(expected):
            return None
    return f"value {actual!r}, CPU gives {expected!r}"


def describe_difference(
    expected: Any,
    actual: Any,
    tolerance_for: ToleranceFn,
    device_type: Optional[str],
    *,
    values: bool = True,
    what: str = "output",
    strides: bool = False,
) -> Optional[str]:
    """None when `actual` (the device's) matches `expected` (the CPU's);
    else where and how they differ. Tensors the CPU returns on the CPU must
    be on `device_type` (None: devices are not compared, e.g. for arguments,
    which the caller placed). With values=False only structure, devices,
    dtypes and shapes are compared (for outputs whose values are random or
    uninitialised); with strides=True the strides of strided tensors too."""
    expected_leaves, expected_spec = pytree.tree_flatten_with_path(expected)
    actual_leaves, actual_spec = pytree.tree_flatten_with_path(actual)
    if expected_spec != actual_spec:
        return f"{what} structure differs: {_short(actual)} on the device, CPU gives {_short(expected)}"
    for (path, want), (_, got) in zip(expected_leaves, actual_leaves):
        where = what + pytree.keystr(path)
        if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
            if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
                difference = f"{type(got).__name__}, CPU gives {type(want).__name__}"
            else:
                difference = _compare_tensors(want, got, tolerance_for, device_type, values, strides)
        elif isinstance(want, (bool, int, float, complex)):
            difference = _compare_scalars(want, got, tolerance_for, values)
        elif isinstance(want, torch.device) and isinstance(got, torch.device) and device_type is not None:
            difference = None if _same_device(want, got, device_type) else f"device {got}, CPU gives {want}"
        else:
            difference = None if want == got else f"{got!r}, CPU gives {want!r}"
        if difference is not None:
            return f"{where}: {difference}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = pytree.tree_structure(value).__repr__().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# How one output relates to the inputs: (index of the input it *is*, or -1;
# indices of the inputs it shares storage with).
AliasInfo = Tuple[int, Tuple[int, ...]]


def _storage_key(tensor: torch.Tensor) -> Optional[int]:
    if tensor.layout != torch.strided:
        return None
    storage = tensor.untyped_storage()
    # Empty storages all have a null pointer: they alias nothing.
    return storage.data_ptr() if storage.nbytes() > 0 else None


def alias_signature(result: Any, inputs: Sequence[Any]) -> List[AliasInfo]:
    """For each tensor in `result`: is it one of `inputs`, and which inputs'
    memory does it share? Views, in-place variants returning self and out=
    variants returning `out` must behave the same on the device as on the
    CPU: user code relies on writes through a view reaching the base."""
    signature: List[AliasInfo] = []
    input_keys = [_storage_key(t) if isinstance(t, torch.Tensor) else None for t in inputs]
    for leaf in pytree.tree_leaves(result):
        if not isinstance(leaf, torch.Tensor):
            continue
        identity = next((i for i, t in enumerate(inputs) if t is leaf), -1)
        key = _storage_key(leaf)
        shared = tuple(i for i, k in enumerate(input_keys) if key is not None and k == key)
        signature.append((identity, shared))
    return signature


def _describe_alias(info: AliasInfo) -> str:
    identity, shared = info
    parts = [f"is argument {identity} itself" if identity >= 0 else "is not an argument"]
    parts.append(
        "shares memory with argument(s) " + ", ".join(map(str, shared)) if shared else "shares no argument's memory"
    )
    return " and ".join(parts)


def describe_alias_difference(expected: List[AliasInfo], actual: List[AliasInfo]) -> Optional[str]:
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            return f"aliasing differs: output tensor {index} {_describe_alias(got)} on the device, on the CPU it {_describe_alias(want)}"
    return None
