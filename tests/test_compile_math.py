"""The device library of compiled mydev kernels: the math functions
(device_ext/include/mydev_math.h: exp, expm1 and erf in vectorized kernels,
and sigmoid through that exp)
and the cascade-summation helpers of float sums
(device_ext/include/mydev_reduce.h).

Accuracy is measured in ulps against the float64 result rounded to float32,
over a sweep of float32 bit patterns (every sign, exponent and special value
class); the ops built on them (GELU, softmax, sigmoid, SiLU, their backward)
are compared with the same function run eagerly on the CPU.
"""

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from inductor_backend.scheduling import with_device_library
from mydev_testing import assert_close_to_cpu, run_python

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"
# About a million float32 values, spread over all bit patterns.
SWEEP_STRIDE = 4099


def float32_sweep():
    bits = torch.arange(-(2**31), 2**31, SWEEP_STRIDE, dtype=torch.int64, device=D)
    return bits.to(torch.int32).view(torch.float32)


def ordered(values):
    """float32 values as integers whose differences count ulps."""
    bits = values.view(torch.int32).to(torch.int64)
    return torch.where(bits < 0, -(2**31) - bits, bits)


def ulp_errors(function):
    """The compiled function on the sweep against itself in float64 on the
    CPU, rounded: (code, largest error in ulps, result, expected)."""
    x = float32_sweep()
    compiled = torch.compile(function)
    result, (code,) = run_and_get_code(compiled, x)
    expected = function(x.cpu().double()).float()
    result = result.cpu()
    nan = expected.isnan()
    assert torch.equal(result.isnan(), nan), "NaN where the exact result is not, or the reverse"
    return code, (ordered(result[~nan]) - ordered(expected[~nan])).abs().max().item(), result, expected


def test_exp_is_within_one_ulp_and_comes_from_the_math_library():
    code, max_ulps, _, _ = ulp_errors(torch.exp)
    assert "mydev_math::exp(" in code
    assert max_ulps <= 1


def test_erf_is_within_seven_ulps_where_atens_vectorized_erf_is_not():
    code, max_ulps, result, expected = ulp_errors(torch.erf)
    assert "mydev_math::erf(" in code
    assert max_ulps <= 7
    assert (result - expected).nan_to_num().abs().max().item() <= 4e-7


def test_expm1_is_within_four_ulps_where_exp_minus_one_is_not():
    """Inductor computes expm1 as exp(x) - 1 on every device: 4% off at
    1e-6, 0 at 1e-40."""
    code, max_ulps, result, expected = ulp_errors(torch.expm1)
    assert "mydev_math::expm1(" in code
    assert max_ulps <= 4


def test_special_values_and_the_scalar_tail():
    # 7 elements: fewer than one vector, so the loop's scalar code runs too.
    x = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 88.7, 89.0, -87.5, -103.9, 1e-40, -0.0, 4.0, -3.95, 1e-6]
        + [0.5] * 9,
        device=D,
    )
    for function in (torch.exp, torch.erf, torch.expm1):
        for inputs in (x, x[:7]):
            exact = function(inputs.cpu().double()).float()
            assert_close_to_cpu(torch.compile(function)(inputs), exact, rtol=1e-6, atol=0)


def test_a_causally_masked_softmax_matches_the_cpu_and_masked_lanes_are_exactly_zero():
    """Half of a causal attention's scores are -inf: exp gives exactly 0
    there (device_ext/include/mydev_math.h computes them apart)."""
    scores = torch.randn(2, 4, 64, 64, device=D)
    causal = torch.ones(64, 64, dtype=torch.bool, device=D).tril()

    def attention_weights(scores):
        return torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)

    result = torch.compile(attention_weights)(scores)
    expected = torch.softmax(scores.cpu().masked_fill(~causal.cpu(), float("-inf")), -1)
    assert_close_to_cpu(result, expected, rtol=1e-6, atol=1e-7)
    assert torch.equal(result.cpu()[..., ~causal.cpu()], torch.zeros_like(expected[..., ~causal.cpu()]))
    tiny = torch.tensor([-float("inf"), -1e30, -200.0, -104.5, -104.0] + [-50.0] * 11, device=D)
    assert torch.equal(torch.compile(torch.exp)(tiny).cpu(), torch.exp(tiny.cpu().double()).float())


