"""The sample inputs an op is checked with, and which of their tensors
belong on the device.

Samples are generated on the CPU and copied to the device (transfer.py), so
that both sides see the same values whatever the device's random number
generator does. One subtlety: in PyTorch's own device tests, samples are
generated *for* the device, and a tensor the sample code creates without a
device argument (tensor_split's `torch.tensor([1, 2, 3])` indices, narrow's
`torch.tensor(1)` start) stays on the CPU, which the op's contract may
require ("tensor_split expected tensor_indices_or_sections to be on cpu").
Those tensors are found by generating the samples a second time with "meta"
as the default device: what lands on meta was placed by default, not by the
sample's device argument.

The metadata check (``--samples-on-device``) generates them for the device
instead, as PyTorch's device-generic tests do, and copies them to the CPU:
the samples' tensors are then outputs of the device's own kernels, and the
ones the sample code leaves on the CPU are simply where they are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, List, Optional

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.opinfo.core import OpInfo, SampleInput


@dataclass(frozen=True)
class Sample:
    index: int  # position in the OpInfo's full sample list
    input: SampleInput
    # ids of the tensors in `input` that stay on the CPU in the device run
    stay_on_cpu: FrozenSet[int] = frozenset()

    def summary(self, limit: int = 240) -> str:
        text = self.input.summary().replace("\n", " ")
        return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaves(sample: SampleInput) -> list:
    return pytree.tree_leaves((sample.input, sample.args, sample.kwargs))


def _default_placed(samples: List[SampleInput], shadow: List[SampleInput]) -> List[FrozenSet[int]]:
    """Per sample, the ids of its tensors whose twin in `shadow` (generated
    with default device meta) is on meta. Samples whose shadow does not line
    up exactly keep nothing on the CPU."""
    placed: List[FrozenSet[int]] = []
    for sample, twin in zip(samples, shadow):
        leaves, twin_leaves = _leaves(sample), _leaves(twin)
        if len(leaves) != len(twin_leaves):
            placed.append(frozenset())
            continue
        placed.append(
            frozenset(
                id(leaf)
                for leaf, other in zip(leaves, twin_leaves)
                if isinstance(leaf, torch.Tensor) and isinstance(other, torch.Tensor) and other.device.type == "meta"
            )
        )
    return placed


def _spread(count: int, limit: Optional[int]) -> List[int]:
    """`limit` indices evenly spread over range(count), first and last
    included, so a limit does not drop all the late (often larger or
    non-contiguous) samples."""
    if limit is None or count <= limit:
        return list(range(count))
    if limit <= 1:
        return list(range(limit))
    step = (count - 1) / (limit - 1)
    return [round(i * step) for i in range(limit)]


def _on_cpu(samples: List[SampleInput]) -> List[FrozenSet[int]]:
    """Per sample generated for the device, the ids of the tensors its code
    left on the CPU: there they stay."""
    return [
        frozenset(id(leaf) for leaf in _leaves(sample) if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu")
        for sample in samples
    ]


def _to_layout(tensor: torch.Tensor, layout: str) -> Optional[torch.Tensor]:
    """`tensor` in a sparse layout, or None when the layout does not apply
    (the compressed layouts are for matrices)."""
    if layout == "sparse_coo":
        return tensor.to_sparse()
    if tensor.dim() != 2:
        return None
    if layout in ("sparse_bsr", "sparse_bsc"):
        return tensor.to_sparse(layout=getattr(torch, layout), blocksize=(1, 1))
    return tensor.to_sparse(layout=getattr(torch, layout))


def _sparse_samples(op: OpInfo, dtype: torch.dtype, layout: str) -> List[SampleInput]:
    """The OpInfo's samples with an input of a sparse layout: its own sparse
    samples where it defines them; otherwise (the unary ufuncs) its dense
    samples with the input converted, as PyTorch's sparse tests do. They
    create no tensors by default placement."""
    try:
        return list(op.sample_inputs_sparse(getattr(torch, layout), "cpu", dtype, requires_grad=False))
    except NotImplementedError:  # "no sample function specified"
        pass
    converted = []
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        sparse_input = _to_layout(sample.input, layout) if isinstance(sample.input, torch.Tensor) else None
        if sparse_input is not None:
            converted.append(SampleInput(sparse_input, args=sample.args, kwargs=sample.kwargs, name=sample.name))
    return converted


def select_samples(
    op: OpInfo,
    dtype: torch.dtype,
    limit: Optional[int] = None,
    reference: bool = False,
    on_device: Optional[str] = None,
    layout: str = "strided",
) -> List[Sample]:
    """The samples to check with. `on_device`: generate them for that device
    (as PyTorch's device tests do, ``op.sample_inputs(device, dtype)``), so
    that the device's own kernels make them, and the CPU gets copies."""
    if layout != "strided":
        sparse = _sparse_samples(op, dtype, layout)
        return [Sample(i, sparse[i]) for i in _spread(len(sparse), limit)]
    generate = op.reference_inputs if reference else op.sample_inputs
    if on_device is not None:
        samples = list(generate(on_device, dtype, requires_grad=False))
        placed = _on_cpu(samples)
        return [Sample(i, samples[i], placed[i]) for i in _spread(len(samples), limit)]
    samples = list(generate("cpu", dtype, requires_grad=False))
    try:
        with torch.device("meta"):
            shadow = list(generate("cpu", dtype, requires_grad=False))
    except Exception:  # noqa: BLE001  (value-dependent sample code cannot run on meta)
        shadow = []
    if len(shadow) == len(samples):
        placed = _default_placed(samples, shadow)
    else:
        placed = [frozenset()] * len(samples)
    return [Sample(i, samples[i], placed[i]) for i in _spread(len(samples), limit)]
