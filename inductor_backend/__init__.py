"""torch.compile for mydev: Inductor generates C++ kernels (or, with
``config.kernel_language = "triton"``, Triton kernels), builds them for the
device and launches them on mydev streams.

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
        from torch._inductor.codegen import common, cpp_utils
        from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

        from . import config, torch_workarounds
        from .benchmarker import register_benchmarker
        from .cpp_wrapper import MydevCppWrapperCodegen
        from .device_interface import DEVICE, register_device_interface
        from .device_op_overrides import MydevDeviceOpOverrides
        from .kernel_languages import MydevCodegens
        from .python_wrapper import MydevPythonWrapperCodegen
        from .scheduling import MydevScheduling

        register_device_interface()
        common.register_backend_for_device(
            DEVICE,
            MydevScheduling,
            MydevPythonWrapperCodegen,
            MydevCppWrapperCodegen,
            WrapperFxCodegen,
            device_custom_config=config,
        )
        # register_backend_for_device stores one scheduling class per device;
        # mydev's entry answers by config.kernel_language at each compile.
        common.device_codegens[DEVICE] = MydevCodegens(
            MydevPythonWrapperCodegen, MydevCppWrapperCodegen, WrapperFxCodegen
        )
        common.register_device_op_overrides(DEVICE, MydevDeviceOpOverrides())
        # How the C++ wrapper names the device type (the PrivateUse1 key).
        cpp_utils.DEVICE_TO_ATEN[DEVICE] = "at::kPrivateUse1"
        register_benchmarker()
        torch_workarounds.install()
        _registered = True
