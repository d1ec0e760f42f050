"""The kernel languages Inductor can generate mydev kernels in, and which one
a compile uses.

- "cpp": Inductor's C++ kernel generator (scheduling.MydevScheduling), built
  by the device compiler into kernel modules.
- "triton": Inductor's Triton kernel generator (TritonScheduling), compiled
  and launched by Triton's mydev backend (device_ext.triton_backend), which
  interprets each kernel over device memory at its place in the stream's
  order.

Inductor keeps one entry per device in its table of code generators and asks
it for the device's scheduling class whenever it needs one: when lowering
(``is_triton()`` checks that class), when listing backend features and when
the scheduler creates the device's kernel generator. mydev's entry answers
from ``config.kernel_language`` each time, so the language is chosen per
compile (``inductor_backend.config.patch(kernel_language=...)``), not once
at registration.
"""

import functools
from typing import Optional, Type

from torch._inductor.codegen.common import DeviceCodegen
from torch._inductor.codegen.triton import TritonScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.scheduler import BaseScheduling

from . import config
from .device_interface import DEVICE
from .scheduling import MydevScheduling

KERNEL_LANGUAGES = ("cpp", "triton")


@functools.cache
def triton_unavailable_reason() -> Optional[str]:
    """Why Triton cannot generate mydev kernels in this process, or None if
    it can. Triton is optional: without it the "cpp" language works alone."""
    try:
        import triton.backends
    except ModuleNotFoundError as error:
        if error.name is not None and error.name.split(".")[0] == "triton":
            return "Triton is not installed (pip install triton)"
        return f"triton cannot be imported: {error}"
    except ImportError as error:
        return f"triton cannot be imported: {error}"
    if DEVICE not in triton.backends.backends:
        return (
            f"Triton {triton.__version__} has no {DEVICE} backend: the plugin "
            "device_ext.triton_backend is not registered under the 'triton.backends' "
            "entry point (reinstall torch-mydev)"
        )
    return None


def _check_language(language: str) -> None:
    if language not in KERNEL_LANGUAGES:
        raise ValueError(
            f"inductor_backend.config.kernel_language={language!r} "
            "(MYDEV_INDUCTOR_KERNEL_LANGUAGE): the mydev kernel languages are "
            + ", ".join(repr(name) for name in KERNEL_LANGUAGES)
        )
    if language == "triton":
        reason = triton_unavailable_reason()
        if reason is not None:
            raise RuntimeError(
                f"inductor_backend.config.kernel_language='triton' is not available: "
                f"{reason}. kernel_language='cpp' needs no Triton."
            )


def scheduling_for(language: str) -> Type[BaseScheduling]:
    """The scheduling class that generates mydev kernels in ``language``."""
    _check_language(language)
    return TritonScheduling if language == "triton" else MydevScheduling


class MydevCodegens(DeviceCodegen):
    """mydev's entry in Inductor's table of device code generators: the
    wrappers are fixed, the scheduling follows config.kernel_language."""

    def __init__(
        self,
        wrapper_codegen: Type[PythonWrapperCodegen],
        cpp_wrapper_codegen: Type[PythonWrapperCodegen],
        fx_wrapper_codegen: Type[PythonWrapperCodegen],
    ):
        # DeviceCodegen's own __init__ would assign ``scheduling``, which is
        # a property here.
        self.wrapper_codegen = wrapper_codegen
        self.cpp_wrapper_codegen = cpp_wrapper_codegen
        self.fx_wrapper_codegen = fx_wrapper_codegen

    @property
    def scheduling(self) -> Type[BaseScheduling]:  # type: ignore[override]
        return scheduling_for(config.kernel_language)
