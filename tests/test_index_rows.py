"""The device's own kernels for whole rows picked by an index, against the
CPU: index_select and x[index] along the first dimension of a contiguous
tensor (an embedding lookup, a beam search's reorder), and index_fill along
any dimension (masking positions).

Which kernel ran is read from a captured graph's debug dump, which names each
recorded kernel: "index_select_rows", "index_rows" or "index_fill_rows" for
the device's kernels, "aten::index_select" and so on for ATen's CPU kernel
run on the device.
"""

import pytest
import torch

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, captured_with_dump, run_python

D = "mydev"
KERNEL = "index_select_rows"
ATEN = "aten::index_select"


def table(shape, dtype):
    """A tensor made on the device, of distinct values where the dtype allows."""
    if dtype == torch.bool:
        return torch.arange(torch.Size(shape).numel(), device=D).reshape(shape) % 3 == 0
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=D)
    return torch.arange(torch.Size(shape).numel(), device=D).reshape(shape).to(dtype)


@pytest.mark.parametrize(
    "shape,index",
    [
        ((1,), [0]),  # the one-element chain of benchmarks/eager.py
        ((10,), [9, 0, 9]),  # repeated rows
        ((50, 768), [17]),  # a decode step's embedding lookup
        ((7, 3, 5), [6, 2, 2, 0]),
        ((4, 1), []),  # no rows: nothing to copy, ATen's kernel
    ],
)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_rows_of_the_first_dimension_take_the_kernel_and_match_cpu(shape, index, index_dtype, tmp_path):
    source = torch.randn(shape, device=D)
    rows = torch.tensor(index, dtype=index_dtype, device=D)
    out, dump = captured_with_dump(lambda: source.index_select(0, rows), tmp_path)
    assert (KERNEL in dump) == bool(index) and (ATEN in dump) == (not index)
    expected = source.cpu().index_select(0, rows.cpu())
    assert_close_to_cpu(out, expected, exact=True)
    assert_close_to_cpu(source.index_select(-len(shape), rows), expected, exact=True)  # eager, dim wrapped


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.uint8, torch.bool, torch.complex64]
)
def test_every_dtype_copies_whole_rows(dtype, tmp_path):
    source = table((6, 5), dtype)
    rows = torch.tensor([5, 1, 3], device=D)
    out, dump = captured_with_dump(lambda: torch.index_select(source, 0, rows), tmp_path)
    assert KERNEL in dump
    assert_close_to_cpu(out, source.cpu().index_select(0, rows.cpu()), exact=True)


def test_out_form_and_a_zero_dim_index_match_cpu(tmp_path):
    source = torch.randn(9, 4, device=D)
    out = torch.full((2, 4), float("nan"), device=D)
    pair, single = torch.tensor([8, 3], device=D), torch.tensor(5, device=D)

    def forms():
        torch.index_select(source, 0, pair, out=out)
        return out, source.index_select(0, single)

    (written, one), dump = captured_with_dump(forms, tmp_path)
    assert dump.count(KERNEL) == 2
    assert_close_to_cpu(written, source.cpu().index_select(0, pair.cpu()), exact=True)
    assert_close_to_cpu(one, source.cpu().index_select(0, single.cpu()), exact=True)


