"""The fused custom ops torch.ops.mydev.{rms_norm, swiglu, rotary_embedding}.

Values and gradients are compared with the same math written with plain
PyTorch ops on the CPU, in float64 from the same (possibly low-precision)
inputs: float32 results must be close to it, bfloat16/float16 results within
a couple of units in the last place (the kernels compute in float32 and round
once). Then: torch.library.opcheck on mydev and the CPU, torch.compile with
fullgraph=True (the ops stay calls of the op in the generated code), autocast,
stream order, determinism, every vector ISA the kernels are built for, and bad
input raising errors that name the op and the argument.
"""

import re

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import device_ext
from mydev_testing import assert_close_to_cpu, assert_device_still_usable, hold_stream, needs_two_devices, run_python

D = "mydev:0"
DEVICES = ["cpu", D]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (rtol, atol) of outputs and gradients against the float64 reference.
TOL = {
    torch.float32: (2e-5, 2e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
}
EPS = 1e-5


# ---------------------------------------------------------------- references --
def rms_norm_ref(x, weight, eps):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def swiglu_ref(gate, up):
    return F.silu(gate.double()) * up.double()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_ref(x, cos, sin):
    x = x.double()
    return x * cos.double() + rotate_half(x) * sin.double()


def values(*shape, seed=0, dtype=torch.float32, low=-2.0, high=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=torch.float64).mul(high - low).add(low).to(dtype)


def rope_tables(seq, head_dim, dtype=torch.float32, batch_positions=None):
    """cos/sin [seq, head_dim] (cat(freqs, freqs), as models build them), or
    [batch, 1, seq, head_dim] for per-sequence position offsets."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    positions = torch.arange(seq, dtype=torch.float64)
    if batch_positions is not None:
        positions = positions + torch.tensor(batch_positions, dtype=torch.float64)[:, None]
    freqs = positions[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    if batch_positions is not None:
        emb = emb[:, None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


# ---------------------------------------------------------------- the cases --
# name -> (make(dtype) -> (inputs, grad-requiring input indices), fused op, reference)
def _rms_inputs(shape, weight_float=False):
    def make(dtype):
        hidden = shape[-1]
        x = values(*shape, seed=1, dtype=dtype)
        w = values(hidden, seed=2, low=0.5, high=1.5, dtype=torch.float32 if weight_float else dtype)
        return (x, w, EPS), (0, 1)

    return make


def _swiglu_inputs(shape):
    def make(dtype):
        return (values(*shape, seed=3, low=-6, high=6, dtype=dtype), values(*shape, seed=4, dtype=dtype)), (0, 1)

    return make


def _rotary_inputs(shape, table="seq", tables_float=False):
    def make(dtype):
        x = values(*shape, seed=5, dtype=dtype)
        table_dtype = torch.float32 if tables_float else dtype
        seq, head_dim = shape[-2], shape[-1]
        if table == "batch":
            cos, sin = rope_tables(seq, head_dim, table_dtype, batch_positions=list(range(0, 7 * shape[0], 7)))
        else:
            cos, sin = rope_tables(seq, head_dim, table_dtype)
            if table == "4d":
                cos, sin = cos[None, None], sin[None, None]
        return (x, cos, sin), (0,)

    return make


CASES = {
    "rms_norm": (_rms_inputs((3, 5, 257)), torch.ops.mydev.rms_norm, rms_norm_ref),
    "rms_norm_2d_float_weight": (_rms_inputs((64, 128), weight_float=True), torch.ops.mydev.rms_norm, rms_norm_ref),
    "swiglu": (_swiglu_inputs((7, 333)), torch.ops.mydev.swiglu, swiglu_ref),
    "swiglu_3d": (_swiglu_inputs((2, 3, 64)), torch.ops.mydev.swiglu, swiglu_ref),
    "rotary": (_rotary_inputs((2, 3, 7, 40)), torch.ops.mydev.rotary_embedding, rotary_ref),
    "rotary_per_batch_float_tables": (
        _rotary_inputs((3, 2, 16, 128), table="batch", tables_float=True),
        torch.ops.mydev.rotary_embedding,
        rotary_ref,
    ),
    "rotary_2d": (_rotary_inputs((5, 6)), torch.ops.mydev.rotary_embedding, rotary_ref),
    "rotary_4d_tables": (_rotary_inputs((1, 2, 9, 72), table="4d"), torch.ops.mydev.rotary_embedding, rotary_ref),
}


def device_args(inputs, device, grad_indices):
    """Fresh leaves on ``device`` (the tensors of ``inputs`` are never modified)."""
    return [
        t.detach().clone().to(device).requires_grad_(i in grad_indices) if isinstance(t, torch.Tensor) else t
        for i, t in enumerate(inputs)
    ]


def _reference_grads(ref, inputs, grad_indices, grad_out):
    leaves = [
        t.detach().double().requires_grad_(i in grad_indices) if isinstance(t, torch.Tensor) else t
        for i, t in enumerate(inputs)
    ]
    out = ref(*leaves)
    out.backward(grad_out.double())
    return out.detach(), [leaves[i].grad for i in grad_indices]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_the_reference(case, dtype, device):
    make, op, ref = CASES[case]
    inputs, grad_indices = make(dtype)
    rtol, atol = TOL[dtype]
    grad_out = values(*inputs[0].shape, seed=9, dtype=dtype)
    expected, expected_grads = _reference_grads(ref, inputs, grad_indices, grad_out)

    args = device_args(inputs, device, grad_indices)
    out = op(*args)
    assert out.device == torch.device(device) and out.dtype == dtype and out.shape == inputs[0].shape
    assert out.is_contiguous()
    out.backward(grad_out.to(device))
    torch.testing.assert_close(out.detach().cpu(), expected.to(dtype), rtol=rtol, atol=atol)
    for i, expected_grad in zip(grad_indices, expected_grads):
        grad = args[i].grad
        assert grad.dtype == inputs[i].dtype and grad.device == torch.device(device), case
        torch.testing.assert_close(
            grad.cpu(),
            expected_grad.to(grad.dtype),
            rtol=rtol,
            atol=atol,
            msg=lambda m, i=i: f"gradient of input {i}: {m}",
        )


@pytest.mark.parametrize("case", list(CASES))
def test_mydev_and_cpu_run_the_same_kernel_bit_for_bit(case):
    """The device kernel is the CPU kernel on host views of device memory, and
    no result depends on the thread schedule (rms_norm's grad_weight reduces
    fixed chunks of rows in a fixed order)."""
    make, op, _ = CASES[case]
    for dtype in (torch.float32, torch.bfloat16):
        inputs, grad_indices = make(dtype)
        grad_out = values(*inputs[0].shape, seed=9, dtype=dtype)
        results = []
        for device in DEVICES:
            args = device_args(inputs, device, grad_indices)
            out = op(*args)
            out.backward(grad_out.to(device))
            results.append([out.detach().cpu()] + [args[i].grad.cpu() for i in grad_indices])
        for a, b in zip(*results):
            assert torch.equal(a, b), case


# Large enough for the kernels to split their work over threads (>= 32K
# elements per task), with splits that fall inside vector steps.
SPLIT_CASES = {
    "rms_norm": (_rms_inputs((1000, 96)), torch.ops.mydev.rms_norm),
    "swiglu": (_swiglu_inputs((300, 333)), torch.ops.mydev.swiglu),
    "rotary": (_rotary_inputs((4, 8, 50, 40)), torch.ops.mydev.rotary_embedding),
}


@pytest.mark.parametrize("case", list(SPLIT_CASES))
def test_results_do_not_depend_on_the_thread_count(case):
    """Bit for bit with 1, 2 and 3 threads: the elementwise kernels split
    anywhere, and rms_norm's grad_weight sums fixed chunks of rows in a fixed
    order."""
    make, op = SPLIT_CASES[case]
    inputs, grad_indices = make(torch.float32)
    grad_out = values(*inputs[0].shape, seed=9)
    results = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            args = device_args(inputs, "cpu", grad_indices)
            out = op(*args)
            out.backward(grad_out)
            results.append([out.detach()] + [args[i].grad for i in grad_indices])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other)), case
    # And the device, whose executor threads split the same way.
    args = device_args(inputs, D, grad_indices)
    out = op(*args)
    out.backward(grad_out.to(D))
    device_results = [out.detach().cpu()] + [args[i].grad.cpu() for i in grad_indices]
    assert all(torch.equal(a, b) for a, b in zip(results[0], device_results)), case


# ------------------------------------------------------ non-contiguous input --
def _strided(t, kind):
    """``t``'s values in a non-contiguous layout."""
    if kind == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if kind == "sliced":  # every other element of a wider buffer
        wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide[..., ::2]
    raise AssertionError(kind)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["transposed", "sliced"])
