"""Where the results of ops without a real out= CPU kernel go on mydev.

Convolutions (and ~460 other ATen ops) have only a functional CPU kernel;
their out= overload is "the functional kernel, then a copy". The device runs
the functional kernel with its CPU allocations redirected into the device
outputs (csrc/aten/cpu_allocation_redirect.cpp), so the result is computed in
place instead of being written twice. ``torch.mydev._debug``'s placement
counts say which results landed in place and which were copied; values and
strides are always the CPU's, copy or not.
"""

import re
import threading

import pytest
import torch
import torch.nn.functional as F

from mydev_testing import (
    BENCHMARKED_CONVOLUTIONS,
    assert_close_to_cpu,
    assert_device_still_usable,
    run_python,
)

D = "mydev"
debug = torch.mydev._debug


def placement(fn):
    """Runs ``fn()`` on the device and returns its result and how its
    results reached their outputs."""
    torch.mydev.synchronize()
    debug.reset_result_placement_counts()
    result = fn()
    torch.mydev.synchronize()
    return result, debug.result_placement_counts()


def inputs_on(device, *shapes, seed=0):
    """Tensors made on the device (seeded there), the same values on
    ``device``."""
    g = torch.Generator(device=D).manual_seed(seed)
    return [torch.randn(shape, device=D, generator=g).to(device) for shape in shapes]


def conv_forward_backward(conv, device, memory_format):
    x, w, b = inputs_on(device, conv.input_shape(), conv.weight_shape, (conv.out_channels,))
    x = x.contiguous(memory_format=memory_format).requires_grad_()
    w = w.contiguous(memory_format=memory_format).requires_grad_()
    b.requires_grad_()
    out = conv(x, w, b)
    grads = torch.autograd.grad(out, (x, w, b), torch.ones_like(out))
    return (out, *grads)


@pytest.mark.parametrize("conv", BENCHMARKED_CONVOLUTIONS, ids=lambda conv: conv.name)
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_convolution_forward_and_backward_compute_into_the_device_outputs(conv, memory_format):
    conv_forward_backward(conv, D, memory_format)  # the first call teaches where results land
    results, counts = placement(lambda: conv_forward_backward(conv, D, memory_format))
    reference = conv_forward_backward(conv, "cpu", memory_format)
    assert_close_to_cpu(results, reference, rtol=1e-4, atol=1e-4)
    assert [t.stride() for t in results] == [t.stride() for t in reference]
    # convolution, then convolution_backward's three gradients: none copied.
    assert counts["copied"] == 0, counts
    assert counts["in_place"] >= 4, counts


def test_result_the_kernel_allocates_elsewhere_is_copied_then_lands_in_place():
    # A channels-first oneDNN convolution first allocates its blocked-layout
    # result, of the output's size, then the dense output: the first call on
    # a layout never seen copies (the redirection gave the output's memory to
    # the blocked buffer), the second computes in place. Both are exact.
    x, w = inputs_on(D, (2, 32, 23, 29), (32, 32, 3, 3), seed=1)
    first, first_counts = placement(lambda: F.conv2d(x, w, padding=1))
    second, second_counts = placement(lambda: F.conv2d(x, w, padding=1))
    reference = F.conv2d(x.cpu(), w.cpu(), padding=1)
    assert first_counts == {"in_place": 0, "copied": 1}
    assert second_counts == {"in_place": 1, "copied": 0}
    assert_close_to_cpu(first, reference, exact=True)
    assert_close_to_cpu(second, reference, exact=True)


def test_other_functional_only_ops_compute_in_place():
    x = inputs_on(D, (4, 8, 6, 6))[0]
    for fn in (
        lambda t: F.layer_norm(t, (6,)),
        lambda t: F.group_norm(t, 4),
        lambda t: t.flip(0),
        lambda t: torch.relu(t[:, ::2]),  # strided: dense relu is a native kernel
        lambda t: torch.var_mean(t, dim=1),
    ):
        fn(x)
        result, counts = placement(lambda fn=fn: fn(x))
        assert counts["copied"] == 0 and counts["in_place"] >= 1, counts
        assert_close_to_cpu(result, fn(x.cpu()), rtol=1e-5, atol=1e-5)


