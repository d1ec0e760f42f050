"""Copies of a sample's inputs on a device, faithful to their memory layout.

`tensor.to(device)` would make a non-contiguous input contiguous, drop its
storage offset and turn an expanded (overlapping) tensor into a full one.
Kernels take different paths for those layouts, and in-place ops must reject
overlapping outputs, so each tensor is rebuilt over a copy of its whole
storage with the same sizes, strides and offset. Tensors that share storage
in the sample share it in the copy too (memo keyed by storage).

Tensors the sample deliberately keeps on the CPU (see samples.py) are
copied on the CPU, whatever the target device."""

from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, Tuple

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.opinfo.core import SampleInput

# Storage copies made for one sample: (data_ptr, nbytes) -> byte tensor.
_StorageMemo = Dict[Tuple[int, int], torch.Tensor]

_CPU_DEVICE_STRING = re.compile(r"cpu(:\d+)?")


def _copy_storage(tensor: torch.Tensor, device: torch.device, memo: _StorageMemo) -> torch.Tensor:
    """A 1-D uint8 tensor holding a copy of `tensor`'s whole storage."""
    storage = tensor.untyped_storage()
    key = (storage.data_ptr(), storage.nbytes())
    if key not in memo or storage.nbytes() == 0:
        as_bytes = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
        # clone on the same device: the copy must not alias the original,
        # which the CPU reference and the in-place variants will mutate.
        memo[key] = as_bytes.to(device, copy=True)
    return memo[key]


def _replicate_tensor(tensor: torch.Tensor, device: torch.device, memo: _StorageMemo) -> torch.Tensor:
    # The conjugate and negative bits are views over the same storage: strip
    # them, copy, and put them back, so the copy is the same kind of view.
    if tensor.is_conj():
        return _replicate_tensor(tensor.conj(), device, memo).conj()
    if tensor.is_neg():
        return torch._neg_view(_replicate_tensor(torch._neg_view(tensor), device, memo))
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_nested:
        # Not storage-backed in the simple sense: a plain copy is the best
        # available (these layouts are rare in the OpInfo samples).
        return tensor.detach().to(device, copy=True).requires_grad_(tensor.requires_grad)
    storage_bytes = _copy_storage(tensor, device, memo)
    copy = torch.empty(0, dtype=tensor.dtype, device=device)
    with torch.no_grad():
        copy.set_(storage_bytes.untyped_storage(), tensor.storage_offset(), tensor.size(), tensor.stride())
    return copy.requires_grad_(tensor.requires_grad)


def _is_cpu_device(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cpu"
    return isinstance(value, str) and _CPU_DEVICE_STRING.fullmatch(value) is not None


def replicate_value(
    value: Any, device: torch.device, memo: _StorageMemo, stay_on_cpu: FrozenSet[int] = frozenset()
) -> Any:
    """`value` with every tensor copied to `device`, recursively through
    lists, tuples and dicts. Samples are generated on the CPU, so factory
    ops carry device="cpu": when the target is another device, CPU devices
    (and CPU generators) are redirected to it, or the op would silently run
    on the CPU."""
    if isinstance(value, torch.Tensor):
        if id(value) in stay_on_cpu:
            return _replicate_tensor(value, torch.device("cpu"), {})
        return _replicate_tensor(value, device, memo)
    if type(value) in (list, tuple):  # exactly: torch.Size and named tuples are values
        return type(value)(replicate_value(item, device, memo, stay_on_cpu) for item in value)
    if isinstance(value, dict):
        return {key: replicate_value(item, device, memo, stay_on_cpu) for key, item in value.items()}
    if device.type != "cpu":
        if _is_cpu_device(value):
            return device if isinstance(value, torch.device) else str(device)
        if isinstance(value, torch.Generator) and value.device.type == "cpu":
            generator = torch.Generator(device)
            generator.manual_seed(value.initial_seed())
            return generator
    return value


def on_cpu(value: Any) -> Any:
    """`value` with every tensor moved to the CPU and every torch.device
    made the CPU, through pytree containers (a SampleInput is not one: pass
    its parts). Unlike replicate_value this keeps neither layout nor
    autograd history apart: it is for running the same call on the CPU, so
    a tensor that requires grad still does."""

    def move(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return leaf.cpu()
        if isinstance(leaf, torch.device):
            return torch.device("cpu")
        return leaf

    return pytree.tree_map(move, value)


def replicate_sample(
    sample: SampleInput, device: torch.device, stay_on_cpu: FrozenSet[int] = frozenset()
) -> SampleInput:
    """A copy of `sample` whose tensors live on `device` (CPU included: the
    CPU reference runs on a copy too, since in-place variants mutate it),
    but for those whose id is in `stay_on_cpu`."""
    memo: _StorageMemo = {}
    return SampleInput(
        replicate_value(sample.input, device, memo, stay_on_cpu),
        args=replicate_value(tuple(sample.args), device, memo, stay_on_cpu),
        kwargs=replicate_value(dict(sample.kwargs), device, memo, stay_on_cpu),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )
