"""Inference under device graphs (mode="reduce-overhead", and max-autotune,
which replays graphs too): what a replay copies, and that it never writes
over a tensor the caller holds (inductor_backend/graph_policy.py).

The first instance recorded for an input signature reads the caller's
inputs where they are: passing the same tensor again copies nothing, a new
one is copied into the recorded one once the caller has dropped it, and
inputs the caller keeps are never written. Outputs are handed out in place
until the caller keeps one, then cloned. Every value is checked against the
same model on the CPU."""

import logging

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from mydev_testing import run_python

POLICY_LOG = "inductor_backend.graph_policy"


def _pair(seed=0):
    """The same small CNN on the CPU and on mydev, in eval mode."""

    def build():
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * 6 * 6, 5),
        ).eval()

    torch.manual_seed(seed)
    cpu = build()
    model = build().to("mydev")
    model.load_state_dict({k: v.to("mydev") for k, v in cpu.state_dict().items()})
    return cpu, model


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Each test's graphs are its own: a graph compiled by an earlier test
    # (same module code) would be reused with its instances.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _recordings(caplog):
    return sum("recording a mydev graph" in r.message for r in caplog.records)


def _copies_in(fn):
    """The device-to-device copies (a static input's copy, an output's
    clone) that running ``fn`` makes."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.mydev.synchronize()
    return sum(e.name.startswith("Memcpy DtoD") for e in prof.events())


def _check(out, cpu, x):
    torch.testing.assert_close(out.cpu(), cpu(x.cpu()), rtol=1e-4, atol=1e-5)


def test_the_same_input_again_replays_without_copies_and_follows_its_data(caplog):
    cpu, model = _pair()
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(2, 3, 6, 6, device="mydev")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger=POLICY_LOG):
        for _ in range(3):
            _check(compiled(x), cpu, x)
        assert _copies_in(lambda: compiled(x)) == 0
        # The graph reads the caller's tensor where it is: changed in
        # place, the next replay sees the new values.
        x.mul_(-2.0)
        _check(compiled(x), cpu, x)
        assert _recordings(caplog) == 1


def test_a_new_input_each_call_is_copied_into_the_dropped_one(caplog):
    cpu, model = _pair()
    compiled = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger=POLICY_LOG):
        for _ in range(4):
            x = torch.randn(2, 3, 6, 6, device="mydev")
            _check(compiled(x), cpu, x)
        del x
        # One copy: the new input into the recorded one, which the caller
        # no longer holds; the output is handed out, not cloned.
        assert _copies_in(lambda: compiled(torch.randn(2, 3, 6, 6, device="mydev"))) == 1
        assert _recordings(caplog) == 1


def test_inputs_the_caller_keeps_are_never_written(caplog):
    cpu, model = _pair()
    compiled = torch.compile(model, mode="reduce-overhead")
    batches = [torch.randn(2, 3, 6, 6, device="mydev") for _ in range(5)]
    originals = [b.cpu() for b in batches]
    with torch.no_grad(), caplog.at_level(logging.INFO, logger=POLICY_LOG):
        for _ in range(2):
            for batch in batches:
                _check(compiled(batch), cpu, batch)
        # The first instance reads batches[1] (recorded at the second
        # call); the others are copied into a second instance's own inputs.
        assert _recordings(caplog) == 2
    for batch, original in zip(batches, originals):
        assert torch.equal(batch.cpu(), original)


def test_outputs_kept_across_calls_stay_intact_and_later_ones_are_cloned(caplog):
    cpu, model = _pair()
    compiled = torch.compile(model, mode="reduce-overhead")
    inputs = [torch.randn(2, 3, 6, 6, device="mydev") for _ in range(8)]
    with torch.no_grad(), caplog.at_level(logging.INFO, logger=POLICY_LOG):
        kept = [compiled(x) for x in inputs]
        for x, out in zip(inputs, kept):
            _check(out, cpu, x)
        assert len({out.data_ptr() for out in kept}) == len(kept)
        # The second and third calls' outputs are held by the fourth: it
        # records a third instance and the graph clones its outputs from
        # then on, so it never runs without capture.
        assert _recordings(caplog) == 3
        assert not any("without capture" in r.message for r in caplog.records)


def test_one_graphs_output_fed_to_another_graph(caplog):
    torch.manual_seed(0)
    first_cpu, second_cpu = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)
    first, second = torch.nn.Linear(8, 8).to("mydev"), torch.nn.Linear(8, 4).to("mydev")
    first.load_state_dict(first_cpu.state_dict())
    second.load_state_dict(second_cpu.state_dict())
    compiled_first = torch.compile(first, mode="reduce-overhead")
    compiled_second = torch.compile(second, mode="reduce-overhead")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger=POLICY_LOG):
        for _ in range(5):
            x = torch.randn(3, 8, device="mydev")
            hidden = compiled_first(x)
            out = compiled_second(hidden)
            torch.testing.assert_close(hidden.cpu(), first_cpu(x.cpu()), rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(out.cpu(), second_cpu(first_cpu(x.cpu())), rtol=1e-5, atol=1e-6)
        # The second graph copies the first's output (it does not hold it).
        # The loop keeps each graph's last output while it makes the next:
        # each graph replays two instances in turn.
        assert _recordings(caplog) == 4


def test_inference_graph_inputs_and_outputs_as_a_user_script():
    result = run_python(
        """
        import torch

        torch.manual_seed(0)
        cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
        model.load_state_dict(cpu.state_dict())
        model = model.to("mydev").eval()
        compiled = torch.compile(model, mode="reduce-overhead")
        worst = 0.0
        with torch.no_grad():
            x = torch.randn(8, 16, device="mydev")
            for _ in range(3):  # the same input again
                worst = max(worst, (compiled(x).cpu() - cpu(x.cpu())).abs().max().item())
            kept_inputs = [torch.randn(8, 16, device="mydev") for _ in range(4)]
            before = [t.cpu() for t in kept_inputs]
            kept_outputs = [compiled(t) for t in kept_inputs]  # inputs and outputs kept
            for t, out in zip(kept_inputs, kept_outputs):
                worst = max(worst, (out.cpu() - cpu(t.cpu())).abs().max().item())
            intact = all(torch.equal(t.cpu(), b) for t, b in zip(kept_inputs, before))
        print("max difference", worst)
        print(worst < 1e-4 and intact)
        """,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "True", result.stdout
