"""The Python wrapper Inductor generates around mydev kernels: buffers from the
mydev allocator, extern kernels (mm, conv, SDPA, ...) as eager mydev ops, and
each generated kernel launched on the current stream of its device:

    stream0 = get_raw_stream(0)
    mydev_fused_add_relu_0(stream0, buf0, arg0_1)
"""

from torch._inductor import config as inductor_config
from torch._inductor.codegen.wrapper import (
    PythonWrapperCodegen,
    SubgraphPythonWrapperCodegen,
)
from torch._inductor.virtualized import V

from . import wrapper_runtime
from .device_interface import DEVICE


class _MydevKernelCalls:
    """What mydev changes in a Python wrapper, shared by the graph's wrapper
    and the wrappers of its subgraphs (cond, while_loop, ...)."""

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from inductor_backend.kernel_modules import load_mydev_kernel")
        self.imports.writeline(wrapper_runtime.IMPORT_LINE)

    def write_kernel_autotune_defs_header(self) -> None:
        # The autotuning block runs on its own, with its own header.
        super().write_kernel_autotune_defs_header()
        self.kernel_autotune_defs.writeline(wrapper_runtime.IMPORT_LINE)

    def _generate_kernel_call_helper(
        self, kernel_name, call_args, *, device=None, triton=True, graph_name="", **kwargs
    ):
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != DEVICE:
            return super()._generate_kernel_call_helper(
                kernel_name, call_args, device=device, triton=triton, graph_name=graph_name, **kwargs
            )
        stream = PythonWrapperCodegen.write_get_raw_stream(self, device.index, graph_name)
        self.writeline(f"{kernel_name}({', '.join([stream, *map(str, call_args)])})")
        return None

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        # Inductor's line for devices without a fast path goes through
        # torch.empty_strided(..., device='mydev'); this is its counterpart
        # of empty_strided_cpu/_cuda (wrapper_runtime.py).
        if device.type != DEVICE or is_pinned or inductor_config.test_configs.track_memory_lifecycle:
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        shape_tuple = self.codegen_python_shape_tuple(shape)
        allocation_tuple = self.codegen_python_shape_tuple(shape if allocation_shape is None else allocation_shape)
        stride_tuple = self.codegen_python_shape_tuple(stride)
        line = f"{name} = empty_strided_mydev({allocation_tuple}, {stride_tuple}, {dtype})"
        if shape_tuple != allocation_tuple:
            line += f".as_strided({shape_tuple}, {stride_tuple})"
        return line

    def codegen_device_guard_exit(self) -> None:
        # The C++ scheduling holds kernels back until the scheduler flushes,
        # which at the end of a graph comes after the device guard closed.
        # Flushing first keeps every launch inside its device's guard.
        scheduler = getattr(V.graph, "scheduler", None)
        if scheduler is not None:
            scheduler.flush()
        super().codegen_device_guard_exit()


class MydevSubgraphPythonWrapperCodegen(_MydevKernelCalls, SubgraphPythonWrapperCodegen):
    def write_header(self) -> None:
        # A subgraph's kernels are defined in its parent's module.
        SubgraphPythonWrapperCodegen.write_header(self)


class MydevPythonWrapperCodegen(_MydevKernelCalls, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return MydevSubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return MydevPythonWrapperCodegen()
