"""The native core ops of mydev (csrc/aten/core_ops.cpp) and the generic
device-kernel path that runs every other ATen op on the device
(csrc/aten/device_kernel_path.cpp).

Every test does the same thing on CPU and compares.
"""

import re
import warnings

import pytest
import torch

from mydev_testing import COMMON_DTYPES, hold_stream, release_from_another_thread, run_python

D = "mydev:0"
D1 = "mydev:1"

ALL_DTYPES = COMMON_DTYPES


def _dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def assert_matches_cpu(actual, expected, exact=False, device=D):
    """``actual`` (a mydev tensor, or a tuple/list of them) equals the CPU
    result ``expected``: same dtype, shape and values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_matches_cpu(a, e, exact=exact, device=device)
        return
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.device == torch.device(device), actual.device
    assert expected.device.type == "cpu"
    if exact:
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def sample(shape, dtype=torch.float32, seed=0, low=-4, high=4):
    """Deterministic CPU values of ``dtype`` (non-negative for unsigned)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    lo = 0 if dtype == torch.uint8 else low
    return torch.randint(lo, high + 1, shape, generator=g).to(dtype)


# ============================================================ empty family ==
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3, 4), (3, 0, 2)], ids=str)
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64], ids=_dtype_id
)
def test_empty(shape, dtype):
    t = torch.empty(shape, dtype=dtype, device=D)
    ref = torch.empty(shape, dtype=dtype)
    assert (t.device, t.dtype, t.shape, t.stride()) == (torch.device(D), ref.dtype, ref.shape, ref.stride())
    assert t.is_contiguous() and not t.requires_grad
    assert t.untyped_storage().nbytes() >= ref.untyped_storage().nbytes()
    assert t.untyped_storage().device == torch.device(D)


@pytest.mark.parametrize(
    "size,stride",
    [
        ((2, 3), (1, 2)),
        ((2, 3), (6, 1)),
        ((4, 5), (10, 2)),
        ((3, 1), (1, 7)),
        ((2, 2), (0, 1)),
        ((0, 3), (3, 1)),
        ((), ()),
    ],
    ids=str,
)
def test_empty_strided(size, stride):
    t = torch.empty_strided(size, stride, device=D, dtype=torch.float64)
    ref = torch.empty_strided(size, stride, dtype=torch.float64)
    assert (t.shape, t.stride(), t.dtype) == (ref.shape, ref.stride(), ref.dtype)
    assert t.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    # The memory is usable in that layout.
    values = sample(size, torch.float64)
    if t.numel() and len(set(t.stride())) == len(t.stride()) and 0 not in t.stride():
        t.copy_(values)
        ref.copy_(values)
        assert_matches_cpu(t, ref, exact=True)


@pytest.mark.parametrize(
    "shape,memory_format",
    [
        ((2, 3, 4, 5), torch.channels_last),
        ((2, 3, 1, 5), torch.channels_last),
        ((2, 3, 4, 5, 6), torch.channels_last_3d),
        ((2, 3, 4, 5), torch.contiguous_format),
    ],
    ids=["cl", "cl_size1", "cl3d", "contiguous"],
)
def test_empty_memory_format(shape, memory_format):
    t = torch.empty(shape, device=D, memory_format=memory_format)
    ref = torch.empty(shape, memory_format=memory_format)
    assert t.stride() == ref.stride()
    assert t.is_contiguous(memory_format=memory_format)
    like = torch.empty_like(t)
    assert like.stride() == ref.stride() and like.device == t.device
    like_cont = torch.empty_like(t, memory_format=torch.contiguous_format)
    assert like_cont.stride() == torch.empty(shape).stride()


def test_empty_device_index_and_options():
    t = torch.empty(3, device=D1)
    assert t.device == torch.device(D1) and t.untyped_storage().device == torch.device(D1)
    with torch.mydev.device(1):
        assert torch.empty(3, device="mydev").device == torch.device(D1)
        assert torch.empty_strided((2,), (1,), device="mydev").device == torch.device(D1)
    assert torch.empty(3, device="mydev").device == torch.device(D)
    g = torch.empty((2, 3), device=D, dtype=torch.float16, requires_grad=True)
    assert g.requires_grad and g.is_leaf and g.grad is None and g.dtype == torch.float16
    g2 = torch.empty_strided((2, 3), (1, 2), device=D1, requires_grad=True)
    assert g2.requires_grad and g2.device == torch.device(D1)
    # Gradients come back on the device.
    with torch.no_grad():
        g.fill_(1.5)
    (g * 3).sum().backward()
    assert_matches_cpu(g.grad, torch.full((2, 3), 3.0, dtype=torch.float16), exact=True)


@pytest.mark.parametrize("src_device", ["cpu", D, D1])
def test_empty_like_options(src_device):
    src = torch.empty((2, 3, 4, 5), dtype=torch.float64, device=src_device).contiguous(
        memory_format=torch.channels_last
    )
    t = torch.empty_like(src, device=D, dtype=torch.int32)
    assert t.device == torch.device(D) and t.dtype == torch.int32
    assert t.stride() == torch.empty_like(src.cpu(), dtype=torch.int32).stride()
    same = torch.empty_like(src)
    assert same.device == src.device and same.stride() == src.stride()


def test_empty_bad_arguments_raise_like_cpu():
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty((2, -1))
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty((2, -1), device=D)
    with pytest.raises(RuntimeError, match="negative"):
        torch.empty_strided((2, -1), (1, 1), device=D)
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(3, device=D, pin_memory=True)
    missing = torch.mydev.device_count()
    with pytest.raises(RuntimeError, match=f"mydev:{missing}|[Ii]nvalid device"):
        torch.empty(3, device=f"mydev:{missing}")
    assert_matches_cpu(torch.zeros(3, device=D) + 1, torch.ones(3))


# ============================================================== as_strided ==
@pytest.mark.parametrize(
    "size,stride,offset",
    [
        ((3, 4), (4, 1), 0),
        ((4, 3), (1, 4), 0),
        ((2, 2), (5, 2), 3),
        ((3, 3), (1, 1), 1),
        ((5,), (0,), 2),
        ((2, 3, 2), (6, 1, 3), 0),
        ((0, 2), (1, 1), 11),
    ],
    ids=str,
)
def test_as_strided(size, stride, offset):
    base_ref = torch.arange(12, dtype=torch.float32)
    base = base_ref.to(D)
    view = base.as_strided(size, stride, offset)
    ref = base_ref.as_strided(size, stride, offset)
    assert (view.shape, view.stride(), view.storage_offset()) == (ref.shape, ref.stride(), ref.storage_offset())
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert_matches_cpu(view, ref, exact=True)


def test_as_strided_of_a_view_uses_absolute_offset_and_writes_through():
    base_ref = torch.arange(20.0)
    base = base_ref.to(D)
    view, view_ref = base[5:], base_ref[5:]
    a, a_ref = view.as_strided((2, 3), (3, 2), 4), view_ref.as_strided((2, 3), (3, 2), 4)
    assert a.storage_offset() == a_ref.storage_offset() == 4
    assert_matches_cpu(a, a_ref, exact=True)
    a.mul_(-1)
    a_ref.mul_(-1)
    assert_matches_cpu(base, base_ref, exact=True)


def test_as_strided_out_of_bounds_raises_like_cpu():
    with pytest.raises(RuntimeError, match="out of bounds for storage") as cpu_error:
        torch.arange(6.0).as_strided((3, 3), (2, 1), 2)
    with pytest.raises(RuntimeError, match="out of bounds for storage") as error:
        torch.arange(6.0, device=D).as_strided((3, 3), (2, 1), 2)
    assert str(error.value) == str(cpu_error.value)
    assert_matches_cpu(torch.arange(6.0, device=D).as_strided((2,), (3,), 1), torch.tensor([1.0, 4.0]))


