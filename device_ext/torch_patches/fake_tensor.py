"""FakeTensor's convolution (torch._subclasses, through
``torch._C._select_conv_backend``), torch 2.13: what torch.compile traces
convolutions with takes the output's memory format from
``_select_conv_backend``, which answers "Overrideable" for any PrivateUse1
tensor, and from there "contiguous". mydev runs the CPU's convolution, which
produces channels-last output for channels-last input or weight
(csrc/aten/cpu_output_contract.cpp says so in eager). Without this, compiled
graphs with convolutions expect the other layout than the device produces
and Inductor asserts (tests/test_compile_workarounds.py::
test_select_conv_backend_answers_like_the_cpu_for_mydev). See the table in
``device_ext/torch_patches/__init__.py``.

Applied by ``inductor_backend`` when it registers.
"""

from typing import Any, Callable

import torch

from ..device_name import DEVICE_NAME


def _select_conv_backend_like_the_cpu(select_conv_backend: Callable[..., Any]) -> Callable[..., Any]:
    # The CPU's choice only depends on sizes, strides and dtypes, so CPU
    # stand-ins of the same layout answer for mydev tensors. The stand-ins
    # are real tensors, and the CPU's selection runs ops on them (a 1-d
    # convolution is viewed as a 2-d one through unsqueeze), so it runs
    # outside the fake mode: inside it, FakeTensor refuses real inputs and a
    # compiled Conv1d failed to trace.
    def select(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if input.device.type != DEVICE_NAME:
            return select_conv_backend(input, weight, *args, **kwargs)
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            bias = kwargs.get("bias")
            if isinstance(bias, torch.Tensor):
                kwargs = {**kwargs, "bias": _cpu_stand_in(bias)}
            return select_conv_backend(_cpu_stand_in(input), _cpu_stand_in(weight), *args, **kwargs)

    select.__wrapped__ = select_conv_backend  # type: ignore[attr-defined]
    return select


def _cpu_stand_in(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(
        tuple(int(s) for s in tensor.shape),
        tuple(int(s) for s in tensor.stride()),
        dtype=tensor.dtype,
        device="cpu",
    )


def apply() -> None:
    """Installs the adjustment (idempotent)."""
    if getattr(torch._C._select_conv_backend, "__module__", None) != __name__:
        torch._C._select_conv_backend = _select_conv_backend_like_the_cpu(torch._C._select_conv_backend)
