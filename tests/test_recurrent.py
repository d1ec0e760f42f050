"""Recurrent modules on mydev against the CPU.

ATen computes every recurrent cell of a non-CPU device with the fused cell
ops (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward ops),
which mydev implements as device kernels (csrc/aten/recurrent_cells.cpp);
nn.RNN's tanh/relu cells are plain ops. Each test builds a module on the CPU,
copies it to mydev (same weights), and compares outputs, final states,
gradients of inputs, initial states and every parameter, and a few SGD steps
of training. The kernels follow the CPU path's order of operations, so
float32 agrees well within rtol=1e-4, atol=1e-5.

Dropout between layers draws different numbers on each device: it is
checked by p=0 equality, by the same model agreeing with itself in eval
mode, and by the statistics of p>0 (outputs differ from p=0, gradients
finite).
"""

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, run_python

D = "mydev:0"
RTOL, ATOL = 1e-4, 1e-5
INPUT, HIDDEN, BATCH, SEQ = 5, 7, 3, 6

MODULES = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN_TANH": nn.RNN}


def seeded(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def initial_state(kind, layers, directions, batch=BATCH, proj=0):
    h = seeded(layers * directions, batch, proj or HIDDEN, seed=1)
    if kind == "LSTM":
        return (h, seeded(layers * directions, batch, HIDDEN, seed=2))
    return h


def to_device(value):
    if isinstance(value, tuple):
        return tuple(v.to(D) for v in value)
    return value.to(D)


def leaves(value):
    return list(value) if isinstance(value, tuple) else [value]


def forward_backward(module, x, state):
    """Runs the module, backpropagates a loss touching every output, and
    returns (outputs, gradients of input, states and parameters)."""
    x = x.detach().requires_grad_()
    state = tuple(s.detach().requires_grad_() for s in leaves(state))
    out, final = module(x, state if len(state) > 1 else state[0])
    loss = out.pow(2).sum() + sum(f.sum() * (i + 2) for i, f in enumerate(leaves(final)))
    loss.backward()
    grads = [x.grad, *(s.grad for s in state), *(p.grad for p in module.parameters())]
    return (out, *leaves(final)), grads


@pytest.mark.parametrize("kind", list(MODULES))
@pytest.mark.parametrize(
    "layers,bidirectional,batch_first,bias",
    [
        (1, False, False, True),
        (2, True, True, True),
        (2, False, False, False),
        (3, True, False, True),
    ],
)
def test_module_matches_cpu(kind, layers, bidirectional, batch_first, bias):
    torch.manual_seed(0)
    cpu = MODULES[kind](
        INPUT, HIDDEN, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias
    )
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(BATCH, SEQ, INPUT) if batch_first else seeded(SEQ, BATCH, INPUT)
    state = initial_state(kind, layers, 2 if bidirectional else 1)
    expected_out, expected_grads = forward_backward(cpu, x, state)
    # Inputs made on the device too, not only moved there.
    x_dev = torch.empty(x.shape, device=D).copy_(x)
    out, grads = forward_backward(dev, x_dev, to_device(state))
    assert_close_to_cpu(out, expected_out, rtol=RTOL, atol=ATOL)
    assert_close_to_cpu(grads, expected_grads, rtol=RTOL, atol=ATOL)


def test_lstm_with_projection_and_no_initial_state():
    torch.manual_seed(0)
    cpu = nn.LSTM(INPUT, HIDDEN, num_layers=2, proj_size=3, batch_first=True)
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(BATCH, SEQ, INPUT)
    expected = cpu(x)
    out = dev(x.to(D))
    assert_close_to_cpu([out[0], *out[1]], [expected[0], *expected[1]], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_match_cpu(kind, enforce_sorted):
    torch.manual_seed(0)
    cpu = MODULES[kind](INPUT, HIDDEN, num_layers=2, bidirectional=True)
    dev = copy.deepcopy(cpu).to(D)
    lengths = torch.tensor([6, 4, 2] if enforce_sorted else [4, 6, 2])
    x = seeded(SEQ, BATCH, INPUT)

    def run(module, x):
        x = x.detach().requires_grad_()
        packed = pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted)
        out, final = module(packed)
        padded, out_lengths = pad_packed_sequence(out)
        (padded.pow(2).sum() + sum(f.sum() for f in leaves(final))).backward()
        return [padded, *leaves(final)], [x.grad, *(p.grad for p in module.parameters())], out_lengths

    expected, expected_grads, expected_lengths = run(cpu, x)
    got, grads, got_lengths = run(dev, x.to(D))
    assert torch.equal(got_lengths, expected_lengths)
    assert_close_to_cpu(got, expected, rtol=RTOL, atol=ATOL)
    assert_close_to_cpu(grads, expected_grads, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("cell_cls", [nn.LSTMCell, nn.GRUCell, nn.RNNCell])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_cpu(cell_cls, bias):
    torch.manual_seed(0)
    cpu = cell_cls(INPUT, HIDDEN, bias=bias)
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(BATCH, INPUT)
    h = seeded(BATCH, HIDDEN, seed=1)
    c = seeded(BATCH, HIDDEN, seed=2)

    def run(module, x, h, c):
        x, h, c = (t.detach().requires_grad_() for t in (x, h, c))
        state = (h, c) if cell_cls is nn.LSTMCell else h
        out = leaves(module(x, state))
        sum(o.pow(2).sum() * (i + 1) for i, o in enumerate(out)).backward()
        grads = [x.grad, h.grad] + ([c.grad] if cell_cls is nn.LSTMCell else [])
        return out, grads + [p.grad for p in module.parameters()]

    expected, expected_grads = run(cpu, x, h, c)
    got, grads = run(dev, x.to(D), h.to(D), c.to(D))
    assert_close_to_cpu(got, expected, rtol=RTOL, atol=ATOL)
    assert_close_to_cpu(grads, expected_grads, rtol=RTOL, atol=ATOL)


def test_lstm_cell_gradient_of_only_the_cell_state():
    """Only cy is used: the backward kernel gets no gradient for hy."""
    torch.manual_seed(0)
    cpu = nn.LSTMCell(INPUT, HIDDEN)
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(BATCH, INPUT)

    def run(module, x):
        x = x.detach().requires_grad_()
        _, c = module(x)
        c.pow(2).sum().backward()
        return [x.grad, *(p.grad for p in module.parameters())]

    assert_close_to_cpu(run(dev, x.to(D)), run(cpu, x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_double_backward_matches_cpu(kind):
    """With create_graph the differentiable (composite) backward runs."""
    torch.manual_seed(0)
    cpu = MODULES[kind](INPUT, HIDDEN)
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(SEQ, BATCH, INPUT)

    def run(module, x):
        x = x.detach().requires_grad_()
        out, _ = module(x)
        (grad,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        grad.pow(2).sum().backward()
        return [grad, x.grad if x.grad is not None else torch.zeros_like(x)] + [p.grad for p in module.parameters()]

    assert_close_to_cpu(run(dev, x.to(D)), run(cpu, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_training_matches_cpu(kind):
    torch.manual_seed(0)
    cpu = MODULES[kind](INPUT, HIDDEN, num_layers=2, batch_first=True, bidirectional=True)
    dev = copy.deepcopy(cpu).to(D)
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
    for step in range(4):
        x = seeded(BATCH, SEQ, INPUT, seed=10 + step)
        target = seeded(BATCH, SEQ, 2 * HIDDEN, seed=20 + step)
        losses = []
        for module, opt, device in ((cpu, opt_cpu, "cpu"), (dev, opt_dev, D)):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(module(x.to(device))[0], target.to(device))
            loss.backward()
            opt.step()
            losses.append(loss)
        assert_close_to_cpu(losses[1], losses[0], rtol=RTOL, atol=ATOL)
    assert_close_to_cpu(list(dev.parameters()), list(cpu.parameters()), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dropout_between_layers(kind):
    torch.manual_seed(0)
    cpu = MODULES[kind](INPUT, HIDDEN, num_layers=3, dropout=0.0)
    dev = copy.deepcopy(cpu).to(D)
    x = seeded(SEQ, BATCH, INPUT)
    # p = 0 in training mode: exactly the CPU's computation.
    assert_close_to_cpu(dev(x.to(D))[0], cpu(x)[0], rtol=RTOL, atol=ATOL)
    dev.dropout = 0.5
    # Eval mode ignores dropout.
    assert_close_to_cpu(dev.eval()(x.to(D))[0], cpu.eval()(x)[0], rtol=RTOL, atol=ATOL)
    dev.train()
    torch.mydev.manual_seed(0)
    first = dev(x.to(D))[0]
    torch.mydev.manual_seed(0)
    again = dev(x.to(D))[0]
    torch.mydev.manual_seed(1)
    other = dev(x.to(D))[0]
    # Seeded like cuda: the same seed gives the same masks, another seed others.
    assert torch.equal(first.cpu(), again.cpu())
    assert not torch.equal(first.cpu(), other.cpu())
    assert not torch.allclose(first.cpu(), cpu(x)[0])
    first.sum().backward()
    assert all(torch.isfinite(p.grad.cpu()).all() for p in dev.parameters())


def test_mixed_devices_are_a_clear_error_and_the_device_stays_usable():
    lstm = nn.LSTM(INPUT, HIDDEN).to(D)
    # ATen's own check, as on cuda.
    with pytest.raises(
        RuntimeError,
        match="Input and parameter tensors are not at the same device, "
        "found input tensor at cpu and parameter tensor at mydev:0",
    ):
        lstm(seeded(SEQ, BATCH, INPUT))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ops.aten._thnn_fused_gru_cell(torch.zeros(2, 6, device=D), torch.zeros(2, 6, device=D), torch.zeros(2, 2))
    with pytest.raises(RuntimeError, match=r"_thnn_fused_lstm_cell: expected input_gates and hidden_gates"):
        torch.ops.aten._thnn_fused_lstm_cell(
            torch.zeros(2, 6, device=D), torch.zeros(2, 6, device=D), torch.zeros(2, 2, device=D)
        )
    assert_device_still_usable()


def test_lstm_in_a_plain_script():
    done = run_python(
        """
        import torch
        lstm = torch.nn.LSTM(4, 8, num_layers=2, batch_first=True)
        x = torch.randn(2, 5, 4)
        expected, _ = lstm(x)
        out, (h, c) = lstm.to("mydev")(x.to("mydev"))
        out.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
        print("OK", out.device, h.shape)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK mydev:0 torch.Size([2, 2, 8])" in done.stdout