def test_convolution_scratch_is_reused_across_calls_and_bounded():
    # A channels-first 3x3 convolution's CPU kernel allocates several MiB of
    # scratch per call (oneDNN's blocked layouts): inside device kernels it
    # comes from the scratch cache from the second call on, results stay
    # exact, and host threads' CPU convolutions do not use the cache.
    x, w = inputs_on(D, (8, 64, 28, 28), (64, 64, 3, 3))
    expected = F.conv2d(x.cpu(), w.cpu(), padding=1)
    results = [F.conv2d(x, w, padding=1) for _ in range(4)]
    torch.mydev.synchronize()
    before = debug.kernel_scratch_stats()
    results += [F.conv2d(x, w, padding=1) for _ in range(4)]
    torch.mydev.synchronize()
    after = debug.kernel_scratch_stats()
    assert after["reuses"] >= before["reuses"] + 4, (before, after)
    assert 0 < after["cached_bytes"] <= 256 << 20, after
    for result in results:
        assert_close_to_cpu(result, expected, exact=True)
    for _ in range(3):
        F.conv2d(x.cpu(), w.cpu(), padding=1)
    assert debug.kernel_scratch_stats() == after


def test_cpu_allocations_outside_device_kernels_are_not_redirected():
    # CPU convolutions on a host thread while the device runs convolutions
    # whose CPU allocations are redirected on the executor: the redirection
    # is per thread, so every result is right.
    x, w = inputs_on("cpu", (2, 16, 14, 14), (16, 16, 3, 3))
    xd, wd = x.to(D), w.to(D)
    expected = F.conv2d(x, w, padding=1)
    host_results = []

    def on_host():
        for _ in range(20):
            host_results.append(F.conv2d(x, w, padding=1))

    thread = threading.Thread(target=on_host)
    thread.start()
    device_results = [F.conv2d(xd, wd, padding=1) for _ in range(20)]
    thread.join()
    for result in host_results:
        assert torch.equal(result, expected)
    for result in device_results:
        assert_close_to_cpu(result, expected, exact=True)


def test_bad_convolution_raises_the_cpu_error_and_the_device_stays_usable():
    x, w = inputs_on("cpu", (2, 16, 14, 14), (16, 8, 3, 3))
    with pytest.raises(RuntimeError) as cpu_error:
        F.conv2d(x, w, padding=1)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(cpu_error.value))}$"):
        F.conv2d(x.to(D), w.to(D), padding=1)
    assert_device_still_usable()
    result, counts = placement(lambda: F.conv2d(x.to(D), w[:, :8].repeat(1, 2, 1, 1).to(D), padding=1))
    assert counts["in_place"] + counts["copied"] == 1
    assert_close_to_cpu(result, F.conv2d(x, w[:, :8].repeat(1, 2, 1, 1), padding=1), exact=True)


def test_convolution_training_in_a_plain_script_computes_in_place():
    result = run_python(
        """
        import torch, torch.nn as nn
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
        x = torch.randn(2, 3, 16, 16)
        reference = model(x)
        reference.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model.to("mydev")
        for _ in range(2):
            torch.mydev._debug.reset_result_placement_counts()
            model.zero_grad()
            out = model(x.to("mydev"))
            out.sum().backward()
            torch.mydev.synchronize()
        counts = torch.mydev._debug.result_placement_counts()
        assert torch.allclose(out.cpu(), reference, atol=1e-5), "forward"
        for p, g in zip(model.parameters(), grads):
            assert torch.allclose(p.grad.cpu(), g, atol=1e-4), "gradients"
        print(counts["in_place"], counts["copied"])
        """
    )
    assert result.returncode == 0, result.stderr
    in_place, copied = map(int, result.stdout.split()[-2:])
    assert copied == 0 and in_place >= 4, result.stdout


