"""Counter-based random kernels on mydev (csrc/aten/philox_random_ops.cpp):
element i of an output is a function of philox(seed, offset + i) alone, as
csrc/core/generator.h defines it. Checked against a Python Philox4x32-10,
and for the properties that follow: tails at shifted offsets, independence
from the thread split and from strides, reproducibility, explicit
generators, dtypes, distribution sanity and CPU-equal errors."""

import math
from typing import Callable, List

import pytest
import torch

DEVICE = "mydev"
MASK32 = 0xFFFFFFFF


def philox4x32_10(key: int, counter: int) -> List[int]:
    """Reference Philox4x32-10 (Salmon et al. 2011), counter {lo, hi, 0, 0}."""
    block = [counter & MASK32, (counter >> 32) & MASK32, 0, 0]
    k0, k1 = key & MASK32, (key >> 32) & MASK32
    for _ in range(10):
        p0 = 0xD2511F53 * block[0]
        p1 = 0xCD9E8D57 * block[2]
        block = [(p1 >> 32) ^ block[1] ^ k0, p1 & MASK32, (p0 >> 32) ^ block[3] ^ k1, p0 & MASK32]
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return block


def bits_at(seed: int, position: int) -> int:
    return philox4x32_10(seed, position // 4)[position % 4]


def set_offset(offset: int) -> None:
    state = torch.mydev.get_rng_state()
    state[8:] = torch.tensor([offset], dtype=torch.int64).view(torch.uint8)
    torch.mydev.set_rng_state(state)


def offset_now() -> int:
    return int(torch.mydev.get_rng_state()[8:].view(torch.int64))


DRAWS = {
    "uniform": lambda n: torch.empty(n, device=DEVICE).uniform_(-2, 3),
    "normal": lambda n: torch.empty(n, device=DEVICE).normal_(1, 2),
    "bernoulli": lambda n: torch.empty(n, device=DEVICE).bernoulli_(0.3),
    "bernoulli_tensor": lambda n: torch.empty(n, device=DEVICE).bernoulli_(
        torch.linspace(0, 1, n, device=DEVICE)[-1:].expand(n) * 0.5
    ),
    "dropout": lambda n: torch.nn.functional.dropout(torch.ones(n, device=DEVICE), 0.4),
    "exponential": lambda n: torch.empty(n, device=DEVICE).exponential_(2.0),
    "random": lambda n: torch.empty(n, device=DEVICE, dtype=torch.int64).random_(-5, 1000),
    "randint": lambda n: torch.randint(0, 7, (n,), device=DEVICE),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_values_drawn_at_a_later_offset_are_the_tail(name):
    draw = DRAWS[name]
    torch.manual_seed(1234)
    whole = draw(48).cpu()
    for shift in (4, 24, 44):
        torch.manual_seed(1234)
        set_offset(shift)
        tail = draw(48 - shift).cpu()
        assert torch.equal(tail, whole[shift:]), (name, shift)


def test_wide_random_ranges_take_two_numbers_per_element():
    def draw(n):
        return torch.empty(n, device=DEVICE, dtype=torch.int64).random_(0, 2**40)

    torch.manual_seed(3)
    whole = draw(20).cpu()
    assert offset_now() == 40
    torch.manual_seed(3)
    set_offset(8)  # 2 numbers per element: 4 elements further
    assert torch.equal(draw(16).cpu(), whole[4:])
    assert int(whole.min()) >= 0 and int(whole.max()) < 2**40


def test_uniform_and_bernoulli_follow_the_documented_formula():
    seed, offset, n = 2024, 12, 37
    torch.manual_seed(seed)
    set_offset(offset)
    u32 = torch.empty(n, device=DEVICE).uniform_(-1, 3).cpu()
    u64 = torch.empty(n, device=DEVICE, dtype=torch.float64).uniform_().cpu()
    bern = torch.empty(n, device=DEVICE, dtype=torch.float64).bernoulli_(0.25).cpu()
    bits = [bits_at(seed, offset + i) for i in range(n)]
    expected32 = torch.tensor([(b >> 8) / 2**24 for b in bits], dtype=torch.float32) * 4 - 1
    assert torch.equal(u32, expected32)
    # u64 and bern were drawn at later offsets (each advanced by 40)
    bits64 = [bits_at(seed, offset + 40 + i) for i in range(n)]
    assert torch.equal(u64, torch.tensor([b / 2**32 for b in bits64], dtype=torch.float64))
    bits_b = [bits_at(seed, offset + 80 + i) for i in range(n)]
    assert torch.equal(bern, torch.tensor([float(b / 2**32 < 0.25) for b in bits_b], dtype=torch.float64))


def test_normal_follows_box_muller_on_lane_pairs():
    seed, n = 77, 10
    torch.manual_seed(seed)
    z = torch.empty(n, device=DEVICE, dtype=torch.float64).normal_().cpu()
    expected = []
    for p in range(n):
        u1 = (bits_at(seed, p & ~1) + 1) / 2**32
        u2 = bits_at(seed, p | 1) / 2**32
        radius = math.sqrt(-2 * math.log(u1))
        expected.append(radius * (math.cos if p % 2 == 0 else math.sin)(2 * math.pi * u2))
    torch.testing.assert_close(z, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["uniform", "normal", "bernoulli", "dropout"])
def test_values_do_not_depend_on_the_thread_split(name):
    draw = DRAWS[name]
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            torch.manual_seed(99)
            results.append(draw(100_003).cpu())
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(results[0], results[1])
    # Drawn as two pieces at their offsets: the same numbers again.
    torch.manual_seed(99)
    head = draw(40_000).cpu()
    tail = draw(60_003).cpu()
    assert torch.equal(torch.cat([head, tail]), results[0])


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.uniform_(),
        lambda t: t.normal_(),
        lambda t: t.bernoulli_(0.5),
        lambda t: t.exponential_(),
        lambda t: t.random_(0, 100),
    ],
)
def test_non_contiguous_outputs_get_the_contiguous_values(op):
    torch.manual_seed(5)
    contiguous = op(torch.empty(8, 6, device=DEVICE)).cpu()
    torch.manual_seed(5)
    transposed = op(torch.empty(6, 8, device=DEVICE).t())
    assert not transposed.is_contiguous()
    assert torch.equal(transposed.cpu(), contiguous)
    torch.manual_seed(5)
    base = torch.zeros(8, 12, device=DEVICE)
    strided = op(base[:, ::2])
    assert torch.equal(strided.cpu(), contiguous)
    assert torch.equal(base[:, 1::2].cpu(), torch.zeros(8, 6)), "wrote outside the view"