# ============================================================ view/reshape ==
@pytest.mark.parametrize("shape", [(2, 6), (3, -1), (12,), (1, 12, 1), (2, 2, 3)], ids=str)
def test_view_shares_storage(shape):
    ref = torch.arange(12.0)
    x = ref.to(D)
    v, v_ref = x.view(shape), ref.view(shape)
    assert (v.shape, v.stride()) == (v_ref.shape, v_ref.stride())
    assert v._base is x and v.data_ptr() == x.data_ptr()
    v.view(-1)[3] = 100
    v_ref.view(-1)[3] = 100
    assert_matches_cpu(x, ref, exact=True)


def test_view_of_non_contiguous_raises_like_cpu():
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        torch.arange(6.0).view(2, 3).t().view(6)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        torch.arange(6.0, device=D).view(2, 3).t().view(6)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        torch.arange(6.0, device=D).view(4, 2)
    assert_matches_cpu(
        torch.arange(6.0, device=D).view(2, 3).t().reshape(6), torch.arange(6.0).view(2, 3).t().reshape(6)
    )


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.int32),
        (torch.float32, torch.uint8),
        (torch.float64, torch.float32),
        (torch.int64, torch.float64),
        (torch.int16, torch.float16),
        (torch.uint8, torch.bool),
        (torch.bfloat16, torch.int16),
        (torch.complex64, torch.float64),
        (torch.int8, torch.int32),
    ],
    ids=lambda d: _dtype_id(d),
)
def test_view_dtype(src_dtype, dst_dtype):
    ref = torch.arange(24, dtype=torch.float64).reshape(3, 8).to(src_dtype)
    if src_dtype == torch.uint8:
        ref = ref.clamp(0, 1).to(torch.uint8)
    x = ref.to(D)
    v, v_ref = x.view(dst_dtype), ref.view(dst_dtype)
    assert (v.shape, v.stride(), v.dtype) == (v_ref.shape, v_ref.stride(), v_ref.dtype)
    assert v.data_ptr() == x.data_ptr()
    assert_matches_cpu(v, v_ref, exact=True)
    # Writing through the reinterpreted view changes the original bits.
    v[0].zero_()
    v_ref[0].zero_()
    assert_matches_cpu(x, ref, exact=True)


def test_view_dtype_bad_size_raises_like_cpu():
    with pytest.raises(RuntimeError, match="must be divisible by 2"):
        torch.arange(5.0).view(torch.float64)
    with pytest.raises(RuntimeError, match="must be divisible by 2"):
        torch.arange(5.0, device=D).view(torch.float64)
    assert_matches_cpu(
        torch.arange(4.0, device=D).view(torch.float64), torch.arange(4.0).view(torch.float64), exact=True
    )


RESHAPE_CASES = {
    "contiguous": (lambda t: t, (4, 3)),
    "transposed": (lambda t: t.t(), (12,)),
    "transposed_split": (lambda t: t.t(), (2, 2, 3)),
    "sliced_rows": (lambda t: t[::2], (8,)),
    "narrow_cols": (lambda t: t[:, 1:3], (2, 3)),
    "expand": (lambda t: t[:1].expand(3, 4), (12,)),
    "unsqueeze": (lambda t: t.t(), (4, 1, 3)),
}


@pytest.mark.parametrize("case", list(RESHAPE_CASES))
def test_reshape_views_when_possible_and_copies_otherwise(case):
    make, shape = RESHAPE_CASES[case]
    ref_base = torch.arange(12.0).reshape(3, 4)
    base = ref_base.to(D)
    src, src_ref = make(base), make(ref_base)
    r, r_ref = src.reshape(shape), src_ref.reshape(shape)
    assert (r.shape, r.stride()) == (r_ref.shape, r_ref.stride())
    assert_matches_cpu(r, r_ref, exact=True)
    # A view exactly when CPU gives a view.
    shares = r.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    shares_ref = r_ref.untyped_storage().data_ptr() == ref_base.untyped_storage().data_ptr()
    assert shares == shares_ref
    r.fill_(-1)
    r_ref.fill_(-1)
    assert_matches_cpu(base, ref_base, exact=True)


def test_reshape_alias():
    ref = torch.arange(24.0)
    x = ref.to(D)
    a = torch.ops.aten._reshape_alias(x, (2, 3, 4), (12, 4, 1))
    a_ref = torch.ops.aten._reshape_alias(ref, (2, 3, 4), (12, 4, 1))
    assert (a.shape, a.stride()) == (a_ref.shape, a_ref.stride())
    assert a.data_ptr() == x.data_ptr()
    assert_matches_cpu(a, a_ref, exact=True)
    b = torch.ops.aten._reshape_alias(x[2:], (4, 5), (1, 4))
    b_ref = torch.ops.aten._reshape_alias(ref[2:], (4, 5), (1, 4))
    assert b.storage_offset() == b_ref.storage_offset() == 2
    assert_matches_cpu(b, b_ref, exact=True)


# ================================================================= resize_ ==
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.complex64], ids=_dtype_id)
def test_resize_grow_keeps_data(dtype):
    ref = sample((2, 3), dtype)
    x = ref.to(D)
    assert x.resize_(5, 4) is x
    ref.resize_(5, 4)
    assert (x.shape, x.stride()) == (ref.shape, ref.stride())
    assert x.untyped_storage().nbytes() >= ref.untyped_storage().nbytes() == 20 * ref.element_size()
    assert_matches_cpu(x.view(-1)[:6], ref.view(-1)[:6], exact=True)
    x.view(-1)[6:] = 1
    ref.view(-1)[6:] = 1
    assert_matches_cpu(x, ref, exact=True)


def test_resize_shrink_keeps_storage():
    ref = torch.arange(12.0)
    x = ref.to(D)
    nbytes = x.untyped_storage().nbytes()
    x.resize_(2, 2)
    ref.resize_(2, 2)
    assert x.shape == (2, 2) and x.untyped_storage().nbytes() == nbytes == ref.untyped_storage().nbytes()
    assert_matches_cpu(x, ref, exact=True)
    x.resize_(12)
    ref.resize_(12)
    assert_matches_cpu(x, ref, exact=True)  # the tail survived the shrink
    x.resize_(0)
    ref.resize_(0)
    assert x.shape == ref.shape == (0,)


def test_resize_of_a_views_base_keeps_the_view_valid():
    ref = torch.arange(6.0)
    x = ref.to(D)
    v, v_ref = x[2:5], ref[2:5]
    x.resize_(50)
    ref.resize_(50)
    assert x.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
    assert_matches_cpu(v, v_ref, exact=True)
    x[:6].fill_(7)
    ref[:6].fill_(7)
    assert_matches_cpu(v, v_ref, exact=True)


def test_resize_of_a_view_grows_the_shared_storage():
    ref = torch.arange(6.0)
    x = ref.to(D)
    v, v_ref = x[2:4], ref[2:4]
    v.resize_(5)
    v_ref.resize_(5)
    assert v.storage_offset() == 2
    assert x.untyped_storage().nbytes() == ref.untyped_storage().nbytes() == 7 * 4
    v.fill_(9)
    v_ref.fill_(9)
    assert_matches_cpu(x, ref, exact=True)
    assert_matches_cpu(v, v_ref, exact=True)


@pytest.mark.parametrize("memory_format", [torch.channels_last, torch.contiguous_format])
def test_resize_with_memory_format(memory_format):
    x = torch.arange(24.0, device=D)
    ref = torch.arange(24.0)
    x.resize_(1, 2, 3, 4, memory_format=memory_format)
    ref.resize_(1, 2, 3, 4, memory_format=memory_format)
    assert x.stride() == ref.stride()
    assert x.is_contiguous(memory_format=memory_format)


