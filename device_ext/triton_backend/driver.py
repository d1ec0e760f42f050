"""``MydevDriver``: Triton's runtime view of the mydev devices.

Which driver Triton uses: Triton keeps exactly one active driver. The mydev
driver is active on its own only where no other backend's driver is (a host
without a GPU, like the simulator's), or when ``TRITON_DEFAULT_BACKEND=mydev``
names it; there, ``@triton.jit`` kernels launch on mydev tensors directly. On a
host with a GPU, Triton's GPU driver stays the active one and mydev work runs
inside :func:`activated`, which makes the mydev driver active for its duration
only.
"""

import os
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from .. import _C
from .target import BACKEND_NAME, target_of

# Imported by Triton's backend discovery while `triton` is still
# initialising: triton.runtime and triton.language (the launcher) only once
# a driver exists.

# num_warps * warp_size may not exceed it, as threads per block on a GPU.
_MAX_THREADS_PER_PROGRAM = 1024
# Triton asks; the simulator's programs have no shared memory limit of their own.
_MAX_SHARED_MEMORY = 64 * 1024

_CPP_TYPES = {
    "i1": "int8_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u1": "uint8_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "fp16": "double",
    "bf16": "double",
    "fp32": "double",
    "f32": "double",
    "fp64": "double",
}


class LoadedKernel:
    """What ``load_binary`` returns as module and function: the simulator
    keeps nothing resident, the launcher runs the kernel from its source."""

    def __init__(self, name: str, device: int) -> None:
        self.name = name
        self.device = device

    def __repr__(self) -> str:
        return f"LoadedKernel({self.name!r} on mydev:{self.device})"


class MydevUtils:
    @staticmethod
    def load_binary(name: str, binary: bytes, shared: int, device: int) -> Tuple[Any, Any, int, int, int]:
        kernel = LoadedKernel(name, device)
        return kernel, kernel, 0, 0, _MAX_THREADS_PER_PROGRAM

    @staticmethod
    def unload_module(module: Any) -> None:
        pass

    @staticmethod
    def get_device_properties(device: int) -> Dict[str, int]:
        properties = torch.mydev.get_device_properties(device)
        return {
            "max_shared_mem": _MAX_SHARED_MEMORY,
            "multiprocessor_count": properties.multi_processor_count,
            "warpSize": target_of(device).warp_size,
            "max_num_regs": 0,
            "sm_clock_rate": 0,
            "mem_clock_rate": 0,
            "mem_bus_width": 0,
        }


def benchmark(
    kernel_call: Callable[[], Any],
    quantiles: Optional[Sequence[float]] = None,
    warmup: int = 1,
    repeat: int = 3,
    **_ignored: Any,
) -> Any:
    """Triton's benchmarker contract (autotuning): milliseconds per call,
    timed with mydev events on the current stream. Few repetitions: the
    simulator's timings are of an interpreter, not worth a long average."""
    for _ in range(warmup):
        kernel_call()
    times: List[float] = []
    for _ in range(repeat):
        start = torch.mydev.Event(enable_timing=True)
        end = torch.mydev.Event(enable_timing=True)
        start.record()
        kernel_call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    if quantiles is None:
        return sorted(times)[len(times) // 2]
    ordered = torch.tensor(times, dtype=torch.float64)
    return [float(torch.quantile(ordered, q)) for q in quantiles]


def _mydev_available() -> bool:
    return hasattr(torch, "mydev") and torch.mydev.is_available()


class MydevDriver(DriverBase):
    def __init__(self) -> None:
        from .launcher import MydevLauncher

        super().__init__()
        self.utils = MydevUtils()
        self.launcher_cls = MydevLauncher
        self.get_current_device = torch.mydev.current_device
        self.set_current_device = torch.mydev.set_device
        self.get_device_capability = torch.mydev.get_device_capability

    @staticmethod
    def is_active() -> bool:
        if not _mydev_available():
            return False
        if os.environ.get("TRITON_DEFAULT_BACKEND") == BACKEND_NAME:
            return True
        from triton.backends import backends

        return not any(backend.driver.is_active() for backend in backends.values() if backend.driver is not MydevDriver)

    def get_current_stream(self, device: Optional[int] = None) -> int:
        if device is None:
            device = self.get_current_device()
        return _C._current_raw_stream(device)

    def get_current_target(self) -> GPUTarget:
        return target_of(self.get_current_device())

    def get_active_torch_device(self) -> torch.device:
        return torch.device(BACKEND_NAME, self.get_current_device())

    def get_device_interface(self) -> Any:
        return torch.mydev

    def map_python_to_cpp_type(self, ty: str) -> str:
        return "void*" if ty.startswith("*") else _CPP_TYPES[ty]

    def get_benchmarker(self) -> Callable[..., Any]:
        return benchmark

    def get_empty_cache_for_benchmark(self) -> torch.Tensor:
        # triton.testing.do_bench zeroes this between runs to evict caches;
        # the simulator has none worth evicting, so keep it small.
        return torch.empty(1 << 20, dtype=torch.int8, device=self.get_active_torch_device())

    def clear_cache(self, cache: torch.Tensor) -> None:
        cache.zero_()


@contextmanager
def activated() -> Iterator[MydevDriver]:
    """Makes the mydev driver Triton's active driver inside the block (for
    mydev launches on a host where another driver is the default), then
    restores the previous one."""
    from triton.runtime.driver import driver as driver_config

    # None until Triton first chose a driver: restoring None keeps that lazy.
    previous = driver_config._active
    driver = previous if isinstance(previous, MydevDriver) else MydevDriver()
    driver_config.set_active(driver)
    try:
        yield driver
    finally:
        driver_config.set_active(previous)
