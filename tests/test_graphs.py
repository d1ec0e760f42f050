"""Graphs on mydev: torch.accelerator.Graph, torch.mydev.graph / MydevGraph,
private pools, RNG per replay, multi-stream capture, refused calls during
capture, make_graphed_callables. The driver's own capture tests are
csrc/runtime/tests/graph_test.cpp."""

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mydev_testing import needs_two_devices, run_python

try:
    import triton
    import triton.language as tl
except ImportError:  # Triton is optional for mydev
    triton = None

needs_triton = pytest.mark.skipif(triton is None, reason="triton is not installed")

if triton is not None:

    @triton.jit
    def _axpb_kernel(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a + b, mask=mask)

    @triton.jit
    def _unmasked_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def _capture(fn, graph=None, pool=None):
    graph = graph or torch.mydev.MydevGraph()
    with torch.mydev.graph(graph, pool=pool):
        out = fn()
    return graph, out


def test_replay_values_equal_eager_and_follow_inputs():
    x = torch.randn(64, device="mydev")
    ref = x.cpu()

    def chain():
        y = x
        for i in range(20):
            y = torch.sin(y) * 0.5 + i
        return y

    graph, out = _capture(chain)
    for _ in range(3):
        x.add_(1.0)
        ref = ref + 1.0
        graph.replay()
        expected = ref
        for i in range(20):
            expected = torch.sin(expected) * 0.5 + i
        torch.testing.assert_close(out.cpu(), expected)


def test_accelerator_graph_on_side_stream_and_keep_graph_debug_dump(tmp_path):
    a = torch.arange(8.0, device="mydev")
    graph = torch.accelerator.Graph(keep_graph=True)
    graph.enable_debug_mode()
    with torch.Stream(device="mydev"), graph:
        b = a * 2 + 1
    graph.instantiate()
    graph.replay()
    torch.testing.assert_close(b.cpu(), torch.arange(8.0) * 2 + 1)
    path = tmp_path / "graph.dot"
    graph.debug_dump(str(path))
    assert "digraph mydev_graph" in path.read_text()
    graph.reset()
    with torch.Stream(device="mydev"), graph:
        c = a - 1
    graph.replay()
    torch.testing.assert_close(c.cpu(), torch.arange(8.0) - 1)


def test_capture_on_default_stream_is_refused_clearly():
    graph = torch.accelerator.Graph()
    with pytest.raises(RuntimeError, match="capture on the default stream of mydev:0 is not permitted"):
        with graph:
            pass
    assert (torch.ones(2, device="mydev") + 1).sum().item() == 4.0


@pytest.mark.parametrize(
    "forbidden",
    [
        lambda t: t.sum().item(),
        lambda t: torch.mydev.synchronize(),
        lambda t: t.cpu(),
    ],
    ids=["item", "synchronize", "copy_to_cpu"],
)
def test_forbidden_call_raises_and_device_stays_usable(forbidden):
    t = torch.ones(4, device="mydev")
    with pytest.raises(RuntimeError, match="not permitted while mydev:0's stream .* is capturing a graph"):
        with torch.mydev.graph(torch.mydev.MydevGraph()):
            forbidden(t)
    # Not capturing any more: the same stream and the device work.
    assert torch.mydev.graph.default_capture_stream.query()
    with torch.mydev.stream(torch.mydev.graph.default_capture_stream):
        assert (t * 3).sum().item() == 12.0
    graph, out = _capture(lambda: t * 5)
    graph.replay()
    torch.testing.assert_close(out.cpu(), torch.full((4,), 5.0))


def test_relaxed_mode_allows_other_streams_to_synchronize():
    other = torch.mydev.Stream()
    t = torch.ones(3, device="mydev")
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph, capture_error_mode="relaxed"):
        other.synchronize()
        out = t + 1
    graph.replay()
    torch.testing.assert_close(out.cpu(), torch.full((3,), 2.0))