def test_resize_negative_size_raises():
    with pytest.raises(RuntimeError):
        torch.arange(6.0).resize_(3, -2)
    x = torch.arange(6.0, device=D)
    with pytest.raises(RuntimeError, match="negative dimension -2"):
        x.resize_(3, -2)
    # Unchanged and usable.
    assert x.shape == (6,)
    assert_matches_cpu(x * 2, torch.arange(6.0) * 2, exact=True)


# ==================================================================== set_ ==
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_set_storage_shares_it():
    ref = torch.arange(6.0)
    a = ref.to(D)
    b = torch.empty(0, device=D)
    b_ref = torch.empty(0)
    assert b.set_(a.untyped_storage()) is b
    b_ref.set_(ref.untyped_storage())
    assert (b.shape, b.stride(), b.storage_offset()) == (b_ref.shape, b_ref.stride(), b_ref.storage_offset())
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    b[1] = -5
    b_ref[1] = -5
    assert_matches_cpu(a, ref, exact=True)
    # Typed storage too (what torch.save/load use).
    c = torch.empty(0, device=D).set_(a.storage())
    assert_matches_cpu(c, ref, exact=True)


@pytest.mark.parametrize(
    "offset,size,stride",
    [(1, (2, 2), (1, 2)), (0, (3, 2), (2, 1)), (4, (2,), (1,)), (2, (2, 3), (0, 1)), (3, (0,), (1,)), (4, (4,), (1,))],
    ids=str,
)
def test_set_storage_offset_size_stride(offset, size, stride):
    ref = torch.arange(6.0)
    a = ref.to(D)
    b = torch.empty(0, device=D).set_(a.untyped_storage(), offset, size, stride)
    b_ref = torch.empty(0).set_(ref.untyped_storage(), offset, size, stride)
    assert (b.shape, b.stride(), b.storage_offset()) == (b_ref.shape, b_ref.stride(), b_ref.storage_offset())
    # Growing past the end of the storage grows it, as on CPU.
    assert a.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    grew = ref.untyped_storage().nbytes() > 6 * 4
    if not grew:
        assert_matches_cpu(b, b_ref, exact=True)
    if b.numel() and 0 not in b.stride():
        b.fill_(-1)
        b_ref.fill_(-1)
        assert_matches_cpu(b, b_ref, exact=True)
    assert_matches_cpu(a, ref, exact=True)


def test_set_tensor_shares_storage_and_metadata():
    ref = torch.arange(12.0).reshape(3, 4)
    a = ref.to(D)
    src, src_ref = a[1:].t(), ref[1:].t()
    b = torch.empty(5, device=D)
    b_ref = torch.empty(5)
    b.set_(src)
    b_ref.set_(src_ref)
    assert (b.shape, b.stride(), b.storage_offset()) == (b_ref.shape, b_ref.stride(), b_ref.storage_offset())
    assert_matches_cpu(b, b_ref, exact=True)
    b.mul_(10)
    b_ref.mul_(10)
    assert_matches_cpu(a, ref, exact=True)
    assert b.set_(b) is b  # set_ to itself is a no-op
    assert_matches_cpu(b, b_ref, exact=True)


@pytest.mark.parametrize("device", [D, D1])
def test_set_empty(device):
    a = torch.arange(6.0, device=device)
    other = a.view(2, 3)
    a.set_()
    ref = torch.arange(6.0).set_()
    assert (a.shape, a.stride(), a.untyped_storage().nbytes()) == (
        ref.shape,
        ref.stride(),
        ref.untyped_storage().nbytes(),
    )
    assert a.device == torch.device(device)
    assert_matches_cpu(
        other, torch.arange(6.0).view(2, 3), exact=True, device=device
    )  # the old storage is not affected
    a.resize_(3).fill_(2)
    assert_matches_cpu(a, torch.full((3,), 2.0), exact=True, device=device)


def test_set_bad_arguments_raise_like_cpu():
    x = torch.empty(0, device=D)
    with pytest.raises(RuntimeError, match="devices must match"):
        x.set_(torch.arange(3.0).untyped_storage())
    with pytest.raises(RuntimeError, match="devices must match"):
        x.set_(torch.arange(3.0, device=D1).untyped_storage())
    with pytest.raises(RuntimeError, match="Could not set tensor of type long int to a tensor of type float"):
        torch.empty(0).set_(torch.arange(3))
    with pytest.raises(RuntimeError, match="Could not set tensor of type long int to a tensor of type float"):
        x.set_(torch.arange(3, device=D))
    assert x.shape == (0,) and x.device == torch.device(D)
    assert_matches_cpu(x.set_(torch.arange(3.0, device=D)) + 1, torch.arange(3.0) + 1, exact=True)


# ================================================================== fill_ ==
FILL_VALUES = {
    "bool": True,
    "int": 3,
    "negative_int": -2,
    "float": 2.75,
    "complex": 1.5 - 2j,
}


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("value", list(FILL_VALUES))
def test_fill_with_python_scalar(dtype, value):
    v = FILL_VALUES[value]
    ref = torch.zeros((3, 4), dtype=dtype)
    try:
        ref.fill_(v)
    except RuntimeError as cpu_error:
        # CPU refuses (complex into a real tensor, negative into uint8...):
        # mydev must refuse with the same message by the time the result is read.
        x = torch.zeros((3, 4), dtype=dtype, device=D)
        with pytest.raises(RuntimeError, match=re.escape(str(cpu_error).split("\n")[0])):
            x.fill_(v)
            x.cpu()
        return
    x = torch.zeros((3, 4), dtype=dtype, device=D)
    assert x.fill_(v) is x
    assert_matches_cpu(x, ref, exact=True)
    # Non-contiguous target: only the view is written.
    x2 = torch.zeros((4, 6), dtype=dtype, device=D)
    ref2 = torch.zeros((4, 6), dtype=dtype)
    x2.t()[::2].fill_(v)
    ref2.t()[::2].fill_(v)
    assert_matches_cpu(x2, ref2, exact=True)


@pytest.mark.parametrize("value_device", [D, "cpu"])
@pytest.mark.parametrize(
    "dtype,value_dtype",
    [
        (torch.float32, torch.float32),
        (torch.int32, torch.float64),
        (torch.float16, torch.int64),
        (torch.bool, torch.float32),
        (torch.complex64, torch.complex64),
        (torch.float64, torch.bfloat16),
    ],
    ids=str,
)
def test_fill_with_zero_dim_tensor(value_device, dtype, value_dtype):
    value_ref = torch.tensor(2.5 if value_dtype.is_floating_point else 7).to(value_dtype)
    if value_dtype.is_complex:
        value_ref = torch.tensor(2.5 + 1j, dtype=value_dtype)
    value = value_ref.to(value_device)
    x = torch.zeros((2, 5), dtype=dtype, device=D)
    ref = torch.zeros((2, 5), dtype=dtype)
    assert x[:, 1:4].fill_(value) is not None
    ref[:, 1:4].fill_(value_ref)
    assert_matches_cpu(x, ref, exact=True)


def test_fill_with_device_value_is_stream_ordered():
    value = torch.tensor(1.0, device=D)
    with hold_stream():
        value.add_(2)  # queued; the fill below must read 3
        x = torch.zeros(8, device=D).fill_(value)
        value.add_(100)  # after the fill: must not change it
    assert_matches_cpu(x, torch.full((8,), 3.0), exact=True)


def test_fill_bad_value_tensor_raises_like_cpu():
    with pytest.raises(RuntimeError, match="0-dimension value tensor but got tensor with 1 dimensions"):
        torch.zeros(3).fill_(torch.tensor([1.0]))
    x = torch.zeros(3, device=D)
    with pytest.raises(RuntimeError, match="0-dimension value tensor but got tensor with 1 dimensions"):
        x.fill_(torch.tensor([1.0], device=D))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x.fill_(torch.tensor(1.0, device=D1))
    x.fill_(torch.tensor(4.0))
    assert_matches_cpu(x, torch.full((3,), 4.0), exact=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_dtype_id)
