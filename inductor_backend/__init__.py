"""torch.compile for mydev: Inductor generates C++ kernels (or, with
``config.kernel_language = "triton"``, Triton kernels), builds them for the
device and launches them on mydev streams.

This package depends on ``device_ext`` (the device itself), never the
reverse. ``import torch`` loads it through its own ``torch.backends`` entry
point (``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off; then
``import inductor_backend``). Loading it costs nothing: it only asks to be
told when the process imports Dynamo's device interface and Inductor's
compiler (``device_ext.import_hooks``), and registers mydev there at that
moment, as torch.compile and Inductor's compile workers import them.
"""

import threading
from types import ModuleType


def _autoload() -> None:
    """Entry point called at the end of ``import torch``. Importing this
    package installs the registration hooks, so there is nothing left to do.
    (Defined before anything imports torch, as in ``device_ext``.)"""


_registered = False
_lock = threading.Lock()


def register() -> None:
    """Registers mydev with Dynamo and Inductor (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        from torch._inductor.codegen import common
        from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

        from device_ext.torch_patches import aot_inductor, autotuning, cudagraphs, fake_tensor, inductor

        from . import config
        from .benchmarker import register_benchmarker, time_on_device
        from .cpp_templates import mydev_benchmark_request
        from .cpp_wrapper import AOTI_MODEL_HEADER, MydevCppWrapperCodegen
        from .device_interface import DEVICE, register_device_interface
        from .device_op_overrides import MydevDeviceOpOverrides
        from .kernel_languages import MydevCodegens
        from .python_wrapper import MydevPythonWrapperCodegen
        from .scheduling import MydevScheduling, outer_reduction_tiling

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
        inductor.set_device_codegens(MydevCodegens(MydevPythonWrapperCodegen, MydevCppWrapperCodegen, WrapperFxCodegen))
        common.register_device_op_overrides(DEVICE, MydevDeviceOpOverrides())
        register_benchmarker()
        inductor.apply(
            kernel_language=lambda: config.kernel_language,
            outer_reduction_tiling=outer_reduction_tiling,
        )
        autotuning.apply(
            kernel_language=lambda: config.kernel_language,
            benchmark_request=mydev_benchmark_request,
            time_on_device=time_on_device,
        )
        fake_tensor.apply()
        aot_inductor.apply(model_header=AOTI_MODEL_HEADER)
        from .graph_policy import MydevGraphPolicy

        cudagraphs.apply(MydevGraphPolicy())
        _registered = True


def _register_device_interface(_module: ModuleType) -> None:
    from device_ext.torch_patches import dynamo

    from .device_interface import register_device_interface

    register_device_interface()
    # Dynamo decides whether to capture a @triton.jit call while tracing,
    # before anything imports Inductor's compiler.
    dynamo.apply(mydev_has_triton=_mydev_has_triton)


def _mydev_has_triton() -> bool:
    import torch

    # Imports Inductor's code generators: only when Dynamo first asks.
    from .kernel_languages import triton_unavailable_reason

    return torch.mydev.is_available() and triton_unavailable_reason() is None


def _register(_module: ModuleType) -> None:
    register()


def _install_hooks() -> None:
    from device_ext import import_hooks

    # Dynamo looks devices up while tracing, before Inductor's compiler is
    # imported.
    import_hooks.run_after_import("torch._dynamo.device_interface", _register_device_interface)
    import_hooks.run_after_import("torch._inductor.compile_fx", _register)


_install_hooks()
