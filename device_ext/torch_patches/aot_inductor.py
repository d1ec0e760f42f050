"""AOTInductor (torch._inductor.codecache), torch 2.13: the header it
precompiles for an AOTInductor model is ``aoti_include/<device>.h``, a path
inside torch's own include tree, which exists for cpu, cuda, xpu and mps
only. See the table in ``device_ext/torch_patches/__init__.py``.

Applied by ``inductor_backend`` when it registers. The header mydev's models
include (``device_ext/include/mydev_aoti.h``) is passed in, so this module
imports nothing from ``inductor_backend``.
"""

from typing import Callable

from torch._inductor import codecache

from ..device_name import DEVICE_NAME


def _precompile_mydev_model_header(
    get_cpp_wrapper_header: Callable[..., str],
    model_header: str,
) -> Callable[..., str]:
    # aoti_compile_and_package precompiles the wrapper's header by default
    # (config.aot_inductor.precompile_headers) and names it after the device:
    # for mydev, "torch/csrc/inductor/aoti_include/mydev.h", which is not
    # there, and the compile fails before the model is built. mydev's model
    # header is the one its wrapper includes first (cpp_wrapper.py).
    def cpp_wrapper_header(device: str, aot_mode: bool = False) -> str:
        if aot_mode and device.split(":", maxsplit=1)[0] == DEVICE_NAME:
            return model_header
        return get_cpp_wrapper_header(device, aot_mode)

    cpp_wrapper_header.__wrapped__ = get_cpp_wrapper_header  # type: ignore[attr-defined]
    return cpp_wrapper_header


def _applied(function: Callable[..., str]) -> bool:
    return getattr(function, "__module__", None) == __name__


def apply(model_header: str) -> None:
    """Installs the adjustment (idempotent). ``model_header``: the absolute
    path of the header mydev's AOTInductor models include first."""
    if not _applied(codecache._get_cpp_wrapper_header):
        codecache._get_cpp_wrapper_header = _precompile_mydev_model_header(
            codecache._get_cpp_wrapper_header, model_header
        )