def test_seed_and_rng_state_reproduce_values_and_offset_advances_by_blocks():
    torch.manual_seed(11)
    assert offset_now() == 0
    first = torch.randn(5, device=DEVICE).cpu()
    assert offset_now() == 8  # ceil(5 / 4) * 4
    state = torch.mydev.get_rng_state()
    second = torch.rand(3, 3, device=DEVICE).cpu()
    assert offset_now() == 8 + 12
    torch.mydev.set_rng_state(state)
    assert torch.equal(torch.rand(3, 3, device=DEVICE).cpu(), second)
    torch.manual_seed(11)
    assert torch.equal(torch.randn(5, device=DEVICE).cpu(), first)
    torch.manual_seed(12)
    assert not torch.equal(torch.randn(5, device=DEVICE).cpu(), first)


def test_explicit_generators_are_used_and_leave_the_default_alone():
    torch.manual_seed(7)
    from_default = torch.rand(10, device=DEVICE).cpu()
    default_state = torch.mydev.get_rng_state()
    g = torch.Generator(DEVICE).manual_seed(7)
    assert torch.equal(torch.rand(10, device=DEVICE, generator=g).cpu(), from_default)
    assert g.get_offset() == 12
    assert torch.equal(torch.mydev.get_rng_state(), default_state)
    g.manual_seed(7)
    t = torch.empty(10, device=DEVICE)
    assert torch.equal(t.uniform_(generator=g).cpu(), from_default)
    g.manual_seed(7)
    mask = torch.empty(10, device=DEVICE).bernoulli_(0.5, generator=g).cpu()
    torch.manual_seed(7)
    assert torch.equal(mask, torch.empty(10, device=DEVICE).bernoulli_(0.5).cpu())
    with pytest.raises(RuntimeError, match="generator"):
        torch.empty(3, device=DEVICE).normal_(generator=torch.Generator())
    for host_op in (
        lambda t: t.uniform_(generator=g),
        lambda t: t.normal_(generator=g),
        lambda t: t.bernoulli_(0.5, generator=g),
        lambda t: t.random_(0, 9, generator=g),
        lambda t: torch.normal(t, 1.0, generator=g),
    ):
        with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'mydev'"):
            host_op(torch.zeros(3))
    assert torch.rand(2, device=DEVICE).shape == (2,)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_values_are_the_float_values_rounded_once(dtype):
    torch.manual_seed(21)
    u32 = torch.rand(1000, device=DEVICE).cpu()
    n32 = torch.randn(1000, device=DEVICE).cpu()
    torch.manual_seed(21)
    u = torch.rand(1000, device=DEVICE, dtype=dtype).cpu()
    n = torch.randn(1000, device=DEVICE, dtype=dtype).cpu()
    assert u.dtype == dtype and n.dtype == dtype
    rounded = u32.to(dtype)
    expected = torch.where(rounded >= 1, torch.zeros_like(rounded), rounded)
    assert torch.equal(u, expected)
    assert bool((u < 1).all()) and bool((u >= 0).all())
    assert torch.equal(n, n32.to(dtype))


