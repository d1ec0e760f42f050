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

import subprocess
import sys
import textwrap

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


# Calls whose Scalar arguments the CPU kernel converts to the dtype it
# computes in (or to float, for Half and BFloat16 kernels that compute in
# float): a value that does not fit raises at the call, with the CPU's
# message; one that fits raises nothing. Each (name, call) takes the device
# and the value.
_SCALAR_CONVERSION_SCRIPT = """
    import sys
    import torch

    def calls(d):
        ones = lambda dtype, n=3: torch.ones(n, dtype=dtype, device=d)
        mask = torch.tensor([True, False, True], device=d)
        index = torch.tensor([0, 2], device=d)
        matrix = lambda dtype: ones(dtype, 9).view(3, 3)
        return {
            "fill_": lambda t, v: ones(t).fill_(v),
            "fill_ one element": lambda t, v: ones(t, 1).fill_(v),
            "fill_ empty": lambda t, v: ones(t, 0).fill_(v),
            "full": lambda t, v: torch.full((3,), v, dtype=t, device=d),
            "new_full": lambda t, v: ones(t).new_full((2,), v),
            "masked_fill": lambda t, v: ones(t).masked_fill(mask, v),
            "where": lambda t, v: torch.where(mask, ones(t), v),
            "clamp": lambda t, v: torch.clamp(ones(t), min=v),
            "clamp_ max": lambda t, v: ones(t).clamp_(max=v),
            "clamp out": lambda t, v: torch.clamp(ones(t), -1, v, out=ones(t)),
            "clamp_min": lambda t, v: torch.clamp_min(ones(t), v),
            "add alpha": lambda t, v: torch.add(ones(t), ones(t), alpha=v),
            "add_ alpha": lambda t, v: ones(t).add_(ones(t), alpha=v),
            "sub alpha": lambda t, v: torch.sub(ones(t), ones(t), alpha=v),
            "rsub alpha": lambda t, v: torch.rsub(ones(t), ones(t), alpha=v),
            "index_add alpha": lambda t, v: ones(t).index_add(0, index, ones(t, 2), alpha=v),
            "addcmul": lambda t, v: torch.addcmul(ones(t), ones(t), ones(t), value=v),
            "addcdiv": lambda t, v: torch.addcdiv(ones(t), ones(t), ones(t), value=v),
            "threshold": lambda t, v: torch.threshold(ones(t), v, 0),
            "threshold value": lambda t, v: torch.threshold(ones(t), 0, v),
            "hardtanh": lambda t, v: torch.nn.functional.hardtanh(ones(t), -1, v),
            "leaky_relu": lambda t, v: torch.nn.functional.leaky_relu(ones(t), v),
            "elu": lambda t, v: torch.nn.functional.elu(ones(t), v),
            "softplus": lambda t, v: torch.nn.functional.softplus(ones(t), v),
            "hardshrink": lambda t, v: torch.nn.functional.hardshrink(ones(t), v),
            "lerp": lambda t, v: torch.lerp(ones(t), ones(t), v),
            "scatter": lambda t, v: ones(t).scatter(0, index, v),
            "addmm": lambda t, v: torch.addmm(matrix(t), matrix(t), matrix(t), alpha=v),
            "baddbmm": lambda t, v: torch.baddbmm(matrix(t)[None], matrix(t)[None], matrix(t)[None], beta=v),
            "addmv": lambda t, v: torch.addmv(ones(t), matrix(t), ones(t), alpha=v),
            "addr": lambda t, v: torch.addr(matrix(t), ones(t), ones(t), beta=v),
            "pow": lambda t, v: torch.pow(ones(t), v),
            "linspace": lambda t, v: torch.linspace(0, v, 3, dtype=t, device=d),
            "rrelu": lambda t, v: torch.nn.functional.rrelu(ones(t), 0.1, v),
            "leaky_relu_backward": lambda t, v: torch.ops.aten.leaky_relu_backward(ones(t), ones(t), v, False),
            "elu_backward": lambda t, v: torch.ops.aten.elu_backward(ones(t), v, 1.0, 1.0, False, ones(t)),
            "hardtanh_backward": lambda t, v: torch.ops.aten.hardtanh_backward(ones(t), ones(t), -1, v),
        }

    values = [
        (torch.int8, 1000), (torch.int8, 100), (torch.uint8, 300), (torch.uint8, -1),
        (torch.int32, 2**40), (torch.bool, 2), (torch.float32, 1e300), (torch.float32, 1e30),
        (torch.float64, 1e300), (torch.float16, 1e6), (torch.float16, 1e4), (torch.bfloat16, 1e300),
        (torch.complex64, 1e300), (torch.float32, 1j),
    ]
    device = sys.argv[1]
    for name, call in calls(device).items():
        for dtype, value in values:
            outcome = "ok"
            try:
                call(dtype, value)
            except Exception as error:
                outcome = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            if device != "cpu":
                try:
                    torch.accelerator.synchronize()
                except Exception as error:
                    outcome = f"late {outcome} {str(error).splitlines()[0]}"
            print(f"{name} {dtype} {value}: {outcome}")
"""


