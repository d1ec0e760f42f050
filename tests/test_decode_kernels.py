"""The device's own kernel for one-row float32 matrix products (every Linear
of a language model's decode step multiplies one token, with its bias or
without, and so does each head's attention product written as a batched
one), against the CPU.

Which kernel ran is read from a captured graph's debug dump, which names each
recorded kernel: "matrix_vector_product" for the device's kernel, "aten::mm",
"aten::addmm" or "aten::bmm" for ATen's CPU kernel run on the device.
"""

import re

import pytest
import torch
import torch.nn.functional as F

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, captured_with_dump, run_python

D = "mydev"
KERNEL = "matrix_vector_product"


# Decode sizes, vector tails, degenerate sizes, and one matrix large enough
# to be split across threads (above 2**20 elements).
SHAPES = [(256, 768), (512, 256), (17, 33), (1, 5), (300, 1), (64, 4), (128, 9000)]


@pytest.mark.parametrize("k,n", SHAPES)
@pytest.mark.parametrize("layout", ["weight_transposed", "rows"])
def test_one_row_products_take_the_kernel_and_match_cpu(k, n, layout, tmp_path):
    x = torch.randn(1, k, device=D)
    if layout == "weight_transposed":  # a Linear's x @ weight.t()
        weight = torch.randn(n, k, device=D)
        fn, ref = (lambda: x @ weight.t()), x.cpu() @ weight.cpu().t()
    else:
        w = torch.randn(k, n, device=D)
        fn, ref = (lambda: x @ w), x.cpu() @ w.cpu()
    out, dump = captured_with_dump(fn, tmp_path)
    assert KERNEL in dump and "aten::mm" not in dump
    assert_close_to_cpu(out, ref, rtol=1e-5, atol=1e-4)
    assert_close_to_cpu(fn(), ref, rtol=1e-5, atol=1e-4)  # eager