def test_double_values_use_all_32_bits():
    torch.manual_seed(21)
    u32 = torch.rand(1000, device=DEVICE).cpu()
    torch.manual_seed(21)
    u64 = torch.rand(1000, device=DEVICE, dtype=torch.float64).cpu()
    assert u64.dtype == torch.float64
    assert float((u64 - u32.double()).abs().max()) < 2**-24
    assert bool((u64 != u32.double()).any())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_distributions_have_the_right_moments(dtype):
    torch.manual_seed(0)
    n = 200_000
    u = torch.empty(n, device=DEVICE, dtype=dtype).uniform_(-1, 3).double().cpu()
    z = torch.empty(n, device=DEVICE, dtype=dtype).normal_(2, 0.5).double().cpu()
    b = torch.empty(n, device=DEVICE, dtype=dtype).bernoulli_(0.2).double().cpu()
    e = torch.empty(n, device=DEVICE, dtype=dtype).exponential_(4).double().cpu()
    assert u.min() >= -1 and u.max() < 3
    assert abs(u.mean() - 1) < 0.02 and abs(u.std() - 4 / math.sqrt(12)) < 0.02
    assert abs(z.mean() - 2) < 0.01 and abs(z.std() - 0.5) < 0.01
    assert set(b.unique().tolist()) == {0.0, 1.0} and abs(b.mean() - 0.2) < 0.005
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005


def test_bernoulli_with_a_probability_tensor_and_extreme_probabilities():
    torch.manual_seed(4)
    p = torch.tensor([0.0, 1.0, 0.5, 0.9], device=DEVICE).repeat(5000)
    drawn = torch.bernoulli(p).cpu()
    rates = drawn.view(5000, 4).mean(0)
    assert rates[0] == 0 and rates[1] == 1
    assert abs(rates[2] - 0.5) < 0.03 and abs(rates[3] - 0.9) < 0.03
    # A host probability tensor works as on CUDA; p broadcasts.
    out = torch.empty(3, 4, device=DEVICE, dtype=torch.bool).bernoulli_(torch.tensor([0.0, 1.0, 0.0, 1.0]))
    assert torch.equal(out.cpu(), torch.tensor([False, True, False, True]).expand(3, 4))
    assert torch.equal(torch.empty(64, device=DEVICE).bernoulli_(1.0).cpu(), torch.ones(64))
    assert torch.equal(torch.empty(64, device=DEVICE).bernoulli_(0.0).cpu(), torch.zeros(64))