def test_scalar_arguments_that_do_not_fit_raise_at_the_call_as_on_the_cpu(tmp_path):
    script = tmp_path / "conversions.py"
    script.write_text(textwrap.dedent(_SCALAR_CONVERSION_SCRIPT))
    outcomes = {}
    for device in ("cpu", "mydev"):
        result = subprocess.run([sys.executable, str(script), device], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        outcomes[device] = result.stdout.splitlines()
    cpu, mydev = outcomes["cpu"], outcomes["mydev"]
    assert len(cpu) == len(mydev) > 400
    converted = [line for line in cpu if "cannot be converted" in line]
    assert len(converted) > 150  # the script reaches the conversions
    assert [line for line in cpu if line.endswith(": ok")]  # and calls that fit
    # A dtype the CPU kernel doesn't compute in is refused by the kernel on
    # the stream, later (docs/user_guide.md, "Errors").
    differences = [(c, m) for c, m in zip(cpu, mydev) if c != m and ": NotImplementedError:" not in c]
    assert differences == [], "\n".join(f"cpu:   {c}\nmydev: {m}" for c, m in differences)


def test_a_refused_scalar_value_raises_at_the_call_after_an_accepted_one():
    # The accepted call puts its Meta result in the cache; the refused one
    # differs only in a Scalar's value, which the Meta kernel checks (its
    # sign, infinity, or the dtypes it fits): raised at the call, not by the
    # kernel at the next synchronize.
    script = """
        import torch
        aten = torch.ops.aten
        x = torch.randn(4, 3, device="mydev")
        g = torch.randn(4, 3, device="mydev")
        empty = torch.empty(0, device="mydev")
        calls = {
            "elu_backward": lambda a: aten.elu_backward(g, a, 1.0, 1.0, True, x),
            "leaky_relu_backward": lambda a: aten.leaky_relu_backward(g, x, a, True),
            "softshrink": lambda a: torch.nn.functional.softshrink(x.half(), a),
            "renorm": lambda a: torch.renorm(x, a, 0, 1.0),
            "vector_norm": lambda a: torch.linalg.vector_norm(empty, ord=a),
            "histc": lambda a: torch.histc(x, 4, a, 1.0),
        }
        accepted = {"elu_backward": 1.0, "leaky_relu_backward": 0.1, "softshrink": 0.5, "renorm": 2.0,
                    "vector_norm": 2.0, "histc": 0.0}
        refused = {"elu_backward": -1.0, "leaky_relu_backward": -0.1, "softshrink": 1e5, "renorm": -1.0,
                   "vector_norm": float("-inf"), "histc": 2.0}
        for name, call in calls.items():
            call(accepted[name])
            torch.mydev.synchronize()
            try:
                call(refused[name])
                print(name, "no error at the call")
            except RuntimeError:
                print(name, "raised at the call")
            torch.mydev.synchronize()
        print((x * 2).sum().item() == (x.cpu() * 2).sum().item())
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "True"
    assert [line for line in lines[:-1] if not line.endswith("raised at the call")] == []
    assert len(lines) == 7


def test_index_put_values_of_another_dtype_raise_at_the_call_as_on_the_cpu():
    # Values of another dtype are refused at the call, except through a
    # mask with one value, which the CPU writes with masked_fill.
    script = """
        import torch

        for device in ("cpu", "mydev"):
            x = torch.zeros(4, dtype=torch.int8, device=device)
            rows = torch.tensor([0, 2], device=device)
            mask = torch.tensor([True, False, True, False], device=device)
            calls = {
                "indices": lambda: x.index_put_((rows,), torch.tensor([5, 6], device=device)),
                "accumulate": lambda: x.index_put_((rows,), torch.tensor(5.0, device=device), accumulate=True),
                "functional": lambda: torch.index_put(x, (rows,), torch.tensor([5, 6], device=device)),
                "mask, one value": lambda: x.index_put_((mask,), torch.tensor(7, device=device)),
            }
            for name, call in calls.items():
                try:
                    call()
                    outcome = "ok"
                except RuntimeError as error:
                    outcome = str(error)
                torch.accelerator.synchronize()
                print(device, name, outcome, x.tolist())
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 8
    cpu, mydev = lines[:4], lines[4:]
    assert [line.replace("cpu ", "", 1) for line in cpu] == [line.replace("mydev ", "", 1) for line in mydev]
    assert "Index put requires the source and destination dtypes match" in cpu[0]
    assert cpu[-1].endswith("ok [7, 0, 7, 0]")


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