def test_non_contiguous_inputs_give_the_contiguous_result(kind, device):
    x = values(4, 6, 64, seed=1).to(device)
    w = values(64, seed=2).to(device)
    gate, up = values(6, 64, seed=3).to(device), values(6, 64, seed=4).to(device)
    cos, sin = (t.to(device) for t in rope_tables(6, 64))
    checks = [
        (torch.ops.mydev.rms_norm, (x, w, EPS), (_strided(x, kind), _strided(w[None], kind)[0], EPS)),
        (torch.ops.mydev.swiglu, (gate, up), (_strided(gate, kind), _strided(up, kind))),
        (
            torch.ops.mydev.rotary_embedding,
            (x, cos, sin),
            (_strided(x, kind), _strided(cos, kind), _strided(sin, kind)),
        ),
    ]
    for op, dense, strided in checks:
        assert not strided[0].is_contiguous()
        out = op(*strided)
        assert out.is_contiguous()
        assert torch.equal(out.cpu(), op(*dense).cpu()), op


def test_expanded_gradient_from_sum_backward():
    """out.sum().backward() hands backward a stride-0 gradient."""
    x = values(8, 32, seed=1).to(D).requires_grad_()
    w = values(32, seed=2).to(D).requires_grad_()
    torch.ops.mydev.rms_norm(x, w, EPS).sum().backward()
    xr, wr = x.detach().cpu().double().requires_grad_(), w.detach().cpu().double().requires_grad_()
    rms_norm_ref(xr, wr, EPS).sum().backward()
    assert_close_to_cpu(x.grad, xr.grad.float(), rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(w.grad, wr.grad.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_inputs(device):
    x = torch.empty(0, 16, device=device, requires_grad=True)
    w = torch.ones(16, device=device, requires_grad=True)
    torch.ops.mydev.rms_norm(x, w, EPS).sum().backward()
    assert x.grad.shape == (0, 16) and torch.equal(w.grad.cpu(), torch.zeros(16))
    assert torch.ops.mydev.swiglu(torch.empty(0, 3, device=device), torch.empty(0, 3, device=device)).shape == (0, 3)
    cos = torch.ones(0, 8, device=device)
    assert torch.ops.mydev.rotary_embedding(torch.empty(2, 0, 8, device=device), cos, cos).shape == (2, 0, 8)


def test_meta_tensors_get_shapes_from_the_fake_kernels():
    x, w = torch.empty(4, 8, device="meta"), torch.empty(8, device="meta", dtype=torch.bfloat16)
    assert torch.ops.mydev.rms_norm(x.bfloat16(), w, EPS).shape == (4, 8)
    assert torch.ops.mydev.swiglu(x, x).device.type == "meta"
    assert torch.ops.mydev.rotary_embedding(x[None], x, x).shape == (1, 4, 8)
    with pytest.raises(ValueError, match=re.escape("mydev::rms_norm: weight must have shape [hidden] = [8], got [7]")):
        torch.ops.mydev.rms_norm(x, torch.empty(7, device="meta"), EPS)


def test_rotary_cos_sin_gradients_when_they_require_grad():
    x = values(2, 3, 5, 16, seed=1)
    cos, sin = values(5, 16, seed=2), values(5, 16, seed=3)
    grad = values(2, 3, 5, 16, seed=4)
    leaves = [t.to(D).requires_grad_() for t in (x, cos, sin)]
    torch.ops.mydev.rotary_embedding(*leaves).backward(grad.to(D))
    ref_leaves = [t.double().requires_grad_() for t in (x, cos, sin)]
    rotary_ref(*ref_leaves).backward(grad.double())
    for leaf, ref_leaf in zip(leaves, ref_leaves):
        assert_close_to_cpu(leaf.grad, ref_leaf.grad.float(), rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------- opcheck --
# opcheck's test_autograd_registration is not implemented in torch for
# devices other than CPU/CUDA/XPU (it raises NotImplementedError before it
# looks at the op); on mydev it is run with inputs that do not require grad
# (where it passes trivially), the other three checks also with inputs that
# do, and what the registration check accepts first (a kernel at the
# Autograd key) is asserted directly.
ALL_BUT_AUTOGRAD_REGISTRATION = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _opcheck_samples(device):
    x, w = values(4, 6, 64, seed=1), values(64, seed=2)
    gate, up = values(6, 40, seed=3), values(6, 40, seed=4)
    q = values(2, 3, 6, 32, seed=5)
    cos, sin = rope_tables(6, 32)
    bcos, bsin = rope_tables(6, 32, batch_positions=[0, 3])
    samples = {
        "rms_norm": [
            (x, w, EPS),
            (x[..., :63].to(torch.bfloat16), w[:63].to(torch.bfloat16), 1e-6),
            (_strided(x, "transposed"), _strided(w[None], "sliced")[0], EPS),
            (x.to(torch.bfloat16), w, EPS),
        ],
        "swiglu": [(gate, up), (_strided(gate, "transposed"), _strided(up, "sliced")), (gate.half(), up.half())],
        "rotary_embedding": [
            (q, cos, sin),
            (_strided(q, "transposed"), _strided(cos, "sliced"), sin),
            (q.to(torch.bfloat16), bcos, bsin),
            (q[0, 0], cos, sin),
        ],
    }
    return {
        name: [tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in s) for s in ss]
        for name, ss in samples.items()
    }


def _with_grad(sample, indices):
    return tuple(t.detach().clone().requires_grad_() if i in indices else t for i, t in enumerate(sample))


GRAD_INDICES = {"rms_norm": (0, 1), "swiglu": (0, 1), "rotary_embedding": (0,)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(GRAD_INDICES))
def test_opcheck(name, device):
    op = getattr(torch.ops.mydev, name).default
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Autograd")
    grad_checks = (
        ALL_BUT_AUTOGRAD_REGISTRATION
        if device != "cpu"
        else ("test_autograd_registration", *ALL_BUT_AUTOGRAD_REGISTRATION)
    )
    for sample in _opcheck_samples(device)[name]:
        opcheck(op, sample)  # every default check; no input requires grad
        opcheck(op, _with_grad(sample, GRAD_INDICES[name]), test_utils=grad_checks)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_backward_ops(device):
    x, w = values(4, 64, seed=1).to(device), values(64, seed=2).to(device)
    g = values(4, 64, seed=3).to(device)
    q = values(2, 6, 32, seed=5).to(device)
    cos, sin = (t.to(device) for t in rope_tables(6, 32))
    opcheck(torch.ops.mydev.rms_norm_backward.default, (g, x, w, EPS))
    opcheck(torch.ops.mydev.swiglu_backward.default, (g, x, g))
    opcheck(torch.ops.mydev.rotary_embedding_backward.default, (q, cos, sin))


def test_rotary_opcheck_with_cos_sin_requiring_grad():
    q = values(2, 3, 6, 32, seed=5).to(D).requires_grad_()
    cos, sin = (t.to(D).requires_grad_() for t in rope_tables(6, 32))
    opcheck(torch.ops.mydev.rotary_embedding.default, (q, cos, sin), test_utils=ALL_BUT_AUTOGRAD_REGISTRATION)


# -------------------------------------------------------------- torch.compile --
def block(x, w, w_gate, w_up, cos, sin):
    """A transformer-ish block using all three ops."""
    h = torch.ops.mydev.rms_norm(x, w, EPS)
    q = torch.ops.mydev.rotary_embedding(h.view(2, 8, 2, 16).transpose(1, 2), cos, sin)
    a = torch.ops.mydev.swiglu(h @ w_gate, h @ w_up)
    return a.sum() + q.square().sum()


def _block_inputs(device):
    x = values(2, 8, 32, seed=1).to(device)
    w = values(32, seed=2, low=0.5, high=1.5).to(device)
    w_gate, w_up = values(32, 48, seed=3).to(device) * 0.2, values(32, 48, seed=4).to(device) * 0.2
    cos, sin = (t.to(device) for t in rope_tables(8, 16))
    return [x, w, w_gate, w_up, cos, sin]


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_keeps_the_ops_and_their_backward_ops(device):
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    counters.clear()
    # The reference is eager on the CPU, whatever the device compiled for.
    eager_leaves = [t.requires_grad_(i < 4) for i, t in enumerate(_block_inputs("cpu"))]
    compiled_leaves = [t.requires_grad_(i < 4) for i, t in enumerate(_block_inputs(device))]
    compiled = torch.compile(block, fullgraph=True)

    def train_step():
        loss = compiled(*compiled_leaves)
        loss.backward()
        return loss

    loss, codes = run_and_get_code(train_step)
    expected = block(*eager_leaves)
    expected.backward()
    assert not counters["graph_break"], dict(counters["graph_break"])
    code = "\n".join(codes)
    for name in (
        "rms_norm",
        "swiglu",
        "rotary_embedding",
        "rms_norm_backward",
        "swiglu_backward",
        "rotary_embedding_backward",
    ):
        assert f"torch.ops.mydev.{name}.default(" in code, name
    assert loss.device == torch.device(device)
    torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    for a, b in zip(compiled_leaves[:4], eager_leaves[:4]):
        assert a.grad.device == torch.device(device)
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-5)


def test_compile_dynamic_shapes():
    torch._dynamo.reset()

    def f(x, w, gate, up):
        return torch.ops.mydev.rms_norm(x, w, EPS) + torch.ops.mydev.swiglu(gate, up)

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows in (3, 5, 9):
        cpu_args = [values(rows, 24, seed=rows), values(24, seed=1), values(rows, 24, seed=2), values(rows, 24, seed=3)]
        assert_close_to_cpu(compiled(*(a.to(D) for a in cpu_args)), f(*cpu_args), rtol=1e-5, atol=1e-5)


def test_compile_reports_bad_input_with_the_op_and_argument():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: torch.ops.mydev.rms_norm(x, w, EPS), fullgraph=True)
    # Dynamo runs the fake kernel, whose input check raises the op's ValueError.
    expected = "got ValueError('mydev::rms_norm: weight must have shape [hidden] = [8], got [7]')"
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError, match=re.escape(expected)):
        compiled(torch.ones(2, 8, device=D), torch.ones(7, device=D))
    assert_device_still_usable()


