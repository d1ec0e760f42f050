"""The library split: libtorch_mydev.so holds the driver and the torch
integration and needs no Python; device_ext._C is a thin module linked
against it; the Python process maps the very file C++ programs link; and
device_ext.cpp_extension tells C++ builds where the headers and library are."""

import json
import os
import re
import subprocess
from pathlib import Path

import device_ext
import device_ext.cpp_extension as mydev_cpp
from mydev_testing import run_python

LIBRARY = Path(mydev_cpp.library_paths()[0]) / "libtorch_mydev.so"
MODULE = Path(device_ext._C.__file__)


def _dynamic_section(path: Path) -> str:
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout


def _needed(path: Path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _dynamic_section(path))


def test_library_needs_no_python():
    needed = _needed(LIBRARY)
    assert "libtorch_cpu.so" in needed and "libc10.so" in needed, needed
    assert not [name for name in needed if "python" in name], needed
    assert re.search(r"\(SONAME\)\s+Library soname: \[libtorch_mydev\.so\]", _dynamic_section(LIBRARY))


def test_python_module_links_the_library_next_to_it():
    assert "libtorch_mydev.so" in _needed(MODULE)
    assert re.search(r"\((RUNPATH|RPATH)\)\s+Library r(un)?path: \[\$ORIGIN/lib\]", _dynamic_section(MODULE))
    assert LIBRARY.parent == MODULE.parent / "lib"


def test_python_maps_the_same_library_file_once():
    result = run_python(
        """
        import json, torch
        x = torch.ones(2, device="mydev")  # the device works through it
        maps = open("/proc/self/maps").read().split("\\n")
        paths = sorted({line.split()[-1] for line in maps if line.endswith("libtorch_mydev.so")})
        print(json.dumps(paths))
        """
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [os.path.realpath(LIBRARY)]


def test_the_library_exports_namespace_mydev_and_the_driver_api_only():
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", "-C", str(LIBRARY)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [line.split(" ", 2)[2] for line in symbols if len(line.split(" ", 2)) == 3]
    assert "mydevKernelPointer" in names
    assert any(name.startswith("mydev::ext::launchKernel(") for name in names)
    stray = [
        n
        for n in names
        if not re.match(r"(mydev\w*|_ZNK?5mydev|(typeinfo|typeinfo name|vtable|VTT) for mydev::|.*\bmydev::)", n)
    ]
    assert stray == [], stray[:20]


def test_include_and_library_paths():
    include = Path(mydev_cpp.include_paths()[0])
    assert (include / "mydev_extension.h").is_file()
    assert (include / "mydev_compiled_kernel.h").is_file()
    assert LIBRARY.is_file()
    flags = mydev_cpp.ldflags()
    assert f"-L{LIBRARY.parent}" in flags and "-ltorch_mydev" in flags
    config = Path(mydev_cpp.cmake_prefix_path) / "TorchMydev" / "TorchMydevConfig.cmake"
    assert config.is_file()
