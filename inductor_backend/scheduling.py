"""Kernel generation for mydev in the "cpp" kernel language: Inductor's C++
scheduling (fusion, vectorized loop nests, OpenMP work sharing across the
device's compute units), with each kernel defined as a mydev kernel module
instead of a CPU function.

The vectorized kernels, 1-D and 2-D tiled (transposing), take exp, expm1 and
erf from the device math library (device_ext/include/mydev_math.h) instead of
ATen's Vectorized functions (sigmoid too, through that exp), draw rand and
randn (dropout's masks) a vector at
a time from the device random-number library (device_ext/include/mydev_random.h,
the same numbers as Inductor's lane-by-lane calls), and load and store bool
tensors as lane masks with the device's mask functions
(device_ext/include/mydev_bool_masks.h): Inductor's own extension points
(CppScheduling.kernel_proxy_cls, CppKernelProxy.vec_kernel_cls and
tile2d_kernel_cls) carry the change, so torch is not patched. Their float
sums take the device's cascade-summation helpers
(device_ext/include/mydev_reduce.h): same order as torch's, a register
instead of memory for the running sum; the kernel's source is where the
helpers are named, so define_kernel renames them there.

An outer reduction (a bias or norm-weight gradient: a column sum of a
row-major [rows, columns] tensor) is vectorized along the columns, each lane
its own sum, and walks the rows. Inductor gives it one vector of columns per
pass over the rows, which then reads one vector per row at the row stride:
the compiled column sum of an [8192, 256] float32 tensor took 3x ATen's eager
sum. ``outer_reduction_tiling`` widens such a tile to several vectors
(at::vec::VectorizedN), so each pass reads that many contiguous columns per
row and keeps that many independent running sums; Inductor offers no hook for
its tiling choice, so device_ext/torch_patches/inductor.py calls it from
``TilingSelect.select_tiling`` for mydev kernels."""

import os
import re

import torch
from torch._inductor import config as inductor_config
from torch._inductor.codegen.common import BracesBuffer
from torch._inductor.codegen.cpp import (
    CppKernelProxy,
    CppScheduling,
    CppTile2DKernel,
    CppTile2DOverrides,
    CppVecKernel,
    CppVecOverrides,
)
from torch._inductor.codegen.cpp_utils import (
    DTYPE_TO_CPP,
    CppCSEVariable,
    _get_dtype_from_loopbodies,
    _get_loop_body,
)
from torch._inductor.cpu_vec_isa import pick_vec_isa
from torch._inductor.utils import IndentedBuffer, Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V, ops

from .device_interface import DEVICE
from .kernel_modules import INCLUDE_DIR

_CPP_PREFIX = "#include <torch/csrc/inductor/cpp_prefix.h>"
_MATH_LIBRARY = f'#include "{os.path.join(INCLUDE_DIR, "mydev_math.h")}"'
_REDUCTION_HELPERS = f'#include "{os.path.join(INCLUDE_DIR, "mydev_reduce.h")}"'
_RANDOM_LIBRARY = f'#include "{os.path.join(INCLUDE_DIR, "mydev_random.h")}"'
_BOOL_MASKS = f'#include "{os.path.join(INCLUDE_DIR, "mydev_bool_masks.h")}"'
# cpp_prefix.h's cascade-summation helper and its functions, as Inductor's
# C++ generator writes them (unqualified), not names already in a namespace.
_CASCADE_SUM_NAMES = re.compile(r"(?<![\w:])(CascadeSumHelper|cascade_sum_combine|cascade_sum_final)\b")


def with_device_library(src_code: str) -> str:
    """A kernel's source on the device library: its cascade sums renamed to
    the device's helpers, and the headers of what it calls (math functions,
    summation helpers) included after the prefix header. Fails at code
    generation, with the reason, if torch stops writing that header's
    include line as _CPP_PREFIX (the kernel would fail to compile, saying
    less)."""
    src_code, cascade_sums = _CASCADE_SUM_NAMES.subn(r"mydev_reduce::\1", src_code)
    headers = [_MATH_LIBRARY] if "mydev_math::" in src_code else []
    headers += [_RANDOM_LIBRARY] if "mydev_random::" in src_code else []
    headers += [_BOOL_MASKS] if "mydev_masks::" in src_code else []
    headers += [_REDUCTION_HELPERS] if cascade_sums else []
    if not headers:
        return src_code
    if _CPP_PREFIX not in src_code:
        raise RuntimeError(
            f"a mydev kernel calls the device library but has no line {_CPP_PREFIX!r} to include it "
            "after: torch changed how C++ kernels include their prefix; update inductor_backend/scheduling.py"
        )
    return src_code.replace(_CPP_PREFIX, "\n".join([_CPP_PREFIX, *headers]), 1)