# ------------------------------------------------------------------ autocast --
def test_autocast_runs_the_ops_in_the_activation_dtype():
    """Under autocast the ops cast nothing: outputs take the activation's
    dtype (bfloat16 from the autocast matmuls), float32 parameters and tables
    are read as they are, and parameter gradients keep the parameters' dtype."""
    x = values(6, 32, seed=1).to(D)
    w_norm = values(48, seed=2, low=0.5, high=1.5).to(D).requires_grad_()
    w_gate = (values(32, 48, seed=3) * 0.2).to(D).requires_grad_()
    w_up = (values(32, 48, seed=4) * 0.2).to(D).requires_grad_()
    cos, sin = (t.to(D) for t in rope_tables(6, 16))
    with torch.autocast("mydev", dtype=torch.bfloat16):
        h = x @ w_gate  # bfloat16 under autocast
        normed = torch.ops.mydev.rms_norm(h, w_norm, EPS)
        act = torch.ops.mydev.swiglu(h, x @ w_up)
        rot = torch.ops.mydev.rotary_embedding(h.view(6, 3, 16).transpose(0, 1), cos, sin)
        fp32 = torch.ops.mydev.rms_norm(x, torch.ones(32, device=D), EPS)
    assert h.dtype == normed.dtype == act.dtype == rot.dtype == torch.bfloat16
    assert fp32.dtype == torch.float32
    (normed.float().sum() + act.float().sum() + rot.float().sum()).backward()
    assert w_norm.grad.dtype == w_gate.grad.dtype == w_up.grad.dtype == torch.float32

    h_cpu = h.detach().cpu()
    rtol, atol = TOL[torch.bfloat16]
    torch.testing.assert_close(
        normed.detach().cpu(), rms_norm_ref(h_cpu, w_norm.detach().cpu(), EPS).bfloat16(), rtol=rtol, atol=atol
    )
    up_cpu = x.cpu().bfloat16() @ w_up.detach().cpu().bfloat16()
    torch.testing.assert_close(act.detach().cpu(), swiglu_ref(h_cpu, up_cpu).bfloat16(), rtol=rtol, atol=atol)
    torch.testing.assert_close(
        rot.detach().cpu(),
        rotary_ref(h_cpu.view(6, 3, 16).transpose(0, 1), cos.cpu(), sin.cpu()).bfloat16(),
        rtol=rtol,
        atol=atol,
    )


