"""torch.profiler with ProfilerActivity.PrivateUse1: mydev kernels, copies and
fills on device timelines (csrc/core/kineto_profiler.cpp over the driver's
activity records), linked to the torch op that launched them."""

import json
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from device_ext import _C
from distributed_harness import check_ok, exit_ok, init_group, run_ranks
from mydev_testing import N_DEVICES, needs_two_devices, run_python

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_events(prof):
    """The profiler's device-side events, in start order."""
    events = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    return sorted(events, key=lambda e: e.time_range.start)


def trace_of(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f)["traceEvents"]


def complete_events(trace, cat):
    return [e for e in trace if e.get("ph") == "X" and e.get("cat") == cat]


def test_eager_kernels_run_on_the_device_in_stream_order():
    x = torch.randn(128, 128, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = x @ x
        z = y.relu()
        torch.mydev.synchronize()
    torch.testing.assert_close(z.cpu(), (x.cpu() @ x.cpu()).relu(), rtol=1e-4, atol=1e-4)

    kernels = [e for e in device_events(prof) if e.name in ("aten::mm", "aten::relu")]
    assert [k.name for k in kernels] == ["aten::mm", "aten::relu"], kernels
    for kernel in kernels:
        assert kernel.device_index == 0
        assert kernel.device_resource_id == 0  # the default stream
        assert kernel.time_range.elapsed_us() > 0
    mm, relu = kernels
    # In-order stream: relu starts once mm finished.
    assert mm.time_range.end <= relu.time_range.start


def test_kernels_are_linked_to_the_op_that_launched_them():
    x = torch.randn(64, 64, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        # sum(0), not sum(): sum() calls sum.dim_IntList, and torch's profiler
        # folds an op into its same-named parent (the kernel then belongs to
        # the parent's row but still names the folded op's id), as on cuda.
        (x @ x).sum(0)
        torch.mydev.synchronize()
    # Torch ops (launch events on the host are CPU events linked to one).
    ops = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU and e.linked_correlation_id == 0}
    kernels = [e for e in device_events(prof) if e.name in ("aten::mm", "aten::sum")]
    assert {k.name for k in kernels} == {"aten::mm", "aten::sum"}
    for kernel in kernels:
        op = ops[kernel.linked_correlation_id]
        assert op.name == kernel.name
        # The op carries its kernel's device time, as cuda ops do.
        assert [k.name for k in op.kernels] == [kernel.name]
        assert op.device_time_total > 0


def test_key_averages_show_device_time():
    x = torch.randn(128, 128, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            x = torch.tanh(x @ x)
        torch.mydev.synchronize()
    # Kernels of eager ops carry the op's name; the op rows are the CPU ones.
    averages = {a.key: a for a in prof.key_averages() if a.device_type == DeviceType.CPU}
    assert averages["aten::mm"].count >= 3
    assert averages["aten::mm"].device_time_total > 0
    assert averages["aten::tanh"].device_time_total > 0
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=10)
    assert "Self MYDEV" in table and "aten::mm" in table


def test_chrome_trace_has_device_tracks_and_flows(tmp_path):
    x = torch.randn(64, 64, device="mydev")
    host = torch.ones(64, 64).pin_memory()
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        x.copy_(host, non_blocking=True)
        y = x * 2
        y.zero_()
        back = y.cpu()
    assert torch.equal(back, torch.zeros(64, 64))
    trace = trace_of(prof, tmp_path)

    kernels = complete_events(trace, "kernel")
    mul = [k for k in kernels if k["name"] == "aten::mul"]
    assert len(mul) == 1 and mul[0]["pid"] == 0 and mul[0]["tid"] == 0, kernels
    assert mul[0]["args"]["device"] == 0 and mul[0]["args"]["stream"] == 0
    copies = {e["name"]: e for e in complete_events(trace, "gpu_memcpy")}
    assert {"Memcpy HtoD (Host -> Device)", "Memcpy DtoH (Device -> Host)"} <= set(copies)
    assert copies["Memcpy DtoH (Device -> Host)"]["args"]["bytes"] == 64 * 64 * 4
    assert (copies["Memcpy HtoD (Host -> Device)"]["pid"], copies["Memcpy HtoD (Host -> Device)"]["tid"]) == (0, 0)

    # Each kernel's host launch is a runtime event on the launching thread,
    # joined to the kernel by an ac2g flow (start at the launch, end at the kernel).
    launches = [
        e
        for e in complete_events(trace, "privateuse1_runtime")
        if e["args"]["correlation"] == mul[0]["args"]["correlation"]
    ]
    # (mydevLaunchKernelEx: the launch whose kernels graphs can capture)
    assert len(launches) == 1 and launches[0]["name"] == "mydevLaunchKernelEx"
    assert launches[0]["pid"] != 0
    flows = [e for e in trace if e.get("cat") == "ac2g" and e["id"] == mul[0]["args"]["correlation"]]
    assert sorted(f["ph"] for f in flows) == ["f", "s"]
    start = next(f for f in flows if f["ph"] == "s")
    end = next(f for f in flows if f["ph"] == "f")
    assert (start["pid"], start["tid"]) == (launches[0]["pid"], launches[0]["tid"])
    assert (end["pid"], end["tid"]) == (0, 0)
    # Both carry the correlation of the (innermost) aten::mul op as "External id".
    ops = {e["args"]["External id"] for e in complete_events(trace, "cpu_op") if e["name"] == "aten::mul"}
    assert mul[0]["args"]["External id"] in ops
    assert launches[0]["args"]["External id"] == mul[0]["args"]["External id"]

    names = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in trace if e.get("ph") == "M"}
    assert names[(0, 0, "process_name")]["name"] == "mydev:0"
    assert names[(0, 0, "thread_name")]["name"] == "stream 0"


