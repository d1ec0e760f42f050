"""Inductor (torch._inductor), torch 2.13: where it assumes that only "cpu"
runs C++ kernels (the scheduler's reindexing, the lowering of small
variances and of concatenation), where the C++ generator's tiling choice has
no hook for a device's own rule, that only GPU_TYPES have device guards,
that a device has one kernel language, that Triton kernels never need their
Python function again, and where mydev's entries go into tables that have no registration
API. See the table in ``device_ext/torch_patches/__init__.py``;
tests/test_compile_workarounds.py shows what goes wrong without each.

Applied by ``inductor_backend`` when it registers (once a process imports
Inductor). The mydev side of each decision is passed in, so this module
imports nothing from ``inductor_backend``: ``kernel_language()`` answers
"cpp" or "triton" at each compile.
"""

import importlib
from typing import Any, Callable, Optional

from torch._inductor import config, ir, lowering, scheduler
from torch._inductor.codegen import common, cpp, cpp_utils
from torch._inductor.runtime import triton_heuristics

from ..device_name import DEVICE_NAME

# Modules that hold their own reference to torch._inductor.utils.
# get_current_backend (imported by name).
GET_CURRENT_BACKEND_USERS = (
    "torch._inductor.utils",
    "torch._inductor.codegen.common",
    "torch._inductor.scheduler",
    "torch._inductor.kernel.mm_common",
)


def _runs_cpp_kernels(device: Optional[Any], kernel_language: Callable[[], str]) -> bool:
    """Whether ``device`` is mydev with kernels from Inductor's C++ generator,
    whose decisions torch keys on device "cpu" below."""
    return device is not None and device.type == DEVICE_NAME and kernel_language() == "cpp"


def _treat_mydev_as_cpp_codegen(
    is_cpu: Callable[[scheduler.BaseSchedulerNode], bool],
    kernel_language: Callable[[], str],
) -> Callable[[scheduler.BaseSchedulerNode], bool]:
    # The scheduler asks node.is_cpu() in exactly three places, all meaning
    # "this node's kernel comes from the C++ code generator, which does not
    # support loop reordering, reindexing for reductions or index inversion
    # after fusion". mydev's "cpp" kernels come from that generator too;
    # without this a pointwise fused into a reduction is reindexed for a SIMD
    # kernel and the C++ kernel generator fails on it. (Triton kernels are
    # SIMD kernels: with kernel_language="triton" mydev nodes get all three.)
    def is_cpu_or_mydev(node: scheduler.BaseSchedulerNode) -> bool:
        return is_cpu(node) or _runs_cpp_kernels(node.get_device(), kernel_language)

    is_cpu_or_mydev.__wrapped__ = is_cpu  # type: ignore[attr-defined]
    return is_cpu_or_mydev


def _two_step_variance_as_for_cpu(
    use_two_step_variance: Callable[..., bool],
    kernel_language: Callable[[], str],
) -> Callable[..., bool]:
    # var_mean (LayerNorm, GroupNorm, var, std) lowers to two sums instead of
    # a Welford reduction when the reduction is small: up to
    # config.cpp.use_two_step_variance_threshold (1024) elements on device
    # "cpu", up to config.unroll_reductions_threshold (8) elsewhere. mydev's
    # "cpp" kernels come from the CPU's generator, where each Welford row
    # ends in a Welford combine across the vector lanes: the forward of a
    # LayerNorm over 64 features ([8192, 64]) took 289 us, 89 us two-step.
    # The other devices' rule, with the CPU's threshold, is the CPU's rule.
    def decide(x: Any, axis: Any, keepdim: bool, input_dtype: Any) -> bool:
        if not _runs_cpp_kernels(x.get_device(), kernel_language):
            return use_two_step_variance(x, axis, keepdim, input_dtype)
        with config.patch(unroll_reductions_threshold=config.cpp.use_two_step_variance_threshold):
            return use_two_step_variance(x, axis, keepdim, input_dtype)

    decide.__wrapped__ = use_two_step_variance  # type: ignore[attr-defined]
    return decide


def _concatenate_as_on_cpu(
    pointwise_cat: Callable[..., Any],
    kernel_language: Callable[[], str],
) -> Callable[..., Any]:
    # lowering.cat picks between pointwise_cat (each output element selects
    # its input by masked loads: one kernel, fusable into its users) and
    # ir.ConcatKernel (each input copied into its slice of the output). For
    # "cpu" it never takes pointwise_cat unless config.force_pointwise_cat,
    # because the C++ generator does not vectorize the masked index
    # expressions: the kernel is a scalar loop. mydev's "cpp" kernels come
    # from that generator. In a transformer block's backward, the gradient of
    # the qkv split (three [32, 4, 256, 16] tensors into [8192, 192]) took
    # 1660 us as a pointwise cat and 444 us as copies into slices. (A right
    # pad, which Inductor lowers as a cat with a fill off "cpu", takes the
    # same time either way on mydev: the copy and the fill fuse.)
    def lower(inputs: Any, dim: int = 0) -> Any:
        if config.force_pointwise_cat or not _runs_cpp_kernels(inputs[0].get_device(), kernel_language):
            return pointwise_cat(inputs, dim)
        return ir.TensorBox(ir.ConcatKernel.create(inputs, dim))

    lower.__wrapped__ = pointwise_cat  # type: ignore[attr-defined]
    return lower