def test_autocast_under_compile():
    torch._dynamo.reset()

    def f(x, w, w_gate):
        with torch.autocast("mydev", dtype=torch.bfloat16):
            h = x @ w_gate
            return torch.ops.mydev.swiglu(torch.ops.mydev.rms_norm(h, w, EPS), h)

    args = [values(4, 16, seed=1).to(D), values(24, seed=2).to(D), values(16, 24, seed=3).to(D)]
    out = torch.compile(f, fullgraph=True)(*args)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), f(*args).cpu(), rtol=0, atol=0)


# ------------------------------------------------------- streams and devices --
def test_ops_are_enqueued_on_the_current_stream():
    x, w = values(64, 256, seed=1).to(D), values(256, seed=2).to(D)
    torch.ops.mydev.rms_norm(x, w, EPS)  # warm up the Python path
    torch.mydev.synchronize()
    side = torch.mydev.Stream()
    with torch.mydev.stream(side):
        src = torch.zeros(64, 256, device=D)
        with hold_stream():  # everything below waits behind this
            src.copy_(x)
            out = torch.ops.mydev.rms_norm(src, w, EPS)
            act = torch.ops.mydev.swiglu(out, src)
            assert side.query() is False  # only enqueued
    side.synchronize()
    expected = rms_norm_ref(x.cpu(), w.cpu(), EPS).float()
    assert_close_to_cpu(out, expected, rtol=1e-5, atol=1e-5)
    assert_close_to_cpu(act, swiglu_ref(expected, x.cpu()).float(), rtol=1e-5, atol=1e-5)


