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

import re

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_map

from mydev_testing import assert_device_still_usable, run_python

D = "mydev"
OPS_WITH_ERROR_INPUTS = [op for op in op_db if op.error_inputs_func is not None]


def _raised_from_the_stream_on_purpose(op, sample) -> bool:
    """masked_fill given its value as a device tensor: cuda's kernel reads
    that value on the host with a synchronize and raises at the call if it
    does not fit the tensor's dtype; the device path keeps the call
    asynchronous, and its kernel raises."""
    value = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("value")
    return op.name == "masked_fill" and isinstance(value, torch.Tensor) and value.device.type == D


def _on_cpu(value):
    return tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, value)


def _raised(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (whatever the op raises is compared)
        return error
    return None


@pytest.mark.parametrize("op", OPS_WITH_ERROR_INPUTS, ids=lambda op: f"{op.name}.{op.variant_test_name}".rstrip("."))
def test_error_inputs_raise_at_the_call_as_the_opinfo_says(op):
    problems = []
    for error_input in op.error_inputs(D):  # a device name, as PyTorch's tests pass it
        sample = error_input.sample_input
        on_device = _raised(op, sample.input, *sample.args, **sample.kwargs)
        late = _raised(torch.mydev.synchronize)
        expected = f"{error_input.error_type.__name__} matching {error_input.error_regex!r}"
        if late is not None and _raised_from_the_stream_on_purpose(op, sample):
            if on_device is not None or not re.search(error_input.error_regex, str(late)):
                problems.append(f"expected {expected} from the stream, got {late!r} (call: {on_device!r})")
        elif late is not None:
            problems.append(f"expected {expected} at the call; raised from the stream: {late}")
        elif on_device is None:
            cpu_sample = _on_cpu(sample)
            on_cpu = _raised(op, cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            if on_cpu is not None:
                problems.append(f"expected {expected}; mydev raised nothing, the CPU raised {on_cpu!r}")
        elif not isinstance(on_device, error_input.error_type) or not re.search(
            error_input.error_regex, str(on_device)
        ):
            problems.append(f"expected {expected}, got {on_device!r}")
    assert not problems, "\n".join(problems)
    assert_device_still_usable()


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