def _tile_outer_reductions_for_mydev(
    select_tiling: Callable[..., Any],
    kernel_language: Callable[[], str],
    outer_reduction_tiling: Callable[..., Any],
) -> Callable[..., Any]:
    # CppKernelProxy.codegen_functions makes its own TilingSelect() and
    # takes its choice of vector tile as is: no scheduling or proxy class
    # can change it. mydev's rule (inductor_backend.scheduling.
    # outer_reduction_tiling) widens the tile of an outer reduction: a bias
    # gradient's column sum over [8192, 256] took 3x ATen's eager sum with
    # Inductor's one-vector tile. The scheduler sets the graph's current
    # device before it generates each node's kernel.
    def select(self: Any, fn_list: Any, var_sizes_list: Any) -> Any:
        from torch._inductor.virtualized import V

        chosen = select_tiling(self, fn_list, var_sizes_list)
        if not _runs_cpp_kernels(V.graph.current_device, kernel_language):
            return chosen
        return outer_reduction_tiling(fn_list, var_sizes_list, *chosen)

    select.__wrapped__ = select_tiling  # type: ignore[attr-defined]
    return select


def _guard_mydev_devices(
    device_need_guard: Callable[[str], bool],
) -> Callable[[str], bool]:
    # Device guards in generated code are emitted only for GPU_TYPES, and
    # adding mydev there would make Inductor require Triton for it. Without a
    # guard, code compiled for mydev:1 would allocate and launch relative to
    # whatever device the caller had current.
    def need_guard(device: str) -> bool:
        return device == DEVICE_NAME or device_need_guard(device)

    need_guard.__wrapped__ = device_need_guard  # type: ignore[attr-defined]
    return need_guard


def _report_mydev_kernel_language(
    get_current_backend: Callable[[Optional[str]], str],
    kernel_language: Callable[[], str],
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
        if device_type == DEVICE_NAME:
            return kernel_language()
        return get_current_backend(device_type)

    current_backend.__wrapped__ = get_current_backend  # type: ignore[attr-defined]
    return current_backend


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
        if autotuner.device_props.type == DEVICE_NAME and kernel.fn is None:
            reloaded = autotuner._reload_kernel().fn
            kernel.fn = reloaded.fn
            kernel.__globals__ = reloaded.__globals__
            kernel.used_global_vals = reloaded.used_global_vals
        make_launchers(autotuner)

    make_launchers_with_python.__wrapped__ = make_launchers  # type: ignore[attr-defined]
    return make_launchers_with_python


def _applied(function: Any) -> bool:
    # Not hasattr(__wrapped__): torch's own decorators (functools.cache,
    # wraps) give originals one too.
    return getattr(function, "__module__", None) == __name__


def set_device_codegens(codegens: common.DeviceCodegen) -> None:
    """mydev's entry in Inductor's table of device code generators.
    ``register_backend_for_device`` stores one fixed scheduling class per
    device; mydev's entry (inductor_backend.kernel_languages.MydevCodegens)
    picks it by kernel language at each compile, and there is no API to
    register such an entry."""
    common.device_codegens[DEVICE_NAME] = codegens


def apply(kernel_language: Callable[[], str], outer_reduction_tiling: Callable[..., Any]) -> None:
    """Installs every adjustment (idempotent). ``kernel_language()``: the
    language mydev kernels are generated in for the current compile;
    ``outer_reduction_tiling``: mydev's change to a C++ loop nest's tiling
    (inductor_backend.scheduling)."""
    if not _applied(scheduler.BaseSchedulerNode.is_cpu):
        scheduler.BaseSchedulerNode.is_cpu = _treat_mydev_as_cpp_codegen(
            scheduler.BaseSchedulerNode.is_cpu, kernel_language
        )
    if not _applied(lowering.use_two_step_variance):
        lowering.use_two_step_variance = _two_step_variance_as_for_cpu(lowering.use_two_step_variance, kernel_language)
    if not _applied(lowering.pointwise_cat):
        lowering.pointwise_cat = _concatenate_as_on_cpu(lowering.pointwise_cat, kernel_language)
    if not _applied(cpp.TilingSelect.select_tiling):
        cpp.TilingSelect.select_tiling = _tile_outer_reductions_for_mydev(
            cpp.TilingSelect.select_tiling, kernel_language, outer_reduction_tiling
        )
    if not _applied(scheduler.device_need_guard):
        scheduler.device_need_guard = _guard_mydev_devices(scheduler.device_need_guard)
    if not _applied(triton_heuristics.CachingAutotuner._make_launchers):
        triton_heuristics.CachingAutotuner._make_launchers = _reload_python_of_mydev_triton_kernels(
            triton_heuristics.CachingAutotuner._make_launchers
        )
    utils = importlib.import_module(GET_CURRENT_BACKEND_USERS[0])
    if not _applied(utils.get_current_backend):
        replacement = _report_mydev_kernel_language(utils.get_current_backend, kernel_language)
        for name in GET_CURRENT_BACKEND_USERS:
            importlib.import_module(name).get_current_backend = replacement
    # How the C++ wrapper names the device type in generated code (the
    # PrivateUse1 key); cpp_wrapper=True fails without an entry, and the
    # table has no registration function.
    cpp_utils.DEVICE_TO_ATEN[DEVICE_NAME] = "at::kPrivateUse1"
