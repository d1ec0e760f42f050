"""Builds examples/extension_cpp/saxpy.cpp as a user would and runs it on
mydev: torch.utils.cpp_extension compiles it against torch and torch-mydev's
public header and library, and torch.ops.myext.saxpy is then an ordinary op.

    python examples/extension_cpp/build_and_run.py
"""

import os

import torch
import torch.utils.cpp_extension

import device_ext.cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))


def build() -> str:
    """Compiles and loads the op library (once; cached in the build
    directory), returning the path of the shared library."""
    return torch.utils.cpp_extension.load(
        name="myext_saxpy",
        sources=[os.path.join(HERE, "saxpy.cpp")],
        extra_include_paths=device_ext.cpp_extension.include_paths(),
        extra_ldflags=device_ext.cpp_extension.ldflags(),
        # A library of torch ops, not a Python module: loading it runs
        # TORCH_LIBRARY and registers torch.ops.myext.*.
        is_python_module=False,
        build_directory=os.environ.get("MYEXT_BUILD_DIR"),
        verbose=False,
    )


def main() -> None:
    build()
    x = torch.randn(1000, device="mydev")
    y = torch.randn(1000, device="mydev")
    out = torch.ops.myext.saxpy(x, y, 2.0)
    expected = 2.0 * x.cpu() + y.cpu()
    print(out.device, out[:4].cpu().tolist())
    print("matches the CPU reference:", torch.allclose(out.cpu(), expected))


if __name__ == "__main__":
    main()
