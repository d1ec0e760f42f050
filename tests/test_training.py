"""Training on mydev, step by step against the same training on the CPU.

Every test builds a model on the CPU, copies it to mydev (same initial
weights), feeds both the same batches and compares, after every step, the
loss, every gradient, every parameter and every buffer. The device runs
ATen's own CPU kernels, so float32 results agree to far better than the
tolerance used here (rtol=1e-4, atol=1e-5); looser tolerances are named and
explained where they are used.
"""

import copy
import io
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mydev_testing import N_DEVICES, assert_close_to_cpu, assert_device_still_usable, needs_two_devices

D = "mydev:0"
RTOL, ATOL = 1e-4, 1e-5
STEPS = 6


# ------------------------------------------------------------------ models --
class MLP(nn.Module):
    """Two hidden layers, ReLU; logits for cross-entropy."""

    def __init__(self, n_in=20, hidden=32, n_classes=5):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


class TinyLM(nn.Module):
    """Embedding -> one TransformerEncoderLayer (batch_first, dropout=0, so
    deterministic) -> linear head over the vocabulary; causal mask."""

    def __init__(self, vocab=40, d_model=32, nhead=4, ff=64, norm_first=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.layer = nn.TransformerEncoderLayer(
            d_model, nhead, ff, dropout=0.0, batch_first=True, norm_first=norm_first
        )
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        seq = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(seq, device=tokens.device)
        return self.head(self.layer(self.embed(tokens), src_mask=mask, is_causal=True))


class SmallCNN(nn.Module):
    """Conv2d + BatchNorm2d + ReLU + MaxPool, twice, then a linear head."""

    def __init__(self, n_classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, stride=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(16 * 4, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


# ----------------------------------------------------------------- batches --
def mlp_batches(steps=STEPS, batch=16, n_in=20, n_classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, n_in, generator=g), torch.randint(0, n_classes, (batch,), generator=g))
        for _ in range(steps)
    ]


def lm_batches(steps=STEPS, batch=4, seq=12, vocab=40, seed=1):
    """(tokens, next tokens): a language-model objective."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        stream = torch.randint(0, vocab, (batch, seq + 1), generator=g)
        out.append((stream[:, :-1], stream[:, 1:]))
    return out


def cnn_batches(steps=STEPS, batch=8, n_classes=4, seed=2):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, 3, 12, 12, generator=g), torch.randint(0, n_classes, (batch,), generator=g))
        for _ in range(steps)
    ]


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---------------------------------------------------------------- lockstep --
def make_model(cls, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(**kwargs)


def to_device(model, device=D):
    """An independent copy of the CPU ``model`` on ``device``, checked to
    start from exactly the same weights and buffers."""
    dev = copy.deepcopy(model).to(device)
    assert_state_matches(dev, model, device=device, exact=True, what="initial")
    return dev


def assert_grads_match(dev_model, cpu_model, *, device=D, rtol=RTOL, atol=ATOL, what=""):
    for (name, p_dev), (_, p_cpu) in zip(dev_model.named_parameters(), cpu_model.named_parameters()):
        assert_close_to_cpu(p_dev.grad, p_cpu.grad, device=device, rtol=rtol, atol=atol, msg=f"{what} grad of {name}")


def assert_state_matches(dev_model, cpu_model, *, device=D, rtol=RTOL, atol=ATOL, exact=False, what="", grads=False):
    dev_state = dev_model.state_dict()
    cpu_state = cpu_model.state_dict()
    assert list(dev_state) == list(cpu_state)
    for name, ref in cpu_state.items():
        assert_close_to_cpu(
            dev_state[name], ref, device=device, rtol=rtol, atol=atol, exact=exact, msg=f"{what} {name}"
        )
    if grads:
        assert_grads_match(dev_model, cpu_model, device=device, rtol=rtol, atol=atol, what=what)


def forward_backward(model, opt, x, y, loss_fn):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.detach()


def train_step(model, opt, x, y, loss_fn):
    loss = forward_backward(model, opt, x, y, loss_fn)
    opt.step()
    return loss


def train_lockstep(
    cpu_model,
    make_opt,
    batches,
    loss_fn,
    *,
    device=D,
    clip=None,
    make_scheduler=None,
    rtol=RTOL,
    atol=ATOL,
    non_blocking=False,
):
    """Trains ``cpu_model`` and its mydev copy side by side. After every
    backward: loss and gradients (and, with ``clip(parameters) -> total
    norm``, the norm and the clipped gradients); after every step:
    parameters, buffers and the learning rate. Returns both models and
    optimizers."""
    dev_model = to_device(cpu_model, device)
    opt_cpu, opt_dev = make_opt(cpu_model.parameters()), make_opt(dev_model.parameters())
    sched_cpu = make_scheduler(opt_cpu) if make_scheduler else None
    sched_dev = make_scheduler(opt_dev) if make_scheduler else None
    for step, (x, y) in enumerate(batches):
        what = f"step {step}"
        if non_blocking:
            x_dev = x.pin_memory().to(device, non_blocking=True)
            y_dev = y.pin_memory().to(device, non_blocking=True)
        else:
            x_dev, y_dev = x.to(device), y.to(device)
        loss_cpu = forward_backward(cpu_model, opt_cpu, x, y, loss_fn)
        loss_dev = forward_backward(dev_model, opt_dev, x_dev, y_dev, loss_fn)
        assert_close_to_cpu(loss_dev, loss_cpu, device=device, rtol=rtol, atol=atol, msg=f"{what} loss")
        assert_grads_match(dev_model, cpu_model, device=device, rtol=rtol, atol=atol, what=what)
        if clip is not None:
            norm_cpu, norm_dev = clip(cpu_model.parameters()), clip(dev_model.parameters())
            assert_close_to_cpu(norm_dev, norm_cpu, device=device, rtol=rtol, atol=atol, msg=f"{what} norm")
            assert_grads_match(dev_model, cpu_model, device=device, rtol=rtol, atol=atol, what=f"{what} clipped")
        opt_cpu.step()
        opt_dev.step()
        if make_scheduler:
            sched_cpu.step()
            sched_dev.step()
            assert [g["lr"] for g in opt_dev.param_groups] == [g["lr"] for g in opt_cpu.param_groups]
        assert_state_matches(dev_model, cpu_model, device=device, rtol=rtol, atol=atol, what=what)
    return cpu_model, dev_model, opt_cpu, opt_dev


# foreach is pinned: mydev defaults to the foreach implementation, the CPU
# to the for-loop one, and they differ in observable details (foreach SGD
# with nesterov updates .grad in place), so both sides use the same one.
OPTIMIZERS = {
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4, foreach=True),
    "sgd_nesterov": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, foreach=False),
    "adamw": lambda params: torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01, foreach=True),
    "adamw_for_loop": lambda params: torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01, foreach=False),
    # For the transformer: the key part of the attention in_proj_bias has a
    # gradient that is mathematically zero (softmax ignores a per-row
    # constant); numerically it is ~1e-9 rounding noise whose bits depend on
    # summation order. AdamW divides each gradient by its own magnitude and
    # would turn that noise into lr-sized steps; eps=1e-5 (default 1e-8)
    # keeps noise from being amplified while real gradients (>= 1e-4 here)
    # are barely affected.
    "adamw_transformer": lambda params: torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01, eps=1e-5, foreach=True),
}


def assert_weights_moved(model, initial):
    moved = [
        name
        for name, p in model.state_dict().items()
        if p.is_floating_point() and not torch.equal(p.cpu(), initial[name])
    ]
    assert moved, "training did not change any weight"


# ==================================================================== MLP ==
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "sgd_nesterov", "adamw", "adamw_for_loop"])
def test_mlp_training_matches_cpu(opt_name):
    cpu_model = make_model(MLP)
    initial = copy.deepcopy(cpu_model.state_dict())
    _, dev_model, _, _ = train_lockstep(cpu_model, OPTIMIZERS[opt_name], mlp_batches(steps=8), F.cross_entropy)
    assert_weights_moved(dev_model, initial)


def test_mlp_training_pinned_non_blocking_batches():
    """The usual input pipeline: batches pinned on the host and copied with
    non_blocking=True; the copy must be ordered before the forward."""
    cpu_model = make_model(MLP)
    train_lockstep(
        cpu_model, OPTIMIZERS["sgd_momentum"], mlp_batches(steps=6, batch=256), F.cross_entropy, non_blocking=True
    )


@needs_two_devices
def test_mlp_training_on_second_device():
    cpu_model = make_model(MLP)
    _, dev_model, _, opt_dev = train_lockstep(
        cpu_model, OPTIMIZERS["adamw"], mlp_batches(steps=5), F.cross_entropy, device="mydev:1"
    )
    for state in opt_dev.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            assert state[key].device == torch.device("mydev:1")
    assert torch.mydev.current_device() == 0


def test_mlp_gradient_accumulation_matches_cpu():
    """Three micro-batches accumulate into .grad before one step."""
    cpu_model = make_model(MLP)
    dev_model = to_device(cpu_model)
    opts = [OPTIMIZERS["sgd_momentum"](m.parameters()) for m in (cpu_model, dev_model)]
    batches = mlp_batches(steps=9)
    for step in range(3):
        for model, opt, dev in ((cpu_model, opts[0], "cpu"), (dev_model, opts[1], D)):
            opt.zero_grad()
            for x, y in batches[3 * step : 3 * step + 3]:
                (F.cross_entropy(model(x.to(dev)), y.to(dev)) / 3).backward()
            opt.step()
        assert_state_matches(dev_model, cpu_model, what=f"step {step}", grads=True)


# ============================================================ transformer ==
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adamw_transformer"])
def test_transformer_training_matches_cpu(opt_name, norm_first):
    cpu_model = make_model(TinyLM, norm_first=norm_first)
    initial = copy.deepcopy(cpu_model.state_dict())
    _, dev_model, _, _ = train_lockstep(cpu_model, OPTIMIZERS[opt_name], lm_batches(steps=6), lm_loss)
    assert_weights_moved(dev_model, initial)


def test_transformer_eval_fast_path_matches_cpu():
    """In eval mode under inference_mode, TransformerEncoderLayer takes its
    fused fast path (torch._transformer_encoder_layer_fwd), which torch
    enables for the privateuse1 device too; with and without a key padding
    mask."""
    layer = make_model(
        nn.TransformerEncoderLayer, d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    ).eval()
    dev = to_device(layer)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 7, 32, generator=g)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, 5:] = True
    pad[2, 2:] = True
    with torch.inference_mode():
        for mask in (None, pad):
            ref = layer(x, src_key_padding_mask=mask)
            out = dev(x.to(D), src_key_padding_mask=None if mask is None else mask.to(D))
            assert out.is_inference()
            assert_close_to_cpu(out, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_decoder_eval_fast_path_matches_cpu(norm_first):
    """Under no_grad a decoder layer's attention takes
    torch._native_multi_head_attention without weights, which the CPU kernel
    returns as None (the Meta kernel says an empty tensor)."""
    layer = make_model(
        nn.TransformerDecoderLayer,
        d_model=4,
        nhead=2,
        dim_feedforward=8,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
    ).eval()
    dev = to_device(layer)
    tgt = torch.randn(2, 3, 4, device=D)
    memory = torch.randn(2, 5, 4, device=D)
    with torch.no_grad():
        ref = layer(tgt.cpu(), memory.cpu())
        out = dev(tgt, memory)
        assert_close_to_cpu(out, ref, rtol=RTOL, atol=ATOL)
        attn = dev.self_attn
        _, weights = attn(tgt, tgt, tgt, need_weights=False)
    assert weights is None


def _transformer_encoder_eval_with_padding_mask():
    enc = make_model(
        nn.TransformerEncoder,
        encoder_layer=nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
        num_layers=2,
    ).eval()
    dev = to_device(enc)
    x = torch.randn(3, 6, 32, generator=torch.Generator().manual_seed(4))
    pad = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    with torch.inference_mode():
        ref = enc(x, src_key_padding_mask=pad)
        out = dev(x.to(D), src_key_padding_mask=pad.to(D))
    return out, ref


@pytest.fixture
def cpu_fallback_policy():
    previous = torch.mydev.cpu_fallback_policy()
    yield torch.mydev.set_cpu_fallback_policy
    torch.mydev.set_cpu_fallback_policy(previous)
    torch.mydev.reset_cpu_fallback_counts()


def test_transformer_encoder_nested_fast_path_is_refused_by_default(cpu_fallback_policy):
    """nn.TransformerEncoder (enable_nested_tensor=True, the default) turns a
    padded batch into a nested tensor on its eval fast path; torch takes that
    path on the privateuse1 device, as on cuda. mydev has no nested-layout
    kernels, so by default that is a clear error naming the switch."""
    cpu_fallback_policy("off")
    with pytest.raises(NotImplementedError, match="no kernels for nested tensors.*MYDEV_CPU_FALLBACK"):
        _transformer_encoder_eval_with_padding_mask()
    assert_close_to_cpu(torch.ones(2, device=D) * 3, torch.full((2,), 3.0))


def test_transformer_encoder_nested_fast_path_matches_cpu_with_cpu_fallback(cpu_fallback_policy):
    cpu_fallback_policy("on")
    torch.mydev.reset_cpu_fallback_counts()
    out, ref = _transformer_encoder_eval_with_padding_mask()
    assert_close_to_cpu(out, ref, rtol=RTOL, atol=ATOL)
    assert torch.mydev.cpu_fallback_counts().get("aten::_transformer_encoder_layer_fwd") == 2


# ==================================================================== CNN ==
@pytest.mark.parametrize("opt_name", ["sgd_momentum", "adamw"])
def test_cnn_batchnorm_train_and_eval_match_cpu(opt_name):
    """Conv2d + BatchNorm2d: train mode updates running_mean/var and
    num_batches_tracked (compared as buffers every step); eval mode uses
    them."""
    cpu_model = make_model(SmallCNN)
    cpu_model, dev_model, _, _ = train_lockstep(cpu_model, OPTIMIZERS[opt_name], cnn_batches(steps=5), F.cross_entropy)
    bn = dev_model.features[1]
    assert bn.running_mean.device == torch.device(D)
    assert int(bn.num_batches_tracked.item()) == 5
    cpu_model.eval()
    dev_model.eval()
    x = torch.randn(5, 3, 12, 12, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        ref = cpu_model(x)
        out = dev_model(x.to(D))
    assert_close_to_cpu(out, ref, rtol=RTOL, atol=ATOL)
    # Eval mode must not touch the running statistics.
    assert_state_matches(dev_model, cpu_model, what="after eval")
    # And eval output differs from train-mode output (the buffers are used).
    dev_model.train()
    with torch.no_grad():
        assert not torch.allclose(dev_model(x.to(D)).cpu(), out.cpu())


# ====================================================== clipping, scheduler ==
@pytest.mark.parametrize("foreach", [False, True])
def test_clip_grad_norm_matches_cpu(foreach):
    """clip_grad_norm_ with a max_norm small enough to clip at every step:
    the returned total norm and the clipped gradients match the CPU."""
    cpu_model = make_model(MLP)
    norms = []

    def clip(params):
        norm = nn.utils.clip_grad_norm_(params, 0.1, foreach=foreach)
        norms.append(norm.item())
        return norm

    train_lockstep(cpu_model, OPTIMIZERS["sgd_momentum"], mlp_batches(steps=5), F.cross_entropy, clip=clip)
    assert len(norms) == 10 and min(norms) > 0.1  # it really clipped, every step


def test_clip_grad_norm_actually_clips_and_value_clipping():
    params_cpu = [nn.Parameter(torch.zeros(4, 3)), nn.Parameter(torch.zeros(5))]
    grads = [torch.linspace(-3, 3, 12).reshape(4, 3), torch.tensor([10.0, -20.0, 0.5, 0.0, 1.0])]
    params_dev = [nn.Parameter(p.detach().to(D)) for p in params_cpu]
    for p_cpu, p_dev, g in zip(params_cpu, params_dev, grads):
        p_cpu.grad, p_dev.grad = g.clone(), g.to(D)
    for norm_type in (2.0, 1.0, float("inf")):
        for ps in (params_cpu, params_dev):
            for p, g in zip(ps, grads):
                p.grad.copy_(g)
        n_cpu = nn.utils.clip_grad_norm_(params_cpu, 1.0, norm_type=norm_type)
        n_dev = nn.utils.clip_grad_norm_(params_dev, 1.0, norm_type=norm_type)
        assert_close_to_cpu(n_dev, n_cpu, rtol=RTOL, atol=ATOL, msg=f"norm {norm_type}")
        assert n_cpu.item() > 1.0
        clipped_total = torch.linalg.vector_norm(torch.cat([p.grad.flatten().cpu() for p in params_dev]), norm_type)
        assert clipped_total.item() == pytest.approx(1.0, rel=1e-4)
        assert_close_to_cpu([p.grad for p in params_dev], [p.grad for p in params_cpu], rtol=RTOL, atol=ATOL)
    for ps in (params_cpu, params_dev):
        for p, g in zip(ps, grads):
            p.grad.copy_(g)
        nn.utils.clip_grad_value_(ps, 1.5)
    assert_close_to_cpu([p.grad for p in params_dev], [p.grad for p in params_cpu], exact=True)
    assert params_dev[1].grad.cpu().tolist() == [1.5, -1.5, 0.5, 0.0, 1.0]


def test_clip_grad_norm_non_finite_raises_and_device_usable():
    p = nn.Parameter(torch.ones(3, device=D))
    p.grad = torch.tensor([1.0, float("inf"), 0.0], device=D)
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped"
        ),
    ):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    # Without error_if_nonfinite, the norm is reported as inf (as on the CPU).
    q = nn.Parameter(torch.ones(3))
    q.grad = torch.tensor([1.0, float("inf"), 0.0])
    assert_close_to_cpu(nn.utils.clip_grad_norm_([p], 1.0), nn.utils.clip_grad_norm_([q], 1.0))
    assert_device_still_usable()


@pytest.mark.parametrize("sched", ["step", "onecycle", "cosine_warm_restarts"])
def test_lr_scheduler_matches_cpu(sched):
    makers = {
        "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
        "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=8),
        "cosine_warm_restarts": lambda opt: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3),
    }
    cpu_model = make_model(MLP)
    make_opt = OPTIMIZERS["sgd_momentum"] if sched != "step" else OPTIMIZERS["adamw"]
    _, _, opt_cpu, opt_dev = train_lockstep(
        cpu_model, make_opt, mlp_batches(steps=7), F.cross_entropy, make_scheduler=makers[sched]
    )
    assert opt_dev.param_groups[0]["lr"] == opt_cpu.param_groups[0]["lr"]


def test_reduce_lr_on_plateau_reads_device_loss():
    """ReduceLROnPlateau.step(metric) takes a 0-dim mydev tensor as the
    metric, as it takes a cuda one."""
    p = nn.Parameter(torch.ones(2, device=D))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    for _ in range(3):
        sched.step(torch.tensor(5.0, device=D))
    assert opt.param_groups[0]["lr"] == 0.25


# =================================================== model.mydev(), state ==
def test_module_mydev_moves_parameters_and_buffers_in_place():
    model = make_model(SmallCNN)
    params_before = list(model.parameters())
    values = copy.deepcopy(model.state_dict())
    assert model.mydev() is model
    assert all(a is b for a, b in zip(model.parameters(), params_before))
    for name, t in model.state_dict().items():
        assert t.device == torch.device(D), name
        assert_close_to_cpu(t, values[name], exact=True, msg=name)
    if N_DEVICES >= 2:
        model.mydev(1)
        assert {t.device for t in model.state_dict().values()} == {torch.device("mydev:1")}
        model.mydev()  # no index: the current device
        assert {t.device for t in model.state_dict().values()} == {torch.device(D)}
    model.cpu()
    assert {t.device.type for t in model.state_dict().values()} == {"cpu"}
    for name, t in model.state_dict().items():
        assert torch.equal(t, values[name]), name


def test_module_mydev_keeps_optimizer_references_valid():
    """An optimizer built before .mydev() keeps working (the Parameter
    objects are the same), as with .cuda()."""
    cpu_model = make_model(MLP)
    moved = copy.deepcopy(cpu_model)
    opt_moved = torch.optim.SGD(moved.parameters(), lr=0.1)
    moved.mydev()
    opt_cpu = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    x, y = mlp_batches(steps=1)[0]
    for model, opt, dev in ((cpu_model, opt_cpu, "cpu"), (moved, opt_moved, D)):
        train_step(model, opt, x.to(dev), y.to(dev), F.cross_entropy)
    assert_state_matches(moved, cpu_model, grads=True)


def test_model_input_on_wrong_device_raises_and_device_usable():
    model = make_model(MLP).mydev()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        model(torch.randn(2, 20))
    if N_DEVICES >= 2:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            model(torch.randn(2, 20, device="mydev:1"))
    out = model(torch.randn(2, 20, device=D))
    assert out.shape == (2, 5) and out.device == torch.device(D)
    assert_device_still_usable()


def test_state_dict_round_trip_and_resume_training():
    """Train 3 steps on mydev, save model + optimizer state, load them into
    fresh objects (on mydev via map_location, and on the CPU) and continue:
    the resumed run equals the uninterrupted one."""
    cpu_model = make_model(MLP)
    batches = mlp_batches(steps=6)
    make_opt = OPTIMIZERS["adamw"]
    # Uninterrupted reference, on mydev.
    ref_model = to_device(cpu_model)
    ref_opt = make_opt(ref_model.parameters())
    for x, y in batches:
        train_step(ref_model, ref_opt, x.to(D), y.to(D), F.cross_entropy)

    model = to_device(cpu_model)
    opt = make_opt(model.parameters())
    for x, y in batches[:3]:
        train_step(model, opt, x.to(D), y.to(D), F.cross_entropy)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)

    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    for name, t in on_cpu["model"].items():
        assert t.device.type == "cpu"
        assert_close_to_cpu(model.state_dict()[name], t, exact=True, msg=name)
    assert all(s["exp_avg"].device.type == "cpu" for s in on_cpu["opt"]["state"].values())

    buf.seek(0)
    loaded = torch.load(buf, map_location=D)
    assert all(t.device == torch.device(D) for t in loaded["model"].values())
    resumed = make_model(MLP, seed=123).to(D)
    resumed.load_state_dict(loaded["model"])
    resumed_opt = make_opt(resumed.parameters())
    resumed_opt.load_state_dict(loaded["opt"])
    for state in resumed_opt.state.values():
        assert state["exp_avg"].device == torch.device(D)
    for x, y in batches[3:]:
        train_step(resumed, resumed_opt, x.to(D), y.to(D), F.cross_entropy)
    for name, t in ref_model.state_dict().items():
        assert torch.equal(resumed.state_dict()[name].cpu(), t.cpu()), name

    # A CPU model loads the mydev state dict directly (copied across devices).
    cpu_copy = make_model(MLP, seed=7)
    cpu_copy.load_state_dict(model.state_dict())
    for name, t in model.state_dict().items():
        assert torch.equal(cpu_copy.state_dict()[name], t.cpu()), name


# ========================================================= no_grad, inference ==
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_without_autograd_matches_cpu(mode):
    ctx = torch.no_grad if mode == "no_grad" else torch.inference_mode
    cpu_model = make_model(TinyLM).eval()
    dev_model = to_device(cpu_model)
    tokens = lm_batches(steps=1)[0][0]
    with ctx():
        ref = cpu_model(tokens)
        out = dev_model(tokens.to(D))
    assert not out.requires_grad and out.grad_fn is None
    assert out.is_inference() == (mode == "inference_mode")
    assert_close_to_cpu(out, ref, rtol=RTOL, atol=ATOL)
    # Outside the context autograd is back on.
    assert dev_model(tokens.to(D)).requires_grad


def test_inference_tensor_in_autograd_raises_and_device_usable():
    model = make_model(MLP).mydev()
    with torch.inference_mode():
        feats = torch.randn(4, 20, device=D).exp()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        F.cross_entropy(model(feats), torch.zeros(4, dtype=torch.long, device=D)).backward()
    # A clone is a normal tensor and trains fine.
    loss = F.cross_entropy(model(feats.clone()), torch.zeros(4, dtype=torch.long, device=D))
    loss.backward()
    assert model.fc1.weight.grad is not None and model.fc1.weight.grad.device == torch.device(D)
    assert_device_still_usable()


def test_no_grad_parameter_update_matches_cpu():
    """A hand-written SGD step under no_grad, in place on the parameters."""
    cpu_model = make_model(MLP)
    dev_model = to_device(cpu_model)
    for step, (x, y) in enumerate(mlp_batches(steps=4)):
        for model, dev in ((cpu_model, "cpu"), (dev_model, D)):
            model.zero_grad()
            F.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * p.grad)
        assert_state_matches(dev_model, cpu_model, what=f"step {step}", grads=True)
    assert all(p.requires_grad and p.grad_fn is None for p in dev_model.parameters())


# ================================================================ warnings ==
@pytest.mark.parametrize("loss_name", ["mse", "cross_entropy"])
def test_training_step_emits_no_warnings(loss_name, capfd):
    """A training step on mydev is as quiet as on the CPU: no Python warning
    and nothing on stderr (C++ TORCH_WARN from kernels running on the
    device's worker threads lands there)."""
    model = make_model(TinyLM)
    tokens, targets = lm_batches(steps=1)[0]

    def step(m, dev):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        logits = m(tokens.to(dev))
        if loss_name == "mse":
            loss = F.mse_loss(logits, F.one_hot(targets.to(dev), logits.shape[-1]).float())
        else:
            loss = lm_loss(logits, targets.to(dev))
        loss.backward()
        opt.step()

    with warnings.catch_warnings(record=True) as cpu_warnings:
        warnings.simplefilter("always")
        step(copy.deepcopy(model), "cpu")
    cpu_err = capfd.readouterr().err
    with warnings.catch_warnings(record=True) as dev_warnings:
        warnings.simplefilter("always")
        step(to_device(model), D)
        torch.mydev.synchronize()
    dev_err = capfd.readouterr().err
    assert [str(w.message) for w in dev_warnings] == [str(w.message) for w in cpu_warnings]
    assert dev_err == cpu_err
