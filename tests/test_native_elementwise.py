"""The device's own elementwise kernels (csrc/aten/native_elementwise.h): add,
sub, mul, true div, neg and relu over dense tensors of one dtype, and rsqrt
and pow(x, 2) over floating ones, run without
ATen's CPU kernels, and compute bit for bit what the CPU computes. Every
call that does not qualify (strided, broadcast, mixed dtypes, alpha != 1,
rounding modes, host tensors) runs ATen's kernel as before: same values,
same errors. ``native_elementwise_launches`` tells which path a call took."""

import pytest
import torch

from mydev_testing import assert_device_still_usable, needs_two_devices, run_python

debug = torch.mydev._debug

SIZES = [0, 1, 7, 4096, 100003]
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]
_BITS = {torch.float32: torch.int32, torch.float64: torch.int64}


def assert_bitwise_equal(actual, expected):
    """Same dtype, shape, strides and bits (-0.0 is not 0.0, NaNs match by
    payload): what ATen's CPU kernel writes, element by element."""
    assert actual.device.type == "mydev"
    actual = actual.cpu()
    assert (actual.dtype, actual.shape, actual.stride()) == (expected.dtype, expected.shape, expected.stride())
    bits = _BITS.get(expected.dtype)
    if bits is None:
        assert torch.equal(actual, expected)
    else:
        assert torch.equal(actual.view(bits), expected.view(bits))


def native_launches(fn, *args):
    """Runs ``fn(*args)`` and returns (its result, native kernels it launched)."""
    debug.reset_native_elementwise_launches()
    result = fn(*args)
    return result, debug.native_elementwise_launches()


def device_input(n, dtype, seed=0, low=-100, high=100):
    """An input made on the device (and its CPU copy), with values that
    exercise rounding: random floats, or integers in [low, high)."""
    torch.manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(n, device="mydev", dtype=dtype) * 3
    else:
        x = torch.randint(low, high, (n,), device="mydev", dtype=dtype)
    return x, x.cpu()


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op", BINARY)
def test_binary_tensor_tensor(op, size, dtype):
    x, x_cpu = device_input(size, dtype, seed=1)
    y, y_cpu = device_input(size, dtype, seed=2, low=1, high=50)  # no division by 0
    out, launches = native_launches(BINARY[op], x, y)
    assert_bitwise_equal(out, BINARY[op](x_cpu, y_cpu))
    # True division of integers has a floating result: ATen's kernel. An
    # empty result launches nothing.
    assert launches == (0 if size == 0 or (op == "div" and not dtype.is_floating_point) else 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", [1, 7, 4096, 100003])
@pytest.mark.parametrize("op", BINARY)
def test_binary_with_a_python_scalar(op, size, dtype):
    # A double scalar with a float tensor computes in float (the scalar is
    # rounded to float first), as ATen's CPU kernel does; 3.0 and 1.0001 are
    # not exact in float32, so a kernel computing in double would differ.
    x, x_cpu = device_input(size, dtype, seed=3)
    for scalar in (1.0001, 3.0, 7) if dtype.is_floating_point else (7, -3):
        for fn in (
            lambda t, s=scalar: BINARY[op](t, s),
            lambda t, s=scalar: BINARY[op](s, t.abs() + 1),  # reflected: 3.0 - x, 7 / x
        ):
            out, launches = native_launches(fn, x)
            assert_bitwise_equal(out, fn(x_cpu))
            if dtype.is_floating_point or op != "div":
                assert launches >= 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unary_ops_keep_special_values(dtype):
    if dtype.is_floating_point:
        special = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), -1.5, 2.5], dtype=dtype)
    else:
        info = torch.iinfo(dtype)
        special = torch.tensor([0, -1, 1, info.min, info.max], dtype=dtype)
    x = special.to("mydev")
    for fn in (torch.neg, torch.relu, lambda t: t.clone().neg_(), lambda t: t.clone().relu_()):
        out, launches = native_launches(fn, x)
        assert_bitwise_equal(out, fn(special))
        assert launches == 1