def test_random_ops_draw_fresh_numbers_each_replay():
    torch.mydev.manual_seed(0)
    graph, out = _capture(
        lambda: (torch.rand(1000, device="mydev"), torch.nn.functional.dropout(torch.ones(1000, device="mydev"), 0.5))
    )
    draws = []
    for _ in range(3):
        graph.replay()
        draws.append((out[0].cpu().clone(), out[1].cpu().clone()))
    assert not torch.equal(draws[0][0], draws[1][0])
    assert not torch.equal(draws[1][1], draws[2][1])
    for uniform, dropped in draws:
        assert 0.0 <= uniform.min() and uniform.max() < 1.0
        assert set(dropped.unique().tolist()) <= {0.0, 2.0}
    # The same seed gives the same replays: numbers come from the generator.
    torch.mydev.manual_seed(0)
    graph.replay()
    torch.testing.assert_close(out[0].cpu(), draws[0][0])


def _host_seeded_draws(probs):
    # Ops that run ATen's CPU kernels with a CPU generator (not counter-based).
    return (
        torch.randperm(50, device="mydev"),
        torch.multinomial(probs, 5),
        torch.multinomial(probs, 20, replacement=True),
        torch.empty(200, device="mydev").cauchy_(),
        torch.empty(200, device="mydev").log_normal_(),
        torch.empty(200, device="mydev").geometric_(0.3),
    )


def test_host_seeded_random_ops_draw_fresh_numbers_each_replay_as_eager_would():
    probs = torch.rand(3, 40, device="mydev") + 0.1
    torch.mydev.manual_seed(123)
    eager = [[t.cpu() for t in _host_seeded_draws(probs)] for _ in range(2)]
    graph, out = _capture(lambda: _host_seeded_draws(probs))
    torch.mydev.manual_seed(123)
    replays = []
    for _ in range(2):
        graph.replay()
        replays.append([t.cpu() for t in out])
    # A replay draws at the generator's (seed, offset) as the eager calls
    # did, and advances it by as much: same seed, same sequence.
    for replay, expected in zip(replays, eager):
        for got, want in zip(replay, expected):
            torch.testing.assert_close(got, want)
    for a, b in zip(replays[0], replays[1]):
        assert not torch.equal(a, b)
    for perm, without, with_replacement, *_ in replays:
        assert perm.sort().values.tolist() == list(range(50))
        assert all(len(set(row.tolist())) == 5 for row in without)
        assert with_replacement.min() >= 0 and with_replacement.max() < 40


def test_op_that_must_synchronize_is_refused_naming_it():
    # binomial has no Meta kernel: it runs at once and waits, which no
    # capture allows.
    counts = torch.full((8,), 10.0, device="mydev")
    with pytest.raises(
        RuntimeError,
        match=r"is capturing a graph(.|\n)*aten::binomial needs its results on the host at once .* "
        r"so it cannot be captured in a graph",
    ):
        with torch.mydev.graph(torch.mydev.MydevGraph()):
            torch.binomial(counts, torch.full((8,), 0.5, device="mydev"))
    assert torch.binomial(counts, torch.zeros(8, device="mydev")).sum().item() == 0.0


def test_random_op_inside_side_stream_of_a_capture():
    side = torch.mydev.Stream()
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph):
        side.wait_stream(torch.mydev.current_stream())
        with torch.mydev.stream(side):
            perm = torch.randperm(30, device="mydev")
        torch.mydev.current_stream().wait_stream(side)
        doubled = perm * 2
    seen = set()
    for _ in range(3):
        graph.replay()
        assert sorted(doubled.cpu().tolist()) == list(range(0, 60, 2))
        seen.add(tuple(doubled.cpu().tolist()))
    assert len(seen) == 3


def test_pool_tensor_freed_inside_capture_and_output_outlives_graph():
    x = torch.randn(256, device="mydev")

    def body():
        tmp = x * 2  # freed inside the capture; its block is reused
        del tmp
        return x + 1

    graph, out = _capture(body)
    x.fill_(1.0)
    graph.replay()
    torch.testing.assert_close(out.cpu(), torch.full((256,), 2.0))
    del graph
    gc.collect()
    # The output's memory stays valid after the graph is gone.
    torch.testing.assert_close(out.cpu(), torch.full((256,), 2.0))
    reserved = torch.mydev.memory_reserved()
    del out
    torch.mydev.empty_cache()
    assert torch.mydev.memory_reserved() < reserved