# The widest tile of an outer reduction, in vectors: four running sums per
# lane group and two 64-byte lines per row (AVX2). Compiled column sums on an
# idle 2-core host, device time: [8192, 256] 480-610 us with one vector,
# 235-290 with four; [2048, 4096] 8.5-9.4 ms, 3.1-5.5. Eight were faster
# only at thousands of columns, and with several sums in one body (a
# LayerNorm backward's weight and bias gradients) they need more vector
# registers than AVX2 has.
OUTER_REDUCTION_VECTORS = 4
# What the body of a widened tile may compute: at::vec::VectorizedN defines
# each of these, as it does not every function a kernel may call.
_WIDE_TILE_OPS = frozenset({"load", "store", "reduction", "store_reduction", "add", "sub", "mul", "neg", "constant"})


def outer_reduction_tiling(fn_list, var_sizes_list, factors, indices, stats):
    """Inductor's tiling choice for a loop nest (``factors``, ``indices``,
    ``stats``: what ``TilingSelect.select_tiling`` returned), widened for a
    float32 sum vectorized along a column (an index of the pointwise
    group, not of the reduction): the widest tile of up to
    OUTER_REDUCTION_VECTORS vectors that divides the columns, so no tail
    is added. Each lane sums its rows as before; with fewer column tiles to
    share out, Inductor may split the rows between threads instead, which
    regroups the partial sums as in any parallel reduction. Anything else
    is returned as chosen."""
    unchanged = factors, indices, stats
    if len(factors) != 1 or not stats.op_counter or not set(stats.op_counter) <= _WIDE_TILE_OPS:
        return unchanged
    group, reduction_group = max(var_sizes_list, key=lambda sizes: len(sizes[1]))
    if not reduction_group or not 0 <= indices[0] < len(group):
        return unchanged
    columns = group[indices[0]]
    lanes = pick_vec_isa().nelements(torch.float32)
    if not getattr(columns, "is_number", True) or factors[0] != lanes:
        return unchanged
    loop_bodies = _get_loop_body(fn_list)
    if set(_get_dtype_from_loopbodies(loop_bodies)) != {torch.float32} or not all(
        node.args[3] == "sum"
        for body in loop_bodies
        for block in (body.root_block, *body.subblocks.values())
        for node in block.graph.nodes
        if node.target == "reduction"
    ):
        return unchanged
    for vectors in range(OUTER_REDUCTION_VECTORS, 1, -1):
        if int(columns) % (vectors * lanes) == 0:
            return [vectors * lanes], indices, stats
    return unchanged


