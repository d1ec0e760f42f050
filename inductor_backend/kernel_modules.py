"""Builds mydev kernel modules: the C++ Inductor generated for one fused
kernel plus a launcher, compiled by the device compiler into a Python
extension module.

The launcher is what the wrapper calls: ``kernel(stream, *args)`` turns the
arguments into device pointers and scalars, then submits the kernel to the
mydev stream as a lambda capturing them by value (SYCL's queue.submit). It
returns at once; the kernel runs on the stream's executor after the work
queued before it, eager ops included.
"""

import os
from typing import Any, Callable, List, Optional, Sequence

from torch._inductor.codecache import CppPythonBindingsCodeCache

import device_ext

from .fingerprints import headers_fingerprint

# Where mydev_compiled_kernel.h (the launch contract) lives.
INCLUDE_DIR = os.path.join(os.path.dirname(device_ext.__file__), "include")

_LAUNCHER = """
// ---- mydev launcher for {kernel_name}
{headers_comment}
#include <mydev_compiled_kernel.h>

static const char kKernelName[] = "{kernel_name}";

static mydev_compiled::TensorArgument tensor_arg(PyObject* args, int index, int device) {{
  mydev_compiled::TensorArgument argument;
  const int where = mydev_compiled::abi().tensor_argument(
      PyTuple_GET_ITEM(args, index), kKernelName, index, device, &argument.device,
      argument.host_value, sizeof(argument.host_value));
  if (where < 0) throw std::invalid_argument(mydev_compiled::abi().last_error());
  argument.on_host = where == 1;
  return argument;
}}

// Replaces the pending Python error with one naming the kernel and argument.
[[noreturn]] static void bad_scalar(int index, const char* expected) {{
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError, "%s: argument %d must be %s", kKernelName, index, expected);
  throw std::invalid_argument("");
}}

static int64_t int_arg(PyObject* args, int index) {{
  const long long value = PyLong_AsLongLong(PyTuple_GET_ITEM(args, index));
  if (value == -1 && PyErr_Occurred()) bad_scalar(index, "an int");
  return value;
}}

static double float_arg(PyObject* args, int index) {{
  const double value = PyFloat_AsDouble(PyTuple_GET_ITEM(args, index));
  if (value == -1.0 && PyErr_Occurred()) bad_scalar(index, "a float");
  return value;
}}

static PyObject* launch_py(PyObject*, PyObject* args) {{
  try {{
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != {arg_count} + 1) {{
      PyErr_SetString(PyExc_TypeError,
                      "{kernel_name}(stream, ...) takes {arg_count} kernel arguments");
      return nullptr;
    }}
    void* stream = PyLong_AsVoidPtr(PyTuple_GET_ITEM(args, 0));
    if (stream == nullptr) {{
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "{kernel_name}: null stream");
      return nullptr;
    }}
    const int device = mydev_compiled::abi().stream_device(stream);
    if (device < 0) throw std::invalid_argument(mydev_compiled::abi().last_error());
{parse_arguments}
    mydev_compiled::launch(stream, kKernelName, [=] {{ {function}({call_arguments}); }});
    Py_RETURN_NONE;
  }} catch (const std::exception& error) {{
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }}
}}

static PyMethodDef launcher_methods[] = {{
    {{"launch", launch_py, METH_VARARGS, "launch {kernel_name} on a mydev stream"}},
    {{nullptr, nullptr, 0, nullptr}}}};

static PyModuleDef launcher_module = {{
    PyModuleDef_HEAD_INIT, "launch", nullptr, -1, launcher_methods}};

PyMODINIT_FUNC PyInit_launch() {{
  if (mydev_compiled::import_abi() == nullptr) return nullptr;
  return PyModule_Create(&launcher_module);
}}
"""


def _parse_argument(index: int, cpp_type: str) -> str:
    """One launcher line: argument ``index`` (after the stream) as ``cpp_type``."""
    position = index + 1
    if cpp_type.endswith("*"):
        reader = f"tensor_arg(args, {position}, device)"
    elif cpp_type in ("float", "double"):
        reader = f"static_cast<{cpp_type}>(float_arg(args, {position}))"
    else:
        reader = f"static_cast<{cpp_type}>(int_arg(args, {position}))"
    return f"    const auto arg{index} = {reader};"


def headers_comment() -> str:
    """A line for generated source that names the device headers it includes
    (see fingerprints.py)."""
    return f"// built against device headers {headers_fingerprint(INCLUDE_DIR)}"


def launcher_source(kernel_name: str, arg_types: Sequence[str], function: str = "kernel") -> str:
    """The launcher of ``kernel_name``: parses ``arg_types`` and submits
    ``function`` (the C++ function of the kernel source) to the stream."""
    return _LAUNCHER.format(
        kernel_name=kernel_name,
        function=function,
        headers_comment=headers_comment(),
        arg_count=len(arg_types),
        parse_arguments="\n".join(_parse_argument(i, t) for i, t in enumerate(arg_types)),
        call_arguments=", ".join(
            f"static_cast<{t}>(arg{i}.get())" if t.endswith("*") else f"arg{i}" for i, t in enumerate(arg_types)
        ),
    )


class MydevKernelCodeCache(CppPythonBindingsCodeCache):
    """Inductor's C++ build and on-disk cache, for kernel modules whose entry
    point is the mydev launcher."""

    cache: dict = {}
    entry_function = "launch"

    @staticmethod
    def cache_clear() -> None:
        MydevKernelCodeCache.cache.clear()

    @classmethod
    def load_kernel_async(
        cls,
        kernel_name: str,
        arg_types: Sequence[str],
        source: str,
        submit_fn: Optional[Callable[..., Any]] = None,
        function: str = "kernel",
    ) -> Callable[[], Any]:
        # The device compiler is the host's C++ compiler in the simulator, so
        # the kernels are built with the CPU's flags and vector ISA.
        get_module = cls.load_async(
            source + launcher_source(kernel_name, arg_types, function),
            "cpu",
            submit_fn=submit_fn,
            extra_flags=(f"-I{INCLUDE_DIR}",),
        )
        return lambda: get_module().launch


def load_mydev_kernel(async_compile: Any, kernel_name: str, arg_types: List[str], source: str) -> Any:
    """What the generated wrapper calls to define a kernel: compiles in
    Inductor's compile workers when it has them, and hands back a future that
    ``async_compile.wait`` resolves, or the launcher itself."""
    from torch._inductor.async_compile import get_compile_threads
    from torch._inductor.codecache import LambdaFuture

    if get_compile_threads() <= 1:
        return MydevKernelCodeCache.load_kernel_async(kernel_name, arg_types, source)()
    return LambdaFuture(
        MydevKernelCodeCache.load_kernel_async(kernel_name, arg_types, source, submit_fn=async_compile.submit)
    )
