"""Copies that involve mydev (csrc/aten/copy.cpp): host to device, device to
host, within one device and between mydev:0 and mydev:1.

Every result is compared with the same copy done on CPU. Copies are exact,
so comparisons use rtol=0, atol=0.
"""

import math

import pytest
import torch

from mydev_testing import COMMON_DTYPES, hold_stream, release_from_another_thread, run_python

D0 = "mydev:0"
D1 = "mydev:1"

DTYPES = COMMON_DTYPES

# Where the source lives and where the destination lives.
DIRECTIONS = {
    "h2d": ("cpu", D0),
    "d2h": (D0, "cpu"),
    "d2d": (D0, D0),
    "xdev": (D0, D1),
}


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``actual`` holds exactly ``expected`` (same dtype, shape, values)."""
    assert expected.device.type == "cpu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def values(shape, dtype) -> torch.Tensor:
    """A CPU tensor of distinct, exactly representable values (as far as the
    dtype allows)."""
    n = math.prod(shape)
    t = torch.arange(n, dtype=torch.float64).remainder(120) + 1
    if dtype.is_complex:
        return torch.complex(t, -t / 4).to(dtype).reshape(shape)
    if dtype == torch.bool:
        return (t.remainder(3) != 0).reshape(shape)
    return t.to(dtype).reshape(shape)


# ---------------------------------------------------------------- layouts --
# Each layout turns a base tensor into a tensor of logical shape SHAPE. The
# base is built on CPU and moved as a whole, so the layout on both sides is
# the same; a destination's base is compared whole, which also checks that
# nothing outside the view was written.
SHAPE = (2, 3, 4, 5)

LAYOUTS = {
    "contiguous": ((2, 3, 4, 5), lambda t: t),
    "transpose": ((2, 3, 5, 4), lambda t: t.transpose(2, 3)),
    "step_slice": ((4, 3, 8, 5), lambda t: t[::2, :, ::2, :]),
    "narrow": ((2, 3, 4, 9), lambda t: t.narrow(3, 2, 5)),
    "permute": ((5, 2, 4, 3), lambda t: t.permute(1, 3, 2, 0)),
    "channels_last": ((2, 3, 4, 5), lambda t: t.contiguous(memory_format=torch.channels_last)),
    "as_strided_gaps": ((400,), lambda t: t.as_strided(SHAPE, (200, 60, 14, 2), 3)),
}


def on_device(base_cpu: torch.Tensor, device: str) -> torch.Tensor:
    if device == "cpu":
        return base_cpu.clone()
    return base_cpu.to(device)


def make_layout(name, device, dtype, fill):
    """(base, view) on ``device``; the base holds ``fill(base_shape)``."""
    base_shape, make_view = LAYOUTS[name]
    base = on_device(fill(base_shape, dtype), device)
    view = make_view(base)
    if name == "channels_last":
        base = view  # a dense tensor of its own, not a view
    return base, view


def sentinel(shape, dtype):
    if dtype == torch.bool:
        return torch.zeros(shape, dtype=dtype)
    return torch.full(shape, -7 if dtype not in (torch.uint8,) else 250, dtype=dtype)


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("src_layout", list(LAYOUTS))
@pytest.mark.parametrize("dst_layout", list(LAYOUTS))
def test_copy_layouts(direction, src_layout, dst_layout):
    src_dev, dst_dev = DIRECTIONS[direction]
    dtype = torch.float32
    _, src = make_layout(src_layout, src_dev, dtype, values)
    dst_base, dst = make_layout(dst_layout, dst_dev, dtype, sentinel)
    _, src_ref = make_layout(src_layout, "cpu", dtype, values)
    dst_base_ref, dst_ref = make_layout(dst_layout, "cpu", dtype, sentinel)
    # The layouts really are what the test claims on both sides.
    assert src.stride() == src_ref.stride() and dst.stride() == dst_ref.stride()

    returned = dst.copy_(src)
    dst_ref.copy_(src_ref)

    assert returned is dst
    assert dst.device == torch.device(dst_dev)
    assert dst.stride() == dst_ref.stride()
    assert_same(dst_base, dst_base_ref)
    assert_same(dst, dst_ref)


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("src_layout", list(LAYOUTS))
def test_to_preserves_values_of_any_layout(direction, src_layout):
    """Tensor.to() (what users call) from a non-contiguous source."""
    src_dev, dst_dev = DIRECTIONS[direction]
    _, src = make_layout(src_layout, src_dev, torch.float64, values)
    _, src_ref = make_layout(src_layout, "cpu", torch.float64, values)
    out = src.to(dst_dev, copy=True)
    assert out.device == torch.device(dst_dev)
    assert_same(out, src_ref.clone())


# ------------------------------------------------------------ broadcasting --
BROADCAST_SOURCES = {
    "expand": lambda dev: values((5,), torch.float32).to(dev)[None].expand(4, 5),
    "expand_middle": lambda dev: values((4, 1, 5), torch.float32).to(dev).expand(4, 3, 5)[:, 1],
    "size1_row": lambda dev: values((1, 5), torch.float32).to(dev),
    "size1_col": lambda dev: values((4, 1), torch.float32).to(dev),
    "row": lambda dev: values((5,), torch.float32).to(dev),
    "zero_dim": lambda dev: torch.tensor(3.25).to(dev),
    "one_element": lambda dev: torch.tensor([-2.5]).to(dev),
}


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("source", list(BROADCAST_SOURCES))
@pytest.mark.parametrize("dst_view", ["contiguous", "transposed"])
def test_copy_broadcasts_source(direction, source, dst_view):
    src_dev, dst_dev = DIRECTIONS[direction]
    src = BROADCAST_SOURCES[source](src_dev)
    src_ref = BROADCAST_SOURCES[source]("cpu")

    def destination(dev):
        if dst_view == "contiguous":
            base = sentinel((4, 5), torch.float32).to(dev)
            return base, base
        base = sentinel((5, 4), torch.float32).to(dev)
        return base, base.t()

    dst_base, dst = destination(dst_dev)
    dst_base_ref, dst_ref = destination("cpu")
    dst.copy_(src)
    dst_ref.copy_(src_ref)
    assert dst.shape == (4, 5)
    assert_same(dst_base, dst_base_ref)


# ------------------------------------------------------- dtype conversions --
def _dtype_id(dtype):
    return str(dtype).replace("torch.", "")


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("src_dtype", DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("dst_dtype", DTYPES, ids=_dtype_id)
def test_copy_converts_dtype(direction, src_dtype, dst_dtype):
    src_dev, dst_dev = DIRECTIONS[direction]
    src_ref = values((3, 7), src_dtype)
    expected = src_ref.to(dst_dtype)

    src = on_device(src_ref, src_dev)
    # copy_ into a preallocated destination ...
    dst = torch.empty((3, 7), dtype=dst_dtype, device=dst_dev)
    dst.copy_(src)
    assert dst.dtype == dst_dtype
    assert_same(dst, expected)
    # ... into a non-contiguous one ...
    dst_t = torch.empty((7, 3), dtype=dst_dtype, device=dst_dev).t()
    dst_t.copy_(src)
    assert_same(dst_t, expected)
    # ... and through Tensor.to(device, dtype).
    out = src.to(dst_dev, dst_dtype)
    assert out.device == torch.device(dst_dev) and out.dtype == dst_dtype
    assert_same(out, expected)


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.int8, torch.bool, torch.complex64], ids=_dtype_id)
def test_copy_converts_dtype_of_non_contiguous_source(direction, dtype):
    src_dev, dst_dev = DIRECTIONS[direction]
    src_ref = values((6, 5), torch.float64)[::2].t()
    src = on_device(values((6, 5), torch.float64), src_dev)[::2].t()
    out = src.to(dst_dev, dtype)
    assert_same(out, src_ref.to(dtype))
    # Into a destination with gaps, converting on the way.
    dst_base = torch.zeros(64, dtype=dtype, device=dst_dev)
    dst_base_ref = torch.zeros(64, dtype=dtype)
    dst_base.as_strided((5, 3), (1, 9), 2).copy_(src)
    dst_base_ref.as_strided((5, 3), (1, 9), 2).copy_(src_ref)
    assert_same(dst_base, dst_base_ref)


# -------------------------------------------------- zero-size and 0-dim --
@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)], ids=str)
def test_copy_zero_size(direction, shape):
    src_dev, dst_dev = DIRECTIONS[direction]
    src = torch.empty(shape, device=src_dev)
    dst = torch.empty(shape, dtype=torch.float64, device=dst_dev)
    assert dst.copy_(src) is dst
    assert_same(dst, torch.empty(shape, dtype=torch.float64))
    out = src.to(dst_dev)
    assert out.device == torch.device(dst_dev)
    assert_same(out, torch.empty(shape))
    # A zero-size non-contiguous source, converting.
    if len(shape) > 1:
        out_t = src.transpose(0, -1).to(dst_dev, torch.int32)
        assert_same(out_t, torch.empty(shape).transpose(0, -1).to(torch.int32))


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.int64, torch.bool, torch.complex64, torch.bfloat16], ids=_dtype_id
)
def test_copy_zero_dim(direction, dtype):
    src_dev, dst_dev = DIRECTIONS[direction]
    ref = values((), dtype)
    src = on_device(ref, src_dev)
    assert src.dim() == 0
    out = src.to(dst_dev)
    assert out.dim() == 0 and out.device == torch.device(dst_dev)
    assert_same(out, ref)
    dst = torch.zeros((), dtype=torch.float64, device=dst_dev)
    dst.copy_(src)
    assert_same(dst, ref.to(torch.float64))
    # A 0-dim source fills a bigger destination.
    big = torch.zeros((2, 3), dtype=torch.float64, device=dst_dev)
    big.copy_(src)
    assert_same(big, ref.to(torch.float64).expand(2, 3))


# ------------------------------------------------------------------ large --
LARGE = 3 * 1024 * 1024 + 17  # float32: just over 12 MiB, not a round size


@pytest.fixture(scope="module")
def large_cpu():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(LARGE, generator=generator)


@pytest.mark.parametrize("direction", list(DIRECTIONS))
def test_copy_large(direction, large_cpu):
    src_dev, dst_dev = DIRECTIONS[direction]
    assert large_cpu.numel() * large_cpu.element_size() >= 8 * 1024 * 1024
    src = on_device(large_cpu, src_dev)
    out = src.to(dst_dev, copy=True)
    assert_same(out, large_cpu)
    # Non-contiguous and converting, large too.
    strided = src[1::2]
    assert_same(strided.to(dst_dev, torch.float64), large_cpu[1::2].to(torch.float64))
    dst = torch.zeros(LARGE, dtype=torch.float64, device=dst_dev)
    dst.copy_(src)
    assert_same(dst, large_cpu.to(torch.float64))


def test_copy_large_into_slice_of_larger_tensor(large_cpu):
    dst = torch.zeros(LARGE + 1000, device=D0)
    dst[500 : 500 + LARGE].copy_(large_cpu)
    expected = torch.zeros(LARGE + 1000)
    expected[500 : 500 + LARGE] = large_cpu
    assert_same(dst, expected)


# ------------------------------------------- conjugate and negative views --
# A crash in one of these must not take down the test process, so the cases
# run in an interpreter of their own, one after another, each reporting its
# outcome; a case the interpreter did not reach fails with how it ended.
CONJ_PRELUDE = """
import torch
c = torch.complex(torch.arange(6.) + 1, -(torch.arange(6.) * 3 - 2))
r = torch.arange(6.) - 2.5
d = c.to("mydev:0")
dr = r.to("mydev:0")
def check(actual, expected):
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
"""

CONJ_CASES = {
    # conjugated sources
    "conj_src_h2d": "check(c.conj().to('mydev:0'), c.conj().resolve_conj())",
    "conj_src_h2d_copy_": "t = torch.zeros(6, dtype=torch.complex64, device='mydev:0'); t.copy_(c.conj()); check(t, c.conj().resolve_conj())",
    "conj_src_d2h": "v = d.conj(); assert v.is_conj(); check(v.cpu(), c.conj().resolve_conj())",
    "conj_src_d2h_copy_": "h = torch.zeros(6, dtype=torch.complex64); h.copy_(d.conj()); check(h, c.conj().resolve_conj())",
    "conj_src_d2d": "t = torch.zeros(6, dtype=torch.complex64, device='mydev:0'); t.copy_(d.conj()); check(t, c.conj().resolve_conj())",
    "conj_src_xdev": "t = d.conj().to('mydev:1'); assert t.device == torch.device('mydev:1'); check(t, c.conj().resolve_conj())",
    "conj_src_convert": "check(d.conj().to(torch.complex128), c.conj().resolve_conj().to(torch.complex128))",
    "resolve_conj": "v = d.conj().resolve_conj(); assert not v.is_conj() and v.device == d.device; check(v, c.conj().resolve_conj()); check(d, c)",
    # conjugated destinations: the conj view must read back the source
    "conj_dst_h2d": "t = torch.zeros(6, dtype=torch.complex64, device='mydev:0'); t.conj().copy_(c); check(t, c.conj().resolve_conj())",
    "conj_dst_d2d": "t = torch.zeros(6, dtype=torch.complex64, device='mydev:0'); t.conj().copy_(d); check(t, c.conj().resolve_conj())",
    "conj_dst_d2h": "h = torch.zeros(6, dtype=torch.complex64); h.conj().copy_(d); check(h, c.conj().resolve_conj())",
    # negative views (what .conj().imag produces)
    "neg_src_d2h": "v = torch._neg_view(dr); assert v.is_neg(); check(v.cpu(), -r); check(v.resolve_neg(), -r)",
    "neg_dst_h2d": "t = torch.zeros(6, device='mydev:0'); torch._neg_view(t).copy_(r); check(t, -r)",
}


CONJ_RUNNER = """
import traceback
for name, code in CASES.items():
    try:
        exec(code)
        print("CASE-OK", name, flush=True)
    except Exception:
        print("CASE-FAILED", name, repr(traceback.format_exc()), flush=True)
