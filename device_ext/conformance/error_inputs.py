"""Checks every OpInfo's error inputs on the device, in-process: the calls
PyTorch's own tests expect to fail.

Each must fail at the call, as on cuda (whose kernels check their arguments
in host code before they launch), with the exception type and message the
OpInfo names, and leave nothing on the stream for the next synchronize to
report. A call that does not fail on the device must not fail on the CPU
either; one that fails on neither is skipped (some error inputs expect an
error only of another device).

Each op is reported like an op, named ``error_inputs:<full name>`` at the
dtype ``any`` (error inputs choose their own dtypes), so the reports and
pass rates include them.
"""

from __future__ import annotations

import re
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.testing._internal.opinfo.core import ErrorInput, OpInfo

from .classify import Tally, classify_exception, describe_exception
from .opdb import is_selected
from .results import ERROR_INPUTS_DTYPE, Status, TaskResult
from .transfer import on_cpu

PREFIX = "error_inputs:"


def _raised(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Optional[BaseException]:
    try:
        call(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (whatever the call raises is compared)
        return error
    return None


def _raised_by_the_kernel_on_purpose(op: OpInfo, error_input: ErrorInput, device_type: str) -> bool:
    """masked_fill given its value as a device tensor: cuda's kernel reads
    that value on the host with a synchronize and raises at the call if it
    does not fit the tensor's dtype; mydev keeps the call asynchronous, and
    its kernel raises."""
    sample = error_input.sample_input
    value = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("value")
    return op.name == "masked_fill" and isinstance(value, torch.Tensor) and value.device.type == device_type


def check_error_input(op: OpInfo, error_input: ErrorInput, device: str) -> Tuple[Status, str]:
    """What calling ``op`` with ``error_input`` on ``device`` did against
    what the OpInfo expects: PASS, SKIPPED (no error on either device), or a
    failure status with its description."""
    sample = error_input.sample_input
    device_type = torch.device(device).type
    synchronize = torch.get_device_module(device_type).synchronize
    expected = f"{error_input.error_type.__name__} matching {error_input.error_regex!r}"
    at_the_call = _raised(op, sample.input, *sample.args, **sample.kwargs)
    late = _raised(synchronize)
    if late is not None and _raised_by_the_kernel_on_purpose(op, error_input, device_type):
        if at_the_call is None and re.search(error_input.error_regex, str(late)):
            return Status.PASS, ""
        return Status.MISMATCH, f"expected {expected} from the kernel, got {describe_exception(late)}"
    if late is not None:
        return Status.MISMATCH, f"expected {expected} at the call; raised from the stream: {describe_exception(late)}"
    if at_the_call is None:
        cpu_input, cpu_args, cpu_kwargs = on_cpu((sample.input, sample.args, sample.kwargs))
        raised_on_cpu = _raised(op, cpu_input, *cpu_args, **cpu_kwargs)
        if raised_on_cpu is None:
            return Status.SKIPPED, "raises on neither the device nor the CPU"
        return (
            Status.MISMATCH,
            f"expected {expected}; {device_type} raised nothing, the CPU raised {describe_exception(raised_on_cpu)}",
        )
    if isinstance(at_the_call, error_input.error_type) and re.search(error_input.error_regex, str(at_the_call)):
        return Status.PASS, ""
    status = classify_exception(at_the_call)
    return (status if status == Status.MISSING_KERNEL else Status.MISMATCH), (
        f"expected {expected}, got {describe_exception(at_the_call)}"
    )


def run_error_inputs(op: OpInfo, device: str) -> TaskResult:
    """Checks every error input of one op; never raises for anything the
    op does."""
    started = time.monotonic()
    tally = Tally(PREFIX + op.full_name, ERROR_INPUTS_DTYPE)
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            error_inputs = list(op.error_inputs(device))  # a device name, as PyTorch's tests pass it
        except Exception as error:  # noqa: BLE001
            tally.failed(
                classify_exception(error), "function", describe_exception(error), -1, "making the error inputs"
            )
            error_inputs = []
        for index, error_input in enumerate(error_inputs):
            checked += 1
            status, message = check_error_input(op, error_input, device)
            if status == Status.PASS:
                tally.passed()
            elif status == Status.SKIPPED:
                tally.skipped(message)
            else:
                tally.failed(status, "function", message, index, error_input.sample_input.summary()[:240])
    return tally.result(checked, time.monotonic() - started)


def run_all_error_inputs(
    ops: Dict[str, OpInfo], patterns: Sequence[str], excludes: Sequence[str], device: str
) -> List[TaskResult]:
    """Every op with error inputs whose ``error_inputs:<full name>`` is
    selected by the patterns."""
    return [
        run_error_inputs(op, device)
        for name, op in ops.items()
        if op.error_inputs_func is not None and is_selected(PREFIX + name, patterns, excludes)
    ]
