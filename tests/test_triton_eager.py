"""@triton.jit kernels in eager mode on mydev, through the mydev Triton backend
plugin (device_ext/triton_backend), checked against the same math in PyTorch
on CPU."""

import importlib.util
import os
import threading

import pytest
import torch

from mydev_testing import assert_device_still_usable, hold_stream, needs_two_devices, release_from_another_thread

triton = pytest.importorskip("triton", reason="triton is not installed: the mydev Triton backend is optional")

import triton.language as tl  # noqa: E402
from torch._inductor.runtime import triton_helpers  # noqa: E402
from torch._inductor.runtime.triton_helpers import libdevice as inductor_libdevice  # noqa: E402
from torch._inductor.runtime.triton_helpers import math as tl_math  # noqa: E402
from triton.backends import Backend, backends  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.driver import DriverBase  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402
from triton.language.extra.cuda import libdevice as cuda_libdevice  # noqa: E402
from triton.runtime.driver import _create_driver  # noqa: E402
from triton.runtime.driver import driver as driver_config  # noqa: E402

from device_ext import _C  # noqa: E402
from device_ext.triton_backend import executor  # noqa: E402
from device_ext.triton_backend.compiler import MydevBackend  # noqa: E402
from device_ext.triton_backend.driver import MydevDriver, activated  # noqa: E402
from device_ext.triton_backend.target import target_of  # noqa: E402

# An install made before setup.py declared the `triton.backends` entry point
# does not have it yet; Triton's discovery is a dict, fill it the same way.
if "mydev" not in backends:
    backends["mydev"] = Backend(compiler=MydevBackend, driver=MydevDriver)

pytestmark = pytest.mark.skipif(
    not MydevDriver.is_active(), reason="another Triton driver (a GPU) is active on this host"
)


# ---------------------------------------------------------------- kernels --


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def scale_2d_kernel(
    x_ptr,
    out_ptr,
    rows,
    cols,
    stride_xr,
    stride_xc,
    stride_or,
    stride_oc,
    scale,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * stride_xr + c * stride_xc, mask=mask)
    tl.store(out_ptr + r * stride_or + c * stride_oc, x * scale, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * stride + offsets, mask=mask, other=-float("inf"))
    shifted = x - tl.max(x, axis=0)
    numerator = tl.exp(shifted)
    tl.store(out_ptr + row * stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        rk = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        accumulator += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], accumulator, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def sum_atomic_kernel(x_ptr, total_ptr, count_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))
    tl.atomic_add(count_ptr + tl.zeros_like(offsets), 1, mask=mask)


@triton.jit
def convert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * 2 + 1, mask=mask)


@triton.jit
def program_ids_kernel(out_ptr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    index = (x * tl.num_programs(1) + y) * tl.num_programs(2) + z
    tl.store(out_ptr + index, x * 100 + y * 10 + z)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def unmasked_copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


@triton.jit
def exp_fp16_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, libdevice.exp(tl.load(x_ptr + offsets)))


@triton.jit
def _square(x):
    return x * x


@triton.jit
def helper_call_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, _square(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def autotuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.cumsum(tl.load(x_ptr + offsets), axis=0))


@triton.jit
def inductor_style_kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    # What Inductor's generated kernels look like: its helpers and both
    # libdevice modules.
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + (xindex), xmask)
    tmp1 = triton_helpers.maximum(inductor_libdevice.tanh(tmp0), 0.0)
    tmp2 = tl_math.exp(tmp1) + cuda_libdevice.erf(tmp0)
    tl.store(out_ptr0 + (xindex), tmp2, xmask)


def add(x, y, out, block=128):
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
    return out


# ------------------------------------------------------------ basic paths --


def test_vector_add_with_mask():
    x, y = torch.randn(1000), torch.randn(1000)
    out = add(x.to("mydev"), y.to("mydev"), torch.empty(1000, device="mydev"))
    torch.testing.assert_close(out.cpu(), x + y)


