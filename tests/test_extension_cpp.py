"""A third-party C++ op for mydev built out of tree (examples/extension_cpp):
torch.utils.cpp_extension.load compiles it against device_ext.cpp_extension's
include and library directories, TORCH_LIBRARY registers it, and its kernel
runs on the current mydev stream. Everything runs in a fresh interpreter that
imports only torch and device_ext.cpp_extension, as a user's script would;
results are compared with the CPU reference here."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mydev_testing import N_DEVICES, assert_close_to_cpu, run_python

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "extension_cpp"

pytestmark = pytest.mark.slow  # compiles a C++ file (about a minute on two cores)

SCRIPT = f"""
import json, sys
import torch
import device_ext.cpp_extension

sys.path.insert(0, {str(EXAMPLE)!r})
from build_and_run import build

build()
saxpy = torch.ops.myext.saxpy
report = {{"tensors": {{}}, "errors": {{}}}}

def keep(name, **tensors):
    report["tensors"][name] = {{k: v.cpu().tolist() for k, v in tensors.items()}}

# Inputs generated on the device.
g = torch.Generator(device="mydev").manual_seed(0)
x = torch.randn(1000, device="mydev", generator=g)
y = torch.randn(1000, device="mydev", generator=g)
out = saxpy(x, y, 2.5)
keep("contiguous", x=x, y=y, out=out, device=torch.tensor(out.device.index))

# Non-contiguous inputs (made contiguous on the device by the op).
a = torch.randn(16, 8, device="mydev", generator=g).t()
b = torch.randn(8, 16, device="mydev", generator=g)
keep("transposed", x=a, y=b, out=saxpy(a, b, -1.0))

# Stream order: x is filled on a side stream held by a latch; the op, called
# on that stream, must run after the fill (the default stream is drained
# before the latch is released, so a kernel queued there would read x early).
side = torch.mydev.Stream()
with torch.mydev.stream(side):
    latch = torch.mydev._debug.hold_stream()
    filled = torch.full((64,), 3.25, device="mydev")
    ones = torch.ones(64, device="mydev")
    ordered = saxpy(filled, ones, 2.0)
torch.mydev.default_stream().synchronize()
latch.release()
side.synchronize()
keep("stream_order", out=ordered)

if torch.mydev.device_count() > 1:
    x1 = torch.randn(33, device="mydev:1")
    y1 = torch.randn(33, device="mydev:1")
    out1 = saxpy(x1, y1, 0.5)
    keep("device1", x=x1, y=y1, out=out1, device=torch.tensor(out1.device.index))

# The CPU kernel of the same op.
keep("cpu", out=saxpy(torch.arange(4.0), torch.ones(4), 3.0))

bad = {{
    "dtype": lambda: saxpy(torch.ones(4, dtype=torch.int32, device="mydev"), torch.ones(4, dtype=torch.int32, device="mydev"), 1.0),
    "shape": lambda: saxpy(torch.ones(4, device="mydev"), torch.ones(5, device="mydev"), 1.0),
    "device": lambda: saxpy(torch.ones(4, device="mydev"), torch.ones(4), 1.0),
}}
for name, call in bad.items():
    try:
        call()
        report["errors"][name] = None
    except Exception as error:
        report["errors"][name] = [type(error).__name__, str(error).splitlines()[0]]

# Still usable after the errors.
keep("after_errors", out=saxpy(torch.ones(3, device="mydev"), torch.ones(3, device="mydev"), 1.0))
print("REPORT" + json.dumps(report))
"""


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("myext_build")


@pytest.fixture(scope="module")
def report(build_dir):
    result = run_python(SCRIPT, env={"MYEXT_BUILD_DIR": str(build_dir)}, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT"))
    return json.loads(line[len("REPORT") :])


def _tensors(report, name):
    return {key: torch.tensor(value) for key, value in report["tensors"][name].items()}


def test_op_matches_the_cpu_reference(report):
    t = _tensors(report, "contiguous")
    assert_close_to_cpu(t["out"].to("mydev"), 2.5 * t["x"] + t["y"])
    assert int(t["device"]) == 0


def test_non_contiguous_inputs(report):
    t = _tensors(report, "transposed")
    assert_close_to_cpu(t["out"].to("mydev"), -1.0 * t["x"] + t["y"])


def test_kernel_runs_on_the_current_stream(report):
    out = _tensors(report, "stream_order")["out"]
    assert torch.equal(out, torch.full((64,), 7.5))


@pytest.mark.skipif(N_DEVICES < 2, reason="needs two mydev devices")
def test_inputs_on_device_1_run_there(report):
    t = _tensors(report, "device1")
    assert_close_to_cpu(t["out"].to("mydev"), 0.5 * t["x"] + t["y"])
    assert int(t["device"]) == 1


def test_cpu_kernel_of_the_same_op(report):
    assert torch.equal(_tensors(report, "cpu")["out"], 3.0 * torch.arange(4.0) + 1)


@pytest.mark.parametrize(
    "case, message",
    [
        ("dtype", "myext::saxpy: expected float32 tensors, got Int and Int"),
        ("shape", "myext::saxpy: x and y must have the same shape, got [4] and [5]"),
        ("device", "myext::saxpy: x and y must be on the same device, got mydev:0 and cpu"),
    ],
)
def test_bad_input_is_a_clear_error(report, case, message):
    kind, text = report["errors"][case]
    assert kind == "RuntimeError"
    assert re.fullmatch(re.escape(message), text), text


def test_still_usable_after_errors(report):
    assert torch.equal(_tensors(report, "after_errors")["out"], torch.full((3,), 2.0))


def test_example_script_runs_as_documented(report, build_dir):
    # The build the report made is reused (torch.utils.cpp_extension.load
    # rebuilds only what changed).
    result = subprocess.run(
        [sys.executable, str(EXAMPLE / "build_and_run.py")],
        env={**os.environ, "MYEXT_BUILD_DIR": str(build_dir)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "matches the CPU reference: True" in result.stdout
