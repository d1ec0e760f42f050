"""Where C++ code finds torch-mydev: the public headers (``device_ext/include``)
and the library ``libtorch_mydev.so`` (``device_ext/lib``) that holds the
driver and the whole torch integration, the same one ``device_ext._C`` loads.

The counterpart of ``torch.utils.cpp_extension.include_paths()`` and
``torch.utils.cmake_prefix_path`` for mydev; docs/cpp_extensions.md shows both
uses (``torch.utils.cpp_extension.load`` and CMake)::

    torch.utils.cpp_extension.load(
        name="my_ops", sources=["my_ops.cpp"], is_python_module=False,
        extra_include_paths=device_ext.cpp_extension.include_paths(),
        extra_ldflags=device_ext.cpp_extension.ldflags())
"""

import os
from typing import List

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

# The library's name for the linker (-ltorch_mydev); setup.py builds it.
LIBRARY = "torch_mydev"

# For CMake: find_package(TorchMydev) with this in CMAKE_PREFIX_PATH defines
# the imported target torch_mydev (headers and library).
cmake_prefix_path = os.path.join(_PACKAGE, "share", "cmake")


def include_paths() -> List[str]:
    """Directories of the public headers (mydev_extension.h and the compiled
    kernel contract). torch's own come from torch.utils.cpp_extension."""
    return [os.path.join(_PACKAGE, "include")]


def library_paths() -> List[str]:
    """The directory of libtorch_mydev.so."""
    return [os.path.join(_PACKAGE, "lib")]


def ldflags() -> List[str]:
    """Linker flags for an extension that calls into the library: the
    directory, the library, and an rpath so that the extension finds the same
    file device_ext._C loaded."""
    flags = []
    for path in library_paths():
        flags += [f"-L{path}", f"-Wl,-rpath,{path}"]
    return flags + [f"-l{LIBRARY}"]
