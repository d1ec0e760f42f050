"""Autograd, optimizers, AMP (GradScaler, autocast) and random numbers on mydev.

Every numerical test runs the same computation on the CPU and compares.
Gradients of the function table are computed in float64, so the default
float64 tolerances of torch.testing.assert_close apply; optimizer runs are
float32 with assert_close's float32 defaults.
"""

import re
import threading
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing._internal.common_optimizers import optim_db

from mydev_testing import (
    N_DEVICES,
    assert_close_to_cpu,
    assert_device_still_usable,
    hold_stream,
    needs_two_devices,
    run_python,
)

D = "mydev:0"
D1 = "mydev:1"


def cpu_values(*shape, seed=0, low=-2.0, high=2.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=torch.float64).mul(high - low).add(low).to(dtype)


def cpu_index(high, *shape, seed=0):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(0, high, shape, generator=g)


# =========================================================================
# Gradients of a table of functions, mydev vs CPU
# =========================================================================
def _inplace_on_views(a, b):
    y = a * 1.0
    y[:, 1].mul_(b[:, 0])  # in place on a column view
    y.t()[2].add_(b[:, 1])  # in place on a view of a transposed view
    y[1:3].clamp_(min=-0.5)  # in place on a row slice
    y.diagonal().exp_()  # in place on the diagonal (saves its output)
    return y * b


def _view_chain(a):
    v = a.t().reshape(-1).view(4, 5).unsqueeze(0).expand(2, 4, 5)
    w = a.permute(1, 0).narrow(0, 1, 3).diagonal(offset=1)
    u = a.unfold(1, 2, 1).sum(-1)
    s = a.as_strided((2, 2), (1, 4), 1)
    return v.sum(0) * 2 + 0, w * 3, u, s


def _mask(shape, seed):
    return cpu_values(*shape, seed=seed) > 0


# name -> (make CPU inputs, function). Floating inputs get requires_grad.
GRAD_CASES = {
    # elementwise
    "arith_broadcast": (
        lambda: (cpu_values(3, 4), cpu_values(4, seed=1)),
        lambda a, b: (a * b + a / (b.abs() + 1) - b**2).sin(),
    ),
    "unary_chain": (
        lambda: (cpu_values(3, 5),),
        lambda a: (
            a.exp().log1p().tanh()
            + a.sigmoid() * a.abs()
            + a.clamp(-0.5, 0.5)
            + F.gelu(a)
            + F.relu(a)
            + F.silu(a)
            + a.rsqrt().nan_to_num(0.0) * 0
        ),
    ),
    "pow_tensor_tensor": (lambda: (cpu_values(3, 4, low=0.5), cpu_values(4, seed=1)), lambda a, b: torch.pow(a, b)),
    "addcmul_lerp": (
        lambda: (cpu_values(3, 4), cpu_values(3, 4, seed=1), cpu_values(3, 4, seed=2)),
        lambda a, b, c: torch.addcmul(a, b, c, value=0.5) + torch.lerp(a, b, 0.3),
    ),
    # matmul family
    "mm": (lambda: (cpu_values(5, 4), cpu_values(4, 3, seed=1)), lambda a, b: a @ b),
    "matmul_broadcast": (lambda: (cpu_values(2, 5, 4), cpu_values(4, 3, seed=1)), torch.matmul),
    "bmm": (lambda: (cpu_values(2, 5, 4), cpu_values(2, 4, 3, seed=1)), torch.bmm),
    "addmm": (
        lambda: (cpu_values(3), cpu_values(5, 4, seed=1), cpu_values(4, 3, seed=2)),
        lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
    ),
    "linear": (lambda: (cpu_values(6, 4), cpu_values(3, 4, seed=1), cpu_values(3, seed=2)), F.linear),
    "einsum": (
        lambda: (cpu_values(2, 3, 4), cpu_values(2, 4, 5, seed=1)),
        lambda a, b: torch.einsum("bij,bjk->bik", a, b),
    ),
    # reductions
    "sum_mean": (lambda: (cpu_values(3, 4, 5),), lambda a: a.sum(1) + a.mean(1) + a.mean((0, 2)).sum() + a.sum()),
    "prod": (lambda: (cpu_values(3, 4, 5),), lambda a: a.prod(1)),
    "amax_max_min": (lambda: (cpu_values(3, 4, 5),), lambda a: a.amax(1) + a.max(1).values * 2 - a.min()),
    "norm_var_std": (
        lambda: (cpu_values(3, 6),),
        lambda a: torch.linalg.vector_norm(a, dim=1) + a.var(1) + a.std(1, correction=0),
    ),
    "logsumexp_cumsum_cumprod": (
        lambda: (cpu_values(3, 6),),
        lambda a: (a.logsumexp(1, keepdim=True) * a.cumsum(1), a.cumprod(1)),
    ),
    "softmax": (lambda: (cpu_values(3, 4, 7),), lambda a: F.softmax(a, -1)),
    "log_softmax": (lambda: (cpu_values(3, 7),), lambda a: F.log_softmax(a, 0)),
    "layer_norm": (
        lambda: (cpu_values(3, 4, 6), cpu_values(6, seed=1), cpu_values(6, seed=2)),
        lambda a, w, b: F.layer_norm(a, (6,), w, b),
    ),
    "batch_norm_train": (
        lambda: (cpu_values(4, 3, 5), cpu_values(3, seed=1), cpu_values(3, seed=2)),
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    ),
    # embedding and index ops
    "embedding": (
        lambda: (torch.tensor([[1, 3, 3], [0, 5, 1]]), cpu_values(6, 4)),
        lambda idx, w: F.embedding(idx, w, padding_idx=0),
    ),
    "index_select": (lambda: (cpu_values(3, 6), torch.tensor([5, 0, 5, 2])), lambda a, idx: a.index_select(1, idx)),
    "gather": (lambda: (cpu_values(3, 6), cpu_index(6, 3, 4)), lambda a, idx: a.gather(1, idx)),
    "scatter_add": (
        lambda: (cpu_values(3, 6), cpu_index(6, 3, 4), cpu_values(3, 4, seed=1)),
        lambda a, idx, src: a.scatter_add(1, idx, src),
    ),
    "advanced_indexing": (
        lambda: (cpu_values(5, 4), torch.tensor([4, 0, 4, 1])),
        lambda a, idx: (a[idx], a[:, [3, 0, 3]], a[a > 0.5]),
    ),
    "index_add": (
        lambda: (cpu_values(5, 3), torch.tensor([0, 4, 0]), cpu_values(3, 3, seed=1)),
        lambda a, idx, src: a.index_add(0, idx, src, alpha=2.0),
    ),
    "index_put_accumulate": (
        lambda: (cpu_values(5, 3), torch.tensor([1, 1, 3]), cpu_values(3, 3, seed=1)),
        lambda a, idx, v: a.index_put((idx,), v, accumulate=True),
    ),
    "masked_fill_scatter": (lambda: (cpu_values(4, 5), _mask((4, 5), seed=7)), lambda a, m: a.masked_fill(m, 0.0) * 2),
    "sort_topk": (lambda: (cpu_values(3, 6),), lambda a: (a.sort(1).values, a.topk(2, dim=1).values)),
    # cat / stack / split
    "cat_stack": (
        lambda: (cpu_values(3, 2), cpu_values(3, 4, seed=1), cpu_values(3, 2, seed=2)),
        lambda a, b, c: (torch.cat([a, b, c], 1), torch.stack([a, c], 0)),
    ),
    "split_chunk": (lambda: (cpu_values(4, 6),), lambda a: (*a.split([1, 3], 0), a.chunk(3, 1)[1] * 2)),
    # views and in place
    "view_chain": (lambda: (cpu_values(5, 4),), _view_chain),
    "inplace_on_views": (lambda: (cpu_values(4, 4), cpu_values(4, 4, seed=1)), _inplace_on_views),
    "where": (
        lambda: (cpu_values(4, 5), cpu_values(4, 5, seed=1)),
        lambda a, b: torch.where(a > 0, a, b * 2) + torch.where(b < 0, 1.0, a),
    ),
    # convolution / pooling
    "conv2d": (
        lambda: (cpu_values(2, 3, 7, 7), cpu_values(4, 3, 3, 3, seed=1), cpu_values(4, seed=2)),
        lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
    ),
    "conv2d_groups_dilation": (
        lambda: (cpu_values(2, 4, 8, 8), cpu_values(6, 2, 3, 3, seed=1)),
        lambda x, w: F.conv2d(x, w, groups=2, dilation=2, padding=2),
    ),
    "conv_transpose2d": (
        lambda: (cpu_values(2, 3, 4, 4), cpu_values(3, 2, 3, 3, seed=1)),
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
    ),
    "max_pool2d": (
        lambda: (cpu_values(2, 3, 8, 8),),
        lambda x: (F.max_pool2d(x, 2), F.max_pool2d(x, 3, stride=2, padding=1)),
    ),
    "avg_adaptive_pool2d": (
        lambda: (cpu_values(2, 3, 7, 7),),
        lambda x: (F.avg_pool2d(x, 3, stride=2), F.adaptive_avg_pool2d(x, 3)),
    ),
    "interpolate_bilinear": (
        lambda: (cpu_values(1, 2, 4, 5),),
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
    ),
    "scaled_dot_product_attention": (
        lambda: (cpu_values(2, 2, 5, 4), cpu_values(2, 2, 5, 4, seed=1), cpu_values(2, 2, 5, 4, seed=2)),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    ),
    # losses
    "cross_entropy": (lambda: (cpu_values(6, 5), torch.tensor([0, 4, 2, 2, 1, 3])), lambda x, t: F.cross_entropy(x, t)),
    "cross_entropy_weight_smoothing_ignore": (
        lambda: (cpu_values(6, 5), torch.tensor([0, 4, -100, 2, 1, 3]), cpu_values(5, low=0.1, high=1.0, seed=3)),
        lambda x, t, w: F.cross_entropy(x, t, weight=w.detach(), ignore_index=-100, label_smoothing=0.1),
    ),
    "cross_entropy_probabilities_2d": (
        lambda: (cpu_values(2, 4, 3, 3), cpu_values(2, 4, 3, 3, seed=1).softmax(1)),
        lambda x, t: F.cross_entropy(x, t, reduction="sum"),
    ),
    "mse_loss": (
        lambda: (cpu_values(4, 5), cpu_values(4, 5, seed=1)),
        lambda a, b: (F.mse_loss(a, b), F.mse_loss(a, b, reduction="none")),
    ),
    "other_losses": (
        lambda: (cpu_values(4, 5), cpu_values(4, 5, low=0.0, high=1.0, seed=1)),
        lambda a, b: (
            F.binary_cross_entropy_with_logits(a, b)
            + F.smooth_l1_loss(a, b)
            + F.kl_div(F.log_softmax(a, 1), b.softmax(1), reduction="batchmean")
            + F.nll_loss(F.log_softmax(a, 1), torch.tensor([0, 1, 4, 2], device=a.device))
        ),
    ),
}


