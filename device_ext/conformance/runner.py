"""Checks one op at one dtype on the device against the CPU, in-process.

For each sample input (generated on the CPU, then copied to the device with
its layout intact, see samples.py and transfer.py) and each way of calling
the op (the function, its in-place variant, its out= form):

1. run it on the CPU, on a copy of the sample. If the CPU raises, the sample
   is not a valid input for that call and is skipped. An in-place or out=
   result the CPU cannot make agree with its own function result is no
   reference either (CPU bug), and is skipped too;
2. run it on the device and synchronize, so that an error raised inside an
   asynchronous kernel is attributed to this op and sample;
3. compare the outputs, how they alias the arguments, and the arguments
   themselves afterwards (in-place writes, and writes that should not
   happen). A difference is a mismatch, unless the values are not
   reproducible: random (the call reaches an ATen op tagged
   nondeterministic_seeded), uninitialised (OpInfo.has_nondeterministic_output),
   or different on a second CPU run. Then only structure, devices, dtypes and
   shapes are compared and the sample counts as skipped.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Set, Tuple

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.opinfo.core import OpInfo, SampleInput
from torch.utils._python_dispatch import TorchDispatchMode

from ..device_name import DEVICE_NAME
from . import policy
from .classify import Tally, classify_exception, describe_exception, first_line
from .compare import AliasInfo, alias_signature, describe_alias_difference, describe_difference
from .results import Status, TaskResult, dtype_name
from .samples import Sample, select_samples
from .transfer import replicate_sample
from .widening import Widening, widening_for

FUNCTION, INPLACE, OUT = "function", "inplace", "out"
VARIANTS = (FUNCTION, INPLACE, OUT)
CPU = torch.device("cpu")


@dataclass(frozen=True)
class RunOptions:
    device: str = DEVICE_NAME
    # Samples per (op, dtype); None for all (see samples.select_samples).
    max_samples: Optional[int] = None
    # Call forms besides the function itself, which always runs.
    variants: Tuple[str, ...] = VARIANTS
    # "sample": op.sample_inputs; "reference": the larger op.reference_inputs.
    inputs: str = "sample"
    # Generate samples on the device (copies go to the CPU) and compare the
    # outputs' strides too: the output metadata contract (shape, stride,
    # dtype, 0-dim) of kernels fed by device-made tensors.
    samples_on_device: bool = False


class DeviceUnusable(RuntimeError):
    """After a failure the device no longer runs even a trivial kernel:
    whatever runs next on it would fail for that reason, not its own."""


@dataclass
class Outcome:
    """One call of the op on one copy of a sample."""

    result: Any  # what the call returned
    processed: Any  # the same after sample.output_process_fn_grad
    arguments: List[torch.Tensor]  # the call's tensor arguments, after the call
    aliases: List[AliasInfo]  # how the result aliases the arguments


# A call form: (op, sample copy, device, CPU function result) -> (result,
# extra arguments the call wrote, e.g. the out= tensors).
CallForm = Callable[[OpInfo, SampleInput, torch.device, Any], Tuple[Any, Any]]


def _call_function(op: OpInfo, sample: SampleInput, device: torch.device, template: Any) -> Tuple[Any, Any]:
    return op(sample.input, *sample.args, **sample.kwargs), None


def _call_inplace(op: OpInfo, sample: SampleInput, device: torch.device, template: Any) -> Tuple[Any, Any]:
    return op.inplace_variant(sample.input, *sample.args, **sample.kwargs), None


def _call_out(op: OpInfo, sample: SampleInput, device: torch.device, template: Any) -> Tuple[Any, Any]:
    # Correctly sized, contiguous out= tensors shaped like the function's
    # CPU result; the same on both sides so that only the device differs.
    def empty_like(t: torch.Tensor) -> torch.Tensor:
        return torch.empty(t.shape, dtype=t.dtype, device=device)

    out = empty_like(template) if isinstance(template, torch.Tensor) else tuple(map(empty_like, template))
    return op(sample.input, *sample.args, out=out, **sample.kwargs), out


CALL_FORMS = {FUNCTION: _call_function, INPLACE: _call_inplace, OUT: _call_out}


def _synchronize(device: torch.device) -> None:
    if device.type != "cpu":
        torch.get_device_module(device.type).synchronize(device)


def _execute(
    op: OpInfo, form: CallForm, sample: Sample, device: torch.device, template: Any, widen: Optional[Widening] = None
) -> Outcome:
    copy = replicate_sample(sample.input, device, sample.stay_on_cpu)
    if widen is not None:  # the CPU's reference at a dtype it lacks
        copy, template = widen.widen_sample(copy), widen.widen(template)
    leaves = pytree.tree_leaves((copy.input, copy.args, copy.kwargs))
    # A factory call without tensor or device arguments (linspace(1, 3, 1))
    # creates its result on the default device: make that the device under
    # test, as user code would with `with torch.device("mydev"):`.
    no_tensors = not any(isinstance(leaf, torch.Tensor) for leaf in leaves)
    with device if no_tensors else contextlib.nullcontext():
        result, written = form(op, copy, device, template)
    # Kernels run asynchronously: an error inside one surfaces here, and
    # belongs to this op and sample, not to whatever runs next.
    _synchronize(device)
    arguments = [leaf for leaf in pytree.tree_leaves((leaves, written)) if isinstance(leaf, torch.Tensor)]
    aliases = alias_signature(result, arguments)
    if widen is not None:
        result, arguments = widen.narrow(result), widen.narrow(arguments)
    processed = sample.input.output_process_fn_grad(result)
    return Outcome(result, processed, arguments, aliases)


class _RandomOpRecorder(TorchDispatchMode):
    """Notes the ATen ops tagged nondeterministic_seeded (random draws) that
    a run calls: PyTorch's own flag for "the values are random"."""

    def __init__(self) -> None:
        super().__init__()
        self.random_ops: Set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random_ops.add(str(func))
        return func(*args, **(kwargs or {}))