@needs_two_devices
def test_device_and_stream_become_pid_and_tid(tmp_path):
    side = torch.mydev.Stream(device=1)
    x = torch.randn(32, 32, device="mydev:1")
    torch.mydev.synchronize(1)
    with profile(activities=ACTIVITIES) as prof:
        with torch.mydev.stream(side):
            y = x.exp()
        side.synchronize()
    torch.testing.assert_close(y.cpu(), x.cpu().exp())
    exp = [e for e in device_events(prof) if e.name == "aten::exp"]
    assert len(exp) == 1
    assert exp[0].device_index == 1 and exp[0].device_resource_id == side.stream_id
    trace = trace_of(prof, tmp_path)
    kernel = next(e for e in complete_events(trace, "kernel") if e["name"] == "aten::exp")
    assert (kernel["pid"], kernel["tid"]) == (1, side.stream_id)
    names = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in trace if e.get("ph") == "M"}
    assert names[(1, 0, "process_name")]["name"] == "mydev:1"
    assert names[(1, side.stream_id, "thread_name")]["name"] == f"stream {side.stream_id}"


def test_the_host_moves_on_while_the_kernel_runs(tmp_path):
    """A stream held at a latch (a placeholder kernel that waits for this
    thread) shows the asynchrony deterministically: the host launches x @ x,
    does other work and only then lets the stream go, so the kernel starts
    after the host's work ended."""
    parked, released = threading.Event(), threading.Event()

    def hold_stream():
        def latch():
            parked.set()
            released.wait()

        _C._run_in_stream_order(_C._current_raw_stream(0), "latch", latch)

    x = torch.randn(64, 64, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        holder = threading.Thread(target=hold_stream)
        holder.start()
        parked.wait()
        y = x @ x
        with record_function("host_work"):
            total = sum(range(1000))
        released.set()
        holder.join()
        torch.mydev.synchronize()
    assert total == 499500
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)
    trace = trace_of(prof, tmp_path)
    kernel = next(e for e in complete_events(trace, "kernel") if e["name"] == "aten::mm")
    launch_op = next(e for e in complete_events(trace, "cpu_op") if e["name"] == "aten::mm")
    host_work = next(e for e in complete_events(trace, "user_annotation") if e["name"] == "host_work")
    assert launch_op["ts"] + launch_op["dur"] <= host_work["ts"]
    assert kernel["ts"] >= host_work["ts"] + host_work["dur"]
    assert kernel["ts"] + kernel["dur"] > launch_op["ts"] + launch_op["dur"]


