"""Device memory on mydev: caching-allocator statistics and reuse, OOM,
record_stream, pinned host memory and storage resizing.

Byte counts are exact: the allocator rounds every request up to 512 bytes;
small requests (<= 1 MiB) share 2 MiB segments, medium ones (< 10 MiB) 20 MiB
segments, and large ones get a segment rounded up to 2 MiB. Checks that need
a known starting state (segment sizes, OOM at 64 MiB) run in a fresh process.
"""

import gc
import json
import threading

import pytest
import torch

from mydev_testing import N_DEVICES, hold_stream, needs_two_devices

KiB = 1 << 10
MiB = 1 << 20


def _round512(nbytes):
    return (nbytes + 511) // 512 * 512


def _stats(device=0):
    return torch.mydev.memory_stats(device)


def _bytes(nbytes, device=0):
    return torch.empty(nbytes, dtype=torch.uint8, device=f"mydev:{device}")


@pytest.fixture
def clean_cache():
    """Starts with no cached blocks, so new segments are really new."""
    gc.collect()
    torch.mydev.synchronize()
    torch.mydev.empty_cache()
    yield


def _run_json(run_python, code, **env):
    """Runs ``code`` in a fresh interpreter through conftest's ``run_python``
    (env as MYDEV_* variables); the code prints one JSON line last, which is
    returned decoded."""
    result = run_python(code, env={key: str(value) for key, value in env.items()})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------- statistics --