def _run_case(make_inputs, fn, device):
    inputs = []
    for t in make_inputs():
        t = t.to(device)
        if t.is_floating_point():
            t.requires_grad_(True)
        inputs.append(t)
    out = fn(*inputs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,))]
    grad_outs = [cpu_values(*o.shape, seed=50 + i).to(device=device, dtype=o.dtype) for i, o in enumerate(outs)]
    torch.autograd.backward(outs, grad_outs)
    return [o.detach() for o in outs], [t.grad if t.requires_grad else None for t in inputs]


@pytest.mark.parametrize(
    "loss", [F.mse_loss, F.smooth_l1_loss, F.huber_loss, F.l1_loss, F.binary_cross_entropy_with_logits]
)
def test_reduced_losses_give_no_warning_the_cpu_does_not(loss):
    # The out= kernels of some losses use a 0-dim `out` as scratch of the
    # input's shape, with a deprecation warning: the device runs their
    # functional kernels, as a CPU call does.
    a = torch.randn(4, 5, device=D)
    b = torch.rand(4, 5, device=D)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = loss(a, b)
        torch.mydev.synchronize()
    assert [str(w.message) for w in caught] == []
    assert_close_to_cpu(result, loss(a.cpu(), b.cpu()))


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients_match_cpu(case):
    make_inputs, fn = GRAD_CASES[case]
    ref_outs, ref_grads = _run_case(make_inputs, fn, "cpu")
    outs, grads = _run_case(make_inputs, fn, D)
    assert_close_to_cpu(outs, ref_outs, device=D, msg=f"{case} outputs")
    assert any(g is not None for g in ref_grads)
    assert_close_to_cpu(grads, ref_grads, device=D, msg=f"{case} grads")


@pytest.mark.parametrize(
    "case",
    ["arith_broadcast", "softmax", "layer_norm", "conv2d", "max_pool2d", "index_put_accumulate", "inplace_on_views"],
)
def test_gradcheck_on_device(case):
    """Numerical vs analytical Jacobian, entirely on mydev (float64)."""
    make_inputs, fn = GRAD_CASES[case]
    inputs = [t.to(D).requires_grad_(t.is_floating_point()) for t in make_inputs()]
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)


# =========================================================================
# torch.autograd API: grad, retain_graph, higher order
# =========================================================================
def _both(fn):
    """Runs ``fn(device)`` for the CPU and for mydev; returns both results."""
    return fn("cpu"), fn(D)