def test_zero_(dtype):
    ref = sample((5, 6), dtype) if dtype != torch.bool else torch.ones((5, 6), dtype=torch.bool)
    x = ref.to(D)
    assert x[1:4, ::2].zero_() is not None
    ref[1:4, ::2].zero_()
    assert_matches_cpu(x, ref, exact=True)
    x.zero_()
    assert_matches_cpu(x, torch.zeros((5, 6), dtype=dtype), exact=True)
    torch.empty(0, dtype=dtype, device=D).zero_()  # empty: nothing to do


# ========================================================= scalars to host ==
SCALAR_VALUES = {
    torch.float32: [1.25, -3.5e7, 0.1],
    torch.float64: [0.1, -1e300, 2.0**-1000],
    torch.float16: [1.5, -65504.0, 0.0999755859375],
    torch.bfloat16: [1.5, -3.3895313892515355e38, 0.1],
    torch.int8: [-128, 127, 0],
    torch.uint8: [255, 0, 7],
    torch.int16: [-32768, 32767, 5],
    torch.int32: [-(2**31), 2**31 - 1, 9],
    torch.int64: [-(2**63), 2**63 - 1, 2**40 + 1],
    torch.bool: [True, False, True],
    torch.complex64: [1.5 - 2j, -0.25j, 3 + 0j],
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_dtype_id)
def test_item_tolist_and_local_scalar_dense(dtype):
    ref = torch.tensor(SCALAR_VALUES[dtype], dtype=dtype)
    x = ref.to(D)
    for i in range(3):
        got, want = x[i].item(), ref[i].item()
        assert type(got) is type(want) and got == want
        lsd = torch.ops.aten._local_scalar_dense(x[i])
        assert type(lsd) is type(want) and lsd == want
    assert x.tolist() == ref.tolist()
    grid, grid_ref = x.repeat(2, 1).t(), ref.repeat(2, 1).t()  # nested, non-contiguous
    assert grid.tolist() == grid_ref.tolist()
    # One element at a storage offset of a transposed view.
    assert grid[2, 1].item() == grid_ref[2, 1].item()
    assert x[1:2].item() == ref[1:2].item()
    assert torch.tensor(SCALAR_VALUES[dtype][2], dtype=dtype, device=D).item() == ref[2].item()


def test_item_sees_queued_work():
    x = torch.ones(1024, device=D)
    latch = hold_stream()
    total = x.mul(3).sum()
    release_from_another_thread(latch)
    assert total.item() == 3072.0
    assert float(total) == 3072.0 and int(total) == 3072


@pytest.mark.parametrize("shape", [(3,), (0,), (2, 2)], ids=str)
def test_item_of_non_single_element_raises_like_cpu(shape):
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(shape).item()
    with pytest.raises(RuntimeError) as error:
        torch.zeros(shape, device=D).item()
    assert str(error.value) == str(cpu_error.value)
    with pytest.raises(RuntimeError, match="[Ee]mpty"):
        torch.ops.aten._local_scalar_dense(torch.zeros(0, device=D))
    assert torch.ones(1, device=D).item() == 1.0


# ================================================================ printing ==
def _without_device(text: str) -> str:
    return " ".join(re.sub(r",\s*device='mydev:\d+'", "", text).split())


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(6.0).reshape(2, 3) / 3,
        lambda: torch.arange(5, dtype=torch.int32),
        lambda: torch.tensor([True, False]),
        lambda: torch.tensor(2.5),
        lambda: torch.empty(0, 3),
        lambda: torch.randn(300, 300, generator=torch.Generator().manual_seed(1)),
        lambda: torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
        lambda: torch.tensor([1.5, float("nan"), float("inf")], dtype=torch.float16),
        lambda: torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64),
        lambda: torch.arange(12.0).reshape(3, 4).t(),
    ],
    ids=[
        "float",
        "int32",
        "bool",
        "zero_dim",
        "empty",
        "summarized",
        "bfloat16",
        "half_nonfinite",
        "complex",
        "transposed",
    ],
)
@pytest.mark.parametrize("device", [D, D1])
def test_printing_matches_cpu(make, device):
    ref = make()
    x = ref.to(device)
    text = repr(x)
    assert f"device='{device}'" in text
    assert _without_device(text) == _without_device(repr(ref))
    assert _without_device(str(x)) == _without_device(str(ref))


def test_printing_with_grad_fn():
    x = torch.ones(2, device=D, requires_grad=True)
    text = repr(x * 2)
    assert "grad_fn=<MulBackward0>" in text and "device='mydev:0'" in text
    assert _without_device(text) == _without_device(repr(torch.ones(2, requires_grad=True) * 2))


# ======================================================= device-kernel path ==
# op -> (function, which dtype kinds it accepts: "b"ool, "i"nt, "f"loat, "c"omplex)
BINARY_OPS = {
    "add": (lambda a, b: a + b, "bifc"),
    "sub": (lambda a, b: torch.sub(a, b, alpha=2), "ifc"),
    "mul": (lambda a, b: a * b, "bifc"),
    "div": (lambda a, b: a / b, "bifc"),
    "floor_divide": (torch.floor_divide, "if"),
    "maximum": (torch.maximum, "bif"),
    "eq": (lambda a, b: a == b, "bifc"),
    "lt": (lambda a, b: a < b, "bif"),
    "pow": (torch.pow, "ifc"),
    "atan2": (torch.atan2, "bif"),
    "bitwise_and": (lambda a, b: a & b, "bi"),
}

DTYPE_PAIRS = [
    (torch.float32, torch.float32),
    (torch.int64, torch.float32),
    (torch.int32, torch.int64),
    (torch.uint8, torch.int8),
    (torch.bool, torch.int32),
    (torch.bool, torch.bool),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float16),
    (torch.float64, torch.complex64),
]


def _kind(dtype):
    if dtype == torch.bool:
        return "b"
    if dtype.is_complex:
        return "c"
    return "f" if dtype.is_floating_point else "i"


BINARY_CASES = [
    pytest.param(op, pair, id=f"{op}-{_dtype_id(pair[0])}-{_dtype_id(pair[1])}")
    for op, (_, kinds) in BINARY_OPS.items()
    for pair in DTYPE_PAIRS
    if _kind(pair[0]) in kinds and _kind(pair[1]) in kinds
]


@pytest.mark.parametrize("op,dtypes", BINARY_CASES)
def test_binary_ops_broadcast_and_promote(op, dtypes):
    fn = BINARY_OPS[op][0]
    a_ref = sample((4, 1, 3), dtypes[0], seed=1, low=1, high=5)
    b_ref = sample((5, 1), dtypes[1], seed=2, low=1, high=5)
    expected = fn(a_ref, b_ref)
    out = fn(a_ref.to(D), b_ref.to(D))
    assert out.dtype == expected.dtype and out.shape == (4, 5, 3)
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x + 2.5,
        lambda x: 3 * x,
        lambda x: x.to(torch.int32) * 1.5,
        lambda x: x.to(torch.int16) + torch.tensor(100000),  # 0-dim does not widen the category
        lambda x: x.to(torch.float16) + torch.tensor(2.0, dtype=torch.float64),
        lambda x: x.to(torch.uint8) + True,
        lambda x: x.to(torch.int64) / 2,
        lambda x: torch.where(x > 0, x, 0.0),
    ],
    ids=[
        "float_scalar",
        "int_scalar_left",
        "int_tensor_float_scalar",
        "int16_plus_0dim_int64",
        "half_plus_0dim_double",
        "uint8_plus_bool",
        "true_divide_int",
        "where_scalar",
    ],
)
def test_scalar_type_promotion(make):
    ref = sample((3, 4), torch.float32, seed=3, low=0, high=4).round()
    # 0-dim CPU tensors inside `make` are mixed with a mydev tensor here.
    expected = make(ref)
    out = make(ref.to(D))
    assert out.dtype == expected.dtype
    assert_matches_cpu(out, expected)


