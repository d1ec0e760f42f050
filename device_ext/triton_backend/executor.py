"""Executes a Triton kernel's programs in the simulator.

The semantics are Triton's own interpreter's (``triton.runtime.interpreter``:
numpy blocks, loads and stores through raw addresses), driven differently:

* no argument copies: the programs compute with the device addresses of
  the mydev tensors themselves, and every load, store and atomic reaches the
  memory at the driver's kernel-side address of its device address (this
  runs inside a kernel, see ``launcher.py``), so stores land in the caller's
  tensors;
* every load, store and atomic is checked against the memory of the
  kernel's tensor arguments, so an unmasked out-of-bounds access is an error
  naming the program instead of a wild write;
* ``libdevice`` calls evaluate with :mod:`.libdevice`, and ``@triton.jit``
  helpers called from the kernel run interpreted too;
* bfloat16 arithmetic is computed in float32 and rounded back (the
  interpreter would operate on the raw bits);
* ``triton.language`` is patched only while a kernel runs, and restored after.

That last point makes execution exclusive: one kernel runs at a time in a
process, and Triton code generation must not run in another thread meanwhile
(it would see the patched language). Kernels run on the launching thread or,
replayed from a graph, on a stream's executor thread while the host goes on,
so both sides wait: an execution starts only while no other thread is inside
Triton's ``compile`` (:func:`_execution_slot`), and a compile for mydev starts
only once the running execution ended (:func:`wait_for_execution`, called by
the backend Triton makes at the start of every compile).
"""

import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.interpreter import TensorHandle, interpreter_builder
from triton.runtime.jit import JITFunction

from . import libdevice

# The kernel's tensor arguments' memory: [start, end) device addresses, and
# what to add to one of them for its kernel-side address.
MemoryRanges = Sequence[Tuple[int, int, int]]

_MISSING = object()
_execution_lock = threading.RLock()


class TritonKernelError(RuntimeError):
    """A Triton kernel failed while executing on mydev."""


class _Patches:
    """Attribute and dict-entry replacements, undone in reverse order. Has
    the ``set_attr`` of the interpreter's own patch scope, so the
    interpreter's patch helpers record into it."""

    def __init__(self) -> None:
        self._undo: List[Tuple[Any, Any, Any, bool]] = []

    def set_attr(self, owner: Any, name: str, value: Any) -> None:
        # The owner's own entry, so that an inherited attribute is inherited
        # again afterwards rather than copied in.
        self._undo.append((owner, name, vars(owner).get(name, _MISSING), False))
        setattr(owner, name, value)

    def set_item(self, mapping: Dict[str, Any], key: str, value: Any) -> None:
        self._undo.append((mapping, key, mapping.get(key, _MISSING), True))
        mapping[key] = value

    def restore(self) -> None:
        while self._undo:
            owner, name, original, is_item = self._undo.pop()
            if is_item:
                if original is _MISSING:
                    owner.pop(name, None)
                else:
                    owner[name] = original
            elif original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def _interpreted(function: JITFunction) -> Any:
    # The interpreter's rewrite (cached per function) makes plain Python
    # assignments produce tensors, as the code generator does.
    return interpreter.InterpretedFunction(function.fn).rewrite()


def _call_helper(function: JITFunction, *args: Any, **kwargs: Any) -> Any:
    return _interpreted(function)(*args, **kwargs)


def _patch_language(patches: _Patches) -> None:
    for language in (tl, tl.core):
        interpreter._patch_builtin(language, interpreter_builder, patches)
        interpreter._patch_builtin(language.tensor, interpreter_builder, patches)
        interpreter._patch_lang_tensor(language.tensor, patches)
        interpreter._patch_lang_core(language, patches)
    interpreter._patch_builtin(tl.math, interpreter_builder, patches)
    interpreter._patch_builtin(tl.core.tensor_descriptor_base, interpreter_builder, patches)
    patches.set_attr(JITFunction, "__call__", _call_helper)