def test_autograd_grad_multiple_inputs_outputs_and_unused():
    def run(device):
        a = cpu_values(3, 4).to(device).requires_grad_()
        b = cpu_values(4, seed=1).to(device).requires_grad_()
        unused = cpu_values(2, seed=2).to(device).requires_grad_()
        y1 = (a * b).sum(1)
        y2 = (a.exp() @ b).tanh()
        go = cpu_values(3, seed=3).to(device)
        grads = torch.autograd.grad([y1, y2], [a, b, unused], grad_outputs=[go, go * 2], allow_unused=True)
        materialized = torch.autograd.grad((a * 2).sum(), [a, unused], allow_unused=True, materialize_grads=True)
        assert a.grad is None  # autograd.grad does not accumulate into .grad
        return grads, materialized

    (ref, ref_mat), (out, out_mat) = _both(run)
    assert out[2] is None
    assert_close_to_cpu(list(out), list(ref))
    assert_close_to_cpu(list(out_mat), list(ref_mat))
    assert torch.equal(out_mat[1].cpu(), torch.zeros(2, dtype=torch.float64))


def test_retain_graph_accumulates_like_cpu():
    def run(device):
        w = cpu_values(4, 3).to(device).requires_grad_()
        x = cpu_values(5, 4, seed=1).to(device)
        loss = (x @ w).sigmoid().pow(2).sum()
        loss.backward(retain_graph=True)
        first = w.grad.clone()
        loss.backward(retain_graph=True)
        loss.backward()
        return first, w.grad

    (ref_first, ref_acc), (first, acc) = _both(run)
    assert_close_to_cpu(first, ref_first)
    assert_close_to_cpu(acc, ref_acc)
    assert_close_to_cpu(acc, (first * 3).cpu())


def test_higher_order_gradients_match_cpu():
    def run(device):
        x = cpu_values(5, seed=4).to(device).requires_grad_()
        y = (x.sin() * x**3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = torch.autograd.grad((gg * x).sum(), x)
        w = cpu_values(3, 4, seed=5).to(device).requires_grad_()
        inp = cpu_values(2, 3, seed=6).to(device)
        # Gradient penalty through matmul, tanh and softmax (double backward).
        out = (inp @ w).tanh().softmax(-1)
        (gw,) = torch.autograd.grad(out[:, 0].sum(), w, create_graph=True)
        gw.pow(2).sum().backward()
        hess = torch.autograd.functional.hessian(lambda v: (v.exp() * v.roll(1)).sum(), x.detach())
        return g, gg, ggg, w.grad, hess

    ref, out = _both(run)
    assert_close_to_cpu(list(out), list(ref))
    # Against the closed form too: d2/dx2 [sin(x) x^3].
    x = cpu_values(5, seed=4)
    analytic = -x.sin() * x**3 + 6 * x.cos() * x**2 + 6 * x * x.sin()
    assert_close_to_cpu(out[1], analytic)


def test_gradgradcheck_on_device():
    x = cpu_values(3, 4).to(D).requires_grad_()
    w = cpu_values(4, 2, seed=1).to(D).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda a, b: (a @ b).tanh(), (x, w))


def test_backward_errors_and_device_usable():
    x = cpu_values(3).to(D).requires_grad_()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(
        RuntimeError, match=re.escape("invalid gradient at index 0 - expected device mydev:0 but got cpu")
    ):
        (x * 2).backward(torch.ones(3, dtype=torch.float64))
    if N_DEVICES >= 2:
        with pytest.raises(
            RuntimeError, match=re.escape("invalid gradient at index 0 - expected device mydev:0 but got mydev:1")
        ):
            (x * 2).backward(torch.ones(3, dtype=torch.float64, device=D1))
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    other = torch.ones(2, device=D, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        torch.autograd.grad((x * 2).sum(), [x, other])
    with pytest.raises(
        RuntimeError,
        match=re.escape("attempting to assign a gradient with device type 'cpu' to a tensor with device type 'mydev'"),
    ):
        x.grad = torch.ones(3, dtype=torch.float64)
    # The graph machinery still works after the errors.
    x.grad = None
    (x * 3).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((3,), 3.0, dtype=torch.float64))
    assert_device_still_usable()


# =========================================================================
# Threads, several devices, streams
# =========================================================================
def _thread_job(seed, device):
    w = cpu_values(16, 16, seed=seed).to(device).requires_grad_()
    x = cpu_values(8, 16, seed=seed + 100).to(device)
    loss = F.log_softmax((x @ w).relu() @ w.t(), 1).sum() + w.pow(2).sum()
    loss.backward()
    return loss.detach(), w.grad


def test_backward_from_several_threads_matches_cpu():
    devices = [f"mydev:{i % N_DEVICES}" for i in range(6)]
    results, errors = {}, []

    def work(i):
        try:
            for rep in range(3):
                results[(i, rep)] = _thread_job(i, devices[i])
        except BaseException as exc:  # noqa: BLE001 (report in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (i, rep), (loss, grad) in results.items():
        ref_loss, ref_grad = _thread_job(i, "cpu")
        assert_close_to_cpu([loss, grad], [ref_loss, ref_grad], device=devices[i], msg=f"thread {i} rep {rep}")


def test_concurrent_backward_into_shared_leaf():
    """Four threads backpropagate into the same leaf: the accumulations are
    serialized, so .grad is exactly 4x one backward (all four equal)."""
    w = cpu_values(32, 32).to(D).requires_grad_()
    x = cpu_values(8, 32, seed=1).to(D)
    barrier = threading.Barrier(4)
    errors = []

    def work():
        try:
            loss = (x @ w).tanh().sum()
            barrier.wait()
            loss.backward()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    w_cpu = cpu_values(32, 32).requires_grad_()
    (cpu_values(8, 32, seed=1) @ w_cpu).tanh().sum().backward()
    assert_close_to_cpu(w.grad, w_cpu.grad * 4)


@needs_two_devices
def test_backward_across_devices():
    """mydev:0 -> mydev:1 -> cpu inside one graph: every leaf gets its gradient
    on its own device, equal to the all-CPU computation."""

    def run(dev0, dev1, dev2):
        a = cpu_values(4, 5).to(dev0).requires_grad_()
        b = cpu_values(5, 3, seed=1).to(dev1).requires_grad_()
        h = (a.sin() * 2).to(dev1)  # crosses mydev:0 -> mydev:1
        out = (h @ b).relu()
        back = out.to(dev0) * a[:, :3]  # and back to mydev:0
        loss = back.sum().to(dev2) + out.to(dev2).pow(2).sum()  # ends on the CPU
        loss.backward()
        return a.grad, b.grad, loss

    ref = run("cpu", "cpu", "cpu")
    with torch.mydev.device(0):
        ga, gb, loss = run(D, D1, "cpu")
    assert_close_to_cpu(ga, ref[0], device=D)
    assert_close_to_cpu(gb, ref[1], device=D1)
    assert loss.device.type == "cpu" and torch.allclose(loss.detach(), ref[2].detach())
    assert torch.mydev.current_device() == 0


