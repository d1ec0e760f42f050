"""The model suite (benchmarks/model_suite.py) compiled for mydev with
torch.compile, against the same models run eagerly on the CPU.

For every case: an inference forward, and one training step (forward, loss,
backward, AdamW step), each compiled with fullgraph=True, so a graph break
fails the test. Models are in train mode (BatchNorm uses batch statistics and
updates its running statistics, which are compared as buffers).

Compiled kernels sum in a different order than ATen's eager CPU kernels, so
values agree to float32 rounding, not bitwise: outputs and losses within
rtol/atol 1e-4, gradients within rtol 1e-4 / atol 1e-5.
"""

import copy

import pytest
import torch
import torch._inductor.config
from model_suite import CASES, loss_fn  # benchmarks/ (see pyproject.toml)
from torch._dynamo.utils import counters

from mydev_testing import assert_close_to_cpu

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"
SIZE = "test"
RTOL, ATOL = 1e-4, 1e-4
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-5


def make_pair(case):
    """The case's model and input batch on the CPU and, with the same weights
    and data, on mydev."""
    cpu_model, x = case.make(SIZE, "cpu", seed=0)
    dev_model = copy.deepcopy(cpu_model).to(D)
    return cpu_model, x, dev_model, x.to(D)


def assert_compiled_in_one_graph():
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1


def assert_state_matches(dev_model, cpu_model, what):
    """Parameters and buffers (BatchNorm running statistics included)."""
    cpu_state = cpu_model.state_dict()
    dev_state = dev_model.state_dict()
    assert list(dev_state) == list(cpu_state)
    for name, ref in cpu_state.items():
        assert_close_to_cpu(dev_state[name], ref, device=D, rtol=RTOL, atol=ATOL, msg=f"{what} {name}")


# AdamW divides each gradient by its own magnitude; a gradient that is
# mathematically zero (a conv bias in front of BatchNorm, the key bias of
# attention) is rounding noise whose bits depend on summation order, and the
# default eps=1e-8 would turn that noise into lr-sized, sign-random steps.
# eps=1e-5 keeps noise from being amplified (as in test_training.py).
def make_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, eps=1e-5, foreach=True)


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_forward_matches_eager_cpu(name):
    cpu_model, x, dev_model, x_dev = make_pair(CASES[name])
    compiled = torch.compile(dev_model, fullgraph=True)
    with torch.no_grad():
        expected = cpu_model(x)
        out = compiled(x_dev)
    assert_compiled_in_one_graph()
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL, msg=f"{name} output")
    assert_state_matches(dev_model, cpu_model, f"{name} after forward")


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python_wrapper", "cpp_wrapper"])
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_training_step_matches_eager_cpu(name, cpp_wrapper):
    cpu_model, x, dev_model, x_dev = make_pair(CASES[name])
    opt_cpu = make_optimizer(cpu_model.parameters())
    opt_dev = make_optimizer(dev_model.parameters())
    compiled = torch.compile(dev_model, fullgraph=True)

    loss_cpu = loss_fn(cpu_model(x))
    loss_cpu.backward()
    with torch._inductor.config.patch(cpp_wrapper=cpp_wrapper):
        loss_dev = loss_fn(compiled(x_dev))
        loss_dev.backward()
    assert_compiled_in_one_graph()

    assert_close_to_cpu(loss_dev.detach(), loss_cpu.detach(), device=D, rtol=RTOL, atol=ATOL, msg=f"{name} loss")
    for (param_name, p_dev), (_, p_cpu) in zip(dev_model.named_parameters(), cpu_model.named_parameters()):
        assert p_dev.grad is not None, f"{name}: no gradient for {param_name}"
        assert_close_to_cpu(
            p_dev.grad, p_cpu.grad, device=D, rtol=GRAD_RTOL, atol=GRAD_ATOL, msg=f"{name} grad of {param_name}"
        )

    before = {k: v.detach().cpu().clone() for k, v in dev_model.named_parameters()}
    opt_cpu.step()
    opt_dev.step()
    assert_state_matches(dev_model, cpu_model, f"{name} after step")
    assert any(not torch.equal(p.detach().cpu(), before[k]) for k, p in dev_model.named_parameters()), (
        "the optimizer step did not change any parameter"
    )
