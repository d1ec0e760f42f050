"""examples/aoti_cpp: an AOTInductor package compiled for mydev runs in a C++
program without Python. The runner is built with CMake against the libtorch
inside the torch wheel and libtorch_mydev.so (find_package(Torch) and
find_package(TorchMydev)); the package and the reference outputs come from a
fresh Python process (export_model.py, Python's aoti_load_package); the
runner's outputs must equal them."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import device_ext.cpp_extension as mydev_cpp
from mydev_testing import N_DEVICES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "aoti_cpp"

# Builds a C++ program and compiles a model: a few minutes on two cores.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake (pip install cmake)"),
]


def _run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("aoti_cpp")


@pytest.fixture(scope="module")
def runner(work):
    prefix = ";".join([torch.utils.cmake_prefix_path, mydev_cpp.cmake_prefix_path])
    build = work / "build"
    configure = _run(["cmake", "-S", str(EXAMPLE), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"])
    assert configure.returncode == 0, configure.stdout + configure.stderr
    compiled = _run(["cmake", "--build", str(build), "-j", "2"])
    assert compiled.returncode == 0, compiled.stdout[-4000:] + compiled.stderr[-4000:]
    return build / "aoti_runner"


@pytest.fixture(scope="module")
def package(work):
    """The package, its input and Python's output for it, made by the
    example's script in a fresh interpreter."""
    paths = {name: work / f"{name}.pt" for name in ("inputs", "expected")}
    paths["package"] = work / "mlp.pt2"
    made = _run(
        [
            sys.executable,
            str(EXAMPLE / "export_model.py"),
            str(paths["package"]),
            str(paths["inputs"]),
            str(paths["expected"]),
        ]
    )
    assert made.returncode == 0, made.stderr[-4000:]
    return paths


def _run_without_python(runner, *args):
    # Nothing of Python's environment: the runner needs only its run path.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    return _run([str(runner), *map(str, args)], env=env)


def test_runner_links_the_library_and_not_python(runner):
    dynamic = _run(["readelf", "-d", str(runner)]).stdout
    needed = re.findall(r"Shared library: \[([^\]]+)\]", dynamic)
    assert "libtorch_mydev.so" in needed
    assert not [name for name in needed if "python" in name], needed


@pytest.mark.parametrize(
    "device", [0, pytest.param(1, marks=pytest.mark.skipif(N_DEVICES < 2, reason="needs two devices"))]
)
def test_runner_output_equals_python(runner, package, work, device):
    outputs = work / f"outputs{device}.pt"
    result = _run_without_python(runner, package["package"], package["inputs"], outputs, device)
    assert result.returncode == 0, result.stderr
    assert f"output 0 on mydev:{device}, shape [8, 4]:" in result.stdout
    actual = torch.load(outputs)
    expected = torch.load(package["expected"])
    assert len(actual) == len(expected) == 1
    # The same kernels on the same inputs: bitwise equal.
    assert torch.equal(actual[0], expected[0])
    # And the model is right: Python's result against eager CPU is tested in tests/test_aoti.py.


def test_truncated_package_is_a_clear_error(runner, package, work):
    truncated = work / "truncated.pt2"
    truncated.write_bytes(package["package"].read_bytes()[:1000])
    result = _run_without_python(runner, truncated, package["inputs"])
    assert result.returncode == 1
    assert result.stderr.strip() == "aoti_runner: Failed to initialize zip archive: failed finding central directory"


def test_bad_device_index_is_a_clear_error(runner, package):
    result = _run_without_python(runner, package["package"], package["inputs"], "", 7)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"aoti_runner: Invalid device index mydev:7: there are {N_DEVICES} mydev devices "
        "(set MYDEV_DEVICE_COUNT to change that)"
    )