UNARY_OPS = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log1p": lambda x: torch.log1p(x.abs()),
    "sin": torch.sin,
    "sqrt": lambda x: x.abs().sqrt(),
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "floor": torch.floor,
    "round": lambda x: torch.round(x, decimals=1),
    "clamp": lambda x: x.clamp(-1, 0.5),
    "sign": torch.sign,
    "logical_not": torch.logical_not,
    "bitwise_not": lambda x: torch.bitwise_not(x.to(torch.int32)),
    "to_int8": lambda x: x.to(torch.int8),
    "isfinite": lambda x: torch.isfinite(x / 0),
}


@pytest.mark.parametrize("op", list(UNARY_OPS))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_unary_ops(op, layout):
    base = sample((6, 8), torch.float32, seed=4)
    view = {"contiguous": lambda t: t, "transposed": lambda t: t.t(), "strided": lambda t: t[::2, 1::3]}[layout]
    expected = UNARY_OPS[op](view(base))
    out = UNARY_OPS[op](view(base.to(D)))
    assert out.dtype == expected.dtype
    assert_matches_cpu(out, expected)


def test_in_place_ops_write_self_and_only_the_view():
    ref = sample((4, 6), torch.float32, seed=5)
    x = ref.to(D)
    other_ref = sample((6,), torch.float32, seed=6)
    ptr = x.data_ptr()
    assert x.add_(other_ref.to(D), alpha=2) is x
    ref.add_(other_ref, alpha=2)
    assert x.data_ptr() == ptr
    assert_matches_cpu(x, ref)
    x[1:3, ::2].mul_(-3)
    ref[1:3, ::2].mul_(-3)
    x.t()[2].sub_(1)
    ref.t()[2].sub_(1)
    assert_matches_cpu(x, ref)
    x += 1
    ref += 1
    x.clamp_(min=0)
    ref.clamp_(min=0)
    assert_matches_cpu(x, ref)
    i = torch.arange(6, device=D)
    i.mul_(2).add_(torch.tensor(1))
    assert_matches_cpu(i, torch.arange(6) * 2 + 1)


def test_in_place_bad_input_raises_like_cpu():
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.ones(3, dtype=torch.int64).add_(torch.ones(3))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.ones(3, dtype=torch.int64, device=D).add_(torch.ones(3, device=D))
    with pytest.raises(RuntimeError, match=re.escape("output with shape [3] doesn't match the broadcast shape [2, 3]")):
        torch.ones(3).add_(torch.ones(2, 3))
    x = torch.ones(3, device=D)
    with pytest.raises(RuntimeError, match=re.escape("output with shape [3] doesn't match the broadcast shape [2, 3]")):
        x.add_(torch.ones(2, 3, device=D))
    assert_matches_cpu(x, torch.ones(3), exact=True)


OUT_SHAPES = {
    "right_size": lambda: torch.empty((3, 4), device=D),
    "empty": lambda: torch.empty(0, device=D),
    "wrong_size": lambda: torch.empty((2, 2), device=D),
    "bigger": lambda: torch.empty((5, 7), device=D),
    "non_contiguous": lambda: torch.empty((4, 3), device=D).t(),
}


@pytest.mark.parametrize("out_kind", list(OUT_SHAPES))
def test_out_variant_writes_and_resizes_out(out_kind):
    a_ref, b_ref = sample((3, 4), seed=7), sample((4,), seed=8)
    out = OUT_SHAPES[out_kind]()
    out_ref = (
        torch.empty(out.shape).as_strided(out.shape, out.stride())
        if out_kind == "non_contiguous"
        else torch.empty(out.shape)
    )
    with warnings.catch_warnings(record=True) as dev_warnings:
        warnings.simplefilter("always")
        result = torch.add(a_ref.to(D), b_ref.to(D), alpha=3, out=out)
    with warnings.catch_warnings(record=True) as cpu_warnings:
        warnings.simplefilter("always")
        result_ref = torch.add(a_ref, b_ref, alpha=3, out=out_ref)
    assert result is out
    assert (out.shape, out.stride()) == (out_ref.shape, out_ref.stride())
    assert_matches_cpu(out, result_ref)
    # Resizing a non-empty out warns as on CPU.
    assert [str(w.message)[:40] for w in dev_warnings] == [str(w.message)[:40] for w in cpu_warnings]


@pytest.mark.parametrize(
    "name,fn",
    [
        ("sum_dim", lambda x, out: torch.sum(x, 1, out=out)),
        ("mm", lambda x, out: torch.mm(x, x.t(), out=out)),
        ("cat", lambda x, out: torch.cat([x, x], 0, out=out)),
        ("exp", lambda x, out: torch.exp(x, out=out)),
        ("max_dim", lambda x, out: torch.amax(x, 0, keepdim=True, out=out)),
        ("masked_select", lambda x, out: torch.masked_select(x, x > 0, out=out)),
        ("nonzero", lambda x, out: torch.nonzero(x > 0, out=out.long())),
    ],
)
def test_out_variants_of_other_ops(name, fn):
    x_ref = sample((3, 5), seed=9)
    out_ref = torch.empty(0)
    expected = fn(x_ref, out_ref)
    out = torch.empty(0, device=D)
    result = fn(x_ref.to(D), out)
    assert result.shape == expected.shape
    assert_matches_cpu(result, expected)
    if name != "nonzero":
        assert result is out


REDUCTIONS = {
    "sum": lambda x, dim, keepdim: torch.sum(x, dim, keepdim=keepdim),
    "sum_dtype": lambda x, dim, keepdim: torch.sum(x, dim, keepdim=keepdim, dtype=torch.float64),
    "mean": lambda x, dim, keepdim: torch.mean(x, dim, keepdim=keepdim),
    "prod": lambda x, dim, keepdim: torch.prod(x, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim),
    "max": lambda x, dim, keepdim: tuple(torch.max(x, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim)),
    "min": lambda x, dim, keepdim: tuple(torch.min(x, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim)),
    "amax": lambda x, dim, keepdim: torch.amax(x, dim, keepdim=keepdim),
    "argmax": lambda x, dim, keepdim: torch.argmax(x, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim),
    "argmin": lambda x, dim, keepdim: torch.argmin(x, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim),
    "std": lambda x, dim, keepdim: torch.std(x, dim, keepdim=keepdim),
    "logsumexp": lambda x, dim, keepdim: torch.logsumexp(x, dim, keepdim=keepdim),
    "any": lambda x, dim, keepdim: torch.any(x > 1, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim),
    "all": lambda x, dim, keepdim: torch.all(x > -3, dim[0] if isinstance(dim, tuple) else dim, keepdim=keepdim),
}


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_with_dim(op, dim, keepdim):
    x_ref = sample((3, 4, 5), seed=10)
    expected = REDUCTIONS[op](x_ref, dim, keepdim)
    out = REDUCTIONS[op](x_ref.to(D), dim, keepdim)
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("sum", torch.sum),
        ("sum_int", lambda x: (x * 10).to(torch.int32).sum()),
        ("mean", torch.mean),
        ("max", torch.max),
        ("min", torch.min),
        ("argmax", torch.argmax),
        ("argmax_transposed", lambda x: x.t().argmax()),
        ("norm", torch.linalg.vector_norm),
        ("var", torch.var),
        ("count_nonzero", lambda x: torch.count_nonzero(x > 0)),
        ("sum_empty", lambda x: x[:0].sum()),
        ("sum_empty_dim", lambda x: x[:, :0].sum(1)),
    ],
)
def test_full_reductions(name, fn):
    x_ref = sample((6, 7), seed=11)
    expected = fn(x_ref)
    out = fn(x_ref.to(D))
    assert out.dtype == expected.dtype
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=_dtype_id)
@pytest.mark.parametrize(
    "name,fn,shapes",
    [
        ("mm", torch.mm, [(5, 7), (7, 3)]),
        ("mm_transposed", lambda a, b: torch.mm(a.t(), b.t()), [(7, 5), (3, 7)]),
        ("matmul_vec", torch.matmul, [(5, 7), (7,)]),
        ("matmul_broadcast", torch.matmul, [(2, 1, 5, 7), (3, 7, 4)]),
        ("bmm", torch.bmm, [(4, 5, 6), (4, 6, 2)]),
        ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), [(3,), (5, 7), (7, 3)]),
        ("einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
        ("linear", torch.nn.functional.linear, [(4, 6), (3, 6)]),
        ("matmul_empty", torch.matmul, [(0, 4), (4, 3)]),
    ],
)
def test_matmul_family(dtype, name, fn, shapes):
    args_ref = [sample(s, dtype, seed=12 + i) for i, s in enumerate(shapes)]
    expected = fn(*args_ref)
    out = fn(*[a.to(D) for a in args_ref])
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_softmax(fn, dim, dtype):
    x_ref = sample((4, 5, 6), seed=13) * 3
    expected = fn(x_ref, dim, dtype=dtype)
    out = fn(x_ref.to(D), dim, dtype=dtype)
    assert out.dtype == expected.dtype
    assert_matches_cpu(out, expected)
    half = x_ref.to(torch.float16)
    assert_matches_cpu(fn(half.to(D).transpose(0, 2), dim), fn(half.transpose(0, 2), dim))