def test_the_jit_compiles_for_the_mydev_target():
    x = torch.randn(10, device="mydev")
    kernel = add_kernel[(1,)](x, x, torch.empty_like(x), 10, BLOCK=16)
    assert kernel.metadata.target == target_of(0)
    assert kernel.metadata.target.backend == "mydev"
    assert "tt.func" in kernel.asm["ttir"]


def test_inductor_style_compile_and_launch():
    """What Inductor does: triton.compile(ASTSource, target=, options=) and
    CompiledKernel.run with the launcher's full signature, launch hooks too."""
    target = GPUTarget("mydev", target_of(0).arch, 32)
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    source = ASTSource(add_kernel, signature, constexprs={(4,): 64})
    binary = triton.compile(
        source, target=target, options={"num_warps": 4, "num_stages": 1, "debug": False, "sanitize_overflow": False}
    )
    x, y = torch.randn(200, device="mydev"), torch.randn(200, device="mydev")
    out = torch.zeros(200, device="mydev")
    calls = []
    binary.run(
        4,
        1,
        1,
        _C._current_raw_stream(0),
        binary.function,
        binary.packed_metadata,
        "metadata",
        lambda metadata: calls.append(("enter", metadata)),
        lambda metadata: calls.append(("exit", metadata)),
        x,
        y,
        out,
        200,
        64,
    )
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu())
    assert calls == [("enter", "metadata"), ("exit", "metadata")]


def test_2d_grid_over_non_contiguous_tensors():
    base = torch.randn(40, 70)
    x = base.to("mydev").t()  # 70 x 40, strides (1, 70)
    out_storage = torch.zeros(70, 80, device="mydev")
    out = out_storage[:, ::2]  # 70 x 40, strides (80, 2)
    grid = (triton.cdiv(70, 16), triton.cdiv(40, 8))
    scale_2d_kernel[grid](x, out, 70, 40, *x.stride(), *out.stride(), 3.0, BLOCK_R=16, BLOCK_C=8)
    torch.testing.assert_close(out.cpu(), base.t() * 3.0)
    assert torch.count_nonzero(out_storage[:, 1::2].cpu()) == 0


def test_three_grid_axes_and_num_programs():
    out = torch.full((2 * 3 * 4,), -1, dtype=torch.int32, device="mydev")
    program_ids_kernel[(2, 3, 4)](out)
    expected = torch.tensor(
        [x * 100 + y * 10 + z for x in range(2) for y in range(3) for z in range(4)], dtype=torch.int32
    )
    assert torch.equal(out.cpu(), expected)


def test_rowwise_softmax_with_max_and_sum():
    x = torch.randn(6, 50)
    out = torch.empty(6, 50, device="mydev")
    softmax_kernel[(6,)](x.to("mydev"), out, 50, 50, BLOCK=64)
    torch.testing.assert_close(out.cpu(), torch.softmax(x, dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dot_matmul(dtype):
    a, b = torch.randn(40, 24, dtype=dtype), torch.randn(24, 36, dtype=dtype)
    c = torch.empty(40, 36, device="mydev")
    matmul_kernel[(triton.cdiv(40, 16), triton.cdiv(36, 16))](
        a.to("mydev"), b.to("mydev"), c, 40, 36, 24, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16
    )
    torch.testing.assert_close(c.cpu(), a.float() @ b.float(), rtol=1e-4, atol=1e-4)


def test_scan():
    x = torch.randn(64)
    out = torch.empty(64, device="mydev")
    cumsum_kernel[(1,)](x.to("mydev"), out, BLOCK=64)
    torch.testing.assert_close(out.cpu(), x.cumsum(0), rtol=1e-5, atol=1e-5)


def test_inductor_style_kernel_with_its_helpers():
    x = torch.randn(100)
    out = torch.empty(100, device="mydev")
    inductor_style_kernel[(4,)](x.to("mydev"), out, 100, XBLOCK=32)
    torch.testing.assert_close(out.cpu(), torch.exp(torch.tanh(x).clamp(min=0)) + torch.erf(x))


def test_reinterpreted_tensor_arguments():
    x = torch.randint(-1000, 1000, (64,), dtype=torch.int32, device="mydev")
    out = torch.empty(64, device="mydev")
    copy_kernel[(1,)](triton.reinterpret(x, tl.float32), out, 64, BLOCK=64)
    assert torch.equal(out.cpu().view(torch.int32), x.cpu())


def test_atomic_add_across_programs():
    x = torch.randn(1000)
    total = torch.zeros(1, device="mydev")
    count = torch.zeros(1, dtype=torch.int32, device="mydev")
    sum_atomic_kernel[(triton.cdiv(1000, 128),)](x.to("mydev"), total, count, 1000, BLOCK=128)
    torch.testing.assert_close(total.cpu(), x.sum().reshape(1), rtol=1e-4, atol=1e-4)
    assert count.item() == 1000


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
)
def test_loads_and_stores_per_dtype(dtype):
    x = (torch.randn(300) * 10).to(dtype)
    out = torch.empty(300, dtype=dtype, device="mydev")
    convert_kernel[(3,)](x.to("mydev"), out, 300, BLOCK=128)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), x * 2 + 1)