def test_an_embedding_lookup_takes_the_kernel_and_its_gradient_matches_cpu(tmp_path):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(100, 32).to(D)
    tokens = torch.tensor([[4, 99, 4]], device=D)
    with torch.no_grad():  # the capture records the forward only
        out, dump = captured_with_dump(lambda: embedding(tokens), tmp_path)
    assert KERNEL in dump
    reference = torch.nn.Embedding(100, 32)
    reference.load_state_dict({k: v.cpu() for k, v in embedding.state_dict().items()})
    assert_close_to_cpu(out, reference(tokens.cpu()), exact=True)
    embedding(tokens).square().sum().backward()
    reference(tokens.cpu()).square().sum().backward()
    assert_close_to_cpu(embedding.weight.grad, reference.weight.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "case",
    ["other_dim", "transposed_source", "strided_index", "large"],
)
def test_calls_outside_the_kernel_keep_aten_and_match_cpu(case, tmp_path):
    source = torch.randn(64, 48, device=D)
    rows = torch.tensor([3, 0, 47], device=D)
    calls = {
        "other_dim": lambda: source.index_select(1, rows),
        "transposed_source": lambda: source.t().index_select(0, rows),
        "strided_index": lambda: source.index_select(0, torch.arange(6, device=D)[::2]),
        # Past the kernel's 1 MiB: ATen's kernel copies with a thread team.
        "large": lambda: torch.randn(4096, 256, device=D).index_select(0, torch.arange(2048, device=D)),
    }
    out, dump = captured_with_dump(calls[case], tmp_path)
    assert ATEN in dump and KERNEL not in dump
    if case != "large":
        reference = {
            "other_dim": lambda: source.cpu().index_select(1, rows.cpu()),
            "transposed_source": lambda: source.cpu().t().index_select(0, rows.cpu()),
            "strided_index": lambda: source.cpu().index_select(0, torch.arange(6)[::2]),
        }[case]()
        assert_close_to_cpu(out, reference, exact=True)


@pytest.mark.parametrize("bad", [7, -1, 2**40])
def test_an_index_out_of_range_raises_cpus_index_error_from_the_kernel(bad):
    source = torch.arange(7.0, device=D)
    rows = torch.tensor([2, bad], device=D)
    with pytest.raises(IndexError, match="index out of range in self"):
        source.cpu().index_select(0, rows.cpu())
    out = source.index_select(0, rows)  # asynchronous, as on cuda
    with pytest.raises(IndexError, match="index out of range in self.*index_select_rows"):
        torch.mydev.synchronize()
    del out
    assert_close_to_cpu(source, torch.arange(7.0), exact=True)  # nothing lost
    assert_close_to_cpu(source.index_select(0, torch.tensor([6, 0], device=D)), torch.tensor([6.0, 0.0]), exact=True)
    assert_device_still_usable()


def test_an_out_argument_overlapping_the_source_raises_at_the_call():
    source = torch.arange(8.0, device=D)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.index_select(source, 0, torch.tensor([1, 2], device=D), out=source[:2])
    assert_close_to_cpu(source, torch.arange(8.0), exact=True)


def test_embedding_lookups_in_a_plain_script():
    # What a user writes: only torch imported, the table and the tokens made
    # on the device; a lookup, a decode-style loop of one token each, and
    # one token out of range, after which the process goes on.
    script = """
        import torch
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(1000, 64, device="mydev")
        reference = torch.nn.Embedding(1000, 64)
        reference.load_state_dict({k: v.cpu() for k, v in embedding.state_dict().items()})
        tokens = torch.randint(0, 1000, (2, 5), device="mydev")
        assert torch.equal(embedding(tokens).cpu(), reference(tokens.cpu()))
        token = tokens[:, -1:]
        for _ in range(4):
            token = (embedding(token).sum(-1) > 0).long() + token
        expected = tokens[:, -1:].cpu()
        for _ in range(4):
            expected = (reference(expected).sum(-1) > 0).long() + expected
        assert torch.equal(token.cpu(), expected)
        try:
            embedding(torch.tensor([1000], device="mydev"))
            torch.mydev.synchronize()
        except IndexError as error:
            print("raised:", str(error).splitlines()[0][:26])
        print("after:", embedding(torch.tensor([3], device="mydev")).shape)
        """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["raised: index out of range in self", "after: torch.Size([1, 64])"]


# x[index]: aten::index with one index tensor, counting negative indices from
# the end.
GATHER = "index_rows"
ATEN_INDEX = "aten::index"


