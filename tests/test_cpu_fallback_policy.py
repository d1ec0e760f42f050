"""MYDEV_CPU_FALLBACK: operators the device has no kernel for (here a custom
operator with only a CPU kernel) are refused by default, run on the CPU with
copies under warn/on, and counted."""

import pytest
import torch

from mydev_testing import assert_device_still_usable, run_python

# A custom op whose only kernel is a CPU one, as a user library would have.
CPU_ONLY_OP = """
import torch, warnings
@torch.library.custom_op("fallback_test::scale", mutates_args=(), device_types="cpu")
def scale(t: torch.Tensor, factor: float) -> torch.Tensor:
    assert t.device.type == "cpu", t.device
    return t * factor
x = torch.arange(4.0, device="mydev")
"""


@pytest.fixture
def restore_policy():
    previous = torch.mydev.cpu_fallback_policy()
    yield
    torch.mydev.set_cpu_fallback_policy(previous)
    torch.mydev.reset_cpu_fallback_counts()


def test_default_policy_refuses_with_the_op_and_the_switch():
    result = run_python(
        CPU_ONLY_OP
        + """
try:
    scale(x, 2.0)
except NotImplementedError as err:
    print("REFUSED", err)
print("STILL", (x + 1).cpu().tolist())
""",
        env={"MYDEV_CPU_FALLBACK": ""},
    )
    assert result.returncode == 0, result.stderr
    assert "REFUSED mydev has no kernel for fallback_test::scale" in result.stdout
    assert "MYDEV_CPU_FALLBACK=warn" in result.stdout
    assert "STILL [1.0, 2.0, 3.0, 4.0]" in result.stdout


@pytest.mark.parametrize("policy", ["warn", "on"])
def test_fallback_runs_on_cpu_copies_and_counts(policy):
    result = run_python(
        CPU_ONLY_OP
        + """
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = scale(x, 2.0)
    second = scale(x, 3.0)
print("DEVICE", first.device, second.device)
print("VALUES", first.cpu().tolist(), second.cpu().tolist())
print("COUNTS", torch.mydev.cpu_fallback_counts())
print("WARNINGS", sum("no device kernel" in str(w.message) for w in caught))
""",
        env={"MYDEV_CPU_FALLBACK": policy},
    )
    assert result.returncode == 0, result.stderr
    assert "DEVICE mydev:0 mydev:0" in result.stdout
    assert "VALUES [0.0, 2.0, 4.0, 6.0] [0.0, 3.0, 6.0, 9.0]" in result.stdout
    assert "COUNTS {'fallback_test::scale': 2}" in result.stdout
    # Once per operator. Depending on how the op was called, c10 hands the
    # warning to Python's warnings or prints it on stderr: count both.
    python_warnings = int(result.stdout.split("WARNINGS ")[1].split()[0])
    printed_warnings = result.stderr.count("no device kernel; running it on the CPU")
    assert python_warnings + printed_warnings == (1 if policy == "warn" else 0)


def test_invalid_policy_value_is_a_clear_error():
    result = run_python(CPU_ONLY_OP + "scale(x, 2.0)", env={"MYDEV_CPU_FALLBACK": "sometimes"})
    assert result.returncode != 0
    assert "MYDEV_CPU_FALLBACK='sometimes' is invalid: expected off, warn or on" in result.stderr


def test_policy_can_be_changed_at_run_time(restore_policy):
    torch.mydev.set_cpu_fallback_policy("on")
    assert torch.mydev.cpu_fallback_policy() == "on"
    with pytest.raises(ValueError) as info:
        torch.mydev.set_cpu_fallback_policy("maybe")
    # The argument is what was wrong, not the environment variable.
    assert "set_cpu_fallback_policy: policy='maybe' is invalid: expected off, warn or on" in str(info.value)
    assert "MYDEV_CPU_FALLBACK" not in str(info.value)
    assert torch.mydev.cpu_fallback_policy() == "on"
    assert_device_still_usable()


def test_aten_ops_never_fall_back(restore_policy):
    torch.mydev.set_cpu_fallback_policy("on")
    torch.mydev.reset_cpu_fallback_counts()
    x = torch.randn(8, 8, device="mydev")
    torch.testing.assert_close((x @ x).softmax(-1).cpu(), (x.cpu() @ x.cpu()).softmax(-1))
    assert torch.mydev.cpu_fallback_counts() == {}


def test_device_generic_custom_ops_run_on_the_device(restore_policy):
    # No device_types: the implementation is device-generic Python, which
    # runs mydev ops; nothing falls back.
    @torch.library.custom_op("fallback_test::generic_double", mutates_args=())
    def generic_double(t: torch.Tensor) -> torch.Tensor:
        return t * 2

    torch.mydev.reset_cpu_fallback_counts()
    x = torch.arange(3.0, device="mydev")
    assert generic_double(x).cpu().tolist() == [0.0, 2.0, 4.0]
    assert torch.mydev.cpu_fallback_counts() == {}