# Compiled kernels compute 16-bit floats in float32 and round once, so the
# reference is the CPU in float64 and the tolerance one rounding of the dtype.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float16: (2e-3, 2e-3),
}


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
def test_activations_forward_and_backward_match_the_cpu(dtype):
    def block(x):
        return F.gelu(x) + torch.softmax(x, -1) + F.silu(x) * torch.sigmoid(x).exp() + F.elu(x)

    x = (torch.randn(33, 129, device=D) * 3).to(dtype).requires_grad_()
    exact_x = x.detach().cpu().double().requires_grad_()
    result = torch.compile(block)(x)
    expected = block(exact_x)
    result.backward(torch.ones_like(result))
    expected.backward(torch.ones_like(expected))
    rtol, atol = TOLERANCES[dtype]
    assert_close_to_cpu(result.double(), expected, rtol=rtol, atol=atol)
    assert_close_to_cpu(x.grad.double(), exact_x.grad, rtol=rtol, atol=atol)


def test_sigmoid_is_within_two_ulps_through_the_math_library_exp():
    code, _, result, expected = ulp_errors(torch.sigmoid)
    assert "mydev_math::exp(" in code and ".exp()" not in code, code
    tiny = torch.finfo(torch.float32).tiny
    finite = ~expected.isnan()
    normal = finite & (expected.abs() >= tiny)
    assert (ordered(result[normal]) - ordered(expected[normal])).abs().max().item() <= 2
    # Below the normal range an ulp is no measure; the error stays under the
    # smallest normal float, as ATen's own sigmoid's does.
    assert (result[finite & ~normal] - expected[finite & ~normal]).abs().max().item() <= tiny


def test_transposing_kernels_take_the_math_library_too():
    x, y = torch.randn(256, 128, device=D), torch.randn(128, 256, device=D)

    def transposed_exp_plus_erf(x, y):
        return x.t().exp() + y.erf()

    result, (code,) = run_and_get_code(torch.compile(transposed_exp_plus_erf), x, y)
    assert "transpose_mxn" in code, "expected a 2-D tiled (transposing) kernel"
    assert "mydev_math::exp(" in code and "mydev_math::erf(" in code
    assert_close_to_cpu(result, transposed_exp_plus_erf(x.cpu(), y.cpu()))


PREFIX = "#include <torch/csrc/inductor/cpp_prefix.h>"
PLAIN_KERNEL = f'{PREFIX}\nextern "C" void kernel(float* out) {{ out[0] = 1; }}'
# What Inductor's C++ generator writes for a vectorized float sum.
CASCADE_SUM = """
    CascadeSumHelper<at::vec::Vectorized<float>, 4096> cascade_helper0(static_cast<int64_t>(131072L));
    tmp_acc0_vec_local = cascade_sum_combine(tmp0, &cascade_helper0);
    tmp_acc0_vec_local = cascade_sum_final(&cascade_helper0);
"""


def test_kernels_include_the_math_library_only_when_they_call_it():
    assert with_device_library(PLAIN_KERNEL) == PLAIN_KERNEL
    calling = PLAIN_KERNEL.replace("= 1", "= mydev_math::exp(x)")
    lines = with_device_library(calling).splitlines()
    assert lines[0] == PREFIX and lines[1].startswith("#include") and lines[1].endswith('mydev_math.h"')
    assert len(lines) == 3
    with pytest.raises(RuntimeError, match="torch changed how C\\+\\+ kernels include their prefix"):
        with_device_library(calling.replace(PREFIX, '#include "elsewhere/cpp_prefix.h"'))


def test_cascade_sums_are_renamed_to_the_device_helpers_once():
    source = PLAIN_KERNEL + CASCADE_SUM
    renamed = with_device_library(source)
    lines = renamed.splitlines()
    assert lines[0] == PREFIX and lines[1].endswith('mydev_reduce.h"')
    assert "mydev_reduce::CascadeSumHelper<at::vec::Vectorized<float>, 4096> cascade_helper0" in renamed
    assert "= mydev_reduce::cascade_sum_combine(tmp0, &cascade_helper0);" in renamed
    assert "= mydev_reduce::cascade_sum_final(&cascade_helper0);" in renamed
    # Names already qualified, or that merely contain the helper's, stay.
    assert "mydev_reduce::mydev_reduce::" not in with_device_library(renamed)
    other = PLAIN_KERNEL + "\n    my_cascade_sum_final(x);"
    assert with_device_library(other) == other