def _randomness(op: OpInfo, form: CallForm, sample: Sample, template: Any, widen: Optional[Widening]) -> Optional[str]:
    """Why the values of this call are random, or None.

    OpInfos seed their random ops (wrapper_set_seed), so two CPU runs agree
    and the generator's state is restored: only the ATen ops called tell.
    They are recorded in a separate CPU run, because a TorchDispatchMode
    changes some results (complex linalg.pinv) and the reference run must be
    the plain computation."""
    recorder = _RandomOpRecorder()
    try:
        with recorder:
            _execute(op, form, sample, CPU, template, widen)
    except Exception:  # noqa: BLE001  (the plain run succeeded; this one only looks)
        return None
    if not recorder.random_ops:
        return None
    return "random values (calls " + ", ".join(sorted(recorder.random_ops)) + ", tagged nondeterministic_seeded)"


def _execute_on_cpu(
    op: OpInfo, form: CallForm, sample: Sample, template: Any, widen: Optional[Widening]
) -> Tuple[Outcome, Optional[str]]:
    """The CPU's reference run, and why its values are random if they are."""
    return _execute(op, form, sample, CPU, template, widen), _randomness(op, form, sample, template, widen)


def _difference(
    expected: Outcome,
    actual: Outcome,
    tolerance_for: policy.ToleranceFn,
    device_type: str,
    values: bool,
    strides: bool = False,
) -> Optional[str]:
    """How one call differs from the reference call, or None. Outputs
    first: a wrong shape also changes aliasing, and is the clearer cause."""
    return (
        describe_difference(
            expected.processed, actual.processed, tolerance_for, device_type, values=values, strides=strides
        )
        # Where the arguments are is the caller's choice, not the op's.
        or describe_difference(
            expected.arguments, actual.arguments, tolerance_for, None, values=values, what="argument"
        )
        or describe_alias_difference(expected.aliases, actual.aliases)
    )


def device_problem(device: torch.device) -> Optional[str]:
    """None if the device still computes correctly, else what goes wrong."""
    try:
        _synchronize(device)
    except Exception:  # noqa: BLE001  (a second failure of the same sample, already reported)
        pass
    try:
        probe = (torch.arange(4, device=device) * 2).cpu()
        _synchronize(device)
    except Exception as error:  # noqa: BLE001
        return describe_exception(error)
    return None if probe.tolist() == [0, 2, 4, 6] else f"arange(4) * 2 gives {probe.tolist()}"