@pytest.mark.parametrize("nbytes", [1, 511, 512, 513, 4000, 1 * MiB, 3 * MiB + 1, 12 * MiB])
def test_allocated_bytes_are_rounded_to_512(nbytes):
    before = _stats()
    tensor = _bytes(nbytes)
    during = _stats()
    rounded = _round512(nbytes)
    pool = "small_pool" if rounded <= 1 * MiB else "large_pool"
    assert during["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == rounded
    assert during[f"allocated_bytes.{pool}.current"] - before[f"allocated_bytes.{pool}.current"] == rounded
    assert during["active_bytes.all.current"] - before["active_bytes.all.current"] == rounded
    assert during["requested_bytes.all.current"] - before["requested_bytes.all.current"] == nbytes
    assert during["allocation.all.current"] - before["allocation.all.current"] == 1
    assert during["allocated_bytes.all.allocated"] - before["allocated_bytes.all.allocated"] == rounded
    assert torch.mydev.memory_allocated() == during["allocated_bytes.all.current"]
    assert torch.mydev.max_memory_allocated() >= torch.mydev.memory_allocated()
    assert torch.mydev.memory_reserved() >= torch.mydev.memory_allocated()
    del tensor
    after = _stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.current"] == before["allocation.all.current"]
    assert after["requested_bytes.all.current"] == before["requested_bytes.all.current"]
    assert after["allocated_bytes.all.freed"] - before["allocated_bytes.all.freed"] == rounded


def test_tensor_bytes_follow_numel_and_dtype():
    before = torch.mydev.memory_allocated()
    tensors = [
        torch.empty(100, dtype=torch.float64, device="mydev"),  # 800 B -> 1024
        torch.empty(3, 5, dtype=torch.int16, device="mydev"),  # 30 B -> 512
        torch.ones(256, device="mydev"),
    ]  # 1024 B -> 1024
    assert torch.mydev.memory_allocated() - before == 1024 + 512 + 1024
    del tensors
    assert torch.mydev.memory_allocated() == before


@pytest.mark.parametrize("device", range(N_DEVICES))
def test_memory_functions_agree_with_memory_stats(device):
    keep = _bytes(5000, device)
    stats = _stats(device)
    assert torch.mydev.memory_allocated(device) == stats["allocated_bytes.all.current"]
    assert torch.mydev.max_memory_allocated(device) == stats["allocated_bytes.all.peak"]
    assert torch.mydev.memory_reserved(device) == stats["reserved_bytes.all.current"]
    assert torch.mydev.max_memory_reserved(device) == stats["reserved_bytes.all.peak"]
    assert torch.mydev.memory_allocated(f"mydev:{device}") == stats["allocated_bytes.all.current"]
    assert torch.accelerator.memory_allocated(device) == stats["allocated_bytes.all.current"]
    assert torch.accelerator.memory_reserved(device) == stats["reserved_bytes.all.current"]
    for key in (
        "num_ooms",
        "num_alloc_retries",
        "num_device_alloc",
        "num_device_free",
        "reserved_bytes.all.peak",
        "segment.all.current",
        "active.all.current",
    ):
        assert isinstance(stats[key], int) and stats[key] >= 0, key
    assert stats["allocated_bytes.all.current"] >= 5120
    del keep


def test_peak_tracks_high_water_mark_and_reset(clean_cache):
    torch.mydev.reset_peak_memory_stats()
    base = torch.mydev.memory_allocated()
    assert torch.mydev.max_memory_allocated() == base
    a = _bytes(4 * MiB)
    b = _bytes(4 * MiB)
    peak_reserved = torch.mydev.memory_reserved()
    del a, b
    assert torch.mydev.memory_allocated() == base
    assert torch.mydev.max_memory_allocated() == base + 8 * MiB
    assert torch.mydev.max_memory_reserved() == peak_reserved
    assert _stats()["allocation.all.peak"] >= 2
    torch.mydev.empty_cache()
    torch.mydev.reset_peak_memory_stats()
    assert torch.mydev.max_memory_allocated() == torch.mydev.memory_allocated() == base
    assert torch.mydev.max_memory_reserved() == torch.mydev.memory_reserved()


def test_reset_accumulated_memory_stats():
    keep = _bytes(2048)
    temporary = _bytes(4096)
    del temporary
    before = _stats()
    assert before["allocated_bytes.all.allocated"] > 0
    assert before["allocated_bytes.all.freed"] > 0
    torch.mydev.reset_accumulated_memory_stats()
    after = _stats()
    for key in (
        "allocated_bytes.all.allocated",
        "allocated_bytes.all.freed",
        "allocation.all.allocated",
        "allocation.all.freed",
        "num_ooms",
        "num_alloc_retries",
        "num_device_alloc",
        "num_device_free",
    ):
        assert after[key] == 0, key
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current", "allocation.all.current"):
        assert after[key] == before[key], key
    # Accumulation restarts from zero.
    extra = _bytes(1000)
    assert _stats()["allocated_bytes.all.allocated"] == 1024
    del keep, extra


@pytest.mark.parametrize("nbytes", [4 * KiB, 4 * MiB, 24 * MiB], ids=["small", "medium", "large"])
def test_caching_allocator_reuses_freed_block(nbytes):
    first = _bytes(nbytes)
    pointer = first.data_ptr()
    del first
    reserved = torch.mydev.memory_reserved()
    device_allocs = _stats()["num_device_alloc"]
    for _ in range(20):
        again = _bytes(nbytes)
        assert again.data_ptr() == pointer
        del again
    assert torch.mydev.memory_reserved() == reserved
    assert _stats()["num_device_alloc"] == device_allocs


def test_empty_cache_releases_only_unused_segments(clean_cache):
    base_reserved = torch.mydev.memory_reserved()
    keep = torch.full((3 * MiB,), 3.0, device="mydev")  # 12 MiB: its own segment
    temporary = _bytes(24 * MiB)
    del temporary
    assert torch.mydev.memory_reserved() >= base_reserved + 36 * MiB
    free_before, _ = torch.mydev.mem_get_info()
    frees_before = _stats()["num_device_free"]
    torch.mydev.empty_cache()
    assert torch.mydev.memory_reserved() == base_reserved + 12 * MiB
    assert _stats()["num_device_free"] >= frees_before + 1
    free_after, _ = torch.mydev.mem_get_info()
    assert free_after - free_before == 24 * MiB
    assert torch.equal(keep.cpu(), torch.full((3 * MiB,), 3.0))
    del keep
    torch.mydev.empty_cache()
    assert torch.mydev.memory_reserved() == base_reserved


def test_segment_sizes_and_empty_cache_in_fresh_process(python_subprocess):
    observed = _run_json(
        python_subprocess,
        """
        import json, torch
        m = torch.mydev
        out = {}
        for name, nbytes in [("small", 1000), ("medium", 3 << 20), ("large", (12 << 20) + 1)]:
            t = torch.empty(nbytes, dtype=torch.uint8, device="mydev")
            out[name] = [m.memory_allocated(), m.memory_reserved()]
            del t
            m.empty_cache()
            out[name + "_emptied"] = [m.memory_allocated(), m.memory_reserved()]
        keep = torch.empty(12 << 20, dtype=torch.uint8, device="mydev")
        tmp = [torch.empty(n, dtype=torch.uint8, device="mydev") for n in (100, 5 << 20, 30 << 20)]
        del tmp
        out["before_empty"] = m.memory_reserved()
        m.empty_cache()
        out["kept"] = [m.memory_allocated(), m.memory_reserved()]
        free, total = m.mem_get_info()
        out["free_plus_reserved"] = free + m.memory_reserved() == total
        print(json.dumps(out))
    """,
    )
    assert observed["small"] == [1024, 2 * MiB]
    assert observed["medium"] == [3 * MiB, 20 * MiB]
    assert observed["large"] == [12 * MiB + 512, 14 * MiB]
    for name in ("small", "medium", "large"):
        assert observed[name + "_emptied"] == [0, 0]
    assert observed["before_empty"] == 12 * MiB + 2 * MiB + 20 * MiB + 30 * MiB
    assert observed["kept"] == [12 * MiB, 12 * MiB]
    assert observed["free_plus_reserved"] is True


@pytest.mark.parametrize("device", range(N_DEVICES))
def test_mem_get_info(device, clean_cache):
    free, total = torch.mydev.mem_get_info(device)
    assert total == torch.mydev.get_device_properties(device).total_memory
    assert 0 <= free <= total
    # Only the caching allocator takes device memory: free = total - reserved.
    assert free == total - torch.mydev.memory_reserved(device)
    assert torch.accelerator.get_memory_info(device) == (free, total)
    tensor = _bytes(24 * MiB, device)
    free_during, total_during = torch.mydev.mem_get_info(device)
    assert total_during == total
    assert free - free_during == 24 * MiB
    del tensor
    torch.mydev.empty_cache()
    assert torch.mydev.mem_get_info(device) == (free, total)


@needs_two_devices
@pytest.mark.parametrize("allocate_on, observe", [(1, 0), (0, 1)])
def test_stats_are_per_device(allocate_on, observe):
    observed_before = _stats(observe)
    allocated_before = torch.mydev.memory_allocated(allocate_on)
    tensor = _bytes(MiB, allocate_on)
    assert tensor.device == torch.device("mydev", allocate_on)
    assert torch.mydev.memory_allocated(allocate_on) - allocated_before == MiB
    assert _stats(observe) == observed_before
    del tensor
    assert torch.mydev.memory_allocated(allocate_on) == allocated_before
    assert _stats(observe) == observed_before


@pytest.mark.parametrize(
    "call",
    [
        torch.mydev.memory_stats,
        torch.mydev.memory_allocated,
        torch.mydev.mem_get_info,
        torch.mydev.reset_peak_memory_stats,
        torch.mydev.reset_accumulated_memory_stats,
    ],
    ids=lambda f: f.__name__,
)
def test_memory_functions_reject_bad_device(call):
    with pytest.raises(RuntimeError, match=f"Invalid device index mydev:{N_DEVICES}"):
        call(N_DEVICES)
    with pytest.raises(ValueError, match="Expected a mydev device"):
        call("cpu")
    assert isinstance(torch.mydev.memory_allocated(0), int)


# -------------------------------------------------- zero and absurd sizes --


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0, 2)])
def test_zero_size_tensors_allocate_nothing(shape):
    before = _stats()
    tensor = torch.empty(shape, device="mydev")
    also = torch.zeros(shape, device="mydev") + 1
    after = _stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.current"] == before["allocation.all.current"]
    assert tensor.shape == torch.Size(shape) and tensor.numel() == 0
    assert torch.equal(also.cpu(), torch.zeros(shape) + 1)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: torch.empty(-5, device="mydev"), RuntimeError, "negative dimension -5"),
        (lambda: torch.empty(4, -1, device="mydev"), RuntimeError, "negative dimension -1"),
        (lambda: torch.empty(2**62, device="mydev"), RuntimeError, "overflow"),
        (
            lambda: torch.empty(2**50, dtype=torch.uint8, device="mydev"),
            torch.OutOfMemoryError,
            "Tried to allocate 1048576.00 GiB",
        ),
        (lambda: torch.empty(-(2**62), device="mydev"), RuntimeError, "negative dimension"),
        (lambda: torch.ones(1, device="mydev").untyped_storage().resize_(-1), RuntimeError, "negative"),
        (lambda: torch.ones(1, device="mydev").untyped_storage().resize_(-1000), RuntimeError, "negative"),
    ],
    ids=[
        "negative",
        "negative-2d",
        "overflow",
        "too-large",
        "huge-negative",
        "storage-resize-negative",
        "storage-resize-negative-1000",
    ],
)
def test_absurd_sizes_raise_clear_errors(make, error, match):
    allocated = torch.mydev.memory_allocated()
    with pytest.raises(error, match=match):
        make()
    gc.collect()
    assert torch.mydev.memory_allocated() == allocated
    y = torch.arange(1000.0, device="mydev") * 2
    assert torch.equal(y.cpu(), torch.arange(1000.0) * 2)