@needs_two_devices
def test_backward_on_device_one_keeps_current_device():
    x = cpu_values(6, 6).to(D1).requires_grad_()
    (x @ x).softmax(1).sum().backward()
    assert x.grad.device == torch.device(D1)
    assert torch.mydev.current_device() == 0
    x_cpu = cpu_values(6, 6).requires_grad_()
    (x_cpu @ x_cpu).softmax(1).sum().backward()
    assert_close_to_cpu(x.grad, x_cpu.grad, device=D1)


def test_backward_on_side_stream_follows_forward_stream():
    """As on CUDA, backward ops run on the stream of their forward op and the
    result is ordered for the caller's stream. The side stream is held by a latch
    until the forward and backward are queued, so a backward that ignored stream order would read
    forward results that do not exist yet."""
    x = cpu_values(64, 64).to(D).requires_grad_()
    torch.mydev.synchronize()
    s = torch.mydev.Stream()
    with torch.mydev.stream(s), hold_stream():
        y = (x @ x).tanh().sum()
        y.backward()
        snapshot = x.grad.clone()
    s.synchronize()
    x_cpu = cpu_values(64, 64).requires_grad_()
    (x_cpu @ x_cpu).tanh().sum().backward()
    assert_close_to_cpu(snapshot, x_cpu.grad)
    assert_close_to_cpu(x.grad, x_cpu.grad)


def test_process_exits_cleanly_right_after_backward():
    """A script whose last mydev work is a backward exits with status 0
    (the autograd engine's device threads may still be winding down when
    the interpreter shuts down). The failure is a race, so a few runs."""
    code = """
        import torch
        x = torch.randn(64, device="mydev", requires_grad=True)
        (x * 2).sum().backward()
        print("done")
    """
    for attempt in range(6):
        proc = run_python(code)
        assert (proc.returncode, proc.stdout.strip()) == (0, "done"), (attempt, proc.returncode, proc.stderr[-400:])


# =========================================================================
# Optimizers: every optimizer of optim_db, mydev vs CPU
# =========================================================================
# SparseAdam is left out: it needs sparse gradients and sparse tensors are
# not a mydev layout (Sparsemydev has no kernels).
_OPTIMS = {info.optim_cls.__name__: info for info in optim_db if info.optim_cls is not torch.optim.SparseAdam}


def _optim_cases():
    cases = []
    for name, info in _OPTIMS.items():
        for inp in info.optim_inputs_func(device="cpu"):
            impls = [None] + [impl for impl in ("foreach", "fused") if impl in info.supported_impls]
            for impl in impls:
                cases.append(pytest.param(name, inp.kwargs, impl, id=f"{name}-{inp.desc}-{impl or 'for_loop'}"))
    return cases


def _make_params(device, matrices_only=False, dtype=torch.float32):
    shapes = [(5, 4), (3, 5)] if matrices_only else [(5, 4), (5,), (3, 5), ()]
    return [nn.Parameter(cpu_values(*s, seed=i, dtype=dtype).to(device)) for i, s in enumerate(shapes)]


def _run_optimizer(cls, kwargs, device, steps=3, matrices_only=False):
    params = _make_params(device, matrices_only)
    opt = cls(params, **kwargs)
    for step in range(steps):

        def closure(step=step):
            opt.zero_grad()
            loss = sum(((p * (step + 1)).sin() ** 2).sum() + 0.1 * (p**2).sum() for p in params)
            loss.backward()
            return loss

        opt.step(closure)
    return params, opt


def _compare_optimizer_runs(cls, kwargs_cpu, kwargs_dev, matrices_only=False, rtol=None, atol=None):
    ref_params, ref_opt = _run_optimizer(cls, kwargs_cpu, "cpu", matrices_only=matrices_only)
    params, opt = _run_optimizer(cls, kwargs_dev, D, matrices_only=matrices_only)
    start = _make_params("cpu", matrices_only)
    assert any(not torch.equal(p.detach(), s) for p, s in zip(ref_params, start)), "the optimizer did not move"
    assert_close_to_cpu(
        [p.detach() for p in params], [p.detach() for p in ref_params], device=D, rtol=rtol, atol=atol, msg="params"
    )
    # The optimizer state matches too; state shaped like its parameter lives
    # on the parameter's device.
    for p, ref_p in zip(params, ref_params):
        state, ref_state = opt.state[p], ref_opt.state[ref_p]
        assert set(state) == set(ref_state)
        for key, ref_value in ref_state.items():
            _assert_state_close(state[key], ref_value, p, key, rtol, atol)


def _assert_state_close(value, ref_value, param, key, rtol, atol):
    """One optimizer-state entry (a tensor, a number, or a list of them, as
    LBFGS keeps) against the CPU run's."""
    if isinstance(ref_value, (list, tuple)):
        assert isinstance(value, (list, tuple)) and len(value) == len(ref_value), key
        for i, (v, r) in enumerate(zip(value, ref_value)):
            _assert_state_close(v, r, param, f"{key}[{i}]", rtol, atol)
    elif isinstance(ref_value, torch.Tensor):
        assert isinstance(value, torch.Tensor), key
        if value.shape == param.shape and value.numel() > 1:
            assert value.device == param.device, (key, value.device)
        torch.testing.assert_close(
            value.detach().cpu().to(ref_value.dtype),
            ref_value.detach(),
            rtol=rtol,
            atol=atol,
            msg=lambda m: f"state {key}: {m}",
        )
    elif isinstance(ref_value, float):
        assert value == pytest.approx(ref_value, rel=rtol or 1.3e-6, abs=atol or 1e-5), key
    else:
        assert value == ref_value, key


@pytest.mark.parametrize("name,kwargs,impl", _optim_cases())
def test_optimizer_matches_cpu(name, kwargs, impl):
    info = _OPTIMS[name]
    kwargs = dict(kwargs)
    if impl is not None:
        kwargs[impl] = True
    elif "foreach" in info.supported_impls:
        kwargs["foreach"] = False
    _compare_optimizer_runs(info.optim_cls, kwargs, kwargs, matrices_only=(name == "Muon"))


