"""Every OpInfo's error inputs on the device, against the CPU.

A call that PyTorch's own tests expect to fail must fail at the call on mydev,
as on cuda (whose kernels check their arguments in host code before they
launch), with the error the OpInfo names, and leave nothing on the stream for
the next synchronize to report. A call that does not fail on mydev must not
fail on the CPU either: some error inputs mix devices, which only a device
run sees.

This scan found two kinds of late errors: overlaps between an out= (or
in-place) argument and the others, which the Meta kernels check but could not
see on metadata-only tensors (csrc/aten/meta_cache.h), and checks that only
the CPU kernels make (csrc/aten/cpu_kernel_checks.h).
"""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import ErrorInput, OpInfo, SampleInput

from device_ext.conformance.error_inputs import check_error_input, run_error_inputs
from device_ext.conformance.results import Status
from mydev_testing import assert_device_still_usable, run_python

D = "mydev"
OPS_WITH_ERROR_INPUTS = [op for op in op_db if op.error_inputs_func is not None]


# The check is the conformance CLI's (`--error-inputs`), so what vendor CI
# runs and what this suite asserts cannot drift apart.
@pytest.mark.parametrize("op", OPS_WITH_ERROR_INPUTS, ids=lambda op: op.full_name)
def test_error_inputs_raise_at_the_call_as_the_opinfo_says(op):
    result = run_error_inputs(op, D)
    assert result.status in (Status.PASS, Status.SKIPPED), "\n".join(
        f"{cause.message} (sample {cause.first_sample}: {cause.sample})" for cause in result.causes
    )
    assert_device_still_usable()


def _refuses_cpu_tensors(x, *, device=None):
    if x.device.type == "cpu" or device == torch.device("cpu"):
        raise ValueError("refused on the CPU")
    return x


@pytest.mark.parametrize("device_argument", [None, torch.device(D)], ids=["tensor", "device_kwarg"])
def test_a_call_the_cpu_refuses_but_the_device_accepts_is_a_mismatch(device_argument):
    # The CPU rerun must really run on the CPU: with the tensors and any
    # device argument moved there, not the device's sample passed again
    # (which would report the call as raising on neither).
    kwargs = {} if device_argument is None else {"device": device_argument}
    sample = SampleInput(torch.ones(3, device=D), kwargs=kwargs)
    op = OpInfo("refuses_cpu_tensors", op=_refuses_cpu_tensors, dtypes=(torch.float32,))
    status, message = check_error_input(op, ErrorInput(sample, error_regex="never matched"), D)
    assert status == Status.MISMATCH
    assert "mydev raised nothing, the CPU raised ValueError" in message, message


def test_a_refused_exponent_raises_at_the_call_after_an_accepted_one():
    # pow(2) puts the call's Meta result in the cache; pow(-2) of the same
    # integer tensor differs only in the exponent's value, which pow's Meta
    # kernel refuses: raised at the call (not by the kernel at the next
    # synchronize), nothing left on the stream, the tensor unchanged.
    script = """
        import torch

        n = torch.arange(1, 5, device="mydev")
        print(n.pow(2).tolist())
        for call in (lambda: n.pow(-2), lambda: n.pow_(-1), lambda: torch.pow(n, -3, out=torch.empty_like(n))):
            try:
                call()
                print("no error")
            except RuntimeError as error:
                print("Integers to negative integer powers are not allowed" in str(error))
        torch.mydev.synchronize()
        print(n.tolist(), n.pow(3).tolist())
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[1, 4, 9, 16]", "True", "True", "True", "[1, 2, 3, 4] [1, 8, 27, 64]"]


def test_overlapping_out_arguments_raise_at_the_call_in_a_plain_script():
    # Each call writes into memory it also reads, which the CPU refuses; the
    # device must refuse it at the call, write nothing, and stay usable.
    script = """
        import torch

        x = torch.arange(8.0, device="mydev")
        index = torch.tensor([0, 1, 2], device="mydev")
        calls = {
            "cat": lambda: torch.cat([x[:2], x[2:4]], out=x[1:5]),
            "mul": lambda: torch.mul(x[:-1], 2, out=x[1:]),
            "gather": lambda: torch.gather(x, 0, index, out=x[:3]),
            "index_select": lambda: torch.index_select(x, 0, index, out=x[2:5]),
            "take": lambda: torch.take(x, index, out=x[:3]),
            "index_select_into_itself": lambda: torch.index_select(x, 0, torch.arange(8, device="mydev"), out=x),
        }
        for name, call in calls.items():
            try:
                call()
                print(name, "no error")
            except RuntimeError as error:
                print(name, str(error).startswith("unsupported operation"))
        torch.mydev.synchronize()
        x.add_(x)  # the same tensor twice: no overlap any kernel refuses
        print(x.cpu().tolist() == list(range(0, 16, 2)), (x * 2).sum().item())
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "cat",
        "True",
        "mul",
        "True",
        "gather",
        "True",
        "index_select",
        "True",
        "take",
        "True",
        "index_select_into_itself",
        "True",
        "True",
        "112.0",
    ], result.stdout
