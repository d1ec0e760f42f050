"""``MydevLauncher``: what ``CompiledKernel.run`` calls for a mydev kernel.

A launch checks the arguments on the host (every tensor on the stream's
device), then runs the kernel at the launch's place in the stream's order:
the stream is parked by a placeholder kernel while this thread executes the
programs (``_C._run_in_stream_order``). Work enqueued on the stream before
the launch is complete and visible; work enqueued after it (eager ops, event
records, other threads' launches) waits for it. The call returns once the
kernel ran, and a failing kernel raises ``TritonKernelError`` here, leaving
the stream and the device usable.

On a stream that is capturing a graph the kernel is recorded instead
(``_C._launch_python_kernel``: a driver-owned kernel, as compiled C++
kernels are), and the stream's executor runs it, holding the GIL, at every
replay, over the memory its arguments name then. The recorded kernel holds
its arguments (scalars by value, tensors by reference) until the graph is
destroyed. A host thread waiting for the device releases the GIL meanwhile
(the driver's host wait hooks, installed by device_ext._C), so the worker
can take it. Eager launches stay on the launching thread: executed on the
worker the interpreter would compete with the host for the GIL rather than
overlap with it, and the launch itself raises a failing kernel's error.
"""

from typing import Any, Callable, List, Optional, Tuple

import torch
from triton.runtime.jit import JITFunction, TensorWrapper

from .. import _C
from ..device_name import DEVICE_NAME
from . import executor

LaunchHook = Optional[Callable[[Any], None]]


def _memory_ranges(kernel: JITFunction, name: str, args: Tuple[Any, ...], device: int) -> List[Tuple[int, int, int]]:
    """The memory the kernel may touch: its tensor arguments' storages, each
    checked to be on the launch's device, with the offset from their device
    addresses to the kernel-side ones (the driver's mydevKernelPointer)."""
    ranges = []

    def visit(param_name: str, value: Any) -> None:
        if isinstance(value, tuple):
            for item in value:
                visit(param_name, item)
            return
        if isinstance(value, TensorWrapper):  # triton.reinterpret(tensor, dtype)
            value = value.base
        if not isinstance(value, torch.Tensor):
            return
        if value.device.type != DEVICE_NAME:
            raise ValueError(
                f"Triton kernel '{name}': argument '{param_name}' is a {value.device} tensor, but the "
                f"kernel runs on mydev:{device}; pass mydev tensors (e.g. x.to('mydev:{device}'))"
            )
        if value.device.index != device:
            raise ValueError(
                f"Triton kernel '{name}': argument '{param_name}' is on {value.device}, but the kernel "
                f"runs on mydev:{device} (the current device); launch it under "
                f"torch.mydev.device({value.device.index})"
            )
        storage = value.untyped_storage()
        start = storage.data_ptr()
        ranges.append((start, start + storage.nbytes(), _C._kernel_pointer(start) - start))

    for param, value in zip(kernel.params, args):
        visit(param.name, value)
    return ranges


class MydevLauncher:
    def __init__(self, src: Any, metadata: Any) -> None:
        kernel = getattr(src, "fn", None)
        if not isinstance(kernel, JITFunction):
            raise NotImplementedError(
                f"Triton kernel '{metadata.name}': the mydev simulator executes kernels compiled from "
                "their Python source (triton.compile of an ASTSource / @triton.jit), not from IR files"
            )
        self._kernel = kernel
        self._name = metadata.name

    def __call__(
        self,
        grid_x: int,
        grid_y: int,
        grid_z: int,
        stream: int,
        function: Any,
        packed_metadata: Any,
        launch_metadata: Any,
        enter_hook: LaunchHook,
        exit_hook: LaunchHook,
        *args: Any,
    ) -> None:
        if len(args) != len(self._kernel.params):
            raise TypeError(
                f"Triton kernel '{self._name}' takes {len(self._kernel.params)} arguments "
                f"(constexprs included), got {len(args)}"
            )
        device = _C._stream_device(stream)
        ranges = _memory_ranges(self._kernel, self._name, args, device)
        grid = (grid_x, grid_y, grid_z)
        if min(grid) <= 0:
            return  # an empty grid launches nothing, as on GPUs
        if enter_hook is not None:
            enter_hook(launch_metadata)
        kernel, name = self._kernel, self._name

        def run() -> None:
            executor.execute(kernel, name, grid, args, ranges)

        if _C._stream_is_capturing(stream):
            _C._launch_python_kernel(stream, name, run)
        else:
            _C._run_in_stream_order(stream, name, run)
        if exit_hook is not None:
            exit_hook(launch_metadata)