class _OpCheck:
    """Checking one op at one dtype: the tally, and the per-op policy."""

    def __init__(self, op: OpInfo, dtype: torch.dtype, options: RunOptions, name: str) -> None:
        self.op = op
        self.device = torch.device(options.device)
        self.forms = [FUNCTION] + [v for v in options.variants if v != FUNCTION]
        self.tally = Tally(name, dtype_name(dtype))
        self.widen = widening_for(op, dtype)
        self.tolerance_for = policy.tolerances(op, self.device.type, dtype, widened=self.widen is not None)
        self.uninitialised = policy.declared_uninitialised(op)
        self.caveat = policy.declared_caveat(op, self.device.type, dtype)
        self.strides = options.samples_on_device
        # The widening the current sample's reference uses: none when the
        # CPU computes the sample at the dtype itself (the OpInfo's CPU list
        # can be narrower than what the kernels do).
        self.sample_widen: Optional[Widening] = None

    def _applies(self, variant: str, sample: Sample, function_result: Any) -> bool:
        if variant == INPLACE:
            # An in-place op cannot broadcast its self argument.
            return self.op.inplace_variant is not None and not sample.input.broadcasts_input
        if variant == OUT:
            leaves = function_result if isinstance(function_result, (tuple, list)) else [function_result]
            return self.op.supports_out and len(leaves) > 0 and all(isinstance(t, torch.Tensor) for t in leaves)
        return True

    def check_sample(self, sample: Sample) -> None:
        function: Optional[Outcome] = None
        for variant in self.forms:
            template = function.result if function is not None else None
            if variant != FUNCTION and not self._applies(variant, sample, template):
                continue
            form = CALL_FORMS[variant]
            try:
                expected, random = self._reference(variant, form, sample, template)
            except Exception as error:  # noqa: BLE001
                # Not a valid input (or this call form does not exist for it).
                if variant == FUNCTION:
                    self.tally.skipped(f"the CPU raises {type(error).__name__} for the sample")
                    return
                continue
            not_comparable = self.uninitialised or random
            if function is None:
                function = expected
            elif not_comparable is None and self._cpu_variant_differs(function, expected):
                self.tally.skipped(f"the CPU's {variant} result differs from its function result: no reference")
                continue
            self._check_on_device(sample, variant, form, expected, template, not_comparable)

    def _reference(self, variant: str, form: CallForm, sample: Sample, template: Any) -> Tuple[Outcome, Optional[str]]:
        if variant == FUNCTION:
            self.sample_widen = None
            try:
                return _execute_on_cpu(self.op, form, sample, template, None)
            except Exception:  # noqa: BLE001  (a dtype the CPU lacks: computed wider, below)
                if self.widen is None:
                    raise
            self.sample_widen = self.widen
        return _execute_on_cpu(self.op, form, sample, template, self.sample_widen)

    def _cpu_variant_differs(self, function: Outcome, variant: Outcome) -> bool:
        """Whether the CPU's in-place/out= call disagrees with its own
        function (garbage in an out= tensor, say): then it cannot be the
        expected value for the device's."""
        # Values only: out= returns e.g. return_types.mode_out, not .mode.
        expected, got = pytree.tree_leaves(function.processed), pytree.tree_leaves(variant.processed)
        return describe_difference(expected, got, self.tolerance_for, "cpu") is not None

    def _check_on_device(
        self,
        sample: Sample,
        variant: str,
        form: CallForm,
        expected: Outcome,
        template: Any,
        not_comparable: Optional[str],
    ) -> None:
        try:
            actual = _execute(self.op, form, sample, self.device, template)
            difference = _difference(
                expected,
                actual,
                self.tolerance_for,
                self.device.type,
                values=not_comparable is None,
                strides=self.strides,
            )
        except Exception as error:  # noqa: BLE001  (any exception is a finding)
            self.tally.failed(
                classify_exception(error), variant, describe_exception(error), sample.index, sample.summary()
            )
            problem = device_problem(self.device)
            if problem is not None:
                raise DeviceUnusable(problem) from error
            return
        if difference is not None and not_comparable is None:
            # Is the CPU's value a reference at all? Not if a second run
            # gives another (a nondeterministic CPU kernel).
            not_comparable = self._cpu_not_reproducible(sample, form, expected, template)
            if not_comparable is not None:
                difference = _difference(
                    expected, actual, self.tolerance_for, self.device.type, values=False, strides=self.strides
                )
        if difference is not None:
            self.tally.failed(Status.MISMATCH, variant, difference, sample.index, sample.summary())
        elif not_comparable is not None:
            self.tally.skipped(not_comparable)
        else:
            self.tally.passed()

    def _cpu_not_reproducible(self, sample: Sample, form: CallForm, first: Outcome, template: Any) -> Optional[str]:
        try:
            again = _execute(self.op, form, sample, CPU, template, self.sample_widen)
        except Exception:  # noqa: BLE001  (the first CPU run succeeded: it stays the reference)
            return None
        if _difference(first, again, self.tolerance_for, "cpu", values=True) is None:
            return None
        return "the CPU gives different values on two runs of the same sample"


def run_op(op: OpInfo, dtype: torch.dtype, options: RunOptions = RunOptions(), layout: str = "strided") -> TaskResult:
    """Checks `op` at `dtype` with inputs of `layout` (strided, or one of
    the sparse layouts); never raises for anything the op does."""
    started = time.monotonic()
    check = _OpCheck(op, dtype, options, op.full_name if layout == "strided" else f"{op.full_name}[{layout}]")
    samples: List[Sample] = []
    with warnings.catch_warnings():
        # Deprecation and performance warnings from thousands of samples
        # would bury the progress output; they say nothing about conformance.
        warnings.simplefilter("ignore")
        try:
            samples = select_samples(
                op,
                dtype,
                options.max_samples,
                reference=options.inputs == "reference",
                on_device=options.device if options.samples_on_device else None,
                layout=layout,
            )
        except Exception as error:  # noqa: BLE001
            # Inputs are made on the CPU (unless samples_on_device): not the device's fault.
            check.tally.skipped(f"the OpInfo cannot generate sample inputs: {describe_exception(error)}")
        for sample in samples:
            try:
                check.check_sample(sample)
            except DeviceUnusable as error:
                message = f"device unusable after this op failed: {first_line(str(error))}"
                check.tally.failed(Status.ERROR, FUNCTION, message, sample.index, sample.summary())
                break
    return check.tally.result(len(samples), time.monotonic() - started, note=check.caveat)