def test_in_process_oom_counts_and_keeps_working():
    ooms = _stats()["num_ooms"]
    capacity = torch.mydev.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as info:
        _bytes(capacity + MiB)
    assert isinstance(info.value, RuntimeError)
    assert "mydev:0 has a total capacity of" in str(info.value)
    assert _stats()["num_ooms"] == ooms + 1
    assert (torch.ones(10, device="mydev") * 4).sum().item() == 40.0


# -------------------------------------------------------------------- OOM --


@pytest.mark.parametrize("empty_cache", [False, True], ids=["free", "free+empty_cache"])
def test_out_of_memory_error_and_recovery(python_subprocess, empty_cache):
    observed = _run_json(
        python_subprocess,
        """
        import json, torch
        m = torch.mydev
        out = {"type": None}
        keep = [torch.full((4 << 20,), float(i), device="mydev") for i in range(3)]   # 3 x 16 MiB
        out["free_before"] = m.mem_get_info()[0]
        try:
            torch.empty(32 << 20, dtype=torch.uint8, device="mydev")
        except RuntimeError as error:
            out["type"] = type(error).__name__
            out["is_oom_error"] = isinstance(error, torch.OutOfMemoryError)
            out["message"] = str(error)
        out["num_ooms"] = m.memory_stats()["num_ooms"]
        out["allocated_after_oom"] = m.memory_allocated()
        out["ops_after_oom"] = (keep[2][:1000] + 1).sum().item()
        del keep[0], keep[0]
        if EMPTY_CACHE:
            m.empty_cache()
            out["reserved_after_empty_cache"] = m.memory_reserved()
        retries = m.memory_stats()["num_alloc_retries"]
        big = torch.full((8 << 20,), 2.0, device="mydev")         # 32 MiB
        out["retried"] = m.memory_stats()["num_alloc_retries"] - retries
        out["big_ok"] = torch.equal(big.cpu(), torch.full((8 << 20,), 2.0))
        out["survivor_ok"] = torch.equal(keep[0].cpu(), torch.full((4 << 20,), 2.0))
        out["num_ooms_end"] = m.memory_stats()["num_ooms"]
        print(json.dumps(out))
    """.replace("EMPTY_CACHE", str(empty_cache)),
        MYDEV_MEMORY_MB=64,
        MYDEV_DEVICE_COUNT=1,
    )
    assert observed["type"] == "OutOfMemoryError"
    assert observed["is_oom_error"] is True  # and, being caught above, a RuntimeError
    message = observed["message"]
    assert "Tried to allocate 32.00 MiB" in message
    assert "total capacity of 64.00 MiB" in message
    assert "of which 16.00 MiB is free" in message
    assert observed["free_before"] == 16 * MiB
    assert observed["num_ooms"] == 1
    assert observed["allocated_after_oom"] == 48 * MiB
    assert observed["ops_after_oom"] == 3.0 * 1000
    if empty_cache:
        assert observed["reserved_after_empty_cache"] == 16 * MiB  # only the survivor
        assert observed["retried"] == 0
    else:
        assert observed["retried"] == 1  # the two cached 16 MiB segments were released
    assert observed["big_ok"] is True
    assert observed["survivor_ok"] is True
    assert observed["num_ooms_end"] == 1