def test_graphs_share_a_pool():
    pool = torch.mydev.graph_pool_handle()
    x = torch.ones(16, device="mydev")
    g1, out1 = _capture(lambda: x * 2, pool=pool)
    g2, out2 = _capture(lambda: out1 + 1, pool=pool)
    assert g1.pool() == g2.pool() == pool
    g1.replay()
    g2.replay()
    torch.testing.assert_close(out2.cpu(), torch.full((16,), 3.0))


def test_multi_stream_capture_joined_by_events():
    x = torch.ones(32, device="mydev")
    side = torch.mydev.Stream()
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph):
        side.wait_stream(torch.mydev.current_stream())
        with torch.mydev.stream(side):
            a = x * 3
        b = x + 1
        torch.mydev.current_stream().wait_stream(side)
        c = a + b
    x.fill_(2.0)
    graph.replay()
    torch.testing.assert_close(c.cpu(), torch.full((32,), 9.0))


def test_side_stream_not_joined_back_fails_the_capture_and_streams_stay_usable():
    x = torch.ones(16, device="mydev")
    capture_stream = torch.mydev.Stream()
    side = torch.mydev.Stream()
    with pytest.raises(
        RuntimeError,
        match=rf"has unjoined work: stream\(s\) {hex(side.native_handle)} joined the capture and recorded "
        r"work that the origin stream does not wait for.*The capture is invalidated",
    ):
        with torch.mydev.graph(torch.mydev.MydevGraph(), stream=capture_stream):
            side.wait_stream(capture_stream)
            with torch.mydev.stream(side):
                x * 3
            x + 1
    assert not capture_stream.is_capturing() and not side.is_capturing()
    # The same streams capture correctly once the side stream is joined back.
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph, stream=capture_stream):
        side.wait_stream(capture_stream)
        with torch.mydev.stream(side):
            a = x * 3
        capture_stream.wait_stream(side)
        c = a + 1
    x.fill_(2.0)
    graph.replay()
    torch.testing.assert_close(c.cpu(), torch.full((16,), 7.0))
    for stream in (capture_stream, side):
        with torch.mydev.stream(stream):
            assert (x * 2).sum().item() == 64.0


def _segments_of_pool(pool):
    return [s for s in torch.mydev.memory._snapshot()["segments"] if tuple(s["segment_pool_id"]) == tuple(pool)]


def test_private_pool_segments_in_snapshot_and_stats():
    from torch.cuda import _memory_viz

    x = torch.ones(16, device="mydev")
    torch.mydev.synchronize()
    torch.mydev.empty_cache()
    before = torch.mydev.memory_stats()
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph):
        small = x * 2  # 64 bytes: a block of a 2 MiB small segment
        large = torch.zeros(3 << 20, dtype=torch.uint8, device="mydev")  # 3 MiB: a 20 MiB large segment
    pool = graph.pool()
    assert pool != (0, 0)

    snapshot = torch.mydev.memory._snapshot()
    segments = _segments_of_pool(pool)
    assert sorted((s["segment_type"], s["total_size"]) for s in segments) == [("large", 20 << 20), ("small", 2 << 20)]
    for address, kind in ((small.data_ptr(), "small"), (large.data_ptr(), "large")):
        (segment,) = [s for s in segments if s["segment_type"] == kind]
        (block,) = [b for b in segment["blocks"] if b["address"] == address]
        assert block["state"] == "active_allocated"
    # memory_snapshot(pool) gives the same segments, as torch.cuda's does.
    assert sorted(s["address"] for s in torch.mydev.memory_snapshot(pool)) == sorted(s["address"] for s in segments)
    assert len(torch.mydev.memory_snapshot()) == len(snapshot["segments"])
    segment_of_x = [s for s in snapshot["segments"] if s["address"] <= x.data_ptr() < s["address"] + s["total_size"]]
    assert [tuple(s["segment_pool_id"]) for s in segment_of_x] == [(0, 0)]
    assert "<html" in _memory_viz.segment_plot(snapshot)

    # Small blocks of a private pool count in the small pool, as on cuda.
    after = torch.mydev.memory_stats()
    for key, delta in {
        "segment.small_pool.current": 1,
        "segment.large_pool.current": 1,
        "reserved_bytes.small_pool.current": 2 << 20,
        "reserved_bytes.large_pool.current": 20 << 20,
        "allocated_bytes.small_pool.current": 512,
        "allocated_bytes.large_pool.current": 3 << 20,
    }.items():
        assert after[key] - before[key] == delta, key

    graph.replay()
    torch.testing.assert_close(small.cpu(), torch.full((16,), 2.0))
    del graph, small, large
    gc.collect()
    torch.mydev.empty_cache()
    assert _segments_of_pool(pool) == []
    final = torch.mydev.memory_stats()
    for key in ("segment.small_pool.current", "segment.large_pool.current", "reserved_bytes.all.current"):
        assert final[key] == before[key], key


