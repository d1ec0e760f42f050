"""What the OpInfo database itself says about comparing an op with the CPU:
its tolerances, whether its values can be compared at all, and why PyTorch
itself skips the comparison for some ops.

Only PyTorch's own annotations are used, so nobody can tune the number here.
Tolerances follow PyTorch's TestCase: torch.testing.assert_close's default
for the dtype, widened (never narrowed) by the op's toleranceOverride /
precisionOverride decorators for TestCommon.test_compare_cpu, PyTorch's own
"device equals CPU" test. That test itself uses atol=rtol=1e-3; this suite
is stricter on purpose, because mydev runs the CPU's kernels."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch
from torch.testing._comparison import default_tolerances
from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
from torch.testing._internal.opinfo.core import DecorateInfo, OpInfo

# Decorators for other tests (gradients, JIT, ...) are ignored.
COMPARE_TEST = ("TestCommon", "test_compare_cpu")

# test_compare_cpu skip reasons worth repeating next to a failure (random
# draws, undefined results for some inputs); a bare "Skipped!" says nothing.
_INFORMATIVE_SKIP = re.compile(r"non-?deterministic|not comparable|undefined|noise", re.IGNORECASE)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


# Given the dtype of one output value, the tolerance to compare it with.
ToleranceFn = Callable[[torch.dtype], Tolerance]


# PyTorch's own comparison of complex32 results with complex64 ones (on
# cuda): its tolerances apply where the reference is computed wider.
WIDER_REFERENCE_TEST = ("TestCommon", "test_complex_half_reference_testing")


def _active_decorators(op: OpInfo, device_type: str, dtype: torch.dtype, widened: bool = False) -> Iterator[Any]:
    """The decorators that would apply to test_compare_cpu on this device at
    this dtype (a decorator for another device, e.g. "cuda", does not), and,
    for a reference computed in a wider dtype, those of cuda's
    test_complex_half_reference_testing."""
    for item in tuple(op.decorators) + tuple(op.skips):
        if isinstance(item, DecorateInfo):
            if item.is_active(*COMPARE_TEST, device_type, dtype, {}) or (
                widened and item.is_active(*WIDER_REFERENCE_TEST, "cuda", dtype, {})
            ):
                yield from item.decorators
        else:  # a bare decorator applies to every test of the op
            yield item


def tolerances(op: OpInfo, device_type: str, dtype: torch.dtype, widened: bool = False) -> ToleranceFn:
    """The tolerance function for this op tested at `dtype`. Outputs can
    have other dtypes (indices, the real part of a complex op), so the
    tolerance is looked up by each output's own dtype."""
    overrides = [
        d
        for d in _active_decorators(op, device_type, dtype, widened)
        if isinstance(d, (toleranceOverride, precisionOverride))
    ]

    def tolerance_for(value_dtype: torch.dtype) -> Tolerance:
        rtol, atol = default_tolerances(value_dtype)
        for override in overrides:
            if value_dtype not in override.d:
                continue
            if isinstance(override, toleranceOverride):
                atol = max(atol, override.d[value_dtype].atol)
                rtol = max(rtol, override.d[value_dtype].rtol)
            else:  # precisionOverride sets only atol, as in TestCase
                atol = max(atol, override.d[value_dtype])
        return Tolerance(atol=atol, rtol=rtol)

    return tolerance_for


def declared_uninitialised(op: OpInfo) -> Optional[str]:
    """Why this op's values cannot be compared at all, if the OpInfo says
    so: its output is uninitialised memory (empty, empty_like, ...). Such ops
    still run on the device, and their outputs' structure, dtypes and shapes
    are checked. (Random ops are recognised per sample, at run time: see
    runner.py.)"""
    if op.has_nondeterministic_output:
        return "output is uninitialised memory (OpInfo.has_nondeterministic_output)"
    return None


def _skip_reason(decorator: Any) -> Optional[str]:
    """The reason string of a unittest.skip(reason) decorator, else None."""
    if not hasattr(decorator, "__code__"):
        return None
    try:
        reason = inspect.getclosurevars(decorator).nonlocals.get("reason")
    except (TypeError, ValueError):
        return None
    return reason if isinstance(reason, str) else None


def declared_caveat(op: OpInfo, device_type: str, dtype: torch.dtype) -> Optional[str]:
    """The reason PyTorch gives for not comparing this op with the CPU
    (random output, undefined results for some inputs, ...), if it gives
    one. It is shown next to a failure as context, never used to excuse it."""
    for decorator in _active_decorators(op, device_type, dtype):
        reason = _skip_reason(decorator)
        if reason is not None and _INFORMATIVE_SKIP.search(reason):
            return reason
    return None