class _DeviceMathLibrary:
    """Put before a CppVecOverrides class: its vector ops, with the device
    math and random-number libraries' functions for vectors (scalars, in loop
    tails and reductions' scalar code, keep the C++ standard library's and
    cpp_prefix.h's)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls, *args, **kwargs)
        # CppVecOverrides.__new__ binds its own static methods on the instance
        # (with scalar fallbacks), which hides a subclass's; rebind ours.
        for name, vector_form in (
            ("exp", lambda x: f"mydev_math::exp({x})"),
            ("erf", lambda x: f"mydev_math::erf({x})"),
            ("expm1", lambda x: f"mydev_math::expm1({x})"),
            ("sigmoid", _sigmoid_of_kernel_exp),
        ):
            setattr(self, name, _vector_or_scalar(vector_form, getattr(self, name)))
        for name, draw in (("rand", "uniform"), ("randn", "normal")):
            setattr(self, name, _vector_of_draws(draw, getattr(self, name)))
        return self


def _vector_or_scalar(vector_form, inherited):
    def op(x):
        if isinstance(x, CppCSEVariable) and x.is_vec:
            return vector_form(x)
        return inherited(x)

    return op


def _sigmoid_of_kernel_exp(x):
    """1 / (1 + exp(-x)) with exp(-x) made through the kernel's own ops, so
    that it is the device library's exp and, by common-subexpression
    elimination, the one a SiLU beside it already computed: SiLU's backward
    (Llama's SwiGLU) recomputes x / (1 + exp(-x)) and sigmoid(x) on the same
    x, and Inductor's own sigmoid is one C++ expression with ATen's exp
    inside, which nothing can share (two exps per element)."""
    exp_of_minus_x = ops.exp(ops.neg(x))
    return f"decltype({x})(1) / (decltype({x})(1) + {exp_of_minus_x})"


def _vector_of_draws(draw, inherited):
    """ops.rand or ops.randn: for a vector of offsets, one call that draws
    every lane (mydev_random::<draw>), in the lambda Inductor's own code has
    (offsets stored to an array, results loaded back as a vector)."""

    def op(seed, offset):
        if not (isinstance(offset, CppCSEVariable) and offset.is_vec) or getattr(seed, "is_vec", False):
            return inherited(seed, offset)
        lanes = V.kernel.tiling_factor
        vectors = V.kernel._get_num_vectors(dtype=torch.float32)
        result_type = "at::vec::Vectorized<float>" if vectors == 1 else f"at::vec::VectorizedN<float, {vectors}>"
        code = BracesBuffer()
        code.writeline("[&]()")
        with code.indent():
            code.writeline(f"{DTYPE_TO_CPP[offset.dtype]} offset[{lanes}];")
            code.writeline(f"float result[{lanes}];")
            code.writeline(f"{offset}.store(offset);")
            code.writeline(f"mydev_random::{draw}({seed}, offset, result);")
            code.writeline(f"return {result_type}::loadu(result);")
        code.writeline("()")
        return code

    return op


class MydevVecOverrides(_DeviceMathLibrary, CppVecOverrides):
    pass


class MydevTile2DOverrides(_DeviceMathLibrary, CppTile2DOverrides):
    pass


class _DeviceBoolMasks:
    """Put before a CppVecKernel class: its contiguous loads and stores of
    bool tensors as lane masks go through the device's mask functions
    (mydev_masks::load and store, same arguments as ATen's VecMask::from and
    VecMask::store that Inductor writes). A line in another form (a masked
    or strided access, or torch writing these differently) stays as
    Inductor wrote it."""

    def _get_vec_load_line(self, var, index, dtype, load_mask=None):
        line = super()._get_vec_load_line(var, index, dtype, load_mask)
        if dtype != torch.bool:
            return line
        mask_type = self._get_mask_type()
        prefix = f"{mask_type}::from("
        if not line.startswith(prefix):
            return line
        return f"mydev_masks::load<{mask_type}>({line[len(prefix) :]}"

    def _get_store_line(self, value, var, index, dtype, accu_store=False):
        code = super()._get_store_line(value, var, index, dtype, accu_store)
        if dtype != torch.bool:
            return code
        lines = code.getvalue().splitlines()
        prefix = f"{value}.store("
        if len(lines) != 1 or not lines[0].startswith(prefix):
            return code
        rewritten = IndentedBuffer()
        rewritten.writeline(f"mydev_masks::store({value}, {lines[0][len(prefix) :]}")
        return rewritten


class MydevVecKernel(_DeviceBoolMasks, CppVecKernel):
    overrides = MydevVecOverrides


class MydevTile2DKernel(MydevVecKernel, CppTile2DKernel):
    # A subclass of MydevVecKernel, as CppTile2DKernel is of CppVecKernel:
    # when Inductor's CppKernelProxy merges the reduction buffers of an
    # outer loop, it asserts that the main loop's kernel is an instance of
    # its vec_kernel_cls, and that kernel is a 2-D tile when every loop is
    # one (a BatchNorm backward over a channels-last convolution output).
    overrides = MydevTile2DOverrides


class MydevKernelProxy(CppKernelProxy):
    vec_kernel_cls = MydevVecKernel
    tile2d_kernel_cls = MydevTile2DKernel


class MydevScheduling(CppScheduling):
    kernel_proxy_cls = MydevKernelProxy

    def define_kernel(self, src_code, nodes, kernel_args=None):
        src_code = with_device_library(src_code)
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
