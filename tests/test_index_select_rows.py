"""The device's own kernel for index_select along the first dimension of a
contiguous tensor (an embedding lookup, a beam search's reorder), against
the CPU.

Which kernel ran is read from a captured graph's debug dump, which names each
recorded kernel: "index_select_rows" for the device's kernel,
"aten::index_select" for ATen's CPU kernel run on the device.
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