def test_cached_blocks_are_released_and_retried_before_oom(python_subprocess):
    observed = _run_json(
        python_subprocess,
        """
        import json, torch
        m = torch.mydev
        out = {}
        blocks = [torch.empty(8 << 20, dtype=torch.uint8, device="mydev") for _ in range(6)]
        del blocks
        out["cached"] = [m.memory_allocated(), m.memory_reserved()]
        big = torch.full((10 << 20,), 1.5, device="mydev")        # 40 MiB
        stats = m.memory_stats()
        out["retries"] = stats["num_alloc_retries"]
        out["ooms"] = stats["num_ooms"]
        out["after"] = [m.memory_allocated(), m.memory_reserved()]
        out["values_ok"] = torch.equal(big.cpu(), torch.full((10 << 20,), 1.5))
        print(json.dumps(out))
    """,
        MYDEV_MEMORY_MB=64,
        MYDEV_DEVICE_COUNT=1,
    )
    # Six 8 MiB blocks fill three 20 MiB segments; 40 MiB only fits once
    # the allocator gave them back.
    assert observed["cached"] == [0, 60 * MiB]
    assert observed["retries"] == 1
    assert observed["ooms"] == 0
    assert observed["after"] == [40 * MiB, 40 * MiB]
    assert observed["values_ok"] is True