def test_a_large_float_sum_keeps_the_cascade_and_its_accuracy():
    """0.1f added 4M times: summed lane by lane without the cascade (2
    threads x 8 lanes, 262144 adds each) the result is 2.5e-3 off; with it,
    6.5e-5 (4096 vectors per chunk, then pairwise)."""
    x = torch.full((1 << 22,), 0.1, device=D)
    result, (code,) = run_and_get_code(torch.compile(torch.sum), x)
    assert "mydev_reduce::cascade_sum_combine(" in code and "mydev_reduce.h" in code
    exact = torch.tensor(0.1, dtype=torch.float32).double().item() * (1 << 22)
    assert abs(result.item() - exact) / exact < 1e-3
    y = torch.randn(3, 1 << 20, device=D)
    z = torch.randn(1000003, device=D)
    assert_close_to_cpu(torch.compile(lambda y: y.sum(0))(y), y.cpu().sum(0))
    assert_close_to_cpu(torch.compile(lambda z: z.pow(2).mean())(z), z.cpu().pow(2).mean())


def test_a_gelu_model_compiled_in_a_plain_script():
    """The LayerNorm over 64 features lowers to two sums there, as on the
    CPU (device_ext/torch_patches/inductor.py), not to a Welford reduction."""
    completed = run_python(
        """
        import torch
        from torch._inductor.utils import run_and_get_code

        model = torch.nn.Sequential(
            torch.nn.LayerNorm(64), torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)
        )
        x = torch.randn(512, 64) * 4
        x[::37, 5] = float("nan")
        expected = model(x)
        model.to("mydev")
        result, code = run_and_get_code(torch.compile(model), x.to("mydev"))
        torch.testing.assert_close(result.cpu(), expected, equal_nan=True)
        assert "mydev_math::erf(" in code[0] and "welford" not in code[0].lower(), code[0]
        print("same as the CPU")
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert "same as the CPU" in completed.stdout


def test_a_swiglu_training_step_compiled_in_a_plain_script_takes_one_exp_per_element():
    """Llama's feed-forward: the backward recomputes SiLU and needs sigmoid
    of the same values, which share one exp (it was two: Inductor's sigmoid
    is one C++ expression with ATen's exp inside)."""
    completed = run_python(
        """
        import torch
        import torch.nn.functional as F
        from torch._inductor.utils import run_and_get_code

        torch.manual_seed(0)
        x = torch.randn(128, 64, device="mydev")
        weights = [(torch.randn(96, 64, device="mydev") / 8).requires_grad_() for _ in range(2)]

        def swiglu(x, gate, up):
            return F.silu(F.linear(x, gate)) * F.linear(x, up)

        def step(fn, x, weights):
            fn(x, *weights).pow(2).mean().backward()
            return [w.grad for w in weights]

        _, codes = run_and_get_code(step, torch.compile(swiglu), x, weights)
        exps = [code.count("mydev_math::exp(") + code.count(".exp()") for code in codes]
        assert exps == [1, 1], exps
        exact = [w.detach().cpu().double().requires_grad_() for w in weights]
        for grad, expected in zip([w.grad for w in weights], step(swiglu, x.cpu().double(), exact)):
            torch.testing.assert_close(grad.cpu().double(), expected, rtol=1e-5, atol=1e-6)
        print("same as the CPU")
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert "same as the CPU" in completed.stdout


def test_a_full_reduction_compiled_in_a_plain_script():
    """A loss over a million values: the kernel sums through the device's
    helpers, included from the installed package, and agrees with the CPU."""
    completed = run_python(
        """
        import torch
        from torch._inductor.utils import run_and_get_code

        x = torch.randn(1024, 1031, device="mydev")
        target = torch.rand(1024, 1031, device="mydev")
        loss = lambda x, target: (x - target).pow(2).mean() + x.abs().sum()
        result, code = run_and_get_code(torch.compile(loss), x, target)
        torch.testing.assert_close(result.cpu(), loss(x.cpu(), target.cpu()), rtol=1e-5, atol=1e-3)
        assert "mydev_reduce::cascade_sum_combine(" in code[0], code[0]
        print("same as the CPU")
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert "same as the CPU" in completed.stdout
