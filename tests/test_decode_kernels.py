"""The device's own kernel for one-row float32 matrix products (every Linear
of a language model's decode step multiplies one token), against the CPU.

Which kernel ran is read from a captured graph's debug dump, which names each
recorded kernel: "matrix_vector_product" for the device's kernel, "aten::mm"
for ATen's CPU kernel run on the device.
"""

import re

import pytest
import torch
import torch.nn.functional as F

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, run_python

D = "mydev"
KERNEL = "matrix_vector_product"


def captured(fn, tmp_path):
    """fn()'s result from one replay of its capture, and the capture's dump."""
    graph = torch.mydev.MydevGraph()
    graph.enable_debug_mode()
    with torch.mydev.graph(graph):
        out = fn()
    graph.replay()
    path = tmp_path / "graph.dot"
    graph.debug_dump(str(path))
    return out, path.read_text()


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
    out, dump = captured(fn, tmp_path)
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

    (mm_out, linear), dump = captured(forms, tmp_path)
    assert dump.count(KERNEL) == 2
    assert_close_to_cpu(mm_out, tokens[1:2].cpu() @ weight.cpu().t(), rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(linear, F.linear(tokens[2:3].cpu().unsqueeze(0), weight.cpu()), rtol=1e-5, atol=1e-5)


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
        result, dump = captured(lambda: torch.mm(x, w, out=out), tmp_path)
        expected = torch.mm(x_cpu, w_cpu, out=out_cpu)
    else:
        result, dump = captured(lambda: x @ w, tmp_path)
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
        product = F.linear(x, weight).cpu()
        attention = F.scaled_dot_product_attention(q, k, v).cpu()
        product_error = (product - F.linear(x.cpu(), weight.cpu())).abs().max().item()
        attention_error = (attention - F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu())).abs().max().item()
        print(torch.backends.cpu.get_cpu_capability(), product_error < 1e-4, attention_error < 1e-5)
    """
    for capability in runnable:
        result = run_python(script, env={"ATEN_CPU_CAPABILITY": capability})
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [capability.upper(), "True", "True"], result.stdout