# ----------------------------------------------------------- record_stream --


def _use_on_held_side_stream(a):
    """Queues b = a * 2 on a side stream behind a latch; returns (side, b,
    the latch), which the test releases (``with latch:``)."""
    side = torch.mydev.Stream()
    side.wait_stream(torch.mydev.current_stream())
    latch = hold_stream(side)
    with torch.mydev.stream(side):
        b = a * 2
    return side, b, latch


@pytest.mark.parametrize("nbytes", [64 * KiB, 12 * MiB], ids=["small", "large"])
def test_record_stream_delays_reuse_until_side_stream_is_done(nbytes, clean_cache):
    n = nbytes // 4
    a = torch.full((n,), 1.0, device="mydev")
    pointer = a.data_ptr()
    side, b, latch = _use_on_held_side_stream(a)
    with latch:
        a.record_stream(side)
        del a
        # Allocated (and overwritten) on the current stream while side still waits.
        c = torch.full((n,), 7.0, device="mydev")
        assert side.query() is False
        assert c.data_ptr() != pointer
    side.synchronize()
    assert torch.equal(b.cpu(), torch.full((n,), 2.0))  # a's memory was not clobbered
    assert torch.equal(c.cpu(), torch.full((n,), 7.0))


def test_record_stream_block_is_reused_once_side_stream_finished(clean_cache):
    n = 12 * MiB // 4  # a whole segment: no splitting or merging
    a = torch.full((n,), 1.0, device="mydev")
    pointer = a.data_ptr()
    side, b, latch = _use_on_held_side_stream(a)
    with latch:
        a.record_stream(side)
        del a
        c = torch.empty(n, device="mydev")
        assert c.data_ptr() != pointer
    torch.mydev.synchronize()
    d = torch.empty(n, device="mydev")
    assert d.data_ptr() == pointer
    assert torch.equal(b.cpu(), torch.full((n,), 2.0))


