"""The CPU reference at dtypes the CPU's kernels lack.

The device is checked at cuda's dtypes (opdb.device_dtypes), some of which
the CPU's kernels do not support: complex32 math, float16 FFTs, bool abs,
integer histc, ... For those the reference runs on the CPU in a wider dtype
(the sample's tensors of the checked dtype converted up), and its results
are converted back to the checked dtype (or, for a real or complex result,
its counterpart of that width: fft of float16 gives complex32), as cuda's
kernels compute such dtypes in a wider one internally."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

_WIDER = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.complex32: torch.complex64,
    torch.bool: torch.uint8,
}


def _wider(dtype: torch.dtype) -> torch.dtype:
    if dtype in _WIDER:
        return _WIDER[dtype]
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.float64  # integers: exact in float64 at the sizes samples use
    return dtype


def _narrowing(dtype: torch.dtype, wide: torch.dtype) -> Dict[torch.dtype, torch.dtype]:
    """Result dtype of the widened computation -> dtype the device returns."""
    back = {wide: dtype}
    if dtype in (torch.float16, torch.complex32):
        back.update({torch.float32: torch.float16, torch.complex64: torch.complex32})
    return back


@dataclass(frozen=True)
class Widening:
    dtype: torch.dtype  # the checked dtype
    wide: torch.dtype  # the dtype the CPU computes in

    def _map(self, value: Any, convert: Dict[torch.dtype, torch.dtype]) -> Any:
        def one(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor) and leaf.dtype in convert:
                with torch.no_grad():
                    return leaf.to(convert[leaf.dtype]).requires_grad_(leaf.requires_grad)
            return leaf

        return pytree.tree_map(one, value)

    def widen(self, value: Any) -> Any:
        return self._map(value, {self.dtype: self.wide})

    def widen_sample(self, sample: SampleInput) -> SampleInput:
        return SampleInput(
            self.widen(sample.input),
            args=self.widen(tuple(sample.args)),
            kwargs=self.widen(dict(sample.kwargs)),
            output_process_fn_grad=sample.output_process_fn_grad,
            broadcasts_input=sample.broadcasts_input,
            name=sample.name,
        )

    def narrow(self, value: Any) -> Any:
        return self._map(value, _narrowing(self.dtype, self.wide))


def widening_for(op: OpInfo, dtype: torch.dtype) -> Optional[Widening]:
    """How to compute the CPU reference of `op` at `dtype`, when the CPU's
    kernels lack the dtype and a wider one exists; None otherwise."""
    if dtype in op.supported_dtypes("cpu") or _wider(dtype) == dtype:
        return None
    return Widening(dtype, _wider(dtype))