FLOATING_UNARY = {
    "rsqrt": torch.rsqrt,
    "pow 2": lambda t: t.pow(2),
    "** 2.0": lambda t: t**2.0,
    "rsqrt_": lambda t: t.clone().rsqrt_(),
    "pow_ 2": lambda t: t.clone().pow_(2),
    "pow out=": lambda t: torch.pow(t, 2, out=torch.empty_like(t)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("size", [1, 7, 4096, 100003])
def test_rsqrt_and_square_compute_the_cpus_bits(size, dtype):
    # A square root's NaN for a negative input, signed zeros, infinities,
    # subnormals and overflow to inf: ATen's values, bit for bit.
    x, x_cpu = device_input(size, dtype, seed=5)
    special = torch.tensor(
        [0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), -1.5, 2.5, 1e-40, 1e38],
        dtype=dtype,
        device="mydev",
    )
    for t in (x, x.abs(), special):
        for fn in FLOATING_UNARY.values():
            out, launches = native_launches(fn, t)
            assert_bitwise_equal(out, fn(t.cpu()))
            assert launches == 1


def test_other_powers_and_integer_inputs_stay_with_aten():
    # pow calls ATen's pow for exponents other than 2 (0.5 and -1 are
    # sqrt and reciprocal there, whose NaNs differ); integers promote
    # (rsqrt) or run ATen's integer loop (pow). sqrt is ATen's: its NaN for
    # a negative input is positive, the processor's negative.
    x, x_cpu = device_input(4099, torch.float32, seed=6)
    for fn in (lambda t: t.pow(3), lambda t: t.pow(0.5), lambda t: t.pow(-1), lambda t: t.pow(2.5), torch.sqrt):
        out, launches = native_launches(fn, x)
        assert_bitwise_equal(out, fn(x_cpu))
        assert launches == 0
    n, n_cpu = device_input(33, torch.int64, seed=7)
    for fn in (lambda t: t.pow(2), torch.rsqrt):
        out, launches = native_launches(fn, n)
        assert_bitwise_equal(out, fn(n_cpu))
        assert launches == 0


def test_integer_overflow_wraps_as_on_the_cpu():
    for dtype in (torch.int32, torch.int64):
        big = torch.full((9,), torch.iinfo(dtype).max // 3, dtype=dtype, device="mydev")
        for fn in (lambda t: t * 5, lambda t: t + t * 4, lambda t: -(t * 7) - t, lambda t: t + 2**40):
            out, launches = native_launches(fn, big)
            assert_bitwise_equal(out, fn(big.cpu()))
            assert launches >= 1


def test_in_place_and_out_forms_including_aliasing():
    x, x_cpu = device_input(4099, torch.float32, seed=4)
    y, y_cpu = device_input(4099, torch.float32, seed=5)
    cases = [
        lambda a, b, o: a.clone().add_(b),
        lambda a, b, o: a.clone().sub_(1.5),
        lambda a, b, o: a.clone().mul_(b),
        lambda a, b, o: a.clone().div_(b),
        lambda a, b, o: torch.add(a, b, out=o),
        lambda a, b, o: torch.sub(a, 0.25, out=o),
        lambda a, b, o: torch.mul(a, b, out=o),
        lambda a, b, o: torch.div(a, 3.0, out=o),
        lambda a, b, o: torch.neg(a, out=o),
        # out= and in-place where the output is an input
        lambda a, b, o: (lambda c: torch.mul(c, b, out=c))(a.clone()),
        lambda a, b, o: (lambda c: torch.add(b, c, out=c))(a.clone()),
        lambda a, b, o: (lambda c: c.mul_(c))(a.clone()),
        lambda a, b, o: (lambda c: torch.add(c, c, out=c))(a.clone()),
    ]
    for i, fn in enumerate(cases):
        out = torch.empty(4099, device="mydev")
        result, launches = native_launches(fn, x, y, out)
        assert_bitwise_equal(result, fn(x_cpu, y_cpu, torch.empty(4099)))
        assert launches == 1, i
        if 4 <= i <= 8:  # the out= cases write the given tensor
            assert result.data_ptr() == out.data_ptr()


def test_alpha_and_rounding_modes_stay_with_aten():
    # alpha != 1: ATen uses a fused multiply-add where the CPU has one.
    x, x_cpu = device_input(4096, torch.float32, seed=6)
    y, y_cpu = device_input(4096, torch.float32, seed=7)
    for fn, native in (
        (lambda a, b: torch.add(a, b, alpha=1), 1),
        (lambda a, b: torch.sub(a, b, alpha=1.0), 1),
        (lambda a, b: torch.add(a, b, alpha=2.5), 0),
        (lambda a, b: torch.sub(a, b, alpha=-3), 0),
        (lambda a, b: torch.div(a, b, rounding_mode="floor"), 0),
        (lambda a, b: torch.div(a, b, rounding_mode="trunc"), 0),
    ):
        out, launches = native_launches(fn, x, y)
        assert_bitwise_equal(out, fn(x_cpu, y_cpu))
        assert launches == native


def test_type_promotion_takes_aten_or_promotes_correctly():
    xi, xi_cpu = device_input(1000, torch.int32, seed=8)
    xf, xf_cpu = device_input(1000, torch.float32, seed=9)
    xd, xd_cpu = device_input(1000, torch.float64, seed=10)
    for fn, native in (
        (lambda i, f, d: i * 2.5, 0),  # int tensor, float scalar: a float result
        (lambda i, f, d: i / 2, 0),  # true division of integers
        (lambda i, f, d: i + True, 1),  # a bool scalar does not promote
        (lambda i, f, d: f * d, 0),  # float32 with float64: a float64 result
        (lambda i, f, d: f + i, 0),
        (lambda i, f, d: d * 1.0001, 1),
        (lambda i, f, d: f * 2, 1),  # an int scalar with a float tensor
        (lambda i, f, d: f * torch.tensor(2.5, dtype=torch.float64), 0),  # a 0-dim CPU tensor the user holds
        (lambda i, f, d: f * 1e300, 1),  # the scalar rounds to inf in float32
    ):
        out, launches = native_launches(fn, xi, xf, xd)
        assert_bitwise_equal(out, fn(xi_cpu, xf_cpu, xd_cpu))
        assert launches == native


def test_strided_broadcast_and_dense_layouts():
    base = torch.randn(48, 48, device="mydev")
    other = torch.randn(48, 48, device="mydev")
    b, o = base.cpu(), other.cpu()
    for fn, native in (
        (lambda a, c: a[:, ::2] * 2.0, 0),  # not dense
        (lambda a, c: a[::2] + c[::2], 0),
        (lambda a, c: a + c[:1], 0),  # broadcast
        (lambda a, c: a + c[0, 0], 0),  # a 0-dim device tensor broadcasts
        (lambda a, c: a.t() * c.t(), 1),  # dense, the same strides: one walk
        (lambda a, c: a.t() * c, 0),  # dense, different strides
        (lambda a, c: a.view(4, 12, 6, 8).to(memory_format=torch.channels_last) - 1.0, 1),
        (lambda a, c: a.t().neg(), 1),
        # torch resolves the negative bit into a fresh tensor before the op
        # reaches mydev; the mul then qualifies.
        (lambda a, c: torch._neg_view(a) * 2.0, 1),
    ):
        out, launches = native_launches(fn, base, other)
        assert_bitwise_equal(out, fn(b, o))
        assert launches == native


def _error_of(fn):
    try:
        fn()
        torch.mydev.synchronize()
    except Exception as error:  # compared by type and message below
        return type(error), str(error)
    return None


def test_bad_input_raises_the_cpu_errors():
    x, y = torch.randn(3, device="mydev"), torch.randn(4, device="mydev")
    assert _error_of(lambda: x + y) == _error_of(lambda: x.cpu() + y.cpu())
    assert _error_of(lambda: x.mul_(y)) == _error_of(lambda: x.cpu().mul_(y.cpu()))
    # An output partly overlapping an input: refused at the call, as on the
    # CPU and cuda (the Meta kernel's overlap check, run on meta tensors
    # sharing memory as these do), before any kernel is launched.
    z = torch.randn(8, device="mydev")
    z_cpu = z.cpu()
    (type_, message), launches = native_launches(_error_of, lambda: torch.add(z[:-1], 1.0, out=z[1:]))
    assert launches == 0
    assert (type_, message) == _error_of(lambda: torch.add(z_cpu[:-1], 1.0, out=z_cpu[1:]))
    torch.mydev.synchronize()
    assert torch.equal(z.cpu(), z_cpu)
    host = torch.randn(3)
    type_, message = _error_of(lambda: x * host)
    assert type_ is RuntimeError and "Expected all tensors to be on the same device" in message
    assert_device_still_usable()


@needs_two_devices
def test_mixed_devices_raise_cudas_error():
    x, y = torch.randn(3, device="mydev:0"), torch.randn(3, device="mydev:1")
    with pytest.raises(RuntimeError) as error:
        x + y
    assert str(error.value).startswith(
        "Expected all tensors to be on the same device, but found at least two devices, mydev:0 and mydev:1!"
    )
    assert_device_still_usable()


def test_autograd_through_native_kernels():
    x = torch.randn(100, device="mydev", requires_grad=True)
    x_cpu = x.detach().cpu().requires_grad_()
    for t in (x, x_cpu):
        ((t * 1.5 - 2.0) / 3.0 + t.neg().relu()).sum().backward()
    assert_bitwise_equal(x.grad, x_cpu.grad)


def _chain(x, y, out):
    for i in range(10):
        x = x * 1.0001
        x = x + float(i % 3)
    x = (x - y) / (y.abs() + 1)
    x.mul_(2.0).relu_()
    torch.neg(x, out=out)
    return out.add_(y)


def test_captured_chain_replays_native_kernels():
    x, x_cpu = device_input(4096, torch.float32, seed=11)
    y, y_cpu = device_input(4096, torch.float32, seed=12)
    out = torch.empty(4096, device="mydev")
    graph = torch.mydev.MydevGraph()
    debug.reset_native_elementwise_launches()
    with torch.mydev.graph(graph):
        result = _chain(x, y, out)
    captured = debug.native_elementwise_launches()
    assert captured == 27  # every op of the chain (the abs is ATen's)
    for seed in (13, 14):
        x.copy_(torch.randn(4096, device="mydev", generator=torch.Generator("mydev").manual_seed(seed)))
        graph.replay()
        assert_bitwise_equal(result, _chain(x.cpu(), y_cpu, torch.empty(4096)))
    assert debug.native_elementwise_launches() == captured  # a replay launches nothing on the host


def test_profiler_names_native_kernels_after_their_op():
    x = torch.randn(64, device="mydev")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        (x * 2.0 + 1.0).neg()
        torch.mydev.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert {"aten::mul", "aten::add", "aten::neg"} <= set(names), names


def test_graph_of_elementwise_ops_as_a_user_script():
    result = run_python(
        """
        import torch
        x = torch.randn(4096, device="mydev")
        y = torch.rand(4096, device="mydev") + 1
        g = torch.mydev.MydevGraph()
        with torch.mydev.graph(g):
            z = x
            for i in range(25):
                z = z * 1.0001
                z = z + float(i % 3)
            z = (z - y) / y
            z.neg_().relu_()
            w = torch.rsqrt(y.pow(2) + 1.0)
        for _ in range(2):
            x.copy_(torch.randn(4096, device="mydev"))
            g.replay()
            ref = x.cpu()
            for i in range(25):
                ref = ref * 1.0001
                ref = ref + float(i % 3)
            ref = ((ref - y.cpu()) / y.cpu()).neg_().relu_()
            print(torch.equal(z.cpu().view(torch.int32), ref.view(torch.int32)))
        y.copy_(torch.rand(4096, device="mydev") + 1)
        g.replay()
        ref = torch.rsqrt(y.cpu().pow(2) + 1.0)
        print(torch.equal(w.cpu().view(torch.int32), ref.view(torch.int32)))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]
