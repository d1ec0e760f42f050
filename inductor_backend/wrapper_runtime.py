"""What the Python wrapper Inductor generates for a mydev graph calls on
every run, besides kernels: buffer allocation and the device guard.

Inductor emits ``torch.empty_strided(..., device='mydev', dtype=...)`` for
devices it has no fast path for, and the guard is whatever the device's
``device_guard`` snippet names. Through torch's Python entry points these
cost about 1.2 us per buffer and 0.5 us per guard of host time; the CPU's
compiled graphs allocate through ``empty_strided_cpu`` (0.55 us). Both
are on the path of every compiled call, so a small graph (the model suite's
cnn forward allocates six buffers) pays them on every call. The helpers
here are single calls into ``device_ext._C``.
"""

from typing import Any

from device_ext import _C

# The line that brings these helpers into generated code: the wrapper's
# header, and the autotuning block AOTInductor runs on its own.
IMPORT_LINE = "from inductor_backend.wrapper_runtime import DeviceGuard, empty_strided_mydev"

# empty_strided_mydev(size, stride, dtype): a buffer on the current mydev
# device (the generated code runs inside its device guard).
empty_strided_mydev = _C._empty_strided


class DeviceGuard:
    """``with DeviceGuard(index):`` makes mydev device ``index`` current and
    restores the previous one on exit (torch.cuda._DeviceGuard's role)."""

    __slots__ = ("index", "previous")

    def __init__(self, index: int):
        self.index = index
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = _C._exchange_device(self.index)

    def __exit__(self, *exc: Any) -> bool:
        if self.previous != self.index:
            _C._exchange_device(self.previous)
        return False
