"""Kernel generation for mydev in the "cpp" kernel language: Inductor's C++
scheduling (fusion, vectorized loop nests, OpenMP work sharing across the
device's compute units), with each kernel defined as a mydev kernel module
instead of a CPU function."""

from torch._inductor import config as inductor_config
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.utils import IndentedBuffer, Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V

from .device_interface import DEVICE


class MydevScheduling(CppScheduling):
    def define_kernel(self, src_code, nodes, kernel_args=None):
        if V.graph.cpp_wrapper:
            # The C++ wrapper compiles kernels into its own module and
            # launches them itself (MydevCppWrapperCodegen).
            return super().define_kernel(src_code, nodes, kernel_args)
        wrapper = V.graph.wrapper_code
        kernel_name = wrapper.src_to_kernel.get(src_code)
        if kernel_name is not None:
            return kernel_name
        descriptive = (
            get_fused_kernel_name(nodes, inductor_config.cpp.descriptive_names)
            if inductor_config.cpp.descriptive_names
            else ""
        )
        kernel_name = "_".join([DEVICE, descriptive, wrapper.next_kernel_suffix()])
        wrapper.src_to_kernel[src_code] = kernel_name
        source = (
            src_code.replace(str(Placeholder.KERNEL_NAME), "kernel")
            .replace(str(Placeholder.DESCRIPTIVE_NAME), kernel_name)
            .replace("#pragma CMT", "//")
        )
        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        definition = IndentedBuffer()
        definition.writeline(f"load_mydev_kernel(async_compile, {kernel_name!r}, {arg_types!r}, r'''")
        definition.splice(source, strip=True)
        definition.writeline("''')")
        wrapper.define_kernel(kernel_name, definition.getvalue(), gpu=False)
        return kernel_name