@pytest.mark.parametrize("nbytes", [64 * KiB, 12 * MiB], ids=["small", "large"])
def test_without_record_stream_block_is_reused_at_once(nbytes, clean_cache):
    n = nbytes // 4
    a = torch.full((n,), 1.0, device="mydev")
    pointer = a.data_ptr()
    side, _, latch = _use_on_held_side_stream(a)
    with latch:
        del a
        c = torch.empty(n, device="mydev")
        assert side.query() is False
        assert c.data_ptr() == pointer


def test_block_freed_on_busy_side_stream_is_not_handed_to_another_stream(clean_cache):
    # Freed in `side`'s order; the current stream must not reuse it while
    # side's queued kernel still reads it.
    n = 16 * KiB
    side = torch.mydev.Stream()
    with torch.mydev.stream(side):
        a = torch.full((n,), 1.0, device="mydev")
        pointer = a.data_ptr()
        latch = hold_stream()
        b = a * 2
        del a
    with latch:
        c = torch.full((n,), 7.0, device="mydev")
        assert side.query() is False
        assert c.data_ptr() != pointer
    side.synchronize()
    assert torch.equal(b.cpu(), torch.full((n,), 2.0))


def test_record_stream_on_own_stream_does_not_delay_reuse(clean_cache):
    a = _bytes(64 * KiB)
    pointer = a.data_ptr()
    with hold_stream():
        a.record_stream(torch.mydev.current_stream())
        del a
        # Same stream: stream order already protects the block.
        assert _bytes(64 * KiB).data_ptr() == pointer


# ---------------------------------------------------------- pinned memory --


def test_pin_memory_and_is_pinned():
    host = torch.arange(1000, dtype=torch.float32)
    assert host.is_pinned() is False
    pinned = host.pin_memory()
    assert pinned.is_pinned() is True
    assert torch.equal(pinned, host)
    assert pinned.data_ptr() != host.data_ptr()
    empty_pinned = torch.empty(10, 10, pin_memory=True)
    assert empty_pinned.is_pinned() is True
    assert empty_pinned.device == torch.device("cpu")
    assert torch.zeros(3).is_pinned() is False
    # A view of pinned memory is pinned as well.
    assert pinned[10:20].is_pinned() is True


def test_pin_memory_on_device_tensor_is_rejected():
    with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
        torch.empty(10, device="mydev", pin_memory=True)
    assert torch.empty(10, pin_memory=True).is_pinned() is True


def test_absurd_pinned_allocation_raises_and_pinning_still_works():
    with pytest.raises(torch.OutOfMemoryError, match="pinned host memory"):
        torch.empty(2**50, dtype=torch.uint8, pin_memory=True)
    pinned = torch.arange(100.0).pin_memory()
    assert pinned.is_pinned() is True
    assert torch.equal(pinned.to("mydev", non_blocking=True).cpu(), torch.arange(100.0))


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_non_blocking_host_to_device_copy(pinned):
    n = 1 << 20
    reference = torch.randn(n, generator=torch.Generator().manual_seed(0))
    source = reference.pin_memory() if pinned else reference.clone()
    target = torch.zeros(n, device="mydev")
    torch.mydev.synchronize()
    with hold_stream() as latch:
        if pinned:
            target.copy_(source, non_blocking=True)  # returns while the stream is held
            assert torch.mydev.current_stream().query() is False
        else:
            # Pageable memory: the copy happens before returning, so it
            # returns only once the stream got past the latch.
            copier = threading.Thread(target=target.copy_, args=(source,), kwargs={"non_blocking": True})
            copier.start()
            latch.release()
            copier.join()
            assert torch.mydev.current_stream().query() is True
    torch.mydev.synchronize()
    assert torch.equal(target.cpu(), reference)


