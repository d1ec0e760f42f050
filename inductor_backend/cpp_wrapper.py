"""The C++ wrapper (``torch._inductor.config.cpp_wrapper = True``) for mydev.

Inductor's CPU C++ wrapper already allocates through the dispatcher (so on
the mydev allocator) and embeds the C++ kernels in the wrapper module. What
mydev changes: kernels are launched on the current stream of their device
as lambdas capturing their arguments, extern kernels run through mydev's C
shims (device_ext/include/mydev_c_shims.h), and ATen fallbacks go
through the dispatcher rather than the CPU's C shims, which would run CPU
kernels directly on device memory.

AOTInductor (``aoti_compile_and_package``) compiles the same wrapper into a
model library. torch's model runtime treats a device it does not know as a
CPU, so the model's constructor is extended (device_ext/include/mydev_aoti.h
says how): it runs on the mydev device its loader asks for, with its
weights on that device, and launches kernels on the stream it is run on.
"""

import os

import torch
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.virtualized import V

from . import config, wrapper_runtime
from .device_interface import DEVICE
from .kernel_modules import INCLUDE_DIR, headers_comment

# What an AOTInductor model for mydev includes first.
AOTI_MODEL_HEADER = os.path.join(INCLUDE_DIR, "mydev_aoti.h")

# ATen fallbacks with a mydev C shim in mydev_cpp_wrapper.h; the others are
# dispatched at run time.
_OPS_WITH_MYDEV_SHIMS = {
    "aten._scaled_dot_product_fused_attention_overrideable.default",
    "aten._scaled_dot_product_fused_attention_overrideable_backward.default",
}


def _is_host_input(name: str) -> bool:
    graph_input = V.graph.graph_inputs.get(str(name))
    if graph_input is None:
        return False
    device = graph_input.get_device()
    return device is not None and device.type == "cpu"


def _triton_needs_the_python_wrapper() -> NotImplementedError:
    return NotImplementedError(
        f"Triton kernels on {DEVICE} (kernel_language='triton', or a user-defined "
        "Triton kernel) are launched by the Python wrapper only; compile with "
        "torch._inductor.config.cpp_wrapper=False"
    )


