"""Inductor's autotuning (max-autotune: torch._inductor.utils,
select_algorithm, codegen.cpp_template, autotune_process), torch 2.13: the
C++ GEMM / BMM templates are offered only for device "cpu"; the choice among
candidates is deferred to the scheduler (which cannot time C++ kernels) for
every device but "cpu"; a template candidate is timed by calling its kernel
in the host process; and the timing of every other non-CPU candidate
(ATen's, decompositions) looks for a device among ``GPU_TYPES`` and otherwise
uses CUDA's. See the table in ``device_ext/torch_patches/__init__.py``.

Applied by ``inductor_backend`` when it registers. The mydev side is passed
in, so this module imports nothing from ``inductor_backend``:
``kernel_language()`` answers "cpp" or "triton" at each compile,
``benchmark_request(cpu_request)`` makes the request that times a template's
kernel on mydev, and ``time_on_device(fn, device)`` times a callable on a
mydev device.
"""

from typing import Any, Callable, Optional

import torch
from torch._inductor import config, ir, utils
from torch._inductor.autotune_process import BenchmarkRequest, CppBenchmarkRequest, GPUDeviceBenchmarkMixin
from torch._inductor.codegen.cpp_template import CppTemplate
from torch._inductor.select_algorithm import AlgorithmSelectorCache

from ..device_name import DEVICE_NAME


def _offer_templates_on_mydev(
    use_template_for_cpu: Callable[[ir.Layout], bool],
    kernel_language: Callable[[], str],
) -> Callable[[ir.Layout], bool]:
    # use_cpp_gemm_template and use_cpp_bmm_template (the mm, addmm and bmm
    # lowerings) ask this first: "max-autotune is on and the output is on
    # the CPU". Their other conditions (the "CPP" autotune backend, dtypes,
    # a micro-kernel for the shape, constant weights for mm/addmm) hold for
    # mydev as they are, since mydev's "cpp" kernels come from the same C++
    # generator and host compiler. Without this, ATen is max-autotune's only
    # candidate for a mydev matrix multiply. (A Triton kernel cannot hold a
    # C++ template: with kernel_language="triton" nothing changes.)
    def use_template(layout: ir.Layout) -> bool:
        if layout.device.type == DEVICE_NAME:
            return kernel_language() == "cpp" and bool(config.max_autotune or config.max_autotune_gemm)
        return use_template_for_cpu(layout)

    use_template.__wrapped__ = use_template_for_cpu  # type: ignore[attr-defined]
    return use_template


def _choose_mydev_cpp_kernels_at_lowering(
    select: Callable[..., Any],
    kernel_language: Callable[[], str],
) -> Callable[..., Any]:
    # With benchmark_epilogue_fusion (on by default) the selection returns a
    # MultiTemplateBuffer and the scheduler picks a candidate later, timing
    # it fused with its epilogue; that timing exists for Triton kernels only
    # (CppScheduling.benchmark_fused_nodes raises NotImplementedError), so
    # torch picks at lowering for "cpu" unless cpu_backend is "triton". The
    # same holds for mydev's "cpp" kernels: the fastest candidate is chosen
    # at lowering, and the C++ template still fuses its epilogue when it is
    # the one chosen.
    def select_algorithm(
        cache: AlgorithmSelectorCache, name: str, choices: Any, input_nodes: Any, layout: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if layout.device.type == DEVICE_NAME and kernel_language() == "cpp":
            kwargs["return_multi_template"] = False
        return select(cache, name, choices, input_nodes, layout, *args, **kwargs)

    select_algorithm.__wrapped__ = select  # type: ignore[attr-defined]
    return select_algorithm


def _time_mydev_templates_on_the_device(
    generate: Callable[..., Any],
    benchmark_request: Callable[[CppBenchmarkRequest], BenchmarkRequest],
) -> Callable[..., Any]:
    # A template's choice carries the request that times it while
    # autotuning. The CPU's loads the kernel into the host process and calls
    # it on the tensors' data pointers, which for mydev tensors is host code
    # dereferencing device memory (a fault). A mydev candidate is timed by a
    # request that launches the same kernel on the stream instead. (The
    # chosen kernel is generated and launched by mydev's scheduling either
    # way: only the timing goes through the request.)
    def generate_with_device_timing(template: CppTemplate, **kwargs: Any) -> Any:
        caller = generate(template, **kwargs)
        if template.layout.device.type == DEVICE_NAME:
            caller.bmreq = benchmark_request(caller.bmreq)
        return caller

    generate_with_device_timing.__wrapped__ = generate  # type: ignore[attr-defined]
    return generate_with_device_timing


def _time_mydev_choices_on_the_device(
    do_bench: Callable[..., float],
    time_on_device: Callable[[Callable[[], Any], torch.device], float],
) -> Callable[..., float]:
    # The timing shared by every non-CPU request (ATen's extern kernels,
    # decompositions, Triton templates) picks its device interface among
    # GPU_TYPES and otherwise takes CUDA's: timing a mydev candidate raises
    # "Torch not compiled with CUDA enabled", which autotuning reports as an
    # incorrect result, and the compile fails. Any mydev tensor among the
    # arguments means the candidate runs on that mydev device.
    def do_bench_on_device(
        request: GPUDeviceBenchmarkMixin, fn: Callable[[], Any], *input_tensors: Any, out: Optional[Any] = None
    ) -> float:
        for tensor in (*input_tensors, out):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == DEVICE_NAME:
                return time_on_device(fn, tensor.device)
        return do_bench(request, fn, *input_tensors, out=out)

    do_bench_on_device.__wrapped__ = do_bench  # type: ignore[attr-defined]
    return do_bench_on_device


def _applied(function: Any) -> bool:
    return getattr(function, "__module__", None) == __name__


def apply(
    kernel_language: Callable[[], str],
    benchmark_request: Callable[[CppBenchmarkRequest], BenchmarkRequest],
    time_on_device: Callable[[Callable[[], Any], torch.device], float],
) -> None:
    """Installs the four adjustments (idempotent)."""
    if not _applied(utils._use_template_for_cpu):
        utils._use_template_for_cpu = _offer_templates_on_mydev(utils._use_template_for_cpu, kernel_language)
    if not _applied(AlgorithmSelectorCache.__call__):
        AlgorithmSelectorCache.__call__ = _choose_mydev_cpp_kernels_at_lowering(
            AlgorithmSelectorCache.__call__, kernel_language
        )
    if not _applied(CppTemplate.generate):
        CppTemplate.generate = _time_mydev_templates_on_the_device(CppTemplate.generate, benchmark_request)
    if not _applied(GPUDeviceBenchmarkMixin.do_bench):
        GPUDeviceBenchmarkMixin.do_bench = _time_mydev_choices_on_the_device(
            GPUDeviceBenchmarkMixin.do_bench, time_on_device
        )