@needs_two_devices
def test_ops_run_on_their_tensors_device():
    x, w = values(8, 32, seed=1), values(32, seed=2)
    out = torch.ops.mydev.rms_norm(x.to("mydev:1"), w.to("mydev:1"), EPS)
    assert out.device == torch.device("mydev:1") and torch.mydev.current_device() == 0
    assert_close_to_cpu(out, rms_norm_ref(x, w, EPS).float(), device="mydev:1", rtol=1e-5, atol=1e-5)
    with pytest.raises(
        RuntimeError, match=re.escape("mydev::rms_norm: weight must be on the same device as x (mydev:1), got mydev:0")
    ):
        torch.ops.mydev.rms_norm(x.to("mydev:1"), w.to("mydev:0"), EPS)
    assert_device_still_usable()


# ------------------------------------------------------------- vector ISAs --
@pytest.mark.parametrize("isa", ["default", "avx2"])
def test_every_isa_build_of_the_kernels(isa):
    """The kernels are compiled for DEFAULT, AVX2 and AVX512 and picked with
    ATen's capability; ATEN_CPU_CAPABILITY forces the smaller ones."""
    code = """
        import torch, device_ext
        import torch.nn.functional as F
        print(device_ext._C._fused_kernels_isa())
        g = torch.Generator().manual_seed(0)
        for dtype, tol in ((torch.float32, 2e-5), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
            x = torch.randn(5, 7, 70, generator=g).to(dtype); w = torch.randn(70, generator=g).to(dtype)
            u = torch.randn(5, 7, 70, generator=g).to(dtype); grad = torch.randn(5, 7, 70, generator=g).to(dtype)
            cos, sin = torch.randn(7, 70, generator=g).to(dtype), torch.randn(7, 70, generator=g).to(dtype)
            def rot(x, c, s):
                return x * c + torch.cat((-x[..., 35:], x[..., :35]), -1) * s
            refs = [
                (torch.ops.mydev.rms_norm, lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w, (x, w)),
                (torch.ops.mydev.swiglu, lambda a, b: F.silu(a) * b, (x, u)),
                (torch.ops.mydev.rotary_embedding, lambda x: rot(x, cos.double(), sin.double()), (x,)),
            ]
            for op, ref, args in refs:
                extra = ((1e-5,) if op is torch.ops.mydev.rms_norm else
                         (cos.to("mydev"), sin.to("mydev")) if op is torch.ops.mydev.rotary_embedding else ())
                leaves = [a.to("mydev").requires_grad_() for a in args]
                out = op(*leaves, *extra)
                out.backward(grad.to("mydev"))
                ref_leaves = [a.double().requires_grad_() for a in args]
                expected = ref(*ref_leaves)
                expected.backward(grad.double())
                torch.testing.assert_close(out.detach().cpu(), expected.detach().to(dtype), rtol=tol, atol=tol)
                for a, b in zip(leaves, ref_leaves):
                    torch.testing.assert_close(a.grad.cpu(), b.grad.to(dtype), rtol=tol, atol=tol)
        print("ok")
    """
    if isa == "avx2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this CPU has no AVX2: ATen cannot select it")
    result = run_python(code, env={"ATEN_CPU_CAPABILITY": isa})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split()
    assert lines[-1] == "ok"
    assert lines[0] == isa.upper(), lines  # the build that ATEN_CPU_CAPABILITY asked for