class MydevCppWrapperCodegen(CppWrapperCpu):
    def __init__(self):
        # An AOTInductor model is a mydev model (the device its weights and
        # package are for); the JIT wrapper keeps the CPU wrapper's device.
        if V.graph.aot_mode:
            self.device = DEVICE
        super().__init__()
        # mydev's kernels come from the CPU's C++ kernel generator.
        self.needs_vec_isa = True

    def write_kernel_autotune_defs_header(self) -> None:
        # AOTInductor runs the autotuning block (Python) on its own, with this
        # header: the device guard and allocations in it name these helpers.
        super().write_kernel_autotune_defs_header()
        self.kernel_autotune_defs.writeline(wrapper_runtime.IMPORT_LINE)

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if config.kernel_language == "triton":
            raise _triton_needs_the_python_wrapper()
        return MydevCppWrapperCodegen()

    @staticmethod
    def get_device_include_path_jit(device: str) -> str:
        if device == DEVICE:
            header = os.path.join(INCLUDE_DIR, "mydev_cpp_wrapper.h")
            return f'#include "{header}"\n{headers_comment()}'
        return CppWrapperCpu.get_device_include_path_jit(device)

    @staticmethod
    def get_device_include_path_aot(device: str) -> str:
        if device == DEVICE:
            return f'#include "{AOTI_MODEL_HEADER}"\n{headers_comment()}'
        return CppWrapperCpu.get_device_include_path_aot(device)

    def generate_input_output_runtime_checks(self) -> None:
        super().generate_input_output_runtime_checks()
        if not V.graph.aot_mode:
            return
        # torch checks an AOTInductor model's inputs (dtype, device type,
        # static sizes and strides, the ranges of torch.export.Dim) only when
        # AOTI_RUNTIME_CHECK_INPUTS=1 is set; without the checks, a size out
        # of the range the model was compiled for runs anyway and reads or
        # writes out of bounds. A mydev model checks them unless
        # AOTI_RUNTIME_CHECK_INPUTS=0.
        opt_in = "const static bool result = env_var_value != nullptr && env_var_value[0] != '0';"
        opt_out = "const static bool result = env_var_value == nullptr || env_var_value[0] != '0';"
        lines = self.prefix._lines
        checks = [index for index, line in enumerate(lines) if str(line).strip() == opt_in]
        if len(checks) != 1:
            raise AssertionError("unexpected AOTInductor input check layout")
        lines[checks[0]] = str(lines[checks[0]]).replace(opt_in, opt_out)

    def codegen_model_constructor(self) -> None:
        super().codegen_model_constructor()
        if self.device != DEVICE:
            return
        # The base class accepts only device types it knows; the model then
        # becomes a mydev model and places its own weights on the device
        # (include_weights = false keeps the container from copying them
        # into host memory afterwards).
        lines = self.prefix._lines
        base_arguments = [index for index, line in enumerate(lines) if str(line).strip() == "device_str,"]
        if len(base_arguments) != 1 or str(lines[-1]).strip() != "}":
            raise AssertionError("unexpected AOTInductor model constructor layout")
        lines[base_arguments[0]] = str(lines[base_arguments[0]]).replace(
            "device_str,", "mydev_compiled::aoti_base_device_str(device_str),"
        )
        closing = lines.pop()
        with self.prefix.indent():
            self.prefix.splice(
                """
                device_type_ = aoti_torch_device_type_privateuse1();
                device_idx_ = mydev_compiled::aoti_resolve_device(device_str);
                if (include_weights) {
                    mydev_compiled::aoti_load_constants_to_device(
                        constants_info_, *constants_map_, _get_constants_start(), device_idx_);
                    update_constants_array_from_map();
                    include_weights = false;
                }
                """
            )
        lines.append(closing)

    def _generate_kernel_call_helper(
        self, kernel_name, call_args, *, device=None, triton=True, arg_types=None, **kwargs
    ):
        device = device or V.graph.get_current_device_or_throw()
        if triton and device.type == DEVICE:
            raise _triton_needs_the_python_wrapper()
        if triton or device.type != DEVICE:
            return super()._generate_kernel_call_helper(
                kernel_name, call_args, device=device, triton=triton, arg_types=arg_types, **kwargs
            )
        # Pointers and scalars are evaluated here, on the host, and captured
        # by value: the lambda runs later, on the stream's executor. A CPU
        # scalar input (a Python number Inductor passes as a 0-dim tensor)
        # is captured by value too, as the tensor may be freed before then.
        self.writeline("{")
        captured = []
        for index, (arg, arg_type) in enumerate(zip(call_args, arg_types)):
            name = f"kernel_arg{index}"
            if "*" not in str(arg_type):
                self.writeline(f"    auto {name} = {arg};")
                captured.append(name)
                continue
            if _is_host_input(arg):
                value = (
                    f"mydev_compiled::host_scalar_argument({arg}.data_ptr(), sizeof(std::remove_pointer_t<{arg_type}>))"
                )
            else:
                value = f"mydev_compiled::device_argument({arg}.data_ptr())"
            self.writeline(f"    auto {name} = {value};")
            captured.append(f"({arg_type})({name}.get())")
        # An AOTInductor model is run on a stream (its run's argument), on
        # whichever device it was loaded for.
        stream = "stream" if V.graph.aot_mode else f"mydev_compiled::current_stream({device.index})"
        self.writeline(
            f'    mydev_compiled::launch({stream}, "{kernel_name}", [=] {{ {kernel_name}({", ".join(captured)}); }});'
        )
        self.writeline("}")
        return None

    @staticmethod
    def _compatible_with_stableivalue(op) -> bool:
        # The StableIValue bridge fails on ops that also return integers or
        # undefined tensors (the attention ops); the boxed dispatcher call
        # Inductor falls back to handles them.
        return CppWrapperCpu._compatible_with_stableivalue(op) and all(
            isinstance(result.type, torch.TensorType) for result in op._schema.returns
        )

    def generate_fallback_kernel(self, node) -> None:
        device = node.get_device()
        if device is None or device.type != DEVICE or str(node.op_overload) in _OPS_WITH_MYDEV_SHIMS:
            return super().generate_fallback_kernel(node)
        # The CPU's C shims call CPU kernels directly; on mydev every ATen
        # fallback is dispatched instead, reaching mydev's kernels. Integer
        # results Inductor already knows statically (e.g. attention's max_q)
        # are not read back.
        outputs = node.outputs if node.outputs else node.mutation_outputs
        self.generate_fallback_kernel_with_runtime_lookup(
            node.get_name(),
            node.python_kernel_name,
            lambda: [*node.codegen_args(), *node.codegen_kwargs()],
            node.op_overload,
            node.export_extern_kernel_node(),
            [None if isinstance(output, int) else output for output in outputs],
        )