@pytest.mark.parametrize(
    "name,fn",
    [
        ("cat0", lambda ts: torch.cat(ts, 0)),
        ("cat1", lambda ts: torch.cat([ts[0], ts[0][:, :1]], 1)),
        ("cat_non_contiguous", lambda ts: torch.cat([ts[0].t(), ts[1][::2].t()], 1)),
        (
            "cat_promotes",
            lambda ts: torch.cat([ts[0].to(torch.int32), ts[1].to(torch.float16), ts[2].to(torch.float64)], 0),
        ),
        ("cat_with_empty", lambda ts: torch.cat([ts[0], torch.empty(0, device=ts[0].device), ts[1]], 0)),
        ("stack", lambda ts: torch.stack([ts[0], ts[1][:2]], 1)),
        ("hstack", lambda ts: torch.hstack([ts[0], ts[0]])),
        ("split_cat", lambda ts: torch.cat(torch.split(ts[1], [1, 3], 0)[::-1], 0)),
        ("chunk_stack", lambda ts: torch.stack(torch.chunk(ts[1], 2, 0))),
        ("unbind", lambda ts: torch.stack(torch.unbind(ts[2], 1), 0)),
    ],
)
def test_cat_stack_and_tensor_lists(name, fn):
    tensors_ref = [sample((2, 4), seed=14), sample((4, 4), seed=15), sample((3, 4), seed=16)]
    expected = fn(tensors_ref)
    out = fn([t.to(D) for t in tensors_ref])
    assert out.dtype == expected.dtype
    assert_matches_cpu(out, expected)


INDEX_OPS = {
    "index_select": lambda x, i: torch.index_select(x, 1, i),
    "index_select_dim0": lambda x, i: torch.index_select(x, 0, i[[1, 2, 4]]),
    "gather": lambda x, i: torch.gather(x, 1, i.expand(4, -1)),
    "scatter_": lambda x, i: x.clone().scatter_(1, i[:, :3].expand(4, -1), -1.0),
    "scatter_src": lambda x, i: x.clone().scatter_(1, i[:, :3].expand(4, -1), x[:, :3] * 10),
    "scatter_add_": lambda x, i: x.clone().scatter_add_(1, i.expand(4, -1), torch.ones_like(x)[:, :5]),
    "index_add_": lambda x, i: x.clone().index_add_(1, i, torch.ones(4, 5, device=x.device)),
    "index_fill_": lambda x, i: x.clone().index_fill_(1, i, 7.0),
    "take_along_dim": lambda x, i: torch.take_along_dim(x, i.expand(4, -1), 1),
    "embedding": lambda x, i: torch.nn.functional.embedding(i, x.t()),
}


@pytest.mark.parametrize("op", list(INDEX_OPS))
def test_index_ops(op):
    x_ref = sample((4, 6), seed=17)
    index_ref = torch.tensor([[5, 0, 3, 3, 1]])
    if op in ("index_select", "index_select_dim0", "index_add_", "index_fill_", "embedding"):
        index_ref = index_ref[0]
    expected = INDEX_OPS[op](x_ref, index_ref)
    out = INDEX_OPS[op](x_ref.to(D), index_ref.to(D))
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize("index_device", [D, "cpu"])
@pytest.mark.parametrize(
    "name,get",
    [
        ("rows", lambda x, i: x[i]),
        ("cols", lambda x, i: x[:, i]),
        ("pair", lambda x, i: x[i, i.flip(0)]),
        ("with_slice", lambda x, i: x[1:, i][:, ::2]),
        ("int32_index", lambda x, i: x[i.to(torch.int32)]),
        ("negative", lambda x, i: x[i - 4]),
    ],
)
def test_advanced_indexing_with_device_or_host_index(index_device, name, get):
    x_ref = sample((4, 5), seed=18)
    index_ref = torch.tensor([3, 0, 2, 2])
    expected = get(x_ref, index_ref)
    out = get(x_ref.to(D), index_ref.to(index_device))
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize("index_device", [D, "cpu"])
def test_index_put_with_device_or_host_index(index_device):
    x_ref = sample((4, 5), seed=19)
    x = x_ref.to(D)
    index_ref = torch.tensor([3, 0, 2])
    x[index_ref.to(index_device)] = -1.0
    x_ref[index_ref] = -1.0
    x[:, index_ref.to(index_device)] = torch.arange(3.0, device=D)
    x_ref[:, index_ref] = torch.arange(3.0)
    x.index_put_((index_ref.to(index_device), index_ref.to(index_device)), torch.tensor(5.0, device=D), accumulate=True)
    x_ref.index_put_((index_ref, index_ref), torch.tensor(5.0), accumulate=True)
    assert_matches_cpu(x, x_ref)


@pytest.mark.parametrize("mask_device", [D, "cpu"])
def test_boolean_mask_indexing(mask_device):
    x_ref = sample((4, 5), seed=20)
    mask_ref = x_ref > 0
    out = x_ref.to(D)[mask_ref.to(mask_device)]
    assert_matches_cpu(out, x_ref[mask_ref])
    rows = x_ref.to(D)[mask_ref[:, 0].to(mask_device)]
    assert_matches_cpu(rows, x_ref[mask_ref[:, 0]])
    x = x_ref.to(D)
    x[mask_ref.to(mask_device)] = 0.0
    expected = x_ref.clone()
    expected[mask_ref] = 0.0
    assert_matches_cpu(x, expected)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("nonzero", lambda x: torch.nonzero(x > 0)),
        ("nonzero_tuple", lambda x: torch.nonzero(x > 0, as_tuple=True)),
        ("argwhere", lambda x: torch.argwhere(x > 0.5)),
        ("unique", lambda x: torch.unique((x * 2).round(), sorted=True)),
        ("unique_all", lambda x: torch.unique((x * 2).round(), return_inverse=True, return_counts=True)),
        ("unique_consecutive", lambda x: torch.unique_consecutive((x.flatten() > 0).int(), return_counts=True)),
        ("masked_select", lambda x: torch.masked_select(x, x < 0)),
        ("masked_select_broadcast", lambda x: torch.masked_select(x, (x[0] > 0))),
        ("nonzero_none", lambda x: torch.nonzero(x > 100)),
    ],
)
def test_data_dependent_ops_return_device_tensors(name, fn):
    x_ref = sample((5, 6), seed=21)
    expected = fn(x_ref)
    x = x_ref.to(D)
    latch = hold_stream()
    x = x * 1  # the input is still being computed when the op runs
    release_from_another_thread(latch)  # data-dependent ops synchronize
    out = fn(x)
    if isinstance(expected, tuple):
        assert_matches_cpu(tuple(out), tuple(expected), exact=True)
    else:
        assert_matches_cpu(out, expected, exact=True)


