"""torch.mydev.memory._record_memory_history / _snapshot / _dump_snapshot and
memory_summary: cuda's snapshot layout, read by PyTorch's own visualizer."""

import pickle
import subprocess
import sys

import pytest
import torch

from mydev_testing import N_DEVICES, run_python

THIS_FILE = "test_memory_history.py"


@pytest.fixture
def history():
    """Recording on for one test, cleared before and after."""
    torch.mydev.synchronize()
    torch.mydev.empty_cache()
    torch.mydev.memory._record_memory_history("all", clear_history=True)
    yield
    torch.mydev.memory._record_memory_history(None, clear_history=True)


def actions(snapshot, device=0):
    return [e["action"] for e in snapshot["device_traces"][device]]


def entries_at(snapshot, addr, device=0):
    return [e for e in snapshot["device_traces"][device] if e.get("addr") == addr]


def block_at(snapshot, addr):
    """The segment and block holding `addr` (a freed block may have merged
    with a free neighbour in front of it)."""
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            if block["address"] <= addr < block["address"] + block["size"]:
                return segment, block
    raise AssertionError(f"no block holds {addr:#x}")


def test_snapshot_has_cudas_layout(history):
    x = torch.randn(1000, device="mydev")
    # Large enough for a segment of its own: 37 MiB rounded up to 2 MiB.
    y = torch.empty(37 << 20, dtype=torch.uint8, device="mydev")
    addr_x, addr_y = x.data_ptr(), y.data_ptr()
    del x
    snapshot = torch.mydev.memory._snapshot()

    assert set(snapshot) == {"segments", "device_traces"}
    assert len(snapshot["device_traces"]) == N_DEVICES
    for segment in snapshot["segments"]:
        assert segment["device"] == 0
        assert segment["segment_type"] in ("small", "large")
        # Blocks tile the segment, in address order.
        assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
        assert segment["blocks"][0]["address"] == segment["address"]
        assert segment["allocated_size"] == sum(
            b["size"] for b in segment["blocks"] if b["state"] == "active_allocated"
        )
    segment, block = block_at(snapshot, addr_y)
    assert segment["segment_type"] == "large" and segment["stream"] == 0
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 37 << 20
    assert any(THIS_FILE in f["filename"] for f in block["frames"])
    _, freed = block_at(snapshot, addr_x)
    assert freed["state"] == "inactive"

    trace = snapshot["device_traces"][0]
    assert [(e["action"], e["size"]) for e in entries_at(snapshot, addr_y)] == [
        ("segment_alloc", 38 << 20),
        ("alloc", 38 << 20),
    ]
    assert [e["action"] for e in entries_at(snapshot, addr_x)][-3:] == ["alloc", "free_requested", "free_completed"]
    alloc_x = entries_at(snapshot, addr_x)[-3]
    assert alloc_x["size"] == 4096 and alloc_x["stream"] == 0  # 4000 bytes rounded up
    assert any(f["name"] == "test_snapshot_has_cudas_layout" for f in alloc_x["frames"])
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    del y