def test_constexpr_specializations_and_jit_helpers():
    x = torch.randn(100)
    for block in (16, 64):
        out = torch.empty(100, device="mydev")
        helper_call_kernel[(triton.cdiv(100, block),)](x.to("mydev"), out, 100, BLOCK=block)
        torch.testing.assert_close(out.cpu(), x * x)
    assert len(helper_call_kernel.device_caches[0][0]) == 2  # one compiled kernel per BLOCK


def test_autotune_picks_a_config_and_computes():
    x, y = torch.randn(500), torch.randn(500)
    out = torch.empty(500, device="mydev")
    autotuned_add_kernel[lambda meta: (triton.cdiv(500, meta["BLOCK"]),)](x.to("mydev"), y.to("mydev"), out, 500)
    torch.testing.assert_close(out.cpu(), x + y)
    assert autotuned_add_kernel.best_config.kwargs["BLOCK"] in (32, 128)


@needs_two_devices
def test_kernel_on_the_second_device():
    x, y = torch.randn(100), torch.randn(100)
    with torch.mydev.device(1):
        out = add(x.to("mydev:1"), y.to("mydev:1"), torch.empty(100, device="mydev:1"))
    assert out.device == torch.device("mydev:1")
    torch.testing.assert_close(out.cpu(), x + y)


# ------------------------------------------------------------- libdevice --

