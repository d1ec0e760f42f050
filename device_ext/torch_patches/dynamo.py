"""Dynamo (torch._dynamo, through torch.utils._triton), torch 2.13: Dynamo
captures calls of ``@triton.jit`` kernels (directly or through
``torch.library.wrap_triton``) only when ``torch.utils._triton.has_triton()``
is true, and that asks a fixed list of devices (cuda, xpu, mtia, cpu with the
triton-cpu backend). Without this, calling a Triton kernel in a function
compiled for mydev is a graph break (tests/test_compile_workarounds.py::
test_has_triton_counts_mydev_as_a_triton_device). See the table in
``device_ext/torch_patches/__init__.py``.

Applied the moment Dynamo is imported (with its device interface), not when
Inductor registers: Dynamo traces before it imports Inductor's compiler, so a
fresh script would trace its first Triton call with the unpatched answer and
fail inside ``JITFunction.run`` (tests/test_user_triton_scripts.py).
``mydev_has_triton()`` says whether Triton can run mydev kernels in this
process.
"""

import functools
from typing import Callable

import torch.utils._triton


def _count_mydev_as_a_triton_device(
    has_triton: Callable[[], bool], mydev_has_triton: Callable[[], bool]
) -> Callable[[], bool]:
    @functools.cache
    def has_triton_or_mydev_triton() -> bool:
        return has_triton() or mydev_has_triton()

    has_triton_or_mydev_triton.__wrapped__ = has_triton  # type: ignore[attr-defined]
    return has_triton_or_mydev_triton


def apply(mydev_has_triton: Callable[[], bool]) -> None:
    """Installs the adjustment (idempotent)."""
    # Dynamo imports has_triton from its module each time it asks. (The
    # original is a functools.cache, which has a __wrapped__ of its own.)
    if torch.utils._triton.has_triton.__module__ != __name__:
        torch.utils._triton.has_triton = _count_mydev_as_a_triton_device(
            torch.utils._triton.has_triton, mydev_has_triton
        )