def test_snapshot_round_trips_through_memory_viz(history, tmp_path):
    # Larger than any block earlier tests may have left cached (compiled
    # graphs keep theirs), so it takes a new segment: a cudaMalloc line.
    a = torch.ones(4096, 4096, device="mydev")
    b = (a * 2).sum()
    assert b.item() == 2 * 4096 * 4096
    del a
    path = tmp_path / "snapshot.pickle"
    torch.mydev.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    assert "alloc" in actions(snapshot)

    def memory_viz(*args):
        result = subprocess.run(
            [sys.executable, "-m", "torch.cuda._memory_viz", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    text = memory_viz("trace", str(path))
    assert "Device 0 ----------------" in text
    assert "= cudaMalloc(" in text and "del " in text
    for kind in ("trace_plot", "segment_plot"):
        html = tmp_path / f"{kind}.html"
        memory_viz(kind, str(path), "-o", str(html))
        content = html.read_text()
        assert "MemoryViz.js" in content and "snapshot.pickle" in content


def test_free_waiting_for_another_stream_is_requested_then_completed(history):
    side = torch.mydev.Stream()
    x = torch.ones(4096, device="mydev")
    addr = x.data_ptr()
    side.wait_stream(torch.mydev.current_stream())  # x is filled on the default stream
    with torch.mydev.stream(side):
        y = x * 3
    x.record_stream(side)
    del x
    # Until the allocator sees the side stream's work done, the block waits.
    _, block = block_at(torch.mydev.memory._snapshot(), addr)
    assert block["state"] == "active_pending_free"
    side.synchronize()
    z = torch.empty(16, device="mydev")  # the next allocation completes the free
    snapshot = torch.mydev.memory._snapshot()
    seen = [e["action"] for e in entries_at(snapshot, addr) if "segment" not in e["action"]]
    # (z itself may take the freed block's place.)
    assert seen[:3] == ["alloc", "free_requested", "free_completed"]
    expected = "active_allocated" if z.data_ptr() == addr else "inactive"
    assert block_at(snapshot, addr)[1]["state"] == expected
    torch.testing.assert_close(y.cpu(), torch.full((4096,), 3.0))


def test_oom_while_recording_leaves_an_oom_entry(history):
    total = torch.mydev.get_device_properties(0).total_memory
    keep = torch.ones(1024, device="mydev")
    with pytest.raises(torch.OutOfMemoryError, match="mydev out of memory"):
        torch.empty(total + (1 << 20), dtype=torch.uint8, device="mydev")
    snapshot = torch.mydev.memory._snapshot()
    oom = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"]
    assert len(oom) == 1
    assert oom[0]["size"] == total + (1 << 20)
    assert 0 <= oom[0]["device_free"] <= total
    assert any(f["name"] == "test_oom_while_recording_leaves_an_oom_entry" for f in oom[0]["frames"])
    # The snapshot at that moment is whole: the live block is still there.
    assert block_at(snapshot, keep.data_ptr())[1]["state"] == "active_allocated"
    assert torch.equal((keep + 1).cpu(), torch.full((1024,), 2.0))


def test_max_entries_keeps_the_newest(history):
    torch.mydev.memory._record_memory_history("all", max_entries=4)
    tensors = [torch.empty(512 * (i + 1), dtype=torch.uint8, device="mydev") for i in range(6)]
    trace = torch.mydev.memory._snapshot()["device_traces"][0]
    assert [e["action"] for e in trace] == ["alloc"] * 4
    assert [e["size"] for e in trace] == [512 * (i + 1) for i in range(2, 6)]
    del tensors


def test_context_levels_and_skip_actions(history):
    torch.mydev.memory._record_memory_history(
        "all", context="state", clear_history=True, skip_actions=["free_requested"]
    )
    x = torch.empty(1024, device="mydev")
    addr = x.data_ptr()
    del x
    z = torch.empty(2048, device="mydev")
    snapshot = torch.mydev.memory._snapshot()
    # "state": the live block has its stack, history entries have none.
    assert block_at(snapshot, z.data_ptr())[1]["frames"]
    assert all(e["frames"] == [] for e in snapshot["device_traces"][0])
    block_actions = [e["action"] for e in entries_at(snapshot, addr) if "segment" not in e["action"]]
    assert block_actions[:2] == ["alloc", "free_completed"]  # z may reuse the address next

    torch.mydev.memory._record_memory_history("state", context=None, clear_history=True)
    w = torch.empty(4096, device="mydev")
    snapshot = torch.mydev.memory._snapshot()
    assert snapshot["device_traces"][0] == []
    assert block_at(snapshot, w.data_ptr())[1]["frames"] == []


def test_cpp_stacks(history):
    torch.mydev.memory._record_memory_history("all", stacks="all", clear_history=True)
    x = torch.empty(1024, device="mydev")
    _, block = block_at(torch.mydev.memory._snapshot(), x.data_ptr())
    files = [f["filename"] for f in block["frames"]]
    assert any(THIS_FILE in name for name in files)
    assert any(name.endswith((".cpp", ".h", ".hpp")) for name in files) or any(
        "mydev" in f["name"] for f in block["frames"]
    ), block["frames"][:20]


def test_stopping_keeps_the_history_and_records_nothing_more(history):
    x = torch.empty(1024, device="mydev")
    torch.mydev.memory._record_memory_history(None)
    before = actions(torch.mydev.memory._snapshot())
    y = torch.empty(2048, device="mydev")
    del x, y
    assert actions(torch.mydev.memory._snapshot()) == before
    torch.mydev.memory._record_memory_history(None, clear_history=True)
    assert actions(torch.mydev.memory._snapshot()) == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"enabled": "yes"}, ValueError, "enabled must be None, 'state' or 'all', got 'yes'"),
        ({"enabled": True}, TypeError, "the legacy boolean form is not supported"),
        ({"context": "stack"}, ValueError, "context must be None, 'state', 'alloc' or 'all'"),
        ({"stacks": "cpp"}, ValueError, "stacks must be 'python' or 'all', got 'cpp'"),
        ({"max_entries": -1}, ValueError, "max_entries must be >= 0, got -1"),
        ({"max_entries": 2.5}, TypeError, "max_entries must be an int"),
        ({"skip_actions": ["malloc"]}, ValueError, "unknown action 'malloc' in skip_actions"),
        ({"device": 64}, RuntimeError, "Invalid device index mydev:64"),
    ],
)
def test_bad_history_arguments(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        torch.mydev.memory._record_memory_history(**kwargs)
    # Nothing was turned on, and the device works.
    torch.empty(16, device="mydev")
    assert torch.mydev.memory._snapshot()["device_traces"][0] == []


def test_snapshot_of_a_device_out_of_range():
    with pytest.raises(RuntimeError, match=f"Invalid device index mydev:{N_DEVICES}"):
        torch.mydev.memory._snapshot(N_DEVICES)
    assert torch.mydev.memory._snapshot(0)["device_traces"][0] == []


def test_memory_summary_is_cudas_table():
    keep = torch.empty(1 << 20, dtype=torch.uint8, device="mydev")
    summary = torch.mydev.memory_summary()
    lines = summary.splitlines()
    assert len({len(line) for line in lines}) == 1  # every row as wide as cuda's
    assert "PyTorch mydev memory summary, device ID 0" in summary
    assert "mydev OOMs:" in summary and "mydevMalloc retries:" in summary
    allocated = torch.mydev.memory_stats()["allocated_bytes.all.current"]
    assert allocated >= 1 << 20
    assert "Allocated memory" in summary and "Non-releasable memory" in summary
    assert "CUDA" not in summary and "cuda" not in summary
    assert torch.mydev.memory_summary(abbreviated=True).count("from large pool") == 0
    with pytest.raises(RuntimeError, match="Invalid device index mydev:64"):
        torch.mydev.memory_summary(64)
    del keep


def test_memory_history_in_a_plain_script(tmp_path):
    snapshot = tmp_path / "snapshot.pickle"
    html = tmp_path / "trace.html"
    result = run_python(f"""
        import torch

        torch.mydev.memory._record_memory_history(max_entries=100000)
        model = torch.nn.Linear(64, 64).to("mydev")
        for _ in range(2):
            model(torch.randn(8, 64, device="mydev")).sum().backward()
        torch.mydev.memory._dump_snapshot({str(snapshot)!r})
        torch.mydev.memory._record_memory_history(enabled=None)
        print(torch.mydev.memory_summary().splitlines()[1])
    """)
    assert result.returncode == 0, result.stderr
    assert "PyTorch mydev memory summary, device ID 0" in result.stdout
    viz = subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(snapshot), "-o", str(html)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert viz.returncode == 0, viz.stderr
    with open(snapshot, "rb") as f:
        data = pickle.load(f)
    allocs = [e for e in data["device_traces"][0] if e["action"] == "alloc"]
    assert allocs and all(e["frames"] for e in allocs)
    assert any(f["filename"] == "<string>" for e in allocs for f in e["frames"])