@pytest.mark.parametrize(
    "shape,index",
    [
        ((4,), [0]),  # the one-element indexing chain of benchmarks/eager.py
        ((10,), [9, -1, -10, 0]),  # negative indices count from the end
        ((7, 3, 5), [[6, 2], [-2, 0]]),  # an index of two dimensions
        ((5, 4), [-5]),  # a row of a matrix (a zero-dim index is a select in Python)
    ],
)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_advanced_indexing_of_the_first_dimension_takes_the_kernel_and_matches_cpu(shape, index, index_dtype, tmp_path):
    source = torch.randn(shape, device=D)
    rows = torch.tensor(index, dtype=index_dtype, device=D)
    out, dump = captured_with_dump(lambda: source[rows], tmp_path)
    assert GATHER in dump and f'"{ATEN_INDEX}"' not in dump
    assert_close_to_cpu(out, source.cpu()[rows.cpu()], exact=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int8, torch.bool, torch.complex128])
def test_advanced_indexing_copies_whole_rows_of_every_dtype(dtype, tmp_path):
    source = table((6, 5), dtype)
    rows = torch.tensor([5, -5, 3], device=D)
    out, dump = captured_with_dump(lambda: source[rows], tmp_path)
    assert GATHER in dump
    assert_close_to_cpu(out, source.cpu()[rows.cpu()], exact=True)


@pytest.mark.parametrize("case", ["other_dim", "two_indices", "mask", "transposed_source"])
def test_indexing_outside_the_kernel_keeps_aten_and_matches_cpu(case, tmp_path):
    source = torch.randn(6, 4, device=D)
    rows = torch.tensor([3, 0], device=D)
    calls = {
        "other_dim": lambda s, r: s[:, r],
        "two_indices": lambda s, r: s[r, r],
        "mask": lambda s, r: s[s > 0],
        "transposed_source": lambda s, r: s.t()[r],
    }
    out = calls[case](source, rows)
    assert_close_to_cpu(out, calls[case](source.cpu(), rows.cpu()), exact=True)
    if case != "mask":  # a mask's result has a shape that depends on the data: no capture
        _, dump = captured_with_dump(lambda: calls[case](source, rows), tmp_path)
        assert GATHER not in dump


# index_fill: a value written into rows of any dimension.
FILL = "index_fill_rows"


@pytest.mark.parametrize(
    "shape,dim,index",
    [
        ((4,), 0, [0]),  # the one-element indexing chain of benchmarks/eager.py
        ((2, 3, 4), 1, [0, -1]),
        ((2, 3, 4), -1, [3, 3]),  # repeated, and the dimension counted from the end
        ((5, 2), 0, 4),  # a zero-dim index
        ((5, 2), 0, []),  # no index: a copy
    ],
)
@pytest.mark.parametrize("in_place", [False, True])
def test_index_fill_takes_the_kernel_and_matches_cpu(shape, dim, index, in_place, tmp_path):
    source = torch.randn(shape, device=D)
    expected = source.cpu().index_fill(dim, torch.tensor(index, dtype=torch.long), -2.5)
    rows = torch.tensor(index, dtype=torch.long, device=D)
    if in_place:
        target = source.clone()
        _, dump = captured_with_dump(lambda: target.index_fill_(dim, rows, -2.5), tmp_path)
        out = target
    else:
        out, dump = captured_with_dump(lambda: source.index_fill(dim, rows, -2.5), tmp_path)
    assert FILL in dump
    assert_close_to_cpu(out, expected, exact=True)


@pytest.mark.parametrize(
    "dtype,value",
    [
        (torch.float16, 1e-3),
        (torch.bfloat16, 3),
        (torch.int16, -7),
        (torch.uint8, 255),
        (torch.bool, 1),
        (torch.complex64, 2 - 1j),
        (torch.complex128, -0.5 + 3j),  # 16-byte elements
    ],
)
def test_index_fill_converts_the_value_as_the_cpu_does(dtype, value, tmp_path):
    source = table((4, 3), dtype)
    rows = torch.tensor([2, 0], device=D)
    out, dump = captured_with_dump(lambda: source.index_fill(1, rows, value), tmp_path)
    assert FILL in dump
    assert_close_to_cpu(out, source.cpu().index_fill(1, rows.cpu(), value), exact=True)