def test_dropout_keeps_the_mask_semantics():
    torch.manual_seed(8)
    x = torch.randn(64, 33, device=DEVICE)
    out, mask = torch.ops.aten.native_dropout(x, 0.25, True)
    assert mask.dtype == torch.bool
    torch.testing.assert_close(out.cpu(), x.cpu() * mask.cpu() / 0.75)
    torch.manual_seed(8)
    torch.randn(64, 33, device=DEVICE)
    keep = torch.empty(64, 33, device=DEVICE).bernoulli_(0.75).bool().cpu()
    assert torch.equal(mask.cpu(), keep)
    y = x.clone().requires_grad_()
    torch.nn.functional.dropout(y, 0.5).sum().backward()
    assert set(y.grad.cpu().unique().tolist()) <= {0.0, 2.0}


def test_normal_tensor_overloads_scale_a_standard_normal():
    mean = torch.linspace(-3, 3, 12, device=DEVICE)
    std = torch.linspace(0, 2, 12, device=DEVICE)
    torch.manual_seed(6)
    z = torch.randn(12, device=DEVICE).cpu()
    torch.manual_seed(6)
    torch.testing.assert_close(torch.normal(mean, std).cpu(), z * std.cpu() + mean.cpu())
    torch.manual_seed(6)
    torch.testing.assert_close(torch.normal(mean, 1.5).cpu(), z * 1.5 + mean.cpu())
    torch.manual_seed(6)
    torch.testing.assert_close(torch.normal(0.5, std).cpu(), z * std.cpu() + 0.5)
    torch.manual_seed(6)
    out = torch.empty(0, device=DEVICE)
    torch.normal(mean, std, out=out)
    torch.testing.assert_close(out.cpu(), z * std.cpu() + mean.cpu())


def _error_of(fn: Callable[[], object]) -> str:
    try:
        fn()
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return ""


@pytest.mark.parametrize(
    "op",
    [
        lambda d: torch.empty(4, device=d).bernoulli_(1.5),
        lambda d: torch.empty(4, device=d).bernoulli_(-0.1),
        lambda d: torch.empty(4, device=d).uniform_(2, 1),
        lambda d: torch.empty(4, device=d).random_(5, 5),
        lambda d: torch.empty(4, device=d).random_(7, 3),
        lambda d: torch.empty(4, device=d).normal_(0, -1),
        lambda d: torch.normal(torch.zeros(4, device=d), -1.0),
        lambda d: torch.normal(torch.zeros(4, device=d), -torch.ones(4, device=d)),
        lambda d: torch.empty(4, device=d).exponential_(0),
        lambda d: torch.randint(3, 3, (2,), device=d),
        lambda d: torch.nn.functional.dropout(torch.ones(4, device=d), 1.5),
        lambda d: torch.empty(4, device=d, dtype=torch.int64).normal_(),
        lambda d: torch.empty(4, device=d, dtype=torch.uint8).random_(0, 300),
    ],
)
def test_bad_arguments_raise_the_cpu_error_and_the_device_keeps_working(op):
    cpu_error = _error_of(lambda: op("cpu"))
    assert cpu_error, "the CPU accepts it"
    mydev_error = _error_of(lambda: op(DEVICE))
    cpu_type, mydev_type = cpu_error.split(":")[0], mydev_error.split(":")[0]
    assert mydev_type == cpu_type, (cpu_error, mydev_error)
    if "not implemented for" not in cpu_error:  # dispatch names differ
        assert mydev_error == cpu_error
    assert torch.rand(3, device=DEVICE).cpu().shape == (3,)


def test_bad_probability_in_a_tensor_fails_at_the_next_synchronization():
    p = torch.tensor([0.5, 1.5], device=DEVICE)
    out = torch.empty(2, device=DEVICE).bernoulli_(p)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        out.cpu()
    assert torch.equal(torch.empty(4, device=DEVICE).bernoulli_(1.0).cpu(), torch.ones(4))


def test_empty_outputs_draw_nothing():
    torch.manual_seed(1)
    torch.empty(0, device=DEVICE).uniform_()
    torch.empty(0, 3, device=DEVICE).normal_()
    torch.empty(0, device=DEVICE).bernoulli_(0.5)
    assert offset_now() == 0