@needs_two_devices
def test_capture_on_second_device():
    with torch.mydev.device(1):
        x = torch.arange(4.0, device="mydev:1")
        graph = torch.mydev.MydevGraph()
        with torch.mydev.graph(graph, stream=torch.mydev.Stream(device=1)):
            y = x * x
        x.add_(1)
        graph.replay()
        torch.testing.assert_close(y.cpu(), (torch.arange(4.0) + 1) ** 2)


def test_make_graphed_callables_module_and_function_forward_backward():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to("mydev")
    module.load_state_dict({k: v.to("mydev") for k, v in cpu.state_dict().items()})

    def scale(t):
        return t * 2 + 1

    sample = torch.randn(2, 8, device="mydev", requires_grad=True)
    graphed_module, graphed_fn = torch.mydev.make_graphed_callables(
        (module, scale), ((sample,), (torch.randn(2, 4, device="mydev", requires_grad=True),))
    )
    for _ in range(2):
        x = torch.randn(2, 8, device="mydev", requires_grad=True)
        loss = graphed_fn(graphed_module(x)).sum()
        loss.backward()
        x_cpu = x.detach().cpu().requires_grad_()
        loss_cpu = scale(cpu(x_cpu)).sum()
        loss_cpu.backward()
        torch.testing.assert_close(loss.detach().cpu(), loss_cpu.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x.grad.cpu(), x_cpu.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(module[0].weight.grad.cpu(), cpu[0].weight.grad, rtol=1e-5, atol=1e-5)
        module.zero_grad()
        cpu.zero_grad()


def test_graph_as_a_user_script():
    result = run_python(
        """
        import torch
        x = torch.zeros(4, device="mydev")
        g = torch.accelerator.Graph()
        with torch.Stream(device="mydev"), g:
            y = x + 1
        x.fill_(2.0)
        g.replay()
        print(y.cpu().tolist())
        try:
            with torch.mydev.graph(torch.mydev.MydevGraph()):
                x.sum().item()
        except RuntimeError as error:
            print("refused" if "is capturing a graph" in str(error) else error)
        print((x * 2).sum().item())
        # randperm inside a graph: a fresh permutation at each replay.
        g = torch.mydev.MydevGraph()
        with torch.mydev.graph(g):
            perm = torch.randperm(1000, device="mydev")
        perms = set()
        for _ in range(3):
            g.replay()
            perms.add(tuple(perm.cpu().tolist()))
        print(len(perms), sorted(perms.pop()) == list(range(1000)))
        # Its private pool in the memory snapshot.
        pools = {s["segment_pool_id"] for s in torch.mydev.memory._snapshot()["segments"]}
        print(g.pool() in pools)
        # A side stream never joined back: the capture fails, streams work.
        side = torch.mydev.Stream()
        try:
            with torch.mydev.graph(torch.mydev.MydevGraph()):
                side.wait_stream(torch.mydev.current_stream())
                with torch.mydev.stream(side):
                    x + 1
        except RuntimeError as error:
            print("unjoined" if "has unjoined work" in str(error) else error)
        with torch.mydev.stream(side):
            print((x + 1).sum().item())
        """,
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "[3.0,",
        "3.0,",
        "3.0,",
        "3.0]",
        "refused",
        "16.0",
        "3",
        "True",
        "True",
        "unjoined",
        "12.0",
    ]


def test_reduce_overhead_replays_captured_graph_inference(caplog):
    import logging

    def f(x, w):
        return torch.relu(x @ w) + 1

    w = torch.randn(8, 8, device="mydev")
    compiled = torch.compile(f, mode="reduce-overhead", dynamic=False)
    with caplog.at_level(logging.INFO, logger="inductor_backend.graph_policy"):
        for _ in range(3):
            x = torch.randn(4, 8, device="mydev")
            torch.testing.assert_close(compiled(x, w).cpu(), f(x.cpu(), w.cpu()), rtol=1e-5, atol=1e-5)
        assert sum("recording a mydev graph" in r.message for r in caplog.records) == 1
        # A new shape records a new graph, at its second call: its first runs
        # without capture (the warm-up, as cudagraph trees do).
        for expected_recordings in (1, 2, 2):
            x = torch.randn(6, 8, device="mydev")
            torch.testing.assert_close(compiled(x, w).cpu(), f(x.cpu(), w.cpu()), rtol=1e-5, atol=1e-5)
            assert sum("recording a mydev graph" in r.message for r in caplog.records) == expected_recordings


def test_reduce_overhead_training_step_matches_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1)).to("mydev")
    model.load_state_dict({k: v.to("mydev") for k, v in cpu.state_dict().items()})
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(4, 8)
        loss = compiled(x.to("mydev")).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_cpu = cpu(x).pow(2).mean()
        loss_cpu.backward()
        opt_cpu.step()
        opt_cpu.zero_grad()
        torch.testing.assert_close(loss.detach().cpu(), loss_cpu.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model[0].weight.detach().cpu(), cpu[0].weight.detach(), rtol=1e-4, atol=1e-5)