@pytest.mark.parametrize(
    "call",
    [
        lambda s, r: s.t().index_fill(0, r, 1.0),  # a transposed source
        lambda s, r: s.index_fill(0, r, torch.full((), 4.0, device=s.device)),  # a tensor value
    ],
    ids=["transposed", "tensor_value"],
)
def test_index_fill_outside_the_kernel_keeps_aten_and_matches_cpu(call, tmp_path):
    source = torch.randn(6, 4, device=D)
    rows = torch.tensor([1, 3], device=D)
    out, dump = captured_with_dump(lambda: call(source, rows), tmp_path)
    assert FILL not in dump
    assert_close_to_cpu(out, call(source.cpu(), rows.cpu()), exact=True)


def test_a_value_the_dtype_cannot_hold_raises_cpus_error_at_the_call():
    source = torch.zeros(3, dtype=torch.int8, device=D)
    rows = torch.tensor([1], device=D)
    with pytest.raises(RuntimeError, match="cannot be converted to type int8_t without overflow"):
        source.cpu().index_fill(0, rows.cpu(), 300)
    with pytest.raises(RuntimeError, match="cannot be converted to type int8_t without overflow"):
        source.index_fill(0, rows, 300)
    assert_close_to_cpu(source.index_fill(0, rows, 100), torch.tensor([0, 100, 0], dtype=torch.int8), exact=True)


@pytest.mark.parametrize(
    "kernel,call",
    [
        ("index_rows", lambda s, r: s[r]),
        ("index_fill_rows", lambda s, r: s.index_fill(0, r, 1.0)),
        ("index_fill_rows", lambda s, r: s.clone().index_fill_(0, r, 1.0)),
    ],
)
@pytest.mark.parametrize("bad", [7, -8, 2**40])
def test_an_index_out_of_bounds_raises_cpus_index_error_from_the_kernel(kernel, call, bad):
    source = torch.arange(7.0, device=D)
    rows = torch.tensor([2, bad], device=D)
    message = f"index {bad} is out of bounds for dimension 0 with size 7"
    with pytest.raises(IndexError, match=message):
        call(source.cpu(), rows.cpu())
    out = call(source, rows)  # asynchronous, as on cuda
    with pytest.raises(IndexError, match=f"{message}.*{kernel}"):
        torch.mydev.synchronize()
    del out
    assert_close_to_cpu(source, torch.arange(7.0), exact=True)  # nothing lost
    assert_close_to_cpu(call(source, torch.tensor([6, -1], device=D)), call(torch.arange(7.0), torch.tensor([6, -1])))
    assert_device_still_usable()


def test_indexing_and_masking_in_a_plain_script():
    # What a user writes: only torch imported, the tensors made on the
    # device; a top-k pick by fancy indexing, a padding mask filled with
    # index_fill, one index out of bounds, after which the process goes on.
    script = """
        import torch
        torch.manual_seed(0)
        scores = torch.randn(8, 16, device="mydev")
        best = scores.sum(-1).argsort(descending=True)[:3]
        assert torch.equal(scores[best].cpu(), scores.cpu()[best.cpu()])
        padded = torch.tensor([0, 5, -1], device="mydev")
        masked = scores.index_fill(1, padded, float("-inf")).softmax(-1)
        expected = scores.cpu().index_fill(1, padded.cpu(), float("-inf")).softmax(-1)
        assert torch.allclose(masked.cpu(), expected)
        try:
            scores[torch.tensor([8], device="mydev")]
            torch.mydev.synchronize()
        except IndexError as error:
            print("raised:", str(error).splitlines()[0][:52])
        print("after:", scores[torch.tensor([-8], device="mydev")].shape)
        """
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == [
        "raised: index 8 is out of bounds for dimension 0 with size 8",
        "after: torch.Size([1, 16])",
    ]