@pytest.mark.parametrize("method", ["copy_", "to"])
def test_non_blocking_device_to_pinned_host_copy(method):
    n = 1 << 20
    reference = torch.randn(n, generator=torch.Generator().manual_seed(1))
    on_device = reference.to("mydev") * 3
    torch.mydev.synchronize()
    with hold_stream():  # the copy returns while the stream is held
        if method == "copy_":
            out = torch.zeros(n, pin_memory=True)
            out.copy_(on_device, non_blocking=True)
        else:
            out = on_device.to("cpu", non_blocking=True)
        assert out.is_pinned() is True
        assert torch.mydev.current_stream().query() is False
    torch.mydev.synchronize()
    assert torch.equal(out, reference * 3)


@pytest.mark.parametrize("empty_host_cache", [False, True], ids=["reuse", "empty_host_cache"])
def test_pinned_block_in_flight_is_not_reused(empty_host_cache):
    n = 1 << 20
    source = torch.full((n,), 5.0).pin_memory()
    pointer = source.data_ptr()
    with hold_stream():
        on_device = source.to("mydev", non_blocking=True)  # reads source after the latch
        del source
        if empty_host_cache:
            torch.accelerator.empty_host_cache()
        scribble = torch.empty(n, pin_memory=True)
        scribble.fill_(-1.0)
        assert torch.mydev.current_stream().query() is False
        assert scribble.data_ptr() != pointer
    torch.mydev.synchronize()
    assert torch.equal(on_device.cpu(), torch.full((n,), 5.0))
    # Once the copy finished, the host cache hands that block out again.
    reused = torch.empty(n, pin_memory=True)
    assert reused.data_ptr() == pointer
    del scribble, reused
    torch.accelerator.empty_host_cache()


# ------------------------------------------------------- storage resizing --


@pytest.mark.parametrize("device", range(N_DEVICES))
def test_storage_resize_to_zero_frees_and_regrows(device):
    # The FSDP2 pattern; from mydev:0 even for a storage on another device.
    t = torch.arange(4096, dtype=torch.float32, device=f"mydev:{device}")  # 16 KiB
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    assert nbytes == 16 * KiB
    allocated = [torch.mydev.memory_allocated(i) for i in range(N_DEVICES)]
    for _ in range(3):
        storage.resize_(0)
        assert storage.nbytes() == 0
        expected = list(allocated)
        expected[device] -= 16 * KiB
        assert [torch.mydev.memory_allocated(i) for i in range(N_DEVICES)] == expected
        storage.resize_(nbytes)
        assert storage.nbytes() == nbytes
        assert storage.device == torch.device("mydev", device)
        assert [torch.mydev.memory_allocated(i) for i in range(N_DEVICES)] == allocated
        reference = torch.randn(4096)
        t.copy_(reference)
        assert torch.equal(t.cpu(), reference)
        assert torch.equal((t * 2).cpu(), reference * 2)


def test_storage_resize_beyond_capacity_raises_and_keeps_storage():
    t = torch.arange(256, dtype=torch.float32, device="mydev")
    storage = t.untyped_storage()
    ooms = _stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
        storage.resize_(2**62)
    assert _stats()["num_ooms"] == ooms + 1
    assert storage.nbytes() == 1024
    assert torch.equal(t.cpu(), torch.arange(256, dtype=torch.float32))


@pytest.mark.parametrize("new_elements", [8192, 1024, 4096 + 7], ids=["grow", "shrink", "grow-odd"])
def test_storage_resize_keeps_existing_bytes_in_stream_order(new_elements):
    reference = torch.arange(4096, dtype=torch.float32)
    t = torch.ones(4096, device="mydev")
    source = reference.to("mydev")
    torch.mydev.synchronize()
    with hold_stream():
        t.copy_(source * 2)  # queued behind the latch
        assert torch.mydev.current_stream().query() is False
        storage = t.untyped_storage()
        storage.resize_(new_elements * 4)  # queued too: the copy of the kept bytes
    assert storage.nbytes() == new_elements * 4
    view = torch.empty(0, device="mydev").set_(storage, 0, (new_elements,))
    kept = min(4096, new_elements)
    assert torch.equal(view[:kept].cpu(), reference[:kept] * 2)
    assert torch.mydev.memory_allocated() >= new_elements * 4