class _DecodeStep(torch.nn.Module):
    """One token through a one-row Linear into a KV cache, then attention over
    the cache: what a decode step replays."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32, bias=False)
        self.register_buffer("cache", torch.zeros(1, 2, 8, 16))

    def forward(self, x, pos):
        k = self.proj(x).view(1, 1, 2, 16).transpose(1, 2)
        self.cache.index_copy_(2, pos, k)
        return torch.nn.functional.scaled_dot_product_attention(k, self.cache, self.cache).reshape(1, 1, 32)


def test_reduce_overhead_decode_step_follows_its_cache_and_a_moved_parameter(caplog):
    import logging

    torch.manual_seed(0)
    cpu = _DecodeStep()
    model = _DecodeStep().to("mydev")
    model.load_state_dict(cpu.state_dict())
    compiled = torch.compile(model, mode="reduce-overhead")

    def step(pos):
        x = torch.randn(1, 1, 32)
        out = compiled(x.to("mydev"), torch.tensor([pos], device="mydev"))
        torch.testing.assert_close(out.cpu(), cpu(x, torch.tensor([pos])), rtol=1e-5, atol=1e-5)

    with torch.no_grad(), caplog.at_level(logging.INFO, logger="inductor_backend.graph_policy"):
        for pos in range(4):
            step(pos)
        assert sum("recording a mydev graph" in r.message for r in caplog.records) == 1
        # The captured kernels read the weight's old address: a parameter
        # given new storage records a new graph.
        weight = torch.randn(32, 32)
        model.proj.weight.data = weight.to("mydev")
        cpu.proj.weight.data = weight
        for pos in range(4, 6):
            step(pos)
        assert sum("recording a mydev graph" in r.message for r in caplog.records) == 2
    torch.testing.assert_close(model.cache.cpu(), cpu.cache, rtol=1e-5, atol=1e-5)


@needs_triton
def test_triton_kernel_is_captured_and_replays_with_current_data():
    n, block = 100, 32
    x = torch.randn(n, device="mydev")
    ref = x.cpu()

    def body():
        y = torch.empty_like(x)
        _axpb_kernel[(triton.cdiv(n, block),)](x, y, n, 3.0, 1.0, BLOCK=block)
        return torch.sin(y) * 2  # an eager op on the kernel's output

    eager = body()
    torch.testing.assert_close(eager.cpu(), torch.sin(ref * 3 + 1) * 2)
    graph, out = _capture(body)
    for step in range(3):
        fresh = torch.full((n,), float(step), device="mydev") + torch.arange(n, device="mydev")
        x.copy_(fresh)  # the static input's contents change between replays
        graph.replay()
        torch.testing.assert_close(out.cpu(), torch.sin(fresh.cpu() * 3 + 1) * 2)


@needs_triton
def test_failing_triton_kernel_in_a_replay_raises_at_synchronize():
    from device_ext.triton_backend.executor import TritonKernelError

    x = torch.ones(8, device="mydev")
    out = torch.empty(8, device="mydev")
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph):
        _unmasked_kernel[(1,)](x, out, BLOCK=16)  # reads past the end of x
    graph.replay()
    with pytest.raises(TritonKernelError, match="Triton kernel '_unmasked_kernel' failed on mydev in program"):
        torch.mydev.synchronize()
    torch.testing.assert_close((x * 2).cpu(), torch.full((8,), 2.0))


@needs_triton
def test_reduce_overhead_with_triton_kernels_captures_and_follows_inputs(caplog):
    import logging

    from inductor_backend import config as mydev_config

    def f(x, w):
        return torch.relu(x @ w).cos() + x.sum(dim=1, keepdim=True)

    w = torch.randn(8, 8, device="mydev")
    torch._dynamo.reset()
    with (
        mydev_config.patch(kernel_language="triton"),
        caplog.at_level(logging.INFO, logger="inductor_backend.graph_policy"),
    ):
        compiled = torch.compile(f, mode="reduce-overhead", dynamic=False)
        for _ in range(3):
            x = torch.randn(4, 8, device="mydev")
            torch.testing.assert_close(compiled(x, w).cpu(), f(x.cpu(), w.cpu()), rtol=1e-5, atol=1e-5)
    assert sum("recording a mydev graph" in r.message for r in caplog.records) == 1


@needs_triton
def test_triton_kernel_in_a_graph_as_a_user_script(tmp_path):
    script = tmp_path / "graph_with_triton.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            import triton
            import triton.language as tl

            @triton.jit
            def double_plus_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                mask = offsets < n
                tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2 + 1, mask=mask)

            x = torch.zeros(10, device="mydev")
            out = torch.empty_like(x)
            g = torch.mydev.MydevGraph()
            with torch.mydev.graph(g):
                double_plus_one[(2,)](x, out, 10, BLOCK=8)
            for value in (1.0, 5.0):
                x.fill_(value)
                g.replay()
                print(out.cpu().tolist() == [value * 2 + 1] * 10)
            # A wait that holds the GIL (storage copies do) while the replayed
            # kernel needs it on the stream's worker: the driver's host wait
            # hooks release it.
            x.fill_(2.0)
            g.replay()
            print(torch.empty(0).set_(out.untyped_storage().cpu())[0].item() == 5.0)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, str(script)], env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


def test_reduce_overhead_skips_are_logged_and_results_stay_correct():
    # A CPU tensor in the graph, and a mutated (non-parameter) input: Inductor
    # does not capture either, and says why as it does on cuda.
    result = run_python(
        """
        import torch
        from torch._dynamo.utils import counters

        def scaled(x, s):
            return x * (s.to("mydev") + 1) + 1

        def bump(x):
            x.add_(1)
            return x * 2

        x = torch.ones(3, device="mydev")
        print(torch.compile(scaled, mode="reduce-overhead")(x, torch.full((3,), 2.0)).cpu().tolist())
        compiled_bump = torch.compile(bump, mode="reduce-overhead")
        for _ in range(2):
            print(compiled_bump(x).cpu().tolist())
        print(x.cpu().tolist(), counters["inductor"]["cudagraph_skips"])
        """,
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[4.0, 4.0, 4.0]", "[4.0, 4.0, 4.0]", "[6.0, 6.0, 6.0]", "[3.0, 3.0, 3.0] 2"]
    assert "skipping cudagraphs due to cpu device (" in result.stderr
    assert "skipping cudagraphs due to mutated inputs (1 instances)" in result.stderr