def _patch_libdevice(kernel: JITFunction, patches: _Patches) -> None:
    for module_name in libdevice.LIBDEVICE_MODULE_NAMES:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        # Every name, as compiling maps the whole module to mydev's.
        for name in libdevice.FUNCTIONS:
            interpreter._patch_attr(module, name, getattr(libdevice, name), interpreter_builder, patches)
    # `from triton.language.extra.libdevice import exp` put the stub itself
    # into the kernel's globals.
    for key, value in list(kernel.fn.__globals__.items()):
        if (
            getattr(value, "__module__", None) in libdevice.LIBDEVICE_MODULE_NAMES
            and getattr(value, "__name__", None) in libdevice.FUNCTIONS
        ):
            extern = getattr(libdevice, value.__name__)
            patches.set_item(
                kernel.fn.__globals__,
                key,
                lambda *args, _extern=extern, **kwargs: _extern(*args, _semantic=interpreter.interpreter_semantic),
            )


def _kernel_side(
    pointers: TensorHandle, mask: Optional[TensorHandle], ranges: MemoryRanges, access: str
) -> TensorHandle:
    """``pointers`` (device addresses) at their kernel-side addresses, after
    checking that every access the mask enables lies inside a tensor
    argument."""
    addresses = pointers.data
    enabled = np.ones(addresses.shape, dtype=bool) if mask is None else np.broadcast_to(mask.data, addresses.shape)
    width = max(1, pointers.get_element_ty().primitive_bitwidth // 8)
    translated = addresses.astype(np.uint64)  # a copy
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end, to_kernel in ranges:
        in_range = (addresses >= start) & (addresses + np.uint64(width) <= end) & ~inside
        translated[in_range] += np.uint64(to_kernel % (1 << 64))
        inside |= in_range
    outside = enabled & ~inside
    if outside.any():
        first = int(addresses[outside].reshape(-1)[0])
        raise IndexError(
            f"{access} of {width} bytes at 0x{first:x} is outside every tensor argument "
            f"({np.count_nonzero(outside)} element(s) out of bounds; a missing mask?)"
        )
    return TensorHandle(translated, pointers.dtype)


def _patch_builder(ranges: MemoryRanges, patches: _Patches) -> None:
    builder = interpreter_builder
    load, store = builder.create_masked_load, builder.create_masked_store
    atomic_rmw, atomic_cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def create_masked_load(pointers, mask, other, cache_policy, is_volatile):
        return load(_kernel_side(pointers, mask, ranges, "load"), mask, other, cache_policy, is_volatile)

    def create_masked_store(pointers, value, mask, cache_policy):
        return store(_kernel_side(pointers, mask, ranges, "store"), value, mask, cache_policy)

    def create_atomic_rmw(operation, pointers, value, mask, semantic, scope):
        return atomic_rmw(operation, _kernel_side(pointers, mask, ranges, "atomic"), value, mask, semantic, scope)

    def create_atomic_cas(pointers, compare, value, semantic, scope):
        return atomic_cas(_kernel_side(pointers, None, ranges, "atomic"), compare, value, semantic, scope)

    def create_extern_elementwise(library, path, symbol, args, result_type, is_pure):
        result = libdevice.evaluate(symbol, [arg.data for arg in args], interpreter._get_np_dtype(result_type.scalar))
        return TensorHandle(result, result_type.scalar)

    for name, replacement in (
        ("create_masked_load", create_masked_load),
        ("create_masked_store", create_masked_store),
        ("create_atomic_rmw", create_atomic_rmw),
        ("create_atomic_cas", create_atomic_cas),
        ("create_extern_elementwise", create_extern_elementwise),
    ):
        patches.set_attr(builder, name, replacement)


def _as_float32(handle: TensorHandle) -> TensorHandle:
    if handle.dtype.scalar != tl.bfloat16:
        return handle
    return interpreter_builder.cast_impl(handle, tl.float32)


def _patch_bfloat16_arithmetic(patches: _Patches) -> None:
    """The interpreter keeps bfloat16 as its uint16 bit pattern and would do
    arithmetic on the bits: compute in float32 and round the result back, as
    the hardware's bf16 units do."""
    builder = interpreter_builder
    binary_op, unary_op = builder.binary_op, builder.unary_op
    fma, dot = builder.create_fma, builder.create_dot

    def rounded_back(result: TensorHandle, was_bfloat16: bool) -> TensorHandle:
        if not was_bfloat16:
            return result
        if result.data.dtype == np.float32:
            return builder.cast_impl(result, tl.bfloat16)
        return TensorHandle(result.data, tl.bfloat16)  # a comparison's booleans

    def bf16_binary_op(lhs, rhs, op):
        was_bfloat16 = lhs.dtype.scalar == tl.bfloat16
        return rounded_back(binary_op(_as_float32(lhs), _as_float32(rhs), op), was_bfloat16)

    def bf16_unary_op(arg, op):
        return rounded_back(unary_op(_as_float32(arg), op), arg.dtype.scalar == tl.bfloat16)

    def bf16_fma(x, y, z):
        return rounded_back(fma(_as_float32(x), _as_float32(y), _as_float32(z)), z.dtype.scalar == tl.bfloat16)

    def bf16_dot(a, b, d, input_precision, max_num_imprecise_acc):
        result = dot(_as_float32(a), _as_float32(b), _as_float32(d), input_precision, max_num_imprecise_acc)
        return rounded_back(result, d.dtype.scalar == tl.bfloat16)

    for name, replacement in (
        ("binary_op", bf16_binary_op),
        ("unary_op", bf16_unary_op),
        ("create_fma", bf16_fma),
        ("create_dot", bf16_dot),
    ):
        patches.set_attr(builder, name, replacement)


@contextmanager
def _interpreting(kernel: JITFunction, ranges: MemoryRanges) -> Iterator[None]:
    patches = _Patches()
    try:
        _patch_language(patches)
        _patch_libdevice(kernel, patches)
        _patch_builder(ranges, patches)
        _patch_bfloat16_arithmetic(patches)
        with np.errstate(all="ignore"):  # inf/nan are results here, not warnings
            yield
    finally:
        patches.restore()


def _compiling_in_another_thread() -> bool:
    from triton.compiler import compiler

    compile_code = compiler.compile.__code__
    this_thread = threading.get_ident()
    for thread, frame in sys._current_frames().items():
        while thread != this_thread and frame is not None:
            if frame.f_code is compile_code:
                return True
            frame = frame.f_back
    return False


@contextmanager
def _execution_slot() -> Iterator[None]:
    while True:
        _execution_lock.acquire()
        if not _compiling_in_another_thread():
            break
        _execution_lock.release()
        time.sleep(0.001)  # a compile takes milliseconds at least
    try:
        yield
    finally:
        _execution_lock.release()


def wait_for_execution() -> None:
    """Returns once no kernel executes (in another thread) any more."""
    with _execution_lock:
        pass


def execute(
    kernel: JITFunction, name: str, grid: Tuple[int, int, int], args: Sequence[Any], ranges: MemoryRanges
) -> None:
    """Runs every program of ``grid`` with ``args`` (one per kernel
    parameter, constexprs included, as Triton's launchers receive them)."""
    with _execution_slot(), _interpreting(kernel, ranges):
        program = _interpreted(kernel)
        call_args = {
            param.name: value if param.is_constexpr else interpreter._implicit_cvt(value)
            for param, value in zip(kernel.params, args)
        }
        interpreter_builder.set_grid_dim(*grid)
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    interpreter_builder.set_grid_idx(x, y, z)
                    try:
                        program(**call_args)
                    except Exception as error:
                        raise TritonKernelError(
                            f"Triton kernel '{name}' failed on mydev in program ({x}, {y}, {z}) of grid "
                            f"{tuple(grid)}: {type(error).__name__}: {error}"
                        ) from error