_CAPTURABLE = ["Adadelta", "Adam", "Adamax", "AdamW", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop"]


@pytest.mark.parametrize("foreach", [False, True], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("name", _CAPTURABLE)
def test_capturable_optimizer_matches_cpu(name, foreach):
    """capturable=True (step counters kept on the device, no host sync) on
    mydev, against the ordinary optimizer on the CPU. Torch lists the
    privateuse1 device as capturable-capable. The capturable formulas are
    rearranged (tensor step, device-side bias correction), so float32
    results differ in the last bits: rtol 1e-5, atol 1e-6."""
    cls = _OPTIMS[name].optim_cls
    _compare_optimizer_runs(cls, {"foreach": foreach}, {"foreach": foreach, "capturable": True}, rtol=1e-5, atol=1e-6)


def test_fused_optimizers_accepted_on_mydev():
    """torch 2.13 lists the privateuse1 backend among the devices with fused
    optimizer kernels, so fused=True is accepted (no refusal) and the fused
    step keeps its step counter on the device."""
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    assert "mydev" in _get_fused_kernels_supported_devices()
    for cls in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW, torch.optim.Adagrad):
        params, opt = _run_optimizer(cls, {"fused": True, "lr": 0.01}, D, steps=1)
        if cls is not torch.optim.SGD:
            assert opt.state[params[0]]["step"].device == torch.device(D), cls


def test_optimizer_bad_arguments_and_device_usable():
    p = nn.Parameter(torch.ones(3, device=D))
    with pytest.raises(RuntimeError, match=re.escape("`fused` and `foreach` cannot be `True` together.")):
        torch.optim.Adam([p], fused=True, foreach=True)
    with pytest.raises(RuntimeError, match=re.escape("`fused` does not support `differentiable`")):
        torch.optim.AdamW([p], fused=True, differentiable=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        torch.optim.SGD([p], lr=-1)
    opt = torch.optim.Adam([p], lr=0.1, fused=True)
    p.grad = torch.ones(3, device=D)
    opt.step()
    assert torch.allclose(p.detach().cpu(), torch.full((3,), 0.9))
    assert_device_still_usable()


# =========================================================================
# GradScaler
# =========================================================================
def _scaler_run(device, inject_inf_at=(), opt_kwargs=None, steps=4, growth_interval=2):
    """Trains two parameters with Adam under a GradScaler; at the steps in
    ``inject_inf_at`` one gradient gets an inf after backward. Returns the
    params, the scale after each update, the Adam step counts and the losses."""
    params = [
        nn.Parameter(cpu_values(4, 3, dtype=torch.float32).to(device)),
        nn.Parameter(cpu_values(3, seed=1, dtype=torch.float32).to(device)),
    ]
    opt = torch.optim.Adam(params, lr=0.01, **(opt_kwargs or {}))
    scaler = torch.amp.GradScaler(device.split(":")[0], init_scale=2.0**10, growth_interval=growth_interval)
    scales, snapshots = [], []
    for step in range(steps):
        opt.zero_grad()
        x = cpu_values(5, 4, seed=10 + step, dtype=torch.float32).to(device)
        loss = ((x @ params[0]) + params[1]).tanh().pow(2).mean()
        scaled = scaler.scale(loss)
        assert scaled.device == loss.device
        torch.testing.assert_close(scaled.detach().cpu(), loss.detach().cpu() * scaler.get_scale())
        scaled.backward()
        if step in inject_inf_at:
            with torch.no_grad():
                params[1].grad[0] = float("inf")
        before = [p.detach().clone() for p in params]
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        snapshots.append([torch.equal(p.detach(), b) for p, b in zip(params, before)])
    steps_taken = opt.state[params[0]]["step"].item() if opt.state[params[0]] else 0
    return [p.detach() for p in params], scales, snapshots, steps_taken


@pytest.mark.parametrize("impl", ["for_loop", "foreach", "fused"])
def test_grad_scaler_growth_and_inf_skip_match_cpu(impl):
    opt_kwargs = {"for_loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
    ref = _scaler_run("cpu", inject_inf_at=(2,), opt_kwargs=opt_kwargs, steps=5)
    out = _scaler_run(D, inject_inf_at=(2,), opt_kwargs=opt_kwargs, steps=5)
    # Scale: 2 clean steps -> x2; inf at step 2 -> x0.5; 2 clean -> x2.
    assert ref[1] == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    assert out[1] == ref[1]
    # The inf step left both parameters untouched; the others moved them.
    assert out[2][2] == [True, True] and ref[2][2] == [True, True]
    assert all(snap == [False, False] for i, snap in enumerate(out[2]) if i != 2)
    assert out[3] == ref[3] == 4
    assert_close_to_cpu(out[0], ref[0])


def test_grad_scaler_unscale_then_clip_matches_cpu():
    def run(device):
        p = nn.Parameter(cpu_values(6, dtype=torch.float32).to(device))
        opt = torch.optim.SGD([p], lr=0.1)
        scaler = torch.amp.GradScaler(device.split(":")[0])
        assert scaler.get_scale() == 65536.0
        loss = (p.exp() * 3).sum()
        scaler.scale(loss).backward()
        scaled_grad = p.grad.clone()
        scaler.unscale_(opt)
        unscaled_grad = p.grad.clone()
        norm = nn.utils.clip_grad_norm_([p], 1.0)
        scaler.step(opt)
        scaler.update()
        return scaled_grad, unscaled_grad, norm, p.detach()

    ref, out = _both(run)
    assert_close_to_cpu(list(out), list(ref))
    assert_close_to_cpu(out[0], ref[1] * 65536.0)


def test_grad_scaler_misuse_raises_and_device_usable():
    p = nn.Parameter(torch.ones(3, device=D))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("mydev")
    scaler.scale((p * 2).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(
        RuntimeError, match=re.escape("unscale_() has already been called on this optimizer since the last update().")
    ):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=re.escape("step() has already been called since the last update().")):
        scaler.step(opt)
    scaler.update()
    assert torch.allclose(p.detach().cpu(), torch.full((3,), 0.8))
    assert_device_still_usable()


@needs_two_devices
def test_grad_scaler_inf_on_one_device_skips_whole_step():
    params = [nn.Parameter(torch.ones(3, device=D)), nn.Parameter(torch.ones(3, device=D1))]
    opt = torch.optim.SGD(params, lr=0.1)
    scaler = torch.amp.GradScaler("mydev", init_scale=8.0)
    scaler.scale(sum((p * 2).sum().to(D) for p in params)).backward()
    params[1].grad[1] = float("nan")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0
    assert all(torch.equal(p.detach().cpu(), torch.ones(3)) for p in params)


def test_grad_scaler_state_dict_round_trip():
    scaler = torch.amp.GradScaler("mydev", init_scale=16.0, growth_interval=3)
    p = nn.Parameter(torch.ones(2, device=D))
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(2):
        scaler.scale(p.sum()).backward()
        scaler.step(opt)
        scaler.update()
    state = scaler.state_dict()
    assert state["scale"] == 16.0 and state["_growth_tracker"] == 2
    other = torch.amp.GradScaler("mydev")
    other.load_state_dict(state)
    assert other.get_scale() == 16.0 and other._get_growth_tracker() == 2


# =========================================================================
# autocast (CUDA policy: torch/include/ATen/autocast_mode.h op lists)
# =========================================================================
LOW = [torch.bfloat16, torch.float16]
_low_id = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def test_autocast_enabled_and_dtype_flags():
    assert not torch.is_autocast_enabled("mydev")
    assert torch.get_autocast_dtype("mydev") == torch.float16  # the default, as for cuda
    with torch.autocast("mydev", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("mydev")
        assert torch.get_autocast_dtype("mydev") == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")
        with torch.autocast("mydev", enabled=False):
            assert not torch.is_autocast_enabled("mydev")
        assert torch.is_autocast_enabled("mydev")
    with torch.autocast("mydev"):
        assert torch.get_autocast_dtype("mydev") == torch.float16
    assert not torch.is_autocast_enabled("mydev")


def test_autocast_unsupported_dtype_warns_and_disables():
    a = torch.ones(2, 2, device=D)
    with pytest.warns(
        UserWarning,
        match=re.escape(
            "In mydev autocast, but the target dtype is not supported. Disabling autocast.\n"
            "mydev Autocast only supports dtypes of torch.float16, torch.bfloat16 currently."
        ),
    ):
        ctx = torch.autocast("mydev", dtype=torch.float64)
    with ctx:
        assert not torch.is_autocast_enabled("mydev")
        assert (a @ a).dtype == torch.float32


def _lowp_cases():
    x = cpu_values(4, 6, dtype=torch.float32)
    w = cpu_values(5, 6, seed=1, dtype=torch.float32)
    b = cpu_values(5, seed=2, dtype=torch.float32)
    b3 = cpu_values(2, 4, 6, seed=3, dtype=torch.float32)
    c3 = cpu_values(2, 6, 3, seed=4, dtype=torch.float32)
    img = cpu_values(2, 3, 6, 6, seed=5, dtype=torch.float32)
    k = cpu_values(4, 3, 3, 3, seed=6, dtype=torch.float32)
    seq = cpu_values(2, 3, 8, seed=7, dtype=torch.float32)
    k1 = cpu_values(4, 3, 3, seed=8, dtype=torch.float32)
    return {
        "mm": (torch.mm, (x, w.t())),
        "matmul": (torch.matmul, (b3, c3)),
        "bmm": (torch.bmm, (b3, c3)),
        "addmm": (torch.addmm, (b, x, w.t())),
        "baddbmm": (torch.baddbmm, (cpu_values(2, 4, 3, seed=9, dtype=torch.float32), b3, c3)),
        "linear": (F.linear, (x, w, b)),
        "einsum": (lambda p, q: torch.einsum("bij,bjk->bik", p, q), (b3, c3)),
        "conv1d": (F.conv1d, (seq, k1)),
        "conv2d": (lambda i, kk: F.conv2d(i, kk, padding=1), (img, k)),
    }


@pytest.mark.parametrize("dtype", LOW, ids=_low_id.get)
@pytest.mark.parametrize("op", list(_lowp_cases()))
def test_autocast_lower_precision_ops(op, dtype):
    """Ops of the lower-precision list run in the autocast dtype: output
    dtype is ``dtype`` and values equal the op on inputs cast to ``dtype``."""
    fn, args = _lowp_cases()[op]
    ref = fn(*[a.to(dtype) for a in args])
    dev_args = [a.to(D) for a in args]
    with torch.autocast("mydev", dtype=dtype):
        out = fn(*dev_args)
    assert out.dtype == dtype
    assert_close_to_cpu(out, ref)
    # Outside autocast the same call stays float32.
    assert fn(*dev_args).dtype == torch.float32


def _fp32_cases():
    """op -> (function, CPU reference given the low-precision input ``h``).
    The default reference is the function on ``h.float()``. cross_entropy
    is not in a list itself: its composite calls log_softmax with an
    explicit dtype (the input's), which the fp32_set_opt_dtype policy keeps,
    then nll_loss (fp32 list) upcasts; that is what CUDA computes."""
    t = torch.tensor([0, 3, 1, 2])
    upcast = None
    return {
        "softmax": (lambda h: F.softmax(h, -1), upcast),
        "log_softmax": (lambda h: F.log_softmax(h, 1), upcast),
        "layer_norm": (lambda h: F.layer_norm(h, (h.shape[-1],)), upcast),
        "group_norm": (lambda h: F.group_norm(h.unsqueeze(-1), 1), upcast),
        "sum": (lambda h: h.sum(), upcast),
        "sum_dim": (lambda h: h.sum(1), upcast),
        "cumsum": (lambda h: h.cumsum(1), upcast),
        "prod": (lambda h: h.prod(1), upcast),
        "exp": (torch.exp, upcast),
        "log": (torch.log, upcast),
        "pow": (lambda h: torch.pow(h, 2), upcast),
        "logsumexp": (lambda h: torch.logsumexp(h, 1), upcast),
        "cross_entropy": (
            lambda h: F.cross_entropy(h, t.to(h.device)),
            lambda h: F.nll_loss(F.log_softmax(h, 1).float(), t),
        ),
        "nll_loss": (lambda h: F.nll_loss(h, t.to(h.device)), upcast),
        "mse_loss": (lambda h: F.mse_loss(h, torch.zeros_like(h)), upcast),
        "binary_cross_entropy_with_logits": (
            lambda h: F.binary_cross_entropy_with_logits(h, torch.ones_like(h)),
            upcast,
        ),
        "norm": (lambda h: torch.norm(h), upcast),
    }


@pytest.mark.parametrize("dtype", LOW, ids=_low_id.get)
@pytest.mark.parametrize("op", list(_fp32_cases()))
def test_autocast_fp32_ops(op, dtype):
    """Ops of the fp32 lists, fed a low-precision tensor (the output of an
    autocast mm, positive), compute and return float32: values equal the op
    on the same input upcast to float32 on the CPU."""
    fn, ref_fn = _fp32_cases()[op]
    x = cpu_values(4, 6, low=0.1, high=1.0, dtype=torch.float32)
    w = cpu_values(6, 6, seed=1, low=0.1, high=1.0, dtype=torch.float32)
    ref_h = x.to(dtype) @ w.to(dtype)
    ref = fn(ref_h.float()) if ref_fn is None else ref_fn(ref_h)
    assert ref.dtype == torch.float32
    with torch.autocast("mydev", dtype=dtype):
        h = x.to(D) @ w.to(D)
        assert h.dtype == dtype
        out = fn(h)
    assert out.dtype == torch.float32
    assert_close_to_cpu(h, ref_h)
    assert_close_to_cpu(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", LOW, ids=_low_id.get)
def test_autocast_promote_and_untouched_ops(dtype):
    x32 = torch.ones(3, device=D)
    xlow = torch.ones(3, device=D, dtype=dtype)
    with torch.autocast("mydev", dtype=dtype):
        # promote list: widest input type
        assert torch.addcmul(x32, xlow, xlow).dtype == torch.float32
        assert torch.atan2(xlow, x32).dtype == torch.float32
        assert torch.dot(xlow, x32).dtype == torch.float32
        # ops in no list keep their input types
        assert (x32 + 1).dtype == torch.float32
        assert F.relu(xlow).dtype == dtype
        assert torch.cat([xlow, xlow]).dtype == dtype
        # factories and random ops work and keep their dtype
        assert torch.randn(2, device=D).dtype == torch.float32
        assert torch.zeros(2, device=D).dtype == torch.float32
        # float64 is not autocast
        d64 = torch.ones(2, 2, device=D, dtype=torch.float64)
        assert (d64 @ d64).dtype == torch.float64


def test_autocast_is_per_device_type():
    a_cpu = torch.ones(2, 2)
    a_dev = torch.ones(2, 2, device=D)
    with torch.autocast("mydev", dtype=torch.bfloat16):
        assert (a_cpu @ a_cpu).dtype == torch.float32
        assert (a_dev @ a_dev).dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a_cpu @ a_cpu).dtype == torch.bfloat16
        assert (a_dev @ a_dev).dtype == torch.float32


def test_autocast_binary_cross_entropy_is_banned_like_cuda():
    """CUDA's autocast refuses F.binary_cross_entropy (unsafe in float16)."""
    p = torch.full((4,), 0.5, device=D)
    with torch.autocast("mydev", dtype=torch.float16):
        with pytest.raises(
            RuntimeError,
            match=re.escape("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast."),
        ):
            F.binary_cross_entropy(p, torch.ones(4, device=D))
    assert_device_still_usable()


@pytest.mark.parametrize("dtype", LOW, ids=_low_id.get)
def test_autocast_backward_matches_manual_casts(dtype):
    """linear -> relu -> linear -> cross_entropy under autocast: the loss is
    float32, gradients land in the parameters' float32, and equal a CPU
    computation written with explicit casts. Tolerances are those of the low
    dtype (the matmuls run in it): rtol 1.6e-2 (bf16) / 1e-3 (fp16)."""

    def params(device):
        return [
            cpu_values(*s, seed=i, dtype=torch.float32).to(device).requires_grad_()
            for i, s in enumerate([(8, 6), (8,), (4, 8), (4,)])
        ]

    x = cpu_values(5, 6, seed=20, dtype=torch.float32)
    t = torch.tensor([0, 3, 1, 2, 3])
    ref_p = params("cpu")
    h = F.relu(F.linear(x.to(dtype), ref_p[0].to(dtype), ref_p[1].to(dtype)))
    logits = F.linear(h, ref_p[2].to(dtype), ref_p[3].to(dtype))
    ref_loss = F.nll_loss(F.log_softmax(logits, 1).float(), t)  # see _fp32_cases
    ref_loss.backward()

    dev_p = params(D)
    with torch.autocast("mydev", dtype=dtype):
        h = F.relu(F.linear(x.to(D), dev_p[0], dev_p[1]))
        logits = F.linear(h, dev_p[2], dev_p[3])
        assert logits.dtype == dtype
        loss = F.cross_entropy(logits, t.to(D))
    assert loss.dtype == torch.float32
    loss.backward()
    tol = {torch.bfloat16: (1.6e-2, 1e-3), torch.float16: (1e-3, 1e-4)}[dtype]
    assert_close_to_cpu(loss, ref_loss, rtol=tol[0], atol=tol[1])
    for p, r in zip(dev_p, ref_p):
        assert p.grad.dtype == torch.float32
        assert_close_to_cpu(p.grad, r.grad, rtol=tol[0], atol=tol[1])


def test_autocast_with_grad_scaler_training_loop():
    """The documented AMP recipe on mydev: autocast(float16) forward, scaled
    backward, scaler.step / update; the loss goes down and no step is
    skipped with a sane scale."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(D)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    scaler = torch.amp.GradScaler("mydev", init_scale=256.0)
    x = cpu_values(32, 8, dtype=torch.float32).to(D)
    y = (torch.arange(32) % 3).to(D)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        with torch.autocast("mydev", dtype=torch.float16):
            out = model(x)
            assert out.dtype == torch.float16
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert scaler.get_scale() == 256.0
    assert losses[-1] < losses[0]


# =========================================================================
# Random numbers from the mydev generator
# =========================================================================
N_RAND = 1000


def _probs(device):
    p = torch.arange(1, 11, dtype=torch.float32, device=device)
    p[3] = 0.0
    return p


RANDOM_OPS = {
    "randn": lambda g=None: torch.randn(N_RAND, device=D, generator=g),
    "rand": lambda g=None: torch.rand(N_RAND, device=D, generator=g),
    "randint": lambda g=None: torch.randint(0, 1000, (N_RAND,), device=D, generator=g),
    "normal_": lambda g=None: torch.empty(N_RAND, device=D).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g=None: torch.empty(N_RAND, device=D).uniform_(-1.0, 1.0, generator=g),
    "exponential_": lambda g=None: torch.empty(N_RAND, device=D).exponential_(generator=g),
    "bernoulli": lambda g=None: torch.bernoulli(torch.full((N_RAND,), 0.5, device=D), generator=g),
    "bernoulli_p": lambda g=None: torch.empty(N_RAND, device=D).bernoulli_(0.3, generator=g),
    "multinomial": lambda g=None: torch.multinomial(_probs(D), N_RAND, replacement=True, generator=g),
    "randperm": lambda g=None: torch.randperm(N_RAND, device=D, generator=g),
    # no generator argument:
    "dropout": lambda: F.dropout(torch.ones(N_RAND, device=D), p=0.5, training=True),
    "randn_like": lambda: torch.randn_like(torch.empty(N_RAND, device=D)),
}
TAKES_GENERATOR = [name for name in RANDOM_OPS if name not in ("dropout", "randn_like")]


def _offset(state):
    return int(state[8:16].view(torch.int64).item())


def _seed_of(state):
    return int(state[:8].view(torch.int64).item())


def _draw(op):
    out = RANDOM_OPS[op]()
    assert out.device == torch.device(D)
    return out.cpu()


@pytest.mark.parametrize("op", list(RANDOM_OPS))
def test_random_same_seed_same_values(op):
    torch.mydev.manual_seed(1234)
    first = _draw(op)
    second_draw = _draw(op)
    torch.mydev.manual_seed(1234)
    again = _draw(op)
    assert torch.equal(first, again)
    assert not torch.equal(first, second_draw), "the generator did not advance between draws"
    torch.mydev.manual_seed(4321)
    assert not torch.equal(first, _draw(op)), "a different seed gave the same values"


@pytest.mark.parametrize("op", list(RANDOM_OPS))
def test_random_independent_of_cpu_generator(op):
    torch.mydev.manual_seed(7)
    torch.default_generator.manual_seed(1)
    first = _draw(op)
    torch.mydev.manual_seed(7)
    torch.default_generator.manual_seed(2)
    cpu_state = torch.get_rng_state()
    second = _draw(op)
    assert torch.equal(first, second), "mydev values changed with the CPU seed"
    assert torch.equal(torch.get_rng_state(), cpu_state), "a mydev random op advanced the CPU generator"


@pytest.mark.parametrize("op", list(RANDOM_OPS))
def test_random_rng_state_round_trip_and_offset(op):
    torch.mydev.manual_seed(99)
    state = torch.mydev.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,)
    assert _seed_of(state) == 99
    first = _draw(op)
    after = torch.mydev.get_rng_state()
    assert _seed_of(after) == 99
    assert _offset(after) > _offset(state), "the Philox offset did not advance"
    torch.mydev.set_rng_state(state)
    assert torch.equal(_draw(op), first)
    assert torch.equal(torch.mydev.get_rng_state(), after)


@pytest.mark.parametrize("op", TAKES_GENERATOR)
def test_random_explicit_generator(op):
    g = torch.Generator(device=D)
    assert g.device == torch.device(D)
    torch.mydev.manual_seed(3)
    default_state = torch.mydev.get_rng_state()
    g.manual_seed(5)
    first = RANDOM_OPS[op](g).cpu()
    g.manual_seed(5)
    second = RANDOM_OPS[op](g).cpu()
    assert torch.equal(first, second)
    assert torch.equal(torch.mydev.get_rng_state(), default_state), "an explicit generator advanced the default one"
    # The explicit generator seeded like the default one draws the same.
    g.manual_seed(3)
    assert torch.equal(RANDOM_OPS[op](g).cpu(), _draw(op))


def test_torch_manual_seed_seeds_mydev():
    torch.manual_seed(2024)
    assert torch.mydev.initial_seed() == 2024
    a = _draw("randn")
    torch.mydev.manual_seed(2024)
    assert torch.equal(_draw("randn"), a)


@needs_two_devices
def test_random_per_device_generators():
    torch.mydev.manual_seed_all(11)
    s0 = torch.mydev.get_rng_state(0)
    a1 = torch.randn(N_RAND, device=D1).cpu()
    assert torch.equal(torch.mydev.get_rng_state(0), s0), "drawing on mydev:1 advanced mydev:0"
    assert _offset(torch.mydev.get_rng_state(1)) > _offset(s0)
    # Same Philox seed and offset on both devices: same stream (what DTensor relies on).
    assert torch.equal(torch.randn(N_RAND, device=D).cpu(), a1)
    with torch.mydev.device(1):
        torch.mydev.manual_seed(12)  # seeds the current device only
    assert _seed_of(torch.mydev.get_rng_state(1)) == 12
    assert _seed_of(torch.mydev.get_rng_state(0)) == 11


def test_fork_rng_restores_mydev_state():
    torch.mydev.manual_seed(8)
    expected = _draw("randn")
    torch.mydev.manual_seed(8)
    with torch.random.fork_rng(devices=[0], device_type="mydev"):
        inside = _draw("randn")
        torch.mydev.manual_seed(1)
        _draw("rand")
    assert torch.equal(inside, expected)
    assert torch.equal(_draw("randn"), expected), "fork_rng did not restore the mydev state"
    # Without devices, all devices are forked (and torch warns if there are several).
    torch.mydev.manual_seed_all(8)
    states = torch.mydev.get_rng_state_all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.random.fork_rng(device_type="mydev"):
            for i in range(N_DEVICES):
                torch.randn(10, device=f"mydev:{i}")
    assert all(torch.equal(a, b) for a, b in zip(torch.mydev.get_rng_state_all(), states))


def test_random_values_are_valid():
    torch.mydev.manual_seed(0)
    r = RANDOM_OPS["randint"]().cpu()
    assert r.dtype == torch.int64 and r.min() >= 0 and r.max() < 1000
    u = RANDOM_OPS["uniform_"]().cpu()
    assert u.min() >= -1 and u.max() < 1
    assert set(RANDOM_OPS["bernoulli"]().cpu().unique().tolist()) <= {0.0, 1.0}
    m = RANDOM_OPS["multinomial"]().cpu()
    assert m.min() >= 0 and m.max() <= 9 and not (m == 3).any(), "multinomial drew a zero-probability class"
    assert torch.equal(RANDOM_OPS["randperm"]().cpu().sort().values, torch.arange(N_RAND))
    d = RANDOM_OPS["dropout"]().cpu()
    assert set(d.unique().tolist()) <= {0.0, 2.0}
    assert (RANDOM_OPS["exponential_"]().cpu() >= 0).all()


def test_random_distributions():
    torch.mydev.manual_seed(123)
    n = 100_000
    x = torch.randn(n, device=D).cpu().double()
    assert abs(x.mean().item()) < 0.02 and abs(x.std().item() - 1) < 0.02
    y = torch.empty(n, device=D).normal_(2.0, 3.0).cpu().double()
    assert abs(y.mean().item() - 2) < 0.06 and abs(y.std().item() - 3) < 0.06
    u = torch.rand(n, device=D).cpu().double()
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    assert u.min() >= 0 and u.max() < 1
    b = torch.empty(n, device=D).bernoulli_(0.3).cpu().double()
    assert abs(b.mean().item() - 0.3) < 0.01
    d = F.dropout(torch.ones(n, device=D), p=0.25, training=True).cpu()
    assert abs((d == 0).double().mean().item() - 0.25) < 0.01
    counts = torch.bincount(torch.randint(0, 10, (n,), device=D).cpu(), minlength=10)
    assert counts.min() > 9_400 and counts.max() < 10_600
    # Dropout in eval mode is the identity and draws nothing.
    before = torch.mydev.get_rng_state()
    ones = torch.ones(5, device=D)
    assert torch.equal(F.dropout(ones, 0.5, training=False).cpu(), torch.ones(5))
    assert torch.equal(torch.mydev.get_rng_state(), before)


def test_rng_state_bad_input_and_device_usable():
    state = torch.mydev.get_rng_state()
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        torch.mydev.set_rng_state(state.float())
    with pytest.raises(
        RuntimeError, match=re.escape("mydev RNG state must be 16 bytes (seed: uint64, offset: int64), got 8")
    ):
        torch.mydev.set_rng_state(state[:8])
    with pytest.raises(RuntimeError, match="Expected a 'mydev' device type for generator but found 'cpu'"):
        torch.randn(3, device=D, generator=torch.Generator())
    # A mydev generator given to a CPU op: cuda says
    # "Expected a 'cpu' device type for generator but found 'cuda'".
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'mydev'"):
        torch.randn(3, generator=torch.Generator(device=D))
    assert torch.equal(torch.mydev.get_rng_state(), state)
    assert_device_still_usable()