def test_out_linear_and_row_view_forms_match_cpu(tmp_path):
    weight = torch.randn(96, 40, device=D)
    tokens = torch.randn(3, 40, device=D)
    out = torch.full((1, 96), float("nan"), device=D)

    def forms():
        torch.mm(tokens[1:2], weight.t(), out=out)  # a row view of a matrix
        return out, F.linear(tokens[2:3].unsqueeze(0), weight)  # [1, 1, 40] input

    (mm_out, linear), dump = captured_with_dump(forms, tmp_path)
    assert dump.count(KERNEL) == 2
    assert_close_to_cpu(mm_out, tokens[1:2].cpu() @ weight.cpu().t(), rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(linear, F.linear(tokens[2:3].cpu().unsqueeze(0), weight.cpu()), rtol=1e-5, atol=1e-5)


def test_a_sliced_weight_and_an_output_beside_the_vector_take_the_kernel(tmp_path):
    # A fused QKV weight cut into its query block is not dense, and the
    # output may sit in the same buffer as the vector as long as their
    # elements do not overlap: the kernel takes both (ATen's overlap check
    # would call the slice "too hard" and refuse it).
    qkv = torch.randn(40, 3 * 32, device=D)
    query_weight = qkv[:, :32]
    buffer = torch.randn(2, 40, device=D)
    x, out = buffer[0:1], buffer[1:2, :32]

    def product():
        return torch.mm(x, query_weight, out=out)

    result, dump = captured_with_dump(product, tmp_path)
    assert KERNEL in dump and "aten::mm" not in dump
    assert_close_to_cpu(result, buffer[0:1].cpu() @ qkv[:, :32].cpu(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,n", [(256, 768), (17, 33), (1, 5), (300, 1), (128, 9000)])
@pytest.mark.parametrize("layout", ["linear", "conv1d"])
def test_one_row_products_with_a_bias_take_the_kernel_and_match_cpu(k, n, layout, tmp_path):
    # A Linear with a bias (x @ weight.t() + bias), and GPT-2's Conv1D
    # (addmm of the bias, x and a weight with contiguous rows).
    x, bias = torch.randn(1, k, device=D), torch.randn(n, device=D)
    if layout == "linear":
        weight = torch.randn(n, k, device=D)
        fn, ref = (lambda: F.linear(x, weight, bias)), F.linear(x.cpu(), weight.cpu(), bias.cpu())
    else:
        w = torch.randn(k, n, device=D)
        fn, ref = (lambda: torch.addmm(bias, x, w)), torch.addmm(bias.cpu(), x.cpu(), w.cpu())
    out, dump = captured_with_dump(fn, tmp_path)
    assert KERNEL in dump and "aten::addmm" not in dump
    assert_close_to_cpu(out, ref, rtol=1e-5, atol=1e-4)
    assert_close_to_cpu(fn(), ref, rtol=1e-5, atol=1e-4)  # eager


@pytest.mark.parametrize("shape", [(40,), (1, 40), (1,), (1, 1), ()])
def test_every_bias_a_row_broadcasts_from_takes_the_kernel(shape, tmp_path):
    x, w = torch.randn(1, 24, device=D), torch.randn(24, 40, device=D)
    bias = torch.randn(shape, device=D)
    out = torch.full((1, 40), float("nan"), device=D)
    (functional, into_out), dump = captured_with_dump(
        lambda: (torch.addmm(bias, x, w), torch.addmm(bias, x, w, out=out)), tmp_path
    )
    assert dump.count(KERNEL) == 2 and "aten::addmm" not in dump
    expected = torch.addmm(bias.cpu(), x.cpu(), w.cpu())
    assert_close_to_cpu(functional, expected, rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(into_out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["beta_alpha", "strided_bias", "bias_overlaps_out", "in_place", "float64"])
def test_biased_products_the_kernel_does_not_take_run_atens_and_match_cpu(case, tmp_path):
    dtype = torch.float64 if case == "float64" else torch.float32
    x, w = torch.randn(1, 24, device=D, dtype=dtype), torch.randn(24, 10, device=D, dtype=dtype)
    bias = (
        torch.randn(20, device=D, dtype=dtype)[::2]
        if case == "strided_bias"
        else torch.randn(10, device=D, dtype=dtype)
    )
    x_cpu, w_cpu, bias_cpu = x.cpu(), w.cpu(), bias.cpu()
    if case == "beta_alpha":
        fn, expected = (
            (lambda: torch.addmm(bias, x, w, beta=0.5, alpha=2)),
            torch.addmm(bias_cpu, x_cpu, w_cpu, beta=0.5, alpha=2),
        )
    elif case == "bias_overlaps_out":  # the bias is the output's memory
        out = bias.view(1, 10)
        fn = lambda: torch.addmm(bias, x, w, out=out)  # noqa: E731
        expected = torch.addmm(bias_cpu, x_cpu, w_cpu, out=bias_cpu.view(1, 10))
    elif case == "in_place":
        row = bias.view(1, 10)
        fn, expected = (lambda: row.addmm_(x, w)), bias_cpu.view(1, 10).addmm_(x_cpu, w_cpu)
    else:
        fn, expected = (lambda: torch.addmm(bias, x, w)), torch.addmm(bias_cpu, x_cpu, w_cpu)
    result, dump = captured_with_dump(fn, tmp_path)
    assert KERNEL not in dump and "aten::addmm" in dump
    assert_close_to_cpu(result, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batches,k,n", [(12, 64, 50), (3, 1, 7), (5, 33, 1), (1, 128, 9000)])
@pytest.mark.parametrize("layout", ["scores", "values", "shared_matrix"])
def test_one_row_batched_products_take_the_kernel_and_match_cpu(batches, k, n, layout, tmp_path):
    # A decode step's attention per head: the query times the cached keys
    # transposed (scores), the weights times the cached values (values), or
    # one matrix for every batch (an expanded weight: no batch stride).
    q = torch.randn(batches, 1, k, device=D)
    if layout == "scores":
        m = torch.randn(batches, n, k, device=D).transpose(1, 2)
    elif layout == "values":
        m = torch.randn(batches, k, n, device=D)
    else:
        m = torch.randn(k, n, device=D).expand(batches, k, n)
    fn = lambda: torch.bmm(q, m)  # noqa: E731
    out, dump = captured_with_dump(fn, tmp_path)
    assert KERNEL in dump and "aten::bmm" not in dump
    expected = torch.bmm(q.cpu(), m.cpu())
    assert_close_to_cpu(out, expected, rtol=1e-5, atol=1e-4)
    assert_close_to_cpu(fn(), expected, rtol=1e-5, atol=1e-4)  # eager


@pytest.mark.parametrize("layout", ["scores", "values"])
def test_small_batched_products_give_the_cpus_bits(layout, tmp_path):
    # Under 400 multiply-adds per batch ATen's bmm sums each output in
    # order, and so does the kernel (a vector times a batch of matrices,
    # as matmul([10], [5, 5, 10, 5]) folds it).
    v = torch.randn(25, 1, 10, device=D)
    m = torch.randn(25, 10, 5, device=D) if layout == "values" else torch.randn(25, 5, 10, device=D).transpose(1, 2)
    out, dump = captured_with_dump(lambda: torch.bmm(v, m), tmp_path)
    assert KERNEL in dump
    assert_close_to_cpu(out, torch.bmm(v.cpu(), m.cpu()), exact=True)


def test_four_dimensional_attention_scores_and_bmm_out_take_the_kernel(tmp_path):
    q = torch.randn(2, 4, 1, 32, device=D)
    keys = torch.randn(2, 4, 50, 32, device=D)
    out = torch.full((8, 1, 50), float("nan"), device=D)

    def forms():
        scores = q @ keys.transpose(-1, -2)  # matmul folds the heads into one bmm
        torch.bmm(q.view(8, 1, 32), keys.view(8, 50, 32).transpose(1, 2), out=out)
        return scores, out

    (scores, into_out), dump = captured_with_dump(forms, tmp_path)
    assert dump.count(KERNEL) == 2 and "aten::bmm" not in dump
    expected = q.cpu() @ keys.cpu().transpose(-1, -2)
    assert_close_to_cpu(scores, expected, rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(into_out, expected.view(8, 1, 50), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["two_rows", "strided_query", "out_overlaps_query", "empty_batch"])
def test_batched_products_the_kernel_does_not_take_run_atens_and_match_cpu(case, tmp_path):
    batches = 0 if case == "empty_batch" else 4
    q = torch.randn(batches, 2 if case == "two_rows" else 1, 16, device=D)
    if case == "strided_query":
        q = torch.randn(batches, 1, 32, device=D)[:, :, ::2]
    m = torch.randn(batches, 16, 16, device=D)
    q_cpu, m_cpu = q.cpu(), m.cpu()
    if case == "out_overlaps_query":
        result, dump = captured_with_dump(lambda: torch.bmm(q, m, out=q), tmp_path)
        expected = torch.bmm(q_cpu, m_cpu, out=q_cpu)
    else:
        result, dump = captured_with_dump(lambda: torch.bmm(q, m), tmp_path)
        expected = torch.bmm(q_cpu, m_cpu)
    assert KERNEL not in dump
    assert_close_to_cpu(result, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "case",
    ["two_rows", "float64", "strided_vector", "strided_matrix", "strided_out", "out_overlaps_matrix"],
)
def test_products_the_kernel_does_not_take_run_atens_and_match_cpu(case, tmp_path):
    x = torch.randn(2 if case == "two_rows" else 1, 24, device=D, dtype=torch.float64 if case == "float64" else None)
    w = torch.randn(24, 10, device=D, dtype=x.dtype)
    if case == "strided_vector":
        x = torch.randn(1, 48, device=D)[:, ::2]
    if case == "strided_matrix":
        w = torch.randn(48, 20, device=D)[::2, ::2]
    x_cpu, w_cpu = x.cpu(), w.cpu()
    if case == "strided_out":
        out, out_cpu = torch.zeros(10, 2, device=D)[:, :1].t(), torch.zeros(10, 2)[:, :1].t()
    if case == "out_overlaps_matrix":  # the CPU allows it; its kernel decides what is read
        out, out_cpu = w[3:4], w_cpu[3:4]
    if case in ("strided_out", "out_overlaps_matrix"):
        result, dump = captured_with_dump(lambda: torch.mm(x, w, out=out), tmp_path)
        expected = torch.mm(x_cpu, w_cpu, out=out_cpu)
    else:
        result, dump = captured_with_dump(lambda: x @ w, tmp_path)
        expected = x_cpu @ w_cpu
    assert KERNEL not in dump and "aten::mm" in dump
    assert_close_to_cpu(result, expected, rtol=1e-5, atol=1e-5)


def test_bad_products_raise_as_on_cpu_and_the_device_recovers():
    x, w = torch.randn(1, 3, device=D), torch.randn(4, 5, device=D)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(1x3 and 4x5\)"):
        torch.mm(x, w)
    int_out = torch.empty(1, 5, dtype=torch.int32, device=D)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got int instead"):
        torch.mm(x, w[:3], out=int_out)
    # A bias the product's row does not fit: the CPU kernel's error, at the
    # call (the Meta kernel does not check the bias), nothing left on the stream.
    for shape in ((4,), (2, 5)):
        bias = torch.randn(shape, device=D)
        with pytest.raises(RuntimeError) as on_cpu:
            torch.addmm(bias.cpu(), x.cpu(), w[:3].cpu())
        assert "The expanded size of the tensor" in str(on_cpu.value)
        with pytest.raises(RuntimeError, match=re.escape(str(on_cpu.value))):
            torch.addmm(bias, x, w[:3])
        with pytest.raises(RuntimeError, match=re.escape(str(on_cpu.value))):
            torch.addmm(bias, x, w[:3], out=torch.empty(1, 5, device=D))
    with pytest.raises(RuntimeError, match=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\]"):
        torch.bmm(torch.randn(2, 1, 3, device=D), torch.randn(3, 3, 5, device=D))
    torch.mydev.synchronize()
    assert_device_still_usable()
    assert_close_to_cpu(x @ w[:3], x.cpu() @ w[:3].cpu(), rtol=1e-6, atol=1e-6)


def test_decode_kernels_match_cpu_with_each_vector_isa_in_a_plain_script():
    # Each ISA's loops that this CPU can run (the baseline, AVX2, AVX-512),
    # chosen as ATen chooses: ATEN_CPU_CAPABILITY forces a smaller one on
    # both. It is no cap: asked for AVX-512 on a CPU without it, ATen's own
    # kernels fault too (SIGILL on an AVX2-only host).
    isas = ("default", "avx2", "avx512")
    own = torch.backends.cpu.get_cpu_capability().lower()
    runnable = isas[: isas.index(own) + 1] if own in isas else isas[:1]
    script = """
        import torch
        import torch.nn.functional as F

        torch.manual_seed(0)
        x = torch.randn(1, 77, device="mydev")
        weight = torch.randn(130, 77, device="mydev")
        q = torch.randn(1, 4, 1, 33, device="mydev")
        k = torch.randn(1, 4, 50, 33, device="mydev")
        v = torch.randn(1, 4, 50, 33, device="mydev")
        bias = torch.randn(130, device="mydev")
        product = F.linear(x, weight).cpu()
        biased = F.linear(x, weight, bias).cpu()
        scores = (q @ k.transpose(-1, -2)).cpu()
        attention = F.scaled_dot_product_attention(q, k, v).cpu()
        product_error = (product - F.linear(x.cpu(), weight.cpu())).abs().max().item()
        attention_error = (attention - F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu())).abs().max().item()
        biased_error = (biased - F.linear(x.cpu(), weight.cpu(), bias.cpu())).abs().max().item()
        scores_error = (scores - q.cpu() @ k.cpu().transpose(-1, -2)).abs().max().item()
        print(torch.backends.cpu.get_cpu_capability(), product_error < 1e-4, attention_error < 1e-5,
              biased_error < 1e-4, scores_error < 1e-4)
    """
    for capability in runnable:
        result = run_python(script, env={"ATEN_CPU_CAPABILITY": capability})
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [capability.upper(), "True", "True", "True", "True"], result.stdout
