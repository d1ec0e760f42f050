"""Checks PyTorch's ModuleInfo database (torch.nn modules) on the device
against the CPU, in-process: the output metadata contract of whole modules.

For each module and mode (training, eval), its inputs are generated on the
device (``module_inputs_func(..., device=...)``, as PyTorch's device tests
do); the module is built on the device, a CPU twin gets the same state, and
both run the forward on the same input values. Outputs are compared in
structure, dtype, shape, strides (those that say something about the
layout) and values. Values that a second CPU run does not reproduce (random
modules such as dropout in training) are compared in metadata only.

Each module is reported like an op, named ``module:<name>`` (e.g.
``module:nn.LSTM``), so the reports and pass rates include them.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, List, Optional, Sequence

import torch
import torch.utils._pytree as pytree
from torch.testing._comparison import default_tolerances
from torch.testing._internal.common_modules import ModuleInfo, module_db

from .classify import Tally, classify_exception, describe_exception
from .compare import describe_difference
from .opdb import is_selected
from .policy import Tolerance
from .results import Status, TaskResult, dtype_name
from .transfer import on_cpu

PREFIX = "module:"
CPU = torch.device("cpu")


def _tolerance_for(dtype: torch.dtype) -> Tolerance:
    rtol, atol = default_tolerances(dtype)
    return Tolerance(atol=atol, rtol=rtol)


def selected_modules(patterns: Sequence[str], excludes: Sequence[str]) -> List[ModuleInfo]:
    """The ModuleInfos whose ``module:<name>`` is selected by the patterns."""
    return [info for info in module_db if is_selected(PREFIX + info.name, patterns, excludes)]


def _forward(
    info: ModuleInfo, module_input: Any, device: torch.device, dtype: torch.dtype, training: bool, state: Optional[dict]
) -> Any:
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    if device == CPU:
        args, kwargs = on_cpu(args), on_cpu(kwargs)
    module = info.module_cls(*args, **kwargs).to(device=device, dtype=dtype)
    module.train(training)
    if state is not None:
        module.load_state_dict(on_cpu(state) if device == CPU else state)
    forward_args, forward_kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
    if device == CPU:
        forward_args, forward_kwargs = on_cpu(forward_args), on_cpu(forward_kwargs)
    with torch.no_grad():
        result = module(*forward_args, **forward_kwargs)
    if device != CPU:
        torch.get_device_module(device.type).synchronize(device)
    return module, result


def run_module(info: ModuleInfo, dtype: torch.dtype, device_name: str) -> TaskResult:
    """Checks one module at one dtype; never raises for anything it does."""
    started = time.monotonic()
    device = torch.device(device_name)
    tally = Tally(PREFIX + info.name, dtype_name(dtype))
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for training in (True, False):
            try:
                inputs = info.module_inputs_func(
                    info, device=device_name, dtype=dtype, requires_grad=False, training=training
                )
            except Exception as error:  # noqa: BLE001
                tally.failed(
                    classify_exception(error),
                    "function",
                    describe_exception(error),
                    -1,
                    "generating the module inputs on the device",
                )
                continue
            for index, module_input in enumerate(inputs):
                if module_input.forward_input is None:
                    continue
                checked += 1
                _check(info, module_input, index, training, device, dtype, tally)
    return tally.result(checked, time.monotonic() - started)


def _describe(function_input: Any) -> str:
    def short(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return f"Tensor{list(leaf.shape)}"
        return leaf

    args, kwargs = pytree.tree_map(short, (function_input.args, function_input.kwargs))
    return ", ".join([*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])


def _check(
    info: ModuleInfo,
    module_input: Any,
    index: int,
    training: bool,
    device: torch.device,
    dtype: torch.dtype,
    tally: Tally,
) -> None:
    mode = "train" if training else "eval"
    summary = f"{mode}: {_describe(module_input.constructor_input)} -> {_describe(module_input.forward_input)}"[:240]
    try:
        module, actual = _forward(info, module_input, device, dtype, training, None)
        state = module.state_dict()
    except Exception as error:  # noqa: BLE001  (any exception is a finding, if the CPU runs it)
        try:
            _forward(info, module_input, CPU, dtype, training, None)
        except Exception:  # noqa: BLE001
            tally.skipped("the CPU raises for the input")
            return
        tally.failed(classify_exception(error), "function", describe_exception(error), index, summary)
        return
    try:
        _, expected = _forward(info, module_input, CPU, dtype, training, state)
        _, again = _forward(info, module_input, CPU, dtype, training, state)
    except Exception:  # noqa: BLE001
        tally.skipped("the CPU raises for the input")
        return
    reproducible = describe_difference(expected, again, _tolerance_for, "cpu") is None
    difference = describe_difference(expected, actual, _tolerance_for, device.type, values=reproducible, strides=True)
    if difference is not None:
        tally.failed(Status.MISMATCH, "function", difference, index, summary)
    elif not reproducible:
        tally.skipped("random values (two CPU runs differ): metadata only")
    else:
        tally.passed()


def run_modules(
    patterns: Sequence[str], excludes: Sequence[str], dtypes: Optional[Sequence[torch.dtype]], device_name: str
) -> List[TaskResult]:
    """Every selected module at every requested dtype it supports (dtypes
    None: all of them)."""
    return [
        run_module(info, dtype, device_name)
        for info in selected_modules(patterns, excludes)
        for dtype in sorted(info.dtypes, key=str)
        if dtypes is None or dtype in dtypes
    ]
