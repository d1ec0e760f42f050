"""Where torch 2.13's Inductor assumes that only "cpu" runs C++ kernels, that
only GPU_TYPES have device guards, or that a PrivateUse1 convolution keeps
the contiguous layout. Every adjustment for mydev is here (Dynamo's list
of Triton devices is in device_ext/torch_patches/dynamo.py), applied once at
registration; tests/test_compile_workarounds.py shows what
goes wrong without each.
"""

import importlib
from typing import Any, Callable, Optional

import torch
from torch._inductor import scheduler
from torch._inductor.runtime import triton_heuristics

from . import config

DEVICE = "mydev"

# Modules that hold their own reference to torch._inductor.utils.
# get_current_backend (imported by name).
_GET_CURRENT_BACKEND_USERS = (
    "torch._inductor.utils",
    "torch._inductor.codegen.common",
    "torch._inductor.scheduler",
    "torch._inductor.kernel.mm_common",
)


def _treat_mydev_as_cpp_codegen(
    is_cpu: Callable[[scheduler.BaseSchedulerNode], bool],
) -> Callable[[scheduler.BaseSchedulerNode], bool]:
    # The scheduler asks node.is_cpu() in exactly three places, all meaning
    # "this node's kernel comes from the C++ code generator, which does not
    # support loop reordering, reindexing for reductions or index inversion
    # after fusion". mydev's "cpp" kernels come from that generator too;
    # without this a pointwise fused into a reduction is reindexed for a SIMD
    # kernel and the C++ kernel generator fails on it. (Triton kernels are
    # SIMD kernels: with kernel_language="triton" mydev nodes get all three.)
    def is_cpu_or_mydev(node: scheduler.BaseSchedulerNode) -> bool:
        device = node.get_device()
        return is_cpu(node) or (
            device is not None and device.type == DEVICE and config.kernel_language == "cpp"
        )

    is_cpu_or_mydev.__wrapped__ = is_cpu  # type: ignore[attr-defined]
    return is_cpu_or_mydev


def _guard_mydev_devices(
    device_need_guard: Callable[[str], bool],
) -> Callable[[str], bool]:
    # Device guards in generated code are emitted only for GPU_TYPES, and
    # adding mydev there would make Inductor require Triton for it. Without a
    # guard, code compiled for mydev:1 would allocate and launch relative to
    # whatever device the caller had current.
    def need_guard(device: str) -> bool:
        return device == DEVICE or device_need_guard(device)

    need_guard.__wrapped__ = device_need_guard  # type: ignore[attr-defined]
    return need_guard


def _report_mydev_kernel_language(
    get_current_backend: Callable[[Optional[str]], str],
) -> Callable[[Optional[str]], str]:
    # Inductor asks which kernel language the current device uses in order to
    # pick dtype and shape propagation, masked-load handling and asserts, and
    # answers config.cuda_backend ("triton") for any device it does not know.
    # For mydev the answer is its own kernel language; with "triton" there,
    # C++ kernels lose the dtypes of index expressions and fail to generate.
    def current_backend(device_type: Optional[str] = None) -> str:
        if device_type is None:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        if device_type == DEVICE:
            return config.kernel_language
        return get_current_backend(device_type)

    current_backend.__wrapped__ = get_current_backend  # type: ignore[attr-defined]
    return current_backend


def _select_conv_backend_like_the_cpu(select_conv_backend: Callable[..., Any]) -> Callable[..., Any]:
    # FakeTensor's convolution (what torch.compile traces with) takes the
    # output's memory format from torch._C._select_conv_backend, which answers
    # "Overrideable" for any PrivateUse1 tensor, and from there "contiguous".
    # mydev runs the CPU's convolution, which produces channels-last output
    # for channels-last input or weight (csrc/aten/cpu_output_contract.cpp
    # says so in eager). Without this, compiled graphs with convolutions
    # expect the other layout than the device produces (Inductor asserts).
    # The CPU's choice only depends on sizes, strides and dtypes, so CPU
    # stand-ins of the same layout answer for mydev tensors.
    def select(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if input.device.type != DEVICE:
            return select_conv_backend(input, weight, *args, **kwargs)
        bias = kwargs.get("bias")
        if isinstance(bias, torch.Tensor):
            kwargs = {**kwargs, "bias": _cpu_stand_in(bias)}
        return select_conv_backend(_cpu_stand_in(input), _cpu_stand_in(weight), *args, **kwargs)

    select.__wrapped__ = select_conv_backend  # type: ignore[attr-defined]
    return select


def _cpu_stand_in(tensor: torch.Tensor) -> torch.Tensor:
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        return torch.empty_strided(
            tuple(int(s) for s in tensor.shape), tuple(int(s) for s in tensor.stride()),
            dtype=tensor.dtype, device="cpu",
        )


def _reload_python_of_mydev_triton_kernels(make_launchers: Callable[[Any], None]) -> Callable[[Any], None]:
    # Inductor compiles Triton kernels in its worker processes and, before
    # sending one back, drops the kernel's Python function (CachingAutotuner.
    # prepare_for_pickle), which a GPU never needs again: it runs the binary.
    # mydev's Triton backend executes kernels from that function (the
    # simulator interprets them), so without this every kernel compiled in
    # a worker fails at its first launch. The function is loaded again in
    # the parent, into the very JITFunction the compiled kernels refer to.
    def make_launchers_with_python(autotuner: Any) -> None:
        kernel = autotuner.fn
        if autotuner.device_props.type == DEVICE and kernel.fn is None:
            reloaded = autotuner._reload_kernel().fn
            kernel.fn = reloaded.fn
            kernel.__globals__ = reloaded.__globals__
            kernel.used_global_vals = reloaded.used_global_vals
        make_launchers(autotuner)

    make_launchers_with_python.__wrapped__ = make_launchers  # type: ignore[attr-defined]
    return make_launchers_with_python


def install() -> None:
    if not hasattr(scheduler.BaseSchedulerNode.is_cpu, "__wrapped__"):
        scheduler.BaseSchedulerNode.is_cpu = _treat_mydev_as_cpp_codegen(
            scheduler.BaseSchedulerNode.is_cpu
        )
    if not hasattr(scheduler.device_need_guard, "__wrapped__"):
        scheduler.device_need_guard = _guard_mydev_devices(scheduler.device_need_guard)
    if not hasattr(torch._C._select_conv_backend, "__wrapped__"):
        torch._C._select_conv_backend = _select_conv_backend_like_the_cpu(
            torch._C._select_conv_backend
        )
    if not hasattr(triton_heuristics.CachingAutotuner._make_launchers, "__wrapped__"):
        triton_heuristics.CachingAutotuner._make_launchers = _reload_python_of_mydev_triton_kernels(
            triton_heuristics.CachingAutotuner._make_launchers
        )
    utils = importlib.import_module(_GET_CURRENT_BACKEND_USERS[0])
    if not hasattr(utils.get_current_backend, "__wrapped__"):
        replacement = _report_mydev_kernel_language(utils.get_current_backend)
        for name in _GET_CURRENT_BACKEND_USERS:
            setattr(importlib.import_module(name), "get_current_backend", replacement)