def test_kernels_use_atens_capability():
    capability = torch.backends.cpu.get_cpu_capability()
    expected = capability if capability in ("AVX2", "AVX512") else "DEFAULT"
    assert device_ext._C._fused_kernels_isa() == expected


# ----------------------------------------------------------------- bad input --
def _bad_calls():
    x = torch.ones(4, 4096, device=D)
    w = torch.ones(4096, device=D)
    gate = torch.ones(3, 8, device=D)
    q = torch.ones(2, 4, 16, device=D)
    cos = torch.ones(4, 16, device=D)
    rms, sw, rot = torch.ops.mydev.rms_norm, torch.ops.mydev.swiglu, torch.ops.mydev.rotary_embedding
    return {
        "weight shape": (
            lambda: rms(x, torch.ones(4095, device=D), EPS),
            ValueError,
            "mydev::rms_norm: weight must have shape [hidden] = [4096], got [4095]",
        ),
        "weight rank": (
            lambda: rms(x, torch.ones(1, 4096, device=D), EPS),
            ValueError,
            "mydev::rms_norm: weight must have shape [hidden] = [4096], got [1, 4096]",
        ),
        "x rank": (
            lambda: rms(torch.tensor(1.0, device=D), w[:1], EPS),
            ValueError,
            "mydev::rms_norm: x must have at least 1 dimension",
        ),
        "x dtype": (
            lambda: rms(x.double(), w, EPS),
            TypeError,
            "mydev::rms_norm: x must have dtype float32, bfloat16 or float16, got torch.float64",
        ),
        "x integer": (lambda: rms(x.long(), w, EPS), TypeError, "mydev::rms_norm: x must have dtype"),
        "weight dtype": (
            lambda: rms(x.bfloat16(), w.half(), EPS),
            TypeError,
            "mydev::rms_norm: weight must have x's dtype (torch.bfloat16) or float32, got torch.float16",
        ),
        "weight on cpu": (
            lambda: rms(x, w.cpu(), EPS),
            RuntimeError,
            "mydev::rms_norm: weight must be on the same device as x (mydev:0), got cpu",
        ),
        "x on cpu": (
            lambda: rms(x.cpu(), w, EPS),
            RuntimeError,
            "mydev::rms_norm: weight must be on the same device as x (cpu), got mydev:0",
        ),
        "eps": (lambda: rms(x, w, -1.0), ValueError, "mydev::rms_norm: eps must be >= 0, got -1.0"),
        "not a tensor": (lambda: device_ext.ops.rms_norm(x, [1.0], EPS), Exception, "weight"),
        "up shape": (
            lambda: sw(gate, torch.ones(3, 9, device=D)),
            ValueError,
            "mydev::swiglu: up must have gate's shape [3, 8], got [3, 9]",
        ),
        "up dtype": (
            lambda: sw(gate, gate.half()),
            TypeError,
            "mydev::swiglu: up must have gate's dtype (torch.float32), got torch.float16",
        ),
        "up device": (
            lambda: sw(gate, gate.cpu()),
            RuntimeError,
            "mydev::swiglu: up must be on the same device as gate (mydev:0), got cpu",
        ),
        "gate dtype": (lambda: sw(gate.double(), gate.double()), TypeError, "mydev::swiglu: gate must have dtype"),
        "rotary rank": (
            lambda: rot(torch.ones(16, device=D), cos[0], cos[0]),
            ValueError,
            "mydev::rotary_embedding: x must have 2 to 9 dimensions [..., seq, head_dim], got a 1-d tensor",
        ),
        "odd head_dim": (
            lambda: rot(torch.ones(4, 15, device=D), cos[:, :15], cos[:, :15]),
            ValueError,
            "mydev::rotary_embedding: x's last dimension (head_dim) must be even, got 15",
        ),
        "cos shape": (
            lambda: rot(q, torch.ones(5, 16, device=D), cos),
            ValueError,
            "mydev::rotary_embedding: cos must have shape [seq, head_dim] = [4, 16] or another shape "
            "that broadcasts to x's shape [2, 4, 16] with head_dim last, got [5, 16]",
        ),
        "sin head_dim": (
            lambda: rot(q, cos, torch.ones(4, 8, device=D)),
            ValueError,
            "mydev::rotary_embedding: sin must have shape [seq, head_dim] = [4, 16]",
        ),
        "cos too many dims": (
            lambda: rot(q, cos[None, None], cos[None, None]),
            ValueError,
            "mydev::rotary_embedding: cos must have shape",
        ),
        "sin dtype": (
            lambda: rot(q, cos, cos.half()),
            TypeError,
            "mydev::rotary_embedding: sin must have x's dtype (torch.float32) or float32, got torch.float16",
        ),
        "cos and sin differ": (
            lambda: rot(q.half(), cos, cos.half()),
            ValueError,
            "mydev::rotary_embedding: sin must have cos's shape [4, 16] and dtype torch.float32",
        ),
        "cos device": (
            lambda: rot(q, cos.cpu(), cos),
            RuntimeError,
            "mydev::rotary_embedding: cos must be on the same device as x (mydev:0), got cpu",
        ),
        "backward grad shape": (
            lambda: torch.ops.mydev.rms_norm_backward(x[:2], x, w, EPS),
            ValueError,
            "mydev::rms_norm_backward: grad_out must have x's shape [4, 4096], got [2, 4096]",
        ),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_input_names_the_op_and_the_argument(case):
    call, error, message = _bad_calls()[case]
    with pytest.raises(error, match=re.escape(message)):
        call()
    assert_device_still_usable()


def test_the_cpp_entry_points_check_their_arguments_too():
    """Direct callers of the bindings (skipping the Python checks) get the
    same kind of message, never an out-of-bounds kernel."""
    C = device_ext._C
    x, w = torch.ones(4, 64, device=D), torch.ones(64, device=D)
    with pytest.raises(
        RuntimeError, match=re.escape("mydev::rms_norm: weight must have shape [hidden] = [64], got [63]")
    ):
        C._fused_rms_norm(x, w[:63], EPS)
    with pytest.raises(RuntimeError, match=re.escape("mydev::swiglu: up must have gate's shape [4, 64], got [4, 63]")):
        C._fused_swiglu(x, x[:, :63])
    with pytest.raises(RuntimeError, match=re.escape("mydev::rotary_embedding: cos must be on the same device as x")):
        C._fused_rotary_embedding(x, x.cpu(), x)
    with pytest.raises(RuntimeError, match=re.escape("mydev::rms_norm_backward: grad_out must have x's shape")):
        C._fused_rms_norm_backward(x[:1], x, w, EPS)
    assert_device_still_usable()