def test_record_function_range_on_the_device(tmp_path):
    x = torch.randn(32, 32, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with record_function("forward_pass"):
            y = (x + 1) * 3
        torch.mydev.synchronize()
    torch.testing.assert_close(y.cpu(), (x.cpu() + 1) * 3)
    trace = trace_of(prof, tmp_path)
    kernels = [e for e in complete_events(trace, "kernel") if e["name"] in ("aten::add", "aten::mul")]
    ranges = [e for e in complete_events(trace, "gpu_user_annotation") if e["name"] == "forward_pass"]
    assert len(ranges) == 1 and (ranges[0]["pid"], ranges[0]["tid"]) == (0, 0)
    assert ranges[0]["ts"] <= min(k["ts"] for k in kernels)
    assert ranges[0]["ts"] + ranges[0]["dur"] >= max(k["ts"] + k["dur"] for k in kernels)


def test_profile_memory_reports_device_allocations():
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        x = torch.empty(1024, 1024, device="mydev")
        del x
    # The allocation is charged to the op that made it, the free to no op.
    empty = [e for e in prof.events() if e.name == "aten::empty"]
    assert any(e.device_memory_usage == 4 * 1024 * 1024 for e in empty)
    freed = [e for e in prof.events() if e.name == "[memory]"]
    assert any(e.device_memory_usage == -4 * 1024 * 1024 for e in freed)


def test_with_stack_and_schedule_with_tensorboard_handler(tmp_path):
    x = torch.randn(32, 32, device="mydev")
    torch.mydev.synchronize()
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profile(
        activities=ACTIVITIES,
        with_stack=True,
        on_trace_ready=handler,
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
    ) as prof:
        for _ in range(5):
            x = (x * 0.5).sin()
            torch.mydev.synchronize()
            prof.step()
    files = list(tmp_path.glob("w.*.pt.trace.json"))
    assert len(files) == 1
    trace = json.loads(files[0].read_text())["traceEvents"]
    sin = [e for e in complete_events(trace, "kernel") if e["name"] == "aten::sin"]
    assert len(sin) == 2  # the two active steps only
    ops = {e["args"]["External id"] for e in complete_events(trace, "cpu_op") if e["name"] == "aten::sin"}
    assert {k["args"]["External id"] for k in sin} <= ops
    assert "test_profiler.py" in json.dumps(trace)  # with_stack: python frames


def test_compiled_kernels_show_their_names(isolated_inductor):
    from torch._inductor.utils import run_and_get_code

    def f(a, b):
        return (a.sin() + b).relu() * 2

    a = torch.randn(256, device="mydev")
    b = torch.randn(256, device="mydev")
    compiled = torch.compile(f)
    _, (code,) = run_and_get_code(compiled, a, b)
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        out = compiled(a, b)
        torch.mydev.synchronize()
    torch.testing.assert_close(out.cpu(), f(a.cpu(), b.cpu()))
    names = {e.name for e in device_events(prof)}
    generated = {name for name in names if name in code}
    assert generated, (names, code[:2000])
    for event in device_events(prof):
        if event.name in generated:
            assert event.device_index == 0 and event.time_range.elapsed_us() > 0


def test_fused_custom_op_kernel_is_recorded():
    x = torch.randn(8, 64, device="mydev")
    w = torch.ones(64, device="mydev")
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        out = torch.ops.mydev.rms_norm(x, w, 1e-6)
        torch.mydev.synchronize()
    reference = x.cpu() * torch.rsqrt(x.cpu().pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-4, atol=1e-5)
    kernels = [e for e in device_events(prof) if "rms_norm" in e.name]
    assert kernels and kernels[0].time_range.elapsed_us() > 0


def test_triton_kernel_is_recorded_under_its_name(tmp_path):
    pytest.importorskip("triton", reason="triton is not installed: the mydev Triton backend is optional")
    script = tmp_path / "triton_profile.py"  # @triton.jit needs its source in a file
    script.write_text(
        textwrap.dedent("""
        import torch
        import triton
        import triton.language as tl
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        @triton.jit
        def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

        x = torch.arange(512, dtype=torch.float32, device="mydev")
        out = torch.empty_like(x)
        double_kernel[(2,)](x, out, 512, BLOCK=256)  # compiled outside the profile
        torch.mydev.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            double_kernel[(2,)](x, out, 512, BLOCK=256)
            torch.mydev.synchronize()
        assert torch.equal(out.cpu(), torch.arange(512, dtype=torch.float32) * 2)
        kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
        print("KERNELS", [(e.name, e.device_index, e.time_range.elapsed_us() > 0) for e in kernels])
    """)
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "KERNELS [('double_kernel', 0, True)]" in result.stdout


def _worker_collective_trace(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    torch.mydev.set_device(rank % N_DEVICES)
    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    t = torch.full((1024,), float(rank + 1), device="mydev")
    dist.all_reduce(t)  # warm-up: connections set up outside the profile
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        dist.all_reduce(t)
        torch.mydev.synchronize()
    assert torch.equal(t.cpu(), torch.full((1024,), 6.0))  # (1 + 2) * 2
    # Torch ops (launch events on the host are CPU events linked to one).
    ops = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU and e.linked_correlation_id == 0}
    collectives = [e for e in device_events(prof) if e.name == "allreduce"]
    assert len(collectives) == 1, [e.name for e in device_events(prof)]
    kernel = collectives[0]
    assert kernel.device_index == rank % N_DEVICES
    assert kernel.device_resource_id != 0  # myccl's communication stream
    assert kernel.time_range.elapsed_us() > 0
    assert ops[kernel.linked_correlation_id].name == "c10d::allreduce_"
    dist.destroy_process_group()
    exit_ok()


def test_collective_kernels_are_on_the_communication_stream():
    check_ok(run_ranks(__name__, "collective_trace", 2))


def test_unknown_activity_is_a_clear_error():
    with pytest.raises(AssertionError, match="No valid profiler activities found"), profile(activities=["mydev"]):
        pass
    # The profiler and the device stay usable.
    with profile(activities=ACTIVITIES) as prof:
        torch.ones(4, device="mydev").add_(1)
        torch.mydev.synchronize()
    # An in-place op's kernel is its out= form's: aten::add.
    assert any(e.name == "aten::add" for e in device_events(prof))


def test_profiler_in_a_plain_script(tmp_path):
    trace = tmp_path / "trace.json"
    result = run_python(f"""
        import json
        import torch
        from torch.profiler import ProfilerActivity, profile

        x = torch.randn(256, 256, device="mydev")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = (x @ x).relu()
            torch.mydev.synchronize()
        print(prof.key_averages().table(sort_by="device_time_total", row_limit=5))
        prof.export_chrome_trace({str(trace)!r})
        kernels = [e["name"] for e in json.load(open({str(trace)!r}))["traceEvents"]
                   if e.get("cat") == "kernel"]
        print("KERNELS", sorted(set(kernels)))
    """)
    assert result.returncode == 0, result.stderr
    assert "KERNELS ['aten::mm', 'aten::relu']" in result.stdout
    assert "MYDEV total" in result.stdout


def test_cpu_only_profile_records_no_device_work():
    x = torch.ones(16, device="mydev")
    with profile(activities=ACTIVITIES):  # the mydev profiler is now known to Kineto
        x.add_(1)
        torch.mydev.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.mul_(2)
        torch.mydev.synchronize()
    assert device_events(prof) == []
    assert not [e for e in prof.events() if e.name.startswith("mydev")]
    assert torch.equal(x.cpu(), torch.full((16,), 4.0))


def test_recording_off_leaves_no_records():
    # Work outside any profile leaves nothing behind for the next profile.
    for _ in range(10):
        torch.ones(16, device="mydev").mul_(2)
    torch.mydev.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        torch.ones(16, device="mydev").add_(1)
        torch.mydev.synchronize()
    names = [e.name for e in device_events(prof)]
    assert "aten::mul" not in names and "aten::add" in names