# name -> (torch reference on float64, low, high) for the float32 inputs.
UNARY = {
    "exp": (torch.exp, -5, 5),
    "exp2": (torch.exp2, -5, 5),
    "exp10": (lambda x: torch.pow(10.0, x), -3, 3),
    "log": (torch.log, 0.1, 10),
    "log2": (torch.log2, 0.1, 10),
    "log10": (torch.log10, 0.1, 10),
    "log1p": (torch.log1p, -0.5, 5),
    "expm1": (torch.expm1, -2, 2),
    "sqrt": (torch.sqrt, 0, 10),
    "rsqrt": (torch.rsqrt, 0.1, 10),
    "cbrt": (lambda x: x.sign() * x.abs() ** (1 / 3), -8, 8),
    "sin": (torch.sin, -4, 4),
    "cos": (torch.cos, -4, 4),
    "tan": (torch.tan, -1.2, 1.2),
    "asin": (torch.asin, -0.95, 0.95),
    "acos": (torch.acos, -0.95, 0.95),
    "atan": (torch.atan, -5, 5),
    "sinh": (torch.sinh, -3, 3),
    "cosh": (torch.cosh, -3, 3),
    "tanh": (torch.tanh, -3, 3),
    "asinh": (torch.asinh, -5, 5),
    "acosh": (torch.acosh, 1.01, 5),
    "atanh": (torch.atanh, -0.95, 0.95),
    "floor": (torch.floor, -5, 5),
    "ceil": (torch.ceil, -5, 5),
    "trunc": (torch.trunc, -5, 5),
    "round": (lambda x: x.sign() * torch.floor(x.abs() + 0.5), -5, 5),
    "rint": (torch.round, -5, 5),
    "nearbyint": (torch.round, -5, 5),
    "erf": (torch.erf, -3, 3),
    "erfc": (torch.erfc, -3, 3),
    "erfinv": (torch.erfinv, -0.95, 0.95),
    "lgamma": (torch.lgamma, 0.1, 6),
    "fast_tanhf": (torch.tanh, -3, 3),
    "abs": (torch.abs, -5, 5),
}
BINARY = {
    "pow": (torch.pow, (0.5, 3), (-2, 2)),
    "atan2": (torch.atan2, (-3, 3), (-3, 3)),
    "fmod": (torch.fmod, (-10, 10), (0.5, 3)),
    "copysign": (torch.copysign, (-3, 3), (-3, 3)),
    "hypot": (torch.hypot, (-3, 3), (-3, 3)),
    "fmin": (torch.fmin, (-3, 3), (-3, 3)),
    "fmax": (torch.fmax, (-3, 3), (-3, 3)),
    "nextafter": (torch.nextafter, (-3, 3), (-3, 3)),
}
# name -> (output dtype, reference) for functions of special values.
CLASSIFY = {
    "isnan": (torch.int8, lambda x: torch.isnan(x).to(torch.int8)),
    "isinf": (torch.int8, lambda x: torch.isinf(x).to(torch.int8)),
    "signbit": (torch.int32, lambda x: torch.signbit(x).to(torch.int32)),
    "ilogb": (
        torch.int32,
        lambda x: torch.where(x == 0, torch.iinfo(torch.int32).min, torch.frexp(x).exponent - 1).to(torch.int32),
    ),
    "llrint": (torch.int64, lambda x: torch.round(x).to(torch.int64)),
}

_GENERATED_HEADER = """
import triton
import triton.language as tl
from triton.language.extra import libdevice
"""

_UNARY_TEMPLATE = """
@triton.jit
def {name}_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, libdevice.{name}(tl.load(x_ptr + offsets, mask=mask)), mask=mask)
"""

_BINARY_TEMPLATE = """
@triton.jit
def {name}_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, libdevice.{name}(x, y), mask=mask)
"""

_EXTRA_KERNELS = """
@triton.jit
def powi_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, libdevice.pow(x, tl.load(y_ptr + offsets, mask=mask)), mask=mask)


@triton.jit
def ldexp_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, libdevice.ldexp(x, tl.load(y_ptr + offsets, mask=mask)), mask=mask)


@triton.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, libdevice.fma(x, y, tl.load(z_ptr + offsets, mask=mask)), mask=mask)
"""


@pytest.fixture(scope="module")
def math_kernels(tmp_path_factory):
    """One kernel per libdevice function, in a generated module (@triton.jit
    needs the source in a file)."""
    parts = [_GENERATED_HEADER, _EXTRA_KERNELS]
    parts += [_UNARY_TEMPLATE.format(name=name) for name in [*UNARY, *CLASSIFY]]
    parts += [_BINARY_TEMPLATE.format(name=name) for name in BINARY]
    path = tmp_path_factory.mktemp("triton_math") / "mydev_math_kernels.py"
    path.write_text("\n".join(parts))
    spec = importlib.util.spec_from_file_location("mydev_math_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _uniform(low, high, n=257, dtype=torch.float32):
    return (torch.rand(n, dtype=torch.float64) * (high - low) + low).to(dtype)


def _run(kernel, *inputs, out_dtype=torch.float32):
    n = inputs[0].numel()
    out = torch.empty(n, dtype=out_dtype, device="mydev")
    kernel[(triton.cdiv(n, 128),)](*[x.to("mydev") for x in inputs], out, n, BLOCK=128)
    return out.cpu()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_libdevice_unary(math_kernels, name):
    reference, low, high = UNARY[name]
    x = _uniform(low, high)
    if name in ("round", "rint", "nearbyint"):
        x[:8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -3.5])
    expected = reference(x.double()).float()
    torch.testing.assert_close(_run(getattr(math_kernels, f"{name}_kernel"), x), expected, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["exp", "erf", "lgamma", "sqrt"])
