"""Inductor's C++ templates (the GEMM and BMM templates its CPU backend
offers under max-autotune) as mydev autotuning candidates.

The kernel a template renders is C++ over raw pointers, like every mydev
"cpp" kernel. Once chosen, it is generated and launched as any other mydev
kernel (``MydevScheduling.define_kernel``, a kernel module launched on the
stream). While autotuning, though, Inductor times a candidate through its
benchmark request, and the CPU's (``CppBenchmarkRequest``) loads the kernel
into the host process and calls it on the tensors' data pointers: for mydev
tensors that is host code dereferencing device memory. A mydev candidate is
timed by ``MydevCppBenchmarkRequest`` instead: the same source built as a
kernel module, launched on the current stream of the output's device and
timed with mydev events (benchmarker.py).

``device_ext/torch_patches/cpp_templates.py`` lets the templates' device
check accept mydev and swaps the request in; this module is the mydev side.
"""

import ctypes
from typing import Any, Callable, List

import torch
from torch._inductor.autotune_process import BenchmarkRequest, CppBenchmarkRequest, TensorMeta
from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP

from device_ext._C import _current_raw_stream

from .benchmarker import time_on_device
from .kernel_modules import MydevKernelCodeCache


def _pointer_type(meta: TensorMeta) -> str:
    return f"{DTYPE_TO_CPP[meta.dtype]}*"


class MydevCppBenchmarkRequest(BenchmarkRequest):
    """Times one C++ template candidate on mydev. Picklable like Inductor's
    own requests (no tensors, no modules), so it also works with
    ``autotune_in_subproc``."""

    def __init__(self, cpu_request: CppBenchmarkRequest):
        super().__init__(
            cpu_request.kernel_name,
            cpu_request.input_tensor_meta,
            cpu_request.output_tensor_meta,
            # Sizes the kernel takes after its buffers (ctypes integers in
            # the CPU's request, which calls the kernel through ctypes).
            tuple(arg.value if isinstance(arg, ctypes.c_ulonglong) else int(arg) for arg in cpu_request.extra_args),
        )
        self.source_code = cpu_request.source_code
        self.hash_key = cpu_request.hash_key
        # The template kernel's parameters, in the order Inductor passes
        # them: input buffers, output buffer, then the sizes.
        self.arg_types: List[str] = [
            *(_pointer_type(meta) for meta in self.input_tensor_meta),
            _pointer_type(self.output_tensor_meta),
            *(["int64_t"] * len(self.extra_args)),
        ]

    def _load_launcher(self) -> Callable[..., None]:
        return MydevKernelCodeCache.load_kernel_async(
            self.kernel_name, self.arg_types, self.source_code, function=self.kernel_name
        )()

    def precompile(self) -> None:
        # Builds the kernel module (Inductor calls this from its precompile
        # thread pool), so that timing finds it in the cache.
        self._load_launcher()

    def make_run_fn(self, *input_tensors: torch.Tensor, out: torch.Tensor) -> Callable[[], None]:
        launch = self._load_launcher()
        stream = _current_raw_stream(out.device.index)
        args = (*input_tensors, out, *self.extra_args)
        return lambda: launch(stream, *args)

    def do_bench(self, fn: Callable[[], None], *input_tensors: torch.Tensor, out: Any = None) -> float:
        # BenchmarkRequest.benchmark passes the output positionally.
        device = out.device if isinstance(out, torch.Tensor) else input_tensors[-1].device
        return time_on_device(fn, device)

    def __str__(self) -> str:
        return f"mydev {self.kernel_name}"


def mydev_benchmark_request(cpu_request: CppBenchmarkRequest) -> MydevCppBenchmarkRequest:
    """The request that times ``cpu_request``'s kernel on mydev."""
    return MydevCppBenchmarkRequest(cpu_request)