"""


@pytest.fixture(scope="module")
def conj_outcomes():
    """(outcomes: case -> "OK" or its traceback, the finished process)."""
    proc = run_python(CONJ_PRELUDE + f"CASES = {CONJ_CASES!r}\n" + CONJ_RUNNER, timeout=120)
    outcomes = {}
    for line in proc.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        name, _, detail = rest.partition(" ")
        if kind == "CASE-OK":
            outcomes[name] = "OK"
        elif kind == "CASE-FAILED":
            outcomes[name] = detail
    return outcomes, proc


@pytest.mark.parametrize("case", list(CONJ_CASES))
def test_conjugate_and_negative_views(case, conj_outcomes):
    outcomes, proc = conj_outcomes
    if case not in outcomes:
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        pytest.fail(f"{case}: the interpreter ended ({how}) at or before this case\nstderr:\n{proc.stderr[-3000:]}")
    assert outcomes[case] == "OK", f"{case}: {CONJ_CASES[case]}\n{outcomes[case]}"


# ------------------------------------------------------------ non_blocking --
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_non_blocking_with_pageable_memory_is_complete_on_return(direction):
    ref = values((512, 256), torch.float32)
    if direction == "h2d":
        host = ref.clone()
        assert not host.is_pinned()
        dev = torch.zeros_like(ref, device=D0)
        release_from_another_thread(hold_stream())  # the stream is held when the copy is issued
        dev.copy_(host, non_blocking=True)
        host.fill_(-1)  # the caller may reuse a pageable buffer at once
        assert_same(dev, ref)
    else:
        dev = ref.to(D0)
        latch = hold_stream()
        dev.mul_(2)
        host = torch.zeros_like(ref)
        release_from_another_thread(latch)
        host.copy_(dev, non_blocking=True)
        # No synchronize: with pageable memory the data is there on return.
        torch.testing.assert_close(host, ref * 2, rtol=0, atol=0)


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_non_blocking_with_pinned_memory_after_synchronize(direction):
    ref = values((512, 256), torch.float32)
    if direction == "h2d":
        host = ref.pin_memory()
        dev = torch.zeros_like(ref, device=D0)
        dev.copy_(host, non_blocking=True)
        torch.mydev.synchronize()
        assert_same(dev, ref)
    else:
        dev = ref.to(D0) + 1
        out = dev.to("cpu", non_blocking=True)
        host = torch.zeros_like(ref).pin_memory()
        host.copy_(dev, non_blocking=True)
        torch.mydev.synchronize()
        torch.testing.assert_close(out, ref + 1, rtol=0, atol=0)
        torch.testing.assert_close(host, ref + 1, rtol=0, atol=0)


@pytest.mark.parametrize("direction", ["d2d", "xdev"])
def test_non_blocking_between_devices(direction):
    src_dev, dst_dev = DIRECTIONS[direction]
    ref = values((64, 33), torch.float32)
    out = ref.to(src_dev).t().to(dst_dev, non_blocking=True)
    assert_same(out, ref.t().contiguous())


# --------------------------------------------- copy_ into part of a tensor --
VIEW_TARGETS = {
    "row": lambda t: t[2],
    "column": lambda t: t[:, 3],
    "block": lambda t: t[1:4, 2:5],
    "strided": lambda t: t[::2, 1::3],
    "diagonal": lambda t: t.diagonal(),
}


@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize("target", list(VIEW_TARGETS))
def test_copy_into_view_touches_only_the_view(direction, target):
    src_dev, dst_dev = DIRECTIONS[direction]
    base_ref = torch.arange(36, dtype=torch.float32).reshape(6, 6)
    base = base_ref.to(dst_dev) if dst_dev != "cpu" else base_ref.clone()
    view_ref = VIEW_TARGETS[target](base_ref)
    src_ref = -values(view_ref.shape, torch.float32)
    VIEW_TARGETS[target](base).copy_(on_device(src_ref, src_dev))
    view_ref.copy_(src_ref)
    assert_same(base, base_ref)


# ---------------------------------------------------------- stream order --
@pytest.mark.parametrize("direction", ["d2h", "d2d", "xdev"])
def test_copy_after_device_op_sees_its_result(direction):
    src_dev, dst_dev = DIRECTIONS[direction]
    ref = values((256, 128), torch.float32)
    src = ref.to(src_dev)
    with torch.mydev.device(src_dev):
        latch = hold_stream()  # the op below is still queued when the copy is issued
    src.mul_(3).add_(1)
    release_from_another_thread(latch)
    out = src.to(dst_dev, copy=True)
    assert_same(out, ref * 3 + 1)
    strided = src.t().to(dst_dev)  # the kernel path of the copy, too
    assert_same(strided, (ref * 3 + 1).t().contiguous())


def test_h2d_copy_after_device_op_is_ordered_after_it():
    ref = values((256, 128), torch.float32)
    dev = torch.zeros_like(ref, device=D0)
    latch = hold_stream()
    dev.add_(100)  # queued, runs before the copy below
    release_from_another_thread(latch)
    dev.copy_(ref)
    assert_same(dev, ref)


def test_copy_on_side_stream_sees_work_of_that_stream():
    ref = values((256, 128), torch.float32)
    dev = ref.to(D0)
    torch.mydev.synchronize()
    stream = torch.mydev.Stream(D0)
    with torch.mydev.stream(stream):
        latch = hold_stream()
        dev.fill_(5)
        host = torch.empty_like(ref)
        release_from_another_thread(latch)
        host.copy_(dev)
        other = torch.empty_like(dev)
        other.copy_(dev)
        other_host = other.cpu()
    torch.testing.assert_close(host, torch.full_like(ref, 5), rtol=0, atol=0)
    torch.testing.assert_close(other_host, torch.full_like(ref, 5), rtol=0, atol=0)


def test_cross_device_copy_waits_for_source_and_destination_work():
    ref = values((128, 64), torch.float32)
    src = ref.to(D0)
    dst = torch.zeros_like(ref, device=D1)
    with torch.mydev.device(D1):
        held_destination = hold_stream()
    dst.fill_(9)  # queued on mydev:1 before the copy: must not win over it
    with torch.mydev.device(D0):
        held_source = hold_stream()
    src.neg_()
    dst.copy_(src)  # queued: a copy between devices does not block the host
    held_source.release()
    held_destination.release()
    assert_same(dst, -ref)


# ------------------------------------------------------------- bad input --
@pytest.mark.parametrize("direction", list(DIRECTIONS))
@pytest.mark.parametrize(
    "dst_shape,src_shape",
    [((2, 3), (5,)), ((2, 3), (2, 5)), ((3, 4), (3, 1, 4)), ((0, 3), (5,))],
    ids=["row", "matrix", "more_dims", "empty_dst"],
)
def test_copy_non_broadcastable_raises(direction, dst_shape, src_shape):
    src_dev, dst_dev = DIRECTIONS[direction]
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(dst_shape).copy_(torch.ones(src_shape))
    dst = torch.zeros(dst_shape, device=dst_dev)
    with pytest.raises(RuntimeError) as error:
        dst.copy_(torch.ones(src_shape, device=src_dev))
    message = str(error.value)
    # Names the sizes that do not match, as CPU does.
    for size in {str(s) for s in dst_shape + src_shape} - {"0", "1"}:
        assert size in message, (size, message, str(cpu_error.value))
    # dst untouched, and copies still work.
    assert_same(dst, torch.zeros(dst_shape))
    ok = torch.zeros(dst_shape, device=dst_dev)
    ok.copy_(torch.full(dst_shape[-1:], 2.0, device=src_dev))
    assert_same(ok, torch.full(dst_shape, 2.0))


def test_copy_to_missing_device_index_raises():
    missing = torch.mydev.device_count()
    host = values((4,), torch.float32)
    dev = host.to(D0)
    for attempt in (
        lambda: host.to(f"mydev:{missing}"),
        lambda: dev.to(f"mydev:{missing}"),
        lambda: dev.to(f"mydev:{missing + 5}", torch.float64),
        lambda: torch.empty(4, device=f"mydev:{missing}").copy_(host),
    ):
        with pytest.raises(RuntimeError, match=f"mydev:{missing}|[Ii]nvalid device"):
            attempt()
    # The process is still usable.
    assert_same(host.to(D1).to(D0).cpu(), host)
    assert torch.mydev.current_device() == 0


def test_copy_into_self_overlapping_destination_raises():
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor") as cpu_error:
        torch.zeros(1, 3).expand(2, 3).copy_(torch.ones(2, 3))
    dst = torch.zeros(1, 3, device=D0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        dst.expand(2, 3).copy_(values((2, 3), torch.float32).to(D0))
        dst.cpu()  # an error found on the device is reported by the next synchronizing call
    assert cpu_error.value is not None
    # Still usable, and the failure is not reported again.
    torch.mydev.synchronize()
    assert_same(values((3,), torch.float32).to(D0) * 2, values((3,), torch.float32) * 2)


def test_copy_between_partially_overlapping_views_raises_like_cpu():
    cpu = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        cpu[1:].copy_(cpu[:-1])
    dev = torch.arange(6.0).to(D0)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        dev[1:].copy_(dev[:-1])
        dev.cpu()
    torch.mydev.synchronize()
    assert_same(dev[:2] + 1, torch.arange(6.0)[:2] + 1)