def test_libdevice_float64(math_kernels, name):
    reference, low, high = UNARY[name]
    x = _uniform(low, high, dtype=torch.float64)
    torch.testing.assert_close(_run(getattr(math_kernels, f"{name}_kernel"), x, out_dtype=torch.float64), reference(x))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_libdevice_binary(math_kernels, name):
    reference, (x_low, x_high), (y_low, y_high) = BINARY[name]
    x, y = _uniform(x_low, x_high), _uniform(y_low, y_high)
    expected = reference(x.double(), y.double()).float()
    if name == "nextafter":  # one float32 step, not a float64 one
        expected = reference(x, y)
    torch.testing.assert_close(_run(getattr(math_kernels, f"{name}_kernel"), x, y), expected, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CLASSIFY))
def test_libdevice_classification(math_kernels, name):
    out_dtype, reference = CLASSIFY[name]
    x = torch.tensor(
        [
            0.0,
            -0.0,
            1.0,
            -2.5,
            3.5,
            2.5,
            1e-30,
            -7e20,
            float("inf"),
            float("-inf"),
            float("nan"),
            0.75,
            -0.75,
            1024.0,
            5e-39,
            100.5,
        ]
    )
    if name == "ilogb" or name == "llrint":
        x = x[torch.isfinite(x)]
    assert torch.equal(_run(getattr(math_kernels, f"{name}_kernel"), x, out_dtype=out_dtype), reference(x))


def test_libdevice_integer_exponent_ldexp_and_fma(math_kernels):
    x, z = _uniform(-3, 3), _uniform(-3, 3)
    n = torch.randint(-4, 5, (x.numel(),), dtype=torch.int32)
    torch.testing.assert_close(_run(math_kernels.powi_kernel, x, n), torch.pow(x.double(), n).float())
    torch.testing.assert_close(_run(math_kernels.ldexp_kernel, x, n), torch.ldexp(x, n))
    n_out = x.numel()
    out = torch.empty(n_out, device="mydev")
    math_kernels.fma_kernel[(triton.cdiv(n_out, 128),)](
        x.to("mydev"), n.float().to("mydev"), z.to("mydev"), out, n_out, BLOCK=128
    )
    torch.testing.assert_close(out.cpu(), (x.double() * n.double() + z.double()).float())


def test_libdevice_with_a_type_it_does_not_take_fails_to_compile():
    x = torch.randn(16, dtype=torch.float16, device="mydev")
    with pytest.raises(triton.CompilationError, match=r"libdevice.exp takes \(fp32\) or \(fp64\), got \(fp16\)"):
        exp_fp16_kernel[(1,)](x, torch.empty_like(x), BLOCK=16)
    assert_device_still_usable()


# ----------------------------------------------------------- stream order --


def test_sees_asynchronous_eager_work_enqueued_before_it():
    x = torch.zeros(256, device="mydev")
    out = torch.empty(256, device="mydev")
    latch = hold_stream()  # the fill below is queued behind it when the launch is made
    x.fill_(3.0)
    release_from_another_thread(latch)  # a launch returns once its kernel ran
    copy_kernel[(2,)](x, out, 256, BLOCK=128)
    assert torch.equal(out.cpu(), torch.full((256,), 3.0))


def test_side_stream_order_and_events():
    side = torch.mydev.Stream()
    x = torch.randn(500, device="mydev")
    expected = x.cpu() * 2 + 1
    y = torch.ones(500, device="mydev")
    out = torch.empty(500, device="mydev")
    torch.mydev.current_stream().synchronize()
    with torch.mydev.stream(side):
        latch = hold_stream()
        x.mul_(2)  # eager op on the side stream, before the launch
        release_from_another_thread(latch)  # a launch returns once its kernel ran
        add(x, y, out)  # launched on the side stream
        after = torch.mydev.Event()
        after.record()
        doubled = out * 2  # enqueued after the launch: sees its result
    after.synchronize()
    torch.testing.assert_close(out.cpu(), expected)
    side.synchronize()
    torch.testing.assert_close(doubled.cpu(), expected * 2)


