"""torch.compile for mydev: Inductor generates C++ kernels, builds them with
the device compiler and launches them on mydev streams.

Nothing here needs importing by hand: ``device_ext`` registers this backend
as soon as a process imports Inductor (see device_ext/_compile_integration.py).
"""

import threading

_registered = False
_lock = threading.Lock()


def register() -> None:
    """Registers mydev with Dynamo and Inductor (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        from torch._inductor.codegen import cpp_utils
        from torch._inductor.codegen.common import (
            register_backend_for_device,
            register_device_op_overrides,
        )
        from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

        from . import config, torch_workarounds
        from .benchmarker import register_benchmarker
        from .cpp_wrapper import MydevCppWrapperCodegen
        from .device_interface import DEVICE, register_device_interface
        from .device_op_overrides import MydevDeviceOpOverrides
        from .python_wrapper import MydevPythonWrapperCodegen
        from .scheduling import MydevScheduling

        register_device_interface()
        register_backend_for_device(
            DEVICE,
            MydevScheduling,
            MydevPythonWrapperCodegen,
            MydevCppWrapperCodegen,
            WrapperFxCodegen,
            device_custom_config=config,
        )
        register_device_op_overrides(DEVICE, MydevDeviceOpOverrides())
        # How the C++ wrapper names the device type (the PrivateUse1 key).
        cpp_utils.DEVICE_TO_ATEN[DEVICE] = "at::kPrivateUse1"
        register_benchmarker()
        torch_workarounds.install()
        _registered = True