CLONE_THEN_IN_PLACE = {
    # Ops whose composite kernel is a clone and the in-place op: on mydev
    # they run as one kernel (csrc/aten/composite_routing.cpp). A contiguous
    # index_fill with a scalar value has a kernel of its own (index_rows.h),
    # which writes its result directly.
    "index_fill transposed": lambda t, mask, index: t.t().index_fill(1, index, -1.5),
    "index_fill with a tensor value": lambda t, mask, index: t.index_fill(0, index[:1], t.new_tensor(2.0)),
    "masked_fill": lambda t, mask, index: t.masked_fill(mask, -1.5),
    "masked_fill broadcast mask": lambda t, mask, index: t.masked_fill(mask[:1], 3.0),
    "masked_fill transposed": lambda t, mask, index: t.t().masked_fill(mask.t(), 3.0),
    "masked_fill with a tensor value": lambda t, mask, index: t.masked_fill(mask, t.new_tensor(0.25)),
    "masked_scatter": lambda t, mask, index: t.masked_scatter(mask, t * 3),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("op", CLONE_THEN_IN_PLACE, ids=str)
def test_clone_then_in_place_ops_are_one_kernel_computing_in_place(op, dtype):
    fn = CLONE_THEN_IN_PLACE[op]
    g = torch.Generator(device=D).manual_seed(3)
    t = (torch.randn(6, 6, device=D, generator=g) * 4).to(dtype)
    mask = torch.rand(6, 6, device=D, generator=g) > 0.5
    index = torch.randint(0, 6, (3,), device=D, generator=g)
    fn(t, mask, index)
    result, counts = placement(lambda: fn(t, mask, index))
    assert counts == {"in_place": 1, "copied": 0}
    expected = fn(t.cpu(), mask.cpu(), index.cpu())
    assert_close_to_cpu(result, expected, exact=True)
    assert result.stride() == expected.stride()


def test_clone_then_in_place_ops_keep_autograd_and_the_cpu_errors():
    a_cpu = torch.randn(4, 4)
    mask_cpu = torch.arange(16).view(4, 4) % 3 == 0
    grads = {}
    for device in ("cpu", D):
        a = a_cpu.clone().to(device).requires_grad_()
        mask = mask_cpu.to(device)
        source = torch.arange(16.0, device=device, requires_grad=True)
        loss = a.masked_fill(mask, 0.5).pow(2).sum() + a.index_fill(0, mask.nonzero()[:1, 0], 0.0).sum()
        (loss + a.masked_scatter(mask, source).pow(2).sum()).backward()
        grads[device] = (a.grad, source.grad)
    assert_close_to_cpu(grads[D], grads["cpu"], rtol=1e-6, atol=1e-6)
    a = a_cpu.to(D)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        a.masked_fill(mask_cpu.float().to(D), 1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        a.index_fill(0, torch.tensor([7], device=D), 1.0)
        torch.mydev.synchronize()
    assert_device_still_usable()


def test_attention_mask_fill_is_one_device_kernel_in_a_plain_script():
    result = run_python(
        """
        import torch
        from torch.profiler import profile, ProfilerActivity
        scores = torch.randn(2, 4, 8, 8, device="mydev")
        causal = torch.ones(8, 8, dtype=torch.bool, device="mydev").triu(1)
        masked = scores.masked_fill(causal, float("-inf"))
        torch.mydev.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            masked = scores.masked_fill(causal, float("-inf"))
            torch.mydev.synchronize()
        expected = scores.cpu().masked_fill(causal.cpu(), float("-inf"))
        assert torch.equal(masked.cpu(), expected), "values"
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
        print(kernels)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['aten::masked_fill']", result.stdout