def test_launches_from_two_threads_on_their_own_streams():
    results = {}

    def worker(index):
        stream = torch.mydev.Stream()
        with torch.mydev.stream(stream):
            x = torch.full((300,), float(index), device="mydev")
            results[index] = add(x, x, torch.empty_like(x)).cpu()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    for index in range(2):
        assert torch.equal(results[index], torch.full((300,), 2.0 * index))


def test_launch_blocking_mode(python_subprocess):
    result = python_subprocess(
        """
        import torch, triton, triton.language as tl
        from triton.backends import Backend, backends
        from device_ext.triton_backend.compiler import MydevBackend
        from device_ext.triton_backend.driver import MydevDriver
        backends.setdefault("mydev", Backend(MydevBackend, MydevDriver))
        import test_triton_eager as t
        assert torch.mydev.is_launch_blocking()
        x = torch.arange(300, dtype=torch.float32, device="mydev")
        out = t.add(x, x, torch.empty_like(x))
        assert torch.equal(out.cpu(), torch.arange(300, dtype=torch.float32) * 2)
        print("ok")
    """,
        env={"MYDEV_LAUNCH_BLOCKING": "1", "PYTHONPATH": _tests_pythonpath()},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def _tests_pythonpath():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.pathsep.join([here, os.path.dirname(here), os.environ.get("PYTHONPATH", "")])


# --------------------------------------------------------------- no copies --


def test_writes_in_place_without_allocating():
    x = torch.randn(1024, device="mydev")
    y = torch.randn(1024, device="mydev")
    out_base = torch.zeros(2048, device="mydev")
    out = out_base[1024:]  # the kernel writes into a view of the caller's tensor
    add(x, y, out)  # compile outside the measurement
    torch.mydev.synchronize()
    before = torch.mydev.memory_stats()
    pointer = out.data_ptr()
    add(x, y, out)
    torch.mydev.synchronize()
    after = torch.mydev.memory_stats()
    assert after["allocation.all.allocated"] == before["allocation.all.allocated"]
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert out.data_ptr() == pointer
    torch.testing.assert_close(out_base.cpu()[1024:], x.cpu() + y.cpu())
    assert torch.count_nonzero(out_base.cpu()[:1024]) == 0


# -------------------------------------------------------------- bad input --


def test_a_cpu_tensor_is_refused_clearly():
    x = torch.randn(64, device="mydev")
    with pytest.raises(ValueError, match=r"argument 'y_ptr' is a cpu tensor, but the kernel runs on mydev:0"):
        add_kernel[(1,)](x, torch.randn(64), torch.empty_like(x), 64, BLOCK=64)
    assert_device_still_usable()


@needs_two_devices
def test_a_tensor_of_another_device_is_refused_clearly():
    x = torch.randn(64, device="mydev:1")
    with pytest.raises(ValueError, match=r"'x_ptr' is on mydev:1, but the kernel runs on mydev:0"):
        add_kernel[(1,)](x, x, x, 64, BLOCK=64)
    assert_device_still_usable()


def test_an_out_of_bounds_access_fails_the_kernel_and_the_process_goes_on():
    x = torch.randn(100, device="mydev")
    out = torch.zeros(100, device="mydev")
    with pytest.raises(
        executor.TritonKernelError,
        match=r"'unmasked_copy_kernel' failed on mydev in program \(0, 0, 0\).*"
        r"outside every tensor argument.*missing mask",
    ):
        unmasked_copy_kernel[(1,)](x, out, BLOCK=128)  # 128 > 100 elements
    assert torch.count_nonzero(out.cpu()) == 0  # nothing was stored
    torch.mydev.synchronize()
    assert_device_still_usable()
    torch.testing.assert_close(add(x, x, out).cpu(), x.cpu() * 2)


def test_an_error_raised_inside_the_kernel_leaves_the_stream_usable():
    side = torch.mydev.Stream()
    x = torch.randn(64, device="mydev")
    with torch.mydev.stream(side):
        with pytest.raises(executor.TritonKernelError, match="unmasked_copy_kernel"):
            unmasked_copy_kernel[(2,)](x, torch.empty_like(x), BLOCK=64)
        out = add(x, x, torch.empty_like(x))
        side.synchronize()
    torch.testing.assert_close(out.cpu(), x.cpu() * 2)


# ---------------------------------------------------- drivers of others --


class _OtherGpuDriver(DriverBase):
    """Stands for a GPU's driver that is active on its host."""

    @staticmethod
    def is_active():
        return True

    def map_python_to_cpp_type(self, ty):
        return "void*"

    def get_current_target(self):
        return GPUTarget("othergpu", 0, 32)

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_benchmarker(self):
        return None


def test_mydev_is_the_active_driver_only_where_no_other_is(monkeypatch):
    assert not any(b.driver.is_active() for name, b in backends.items() if name != "mydev")
    assert MydevDriver.is_active()
    monkeypatch.setitem(backends, "othergpu", Backend(compiler=MydevBackend, driver=_OtherGpuDriver))
    monkeypatch.delenv("TRITON_DEFAULT_BACKEND", raising=False)
    assert not MydevDriver.is_active()
    assert isinstance(_create_driver(), _OtherGpuDriver)
    monkeypatch.setenv("TRITON_DEFAULT_BACKEND", "mydev")
    assert MydevDriver.is_active()


def test_activated_sets_the_mydev_driver_for_its_block_only(monkeypatch):
    other = _OtherGpuDriver()
    monkeypatch.setattr(driver_config, "_active", other)
    with activated() as driver:
        assert driver_config.active is driver
        assert isinstance(driver, MydevDriver)
        x = torch.randn(50, device="mydev")
        torch.testing.assert_close(add(x, x, torch.empty_like(x)).cpu(), x.cpu() * 2)
    assert driver_config.active is other


def test_other_targets_still_get_their_own_backend():
    from triton.compiler.compiler import make_backend

    assert type(make_backend(GPUTarget("cuda", 80, 32))).__name__ == "CUDABackend"
    assert isinstance(make_backend(GPUTarget("mydev", 10, 32)), MydevBackend)


@pytest.mark.parametrize("first", ["triton", "torch"])
def test_triton_discovers_the_backend_through_its_entry_point(python_subprocess, first):
    """Triton imports the plugin while it is itself still initialising; the
    entry point is simulated so that this holds before the install has it."""
    result = python_subprocess(f"""
        import importlib.metadata as metadata
        listed = metadata.entry_points

        class WithMydev:
            def select(self, **selection):
                found = list(listed(**selection))
                if selection.get("group") == "triton.backends" and "mydev" not in [e.name for e in found]:
                    found.append(metadata.EntryPoint("mydev", "device_ext.triton_backend", "triton.backends"))
                return found

        metadata.entry_points = lambda **selection: listed(**selection) if selection else WithMydev()
        import {first}
        import torch, triton
        from triton.backends import backends
        from triton.runtime.driver import driver
        assert backends["mydev"].compiler.__name__ == "MydevBackend", backends
        print(type(driver.active).__name__)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "MydevDriver"


# ------------------------------------------------------------ optionality --


def test_torch_and_mydev_work_without_triton(python_subprocess):
    result = python_subprocess("""
        import sys
        sys.modules["triton"] = None  # import triton raises ImportError
        import torch
        x = torch.randn(2, device="mydev")
        assert torch.equal((x + 1).cpu(), x.cpu() + 1)
        assert "device_ext.triton_backend" not in sys.modules
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_import_torch_does_not_import_triton(python_subprocess):
    result = python_subprocess("""
        import sys
        import torch
        print(sorted(name for name in sys.modules if name.startswith("triton") or "triton_backend" in name))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