def test_ops_returning_host_values():
    a_ref = sample((3, 4), seed=22)
    a = a_ref.to(D)
    assert torch.equal(a, a.clone()) is True
    assert torch.equal(a, a + 1) is torch.equal(a_ref, a_ref + 1) is False
    assert torch.equal(a, a[:2]) is False
    assert torch.allclose(a, a + 1e-9) is True
    assert torch.allclose(a, a + 1) is False
    assert torch.tensor([0.0], device=D).is_nonzero() is False
    assert torch.tensor(3, device=D).is_nonzero() is True
    assert (a > 0).any().item() is (a_ref > 0).any().item()
    assert (a > 100).any().item() is False
    assert bool((a > -100).all()) is True
    assert a.sum().item() == pytest.approx(a_ref.sum().item(), rel=1e-6)
    assert a.argmax().item() == a_ref.argmax().item()
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(torch.tensor([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(torch.tensor([0.0, 1.0], device=D))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        torch.tensor([0.0, 1.0], device=D).is_nonzero()


VIEW_OPS = {
    "t": lambda x: x.t(),
    "transpose": lambda x: x.transpose(0, 1),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "unfold_overlap_read": lambda x: x.unfold(0, 2, 1)[1],
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x.diagonal(1),
    "narrow": lambda x: x.narrow(1, 1, 3),
    "select": lambda x: x.select(1, 2),
    "movedim": lambda x: x.view(2, 2, 6).movedim(2, 0),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "chunk": lambda x: torch.chunk(x, 3, 1)[1],
    "unbind": lambda x: x.unbind(0)[2],
    "view_as_real": lambda x: torch.view_as_real(torch.view_as_complex(x.view(4, 3, 2))),
    "view_as_complex": lambda x: torch.view_as_complex(x.view(4, 3, 2)),
    "real_of_complex": lambda x: torch.view_as_complex(x.view(4, 3, 2)).real,
}


@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_views_share_storage_and_write_through(op):
    base_ref = torch.arange(24.0).reshape(4, 6)
    base = base_ref.to(D)
    view, view_ref = VIEW_OPS[op](base), VIEW_OPS[op](base_ref)
    assert (view.dtype, view.shape, view.stride(), view.storage_offset()) == (
        view_ref.dtype,
        view_ref.shape,
        view_ref.stride(),
        view_ref.storage_offset(),
    )
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert_matches_cpu(view, view_ref, exact=True)
    if op != "unfold_overlap_read":
        view.mul_(-1)
        view_ref.mul_(-1)
    assert_matches_cpu(base, base_ref, exact=True)


def test_unfold_overlapping_view_reads():
    ref = torch.arange(10.0)
    x = ref.to(D)
    u, u_ref = x.unfold(0, 4, 1), ref.unfold(0, 4, 1)
    assert_matches_cpu(u, u_ref, exact=True)
    assert_matches_cpu(u.sum(1), u_ref.sum(1), exact=True)
    x[3] = 100
    ref[3] = 100
    assert_matches_cpu(u, u_ref, exact=True)


# ============================================================ device mixing ==
@pytest.mark.parametrize(
    "name,fn",
    [
        ("add_right", lambda x, s: x + s),
        ("add_left", lambda x, s: s + x),
        ("mul_left", lambda x, s: torch.mul(s, x)),
        ("where_other", lambda x, s: torch.where(x > 0, x, s)),
        ("where_self", lambda x, s: torch.where(x > 0, s, x)),
        ("in_place", lambda x, s: x.clone().add_(s)),
        ("index_put_value", lambda x, s: x.clone().index_put_((torch.tensor([1], device=x.device),), s)),
    ],
)
def test_zero_dim_cpu_tensor_mixes_with_device_tensor(name, fn):
    x_ref = sample((3, 4), seed=23)
    scalar = torch.tensor(0.5)
    expected = fn(x_ref, scalar)
    out = fn(x_ref.to(D), scalar)
    assert_matches_cpu(out, expected)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("add", lambda a, b: a + b),
        ("add_reversed", lambda a, b: b + a),
        ("in_place", lambda a, b: a.add_(b)),
        ("mm", lambda a, b: torch.mm(a, b.view(4, 1))),
        ("cat", lambda a, b: torch.cat([a, b.view(1, 4)])),
        ("where", lambda a, b: torch.where(a > 0, a, b)),
        ("index_select", lambda a, b: torch.index_select(a, 1, b.long())),
        ("out", lambda a, b: torch.add(a, a, out=b)),
        ("foreach_in_place", lambda a, b: torch._foreach_add_([a], [b])),
        ("foreach_functional", lambda a, b: torch._foreach_mul([a, a], [a, b])),
    ],
)
@pytest.mark.parametrize("other_device", ["cpu", D1])
def test_mixing_devices_raises(name, fn, other_device):
    a = sample((3, 4), seed=24).to(D)
    before = a.cpu()
    b = torch.zeros(4, device=other_device)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device") as error:
        fn(a, b)
    assert other_device in str(error.value) and "mydev:0" in str(error.value)
    # Nothing was written, and the device still works.
    assert_matches_cpu(a, before, exact=True)
    assert_matches_cpu(a + 1, before + 1, exact=True)


def test_foreach_scalars_tensor_is_read_on_the_host():
    # The `Tensor scalars` overloads take one number per position as a host
    # tensor, as on cuda; only that argument may be a host tensor.
    tensors = [sample((3, 4), seed=25), sample((5,), seed=26)]
    scalars = torch.tensor([0.5, -2.0])
    expected = torch._foreach_addcdiv(tensors, tensors, [t.abs() + 1 for t in tensors], scalars)
    on_device = [t.to(D) for t in tensors]
    out = torch._foreach_addcdiv(on_device, on_device, [t.abs() + 1 for t in on_device], scalars)
    for got, want in zip(out, expected):
        assert_matches_cpu(got, want)


def test_mixing_devices_raises_for_device_one_first():
    a = torch.ones(3, device=D1)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a * torch.ones(3, device=D)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a * torch.ones(3)
    assert_matches_cpu(a * 2, torch.full((3,), 2.0), device=D1)


# ====================================================== errors of the ops ==
def _raise_same(fn, x_ref, *args):
    """Runs ``fn`` on CPU and on mydev; both must raise the same exception
    type with the same first line of message. A device failure may surface
    at the next synchronizing call, so the result is read back."""
    with pytest.raises(Exception) as cpu_error:
        fn(x_ref, *args)
    x = x_ref.to(D)
    dev_args = [a.to(D) if isinstance(a, torch.Tensor) and a.dim() > 0 else a for a in args]
    with pytest.raises(Exception) as dev_error:
        out = fn(x, *dev_args)
        (out[0] if isinstance(out, tuple) else out).cpu()
    assert dev_error.type is cpu_error.type, (dev_error.type, str(dev_error.value))
    cpu_line = str(cpu_error.value).split("\n")[0]
    assert cpu_line in str(dev_error.value), (cpu_line, str(dev_error.value))
    # Usable after.
    torch.mydev.synchronize()
    assert_matches_cpu(x * 2, x_ref * 2, exact=True)


@pytest.mark.parametrize(
    "name,fn,args",
    [
        ("mm_shapes", lambda x, y: torch.mm(x, y), (torch.ones(5, 2),)),
        ("matmul_shapes", lambda x, y: x @ y, (torch.ones(3),)),
        ("bmm_rank", lambda x, y: torch.bmm(x, y), (torch.ones(4, 2),)),
        ("add_shapes", lambda x, y: x + y, (torch.ones(5),)),
        ("cat_shapes", lambda x, y: torch.cat([x, y]), (torch.ones(2, 3),)),
        ("int_index", lambda x: x[10], ()),
        ("index_out_of_range", lambda x, i: x[i], (torch.tensor([1, 10]),)),
        ("index_negative_out_of_range", lambda x, i: x[:, i], (torch.tensor([-9]),)),
        ("index_select_out_of_range", lambda x, i: torch.index_select(x, 0, i), (torch.tensor([7]),)),
        ("gather_out_of_range", lambda x, i: torch.gather(x, 1, i), (torch.tensor([[0], [9], [0], [0]]),)),
        ("scatter_out_of_range", lambda x, i: x.clone().scatter_(0, i, 1.0), (torch.tensor([[9]]),)),
        ("softmax_dim", lambda x: torch.softmax(x, 3), ()),
        ("sum_dim", lambda x: x.sum(5), ()),
        ("view_size", lambda x: x.view(7), ()),
        ("index_put_shapes", lambda x, i: x.index_put_((i,), torch.ones(3, 3)), (torch.tensor([0, 1]),)),
        ("dtype_not_implemented", lambda x, y: x & y, (torch.ones(4),)),
        ("complex_not_implemented", lambda x: x.to(torch.complex64) < 1, ()),
        ("complex_floor_divide", lambda x: torch.floor_divide(x.to(torch.complex64), 2), ()),
    ],
)
def test_op_errors_match_cpu(name, fn, args):
    _raise_same(fn, sample((4, 4), seed=25), *args)


@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_lstsq_solution_is_the_cpus_narrowed_column_major_buffer(driver, batch):
    # The CPU returns a view of an (m, k) column-major buffer narrowed to
    # (n, k): strides (1, m), not a dense tensor.
    g = torch.Generator(device="mydev").manual_seed(0)
    a = torch.randn(*batch, 4, 3, device="mydev", generator=g)
    b = torch.randn(*batch, 4, 2, device="mydev", generator=g)
    got, expected = torch.linalg.lstsq(a, b, driver=driver), torch.linalg.lstsq(a.cpu(), b.cpu(), driver=driver)
    for name, d, c in zip(("solution", "residuals", "rank", "singular_values"), got, expected):
        assert (d.shape, d.stride(), d.dtype) == (c.shape, c.stride(), c.dtype), name
        torch.testing.assert_close(d.cpu(), c, rtol=1e-4, atol=1e-5, msg=name)
    assert got.solution.stride()[-2:] == (1, 4)
    # The solution is usable as any device tensor.
    torch.testing.assert_close((got.solution * 2).cpu(), expected.solution * 2, rtol=1e-4, atol=1e-5)


def test_outputs_keep_the_cpu_layout_where_meta_kernels_disagree():
    """Output metadata follows the CPU kernel (csrc/aten/cpu_output_contract.cpp):
    pointwise ops through an empty out= keep a transposed input's layout,
    eigenvectors and least-squares solutions are column-major, FFTs take
    the CPU library's layout, a 1-D multilabel margin loss without
    reduction is 0-dim. Inputs are made on the device."""
    g = torch.Generator(device="mydev").manual_seed(0)
    x = torch.randn(5, 5, device="mydev", generator=g)
    cases = {
        "abs of a transposed tensor": lambda t: t.t().abs(),
        "abs of a narrowed column-major tensor": lambda t: t.t()[:3].abs(),
        "abs of svd's narrowed Vh": lambda t: torch.linalg.svd(t[:3], full_matrices=True)[2][:3].abs(),
        "neg of a transposed tensor": lambda t: torch.neg(t.t()),
        "eigenvectors": lambda t: torch.linalg.eig(t)[1],
        "lstsq solution": lambda t: torch.linalg.lstsq(t[:2], t[2:4]).solution,
        "lstsq solution, more rows than columns": lambda t: torch.linalg.lstsq(t[:4, :3], t[:4, 3:]).solution,
        "rfft2": lambda t: torch.fft.rfft2(t.reshape(1, 5, 5), dim=(-3, -2, -1)),
        "multilabel margin loss": lambda t: torch.nn.functional.multilabel_margin_loss(
            t[0], torch.tensor([3, 0, -1, 1, 2], device=t.device), reduction="none"
        ),
        "nonzero_static": lambda t: torch.nonzero_static(t > 0, size=3),
    }
    for name, fn in cases.items():
        got, expected = fn(x), fn(x.cpu())
        assert (got.shape, got.stride(), got.dtype) == (expected.shape, expected.stride(), expected.dtype), name
        torch.testing.assert_close(got.cpu(), expected, msg=name)


FLOOR_DIVISION_SCRIPT = """
import torch

g = torch.Generator(device="mydev").manual_seed(0)
ints = torch.randint(-50, 50, (6, 7), device="mydev", generator=g)
floats = torch.randn(6, 7, device="mydev", generator=g)
divisors = torch.randint(1, 9, (7,), device="mydev", generator=g)
in_place = ints.clone()
out = torch.empty(6, 7, dtype=torch.int64, device="mydev")
torch.mydev.synchronize()

latch = torch.mydev._debug.hold_stream()
results = {
    "int // int": ints // 7,
    "int // tensor": ints // divisors,
    "float // float": floats // 0.3,
    "floor_divide(float, tensor)": torch.floor_divide(floats, divisors),
    "int //= int": in_place.floor_divide_(3),
    "out=": torch.floor_divide(ints, divisors, out=out),
}
# Every call above returned while the stream was held: none waited for it.
assert torch.mydev.current_stream().query() is False
latch.release()
torch.mydev.synchronize()
h_ints, h_floats, h_divisors = ints.cpu(), floats.cpu(), divisors.cpu()
expected = {
    "int // int": h_ints // 7,
    "int // tensor": h_ints // h_divisors,
    "float // float": h_floats // 0.3,
    "floor_divide(float, tensor)": torch.floor_divide(h_floats, h_divisors),
    "int //= int": h_ints // 3,
    "out=": h_ints // h_divisors,
}
for name, result in results.items():
    assert result.device.type == "mydev", name
    assert result.dtype == expected[name].dtype and result.stride() == expected[name].stride(), name
    assert torch.equal(result.cpu(), expected[name]), name

# Integer division by zero: the CPU kernel's error, at the next
# synchronization, and the device still computes afterwards.
zero = ints // torch.zeros((), dtype=torch.int64, device="mydev")
try:
    torch.mydev.synchronize()
    raise AssertionError("no error for an integer division by zero")
except RuntimeError as error:
    assert "ZeroDivisionError" in str(error), error
assert torch.equal((ints // 5).cpu(), h_ints // 5)
print("asynchronous and equal")
"""


def test_floor_division_is_queued_without_waiting_for_the_stream():
    """`a // b` (floor_divide; torch's Meta kernel for it is Python) runs on
    the device like any pointwise op: queued behind held work, not run
    synchronously. A user's script in a fresh interpreter: while the stream
    is held, a synchronizing call would block, so the timeout fails it."""
    result = run_python(FLOOR_DIVISION_SCRIPT, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-3:] == ["asynchronous", "and", "equal"], result.stdout
