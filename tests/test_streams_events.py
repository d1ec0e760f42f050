"""Streams, events, asynchrony and asynchronous kernel errors on mydev.

Nothing here depends on how long anything takes: a stream latch
(``torch.mydev._debug.hold_stream``) holds a stream while the test checks
that the work queued behind it has not run, then releases it.
"""

import contextlib
import resource
import threading
import time

import pytest
import torch

import device_ext
from mydev_testing import N_DEVICES, hold_stream, needs_two_devices, run_python


@pytest.fixture(autouse=True)
def restore_current_streams():
    """Tests here change current streams and devices; leave them as found."""
    device = torch.mydev.current_device()
    streams = [torch.mydev.current_stream(i) for i in range(N_DEVICES)]
    yield
    for stream in streams:
        torch.mydev.set_stream(stream)
    torch.mydev.set_device(device)


def _same_stream(a, b):
    return (a.device_index, a.stream_id) == (b.device_index, b.stream_id)


# ------------------------------------------------------------- asynchrony --


def test_host_returns_before_the_kernel_runs_and_synchronize_waits():
    x = torch.zeros(1000, device="mydev")
    torch.mydev.synchronize()
    peek_stream = torch.mydev.Stream()
    with hold_stream() as latch:
        x.fill_(3.0)  # the host is back here, the kernel has not run
        assert torch.mydev.current_stream().query() is False
        with torch.mydev.stream(peek_stream):  # a copy ordered after nothing on the held stream
            assert torch.equal(x.cpu(), torch.zeros(1000))
        latch.release()
        torch.mydev.synchronize()
        assert torch.mydev.current_stream().query() is True
        assert torch.equal(x.cpu(), torch.full((1000,), 3.0))


def test_latch_reports_when_the_stream_reaches_it():
    with hold_stream() as first:
        second = hold_stream()
        assert first.wait_until_reached() is True
        assert second.reached is False  # queued behind the first latch
        first.release()
        assert second.wait_until_reached() is True
        second.release()
    torch.mydev.synchronize()
    assert (first.released, second.released) == (True, True)


def test_latch_never_released_fails_its_kernel_instead_of_hanging():
    hold_stream(timeout_s=0.05)  # nobody releases it
    with pytest.raises(
        RuntimeError, match=r"kernel '_hold_stream' failed on mydev:0: the stream latch was not released within 50 ms"
    ):
        torch.mydev.synchronize()
    assert (torch.arange(3.0, device="mydev") + 1).cpu().tolist() == [1.0, 2.0, 3.0]


def test_release_all_frees_latches_a_test_left_held():
    side = torch.mydev.Stream()
    hold_stream(side)  # dropped without a release, as by a failing test
    with torch.mydev.stream(side):
        y = torch.arange(3.0, device="mydev") * 2
    torch.mydev._debug.release_all()  # what the suite's autouse fixture does
    side.synchronize()
    assert y.cpu().tolist() == [0.0, 2.0, 4.0]


def test_latch_timeout_must_be_positive():
    with pytest.raises(ValueError, match=r"^hold_stream: timeout_s must be > 0, got 0$"):
        hold_stream(timeout_s=0)
    assert torch.mydev.current_stream().query() is True


def test_sleep_queues_a_kernel_on_the_current_stream():
    side = torch.mydev.Stream()
    with hold_stream(side) as latch, torch.mydev.stream(side):
        torch.mydev._sleep(1)
        assert side.query() is False
        assert torch.mydev.default_stream().query() is True
        latch.release()
    side.synchronize()
    assert side.query() is True
    with pytest.raises(RuntimeError, match=r"^_sleep: milliseconds must be >= 0, got -1$"):
        torch.mydev._sleep(-1)


def test_synchronize_sleeps_until_its_work_is_done_not_once_per_kernel():
    # A thread asleep in synchronize is woken by the work it waits for, not
    # by every kernel before it: behind short convolutions each wake-up took
    # a core from the kernels' own threads (csrc/runtime/stream.h, wake_at_).
    # Counted as the waiting thread's voluntary context switches; the _sleep
    # kernels only space the completions out.
    kernels = 40
    for _ in range(kernels):
        torch.mydev._sleep(1)
    switches = []

    def wait():
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        torch.mydev.synchronize()
        switches.append(resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before)

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join()
    assert torch.mydev.current_stream().query() is True
    assert switches[0] < kernels // 4, switches


def test_stream_query_false_while_busy_true_after():
    side = torch.mydev.Stream()
    with hold_stream(side) as latch:
        assert side.query() is False
        # A held side stream does not occupy the default stream.
        assert torch.mydev.default_stream().query() is True
        latch.release()
        side.synchronize()
    assert side.query() is True


@pytest.mark.parametrize("on_side_stream", [False, True], ids=["default", "side"])
def test_work_queued_behind_a_held_stream_runs_in_order(on_side_stream):
    stream = torch.mydev.Stream() if on_side_stream else torch.mydev.default_stream()
    n = 1000
    with torch.mydev.stream(stream):
        x = torch.arange(n, dtype=torch.float32, device="mydev")
        with hold_stream() as latch:
            x.fill_(3.0)  # must run before the add, both after the latch
            x.add_(2.0)
            x.mul_(torch.arange(n, dtype=torch.float32, device="mydev"))
            assert stream.query() is False
            latch.release()
        result = x.cpu()
    torch.testing.assert_close(result, (torch.full((n,), 3.0) + 2.0) * torch.arange(n, dtype=torch.float32))


# ---------------------------------------------------------------- streams --


def test_pool_streams_are_distinct_and_not_default():
    a = torch.mydev.Stream()
    b = torch.mydev.Stream()
    default = torch.mydev.default_stream()
    assert isinstance(a, torch.Stream)
    assert a.stream_id != b.stream_id
    assert default.stream_id == 0
    assert 0 not in (a.stream_id, b.stream_id)
    assert a.device_index == torch.mydev.current_device() == 0
    assert a.device == torch.device("mydev", 0)
    assert a != b and a != default


@pytest.mark.parametrize("requested, expected", [(0, 0), (-1, -1), (-5, -1), (3, 0)])
def test_stream_priority(requested, expected):
    # Out-of-range priorities are clamped into (least, greatest) = (0, -1), as on CUDA.
    assert torch.mydev.Stream.priority_range() == (0, -1)
    stream = torch.mydev.Stream(priority=requested)
    assert stream.priority == expected
    assert stream.stream_id != 0


def test_high_and_normal_priority_streams_differ_and_default_is_normal():
    high = torch.mydev.Stream(priority=-1)
    normal = torch.mydev.Stream(priority=0)
    assert high.stream_id != normal.stream_id
    assert torch.mydev.default_stream().priority == 0
    # Both kinds of stream run work correctly.
    for stream in (high, normal):
        with torch.mydev.stream(stream):
            y = torch.arange(6.0, device="mydev") * 2
        stream.synchronize()
        assert torch.equal(y.cpu(), torch.arange(6.0) * 2)


@needs_two_devices
@pytest.mark.parametrize("device", [1, "mydev:1", torch.device("mydev", 1)], ids=["int", "str", "device"])
def test_stream_on_other_device(device):
    stream = torch.mydev.Stream(device=device)
    assert stream.device_index == 1
    assert stream.device == torch.device("mydev", 1)
    assert torch.mydev.current_device() == 0


def test_stream_repr_names_device_id_and_priority():
    stream = torch.mydev.Stream(priority=-1)
    text = repr(stream)
    assert "mydev:0" in text
    assert f"stream_id={stream.stream_id}" in text
    assert "priority=-1" in text


def test_stream_with_bad_device_raises_and_process_stays_usable():
    with pytest.raises(RuntimeError, match="Invalid device index mydev:7"):
        torch.mydev.Stream(device=7)
    with pytest.raises(ValueError, match="Expected a mydev device"):
        torch.mydev.Stream(device="cpu")
    stream = torch.mydev.Stream()
    with torch.mydev.stream(stream):
        y = (torch.arange(4.0, device="mydev") + 1).cpu()
    assert torch.equal(y, torch.arange(4.0) + 1)


def test_current_and_default_stream_and_set_stream():
    assert _same_stream(torch.mydev.current_stream(), torch.mydev.default_stream())
    for index in range(N_DEVICES):
        assert torch.mydev.default_stream(index).device_index == index
        assert torch.mydev.default_stream(index).stream_id == 0
    side = torch.mydev.Stream()
    torch.mydev.set_stream(side)
    assert _same_stream(torch.mydev.current_stream(), side)
    assert torch.mydev.current_stream() == side
    # Work now goes to `side`.
    with hold_stream() as latch:
        assert side.query() is False
        assert torch.mydev.default_stream().query() is True
        latch.release()
    # Other devices keep their own current stream.
    if N_DEVICES > 1:
        assert torch.mydev.current_stream(1).stream_id == 0
    torch.mydev.set_stream(torch.mydev.default_stream())
    assert torch.mydev.current_stream().stream_id == 0


def test_current_stream_is_per_thread():
    side = torch.mydev.Stream()
    seen = {}

    def worker():
        torch.mydev.set_stream(side)
        seen["worker"] = torch.mydev.current_stream()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert _same_stream(seen["worker"], side)
    assert torch.mydev.current_stream().stream_id == 0


def test_stream_context_sets_and_restores():
    outer = torch.mydev.current_stream()
    side = torch.mydev.Stream()
    with torch.mydev.stream(side) as entered:
        assert entered is side
        assert _same_stream(torch.mydev.current_stream(), side)
        latch = hold_stream()
    with latch:
        assert _same_stream(torch.mydev.current_stream(), outer)
        assert side.query() is False  # the latch went to `side`...
        assert outer.query() is True  # ...not to the outer stream


def test_stream_context_restores_after_exception():
    side = torch.mydev.Stream()
    with pytest.raises(KeyError):
        with torch.mydev.stream(side):
            raise KeyError("inside")
    assert torch.mydev.current_stream().stream_id == 0


def test_stream_context_none_is_a_no_op():
    with torch.mydev.stream(None) as entered:
        assert entered is None
        assert torch.mydev.current_stream().stream_id == 0


@needs_two_devices
def test_stream_context_on_other_device_switches_device_and_back():
    assert torch.mydev.current_device() == 0
    stream1 = torch.mydev.Stream(device=1)
    with torch.mydev.stream(stream1):
        assert torch.mydev.current_device() == 1
        assert _same_stream(torch.mydev.current_stream(), stream1)
        assert torch.mydev.current_stream(0).stream_id == 0
        latch = hold_stream()
        y = torch.arange(5.0, device="mydev") * 3  # "mydev" = current device
        assert y.device == torch.device("mydev", 1)
    with latch:
        assert torch.mydev.current_device() == 0
        assert torch.mydev.current_stream(1).stream_id == 0
        assert torch.mydev.current_stream(0).stream_id == 0
        assert stream1.query() is False  # work went to stream1
        assert torch.mydev.default_stream(1).query() is True
    stream1.synchronize()
    assert torch.equal(y.cpu(), torch.arange(5.0) * 3)


def test_generic_torch_stream_and_event():
    stream = torch.Stream(device="mydev")
    assert type(stream) is torch.Stream
    assert stream.device == torch.device("mydev", 0)
    assert stream.stream_id != 0
    with stream:
        assert _same_stream(torch.mydev.current_stream(), stream)
        latch = hold_stream()
        y = torch.arange(8.0, device="mydev").pow(2)
    assert torch.mydev.current_stream().stream_id == 0
    event = torch.Event(device="mydev")
    event.record(stream)
    with latch:
        assert stream.query() is False
        assert event.query() is False
    event.synchronize()
    assert event.query() is True
    assert stream.query() is True
    assert torch.equal(y.cpu(), torch.arange(8.0).pow(2))
    recorded = stream.record_event()
    assert isinstance(recorded, torch.Event)
    recorded.synchronize()
    assert recorded.query() is True


def test_generic_torch_event_timing():
    start = torch.Event(device="mydev", enable_timing=True)
    end = torch.Event(device="mydev", enable_timing=True)
    start.record()
    with hold_stream():
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_torch_accelerator_streams():
    assert torch.accelerator.current_accelerator() == torch.device("mydev")
    assert _same_stream(torch.accelerator.current_stream(), torch.mydev.current_stream())
    side = torch.mydev.Stream()
    torch.accelerator.set_stream(side)
    assert _same_stream(torch.mydev.current_stream(), side)
    assert _same_stream(torch.accelerator.current_stream(), side)
    with hold_stream():
        assert side.query() is False
    torch.accelerator.synchronize()
    assert side.query() is True
    torch.accelerator.set_stream(torch.mydev.default_stream())
    assert torch.accelerator.current_stream().stream_id == 0


@needs_two_devices
def test_torch_accelerator_current_stream_of_other_device():
    stream1 = torch.mydev.Stream(device=1)
    with torch.mydev.stream(stream1):
        pass
    assert torch.accelerator.current_stream(1).stream_id == 0
    torch.mydev.set_stream(stream1)
    assert _same_stream(torch.accelerator.current_stream(1), stream1)
    assert torch.accelerator.current_stream(0).stream_id == 0


# ----------------------------------------------------------------- events --


@pytest.mark.parametrize("blocking", [False, True], ids=["spin", "blocking"])
def test_event_record_query_synchronize(blocking):
    event = torch.mydev.Event(blocking=blocking)
    assert event.query() is True  # never recorded: nothing to wait for
    side = torch.mydev.Stream()
    with torch.mydev.stream(side):
        x = torch.zeros(100, device="mydev")
        latch = hold_stream()
        x.add_(4.0)
        event.record()  # records on the current stream: side
    with latch:
        assert event.query() is False
    event.synchronize()
    assert event.query() is True
    assert side.query() is True
    # Everything before the record is done: a host copy on another stream sees it.
    assert torch.equal(x.cpu(), torch.full((100,), 4.0))


def test_event_rerecord_replaces_previous_capture():
    event = torch.mydev.Event()
    event.record()
    event.synchronize()
    with hold_stream():
        event.record()
        assert event.query() is False
    event.synchronize()
    assert event.query() is True


@pytest.mark.parametrize(
    "make_event",
    [
        lambda: torch.mydev.Event(enable_timing=True),
        lambda: torch.Event(device="mydev", enable_timing=True),
    ],
    ids=["mydev.Event", "torch.Event"],
)
def test_elapsed_time_is_ordered_and_consistent(make_event):
    first, second, third = make_event(), make_event(), make_event()
    first.record()
    with hold_stream():
        second.record()  # recorded while the stream is held: completes after the release
        (torch.arange(1000.0, device="mydev") * 2).sum()
        third.record()
    third.synchronize()
    elapsed = first.elapsed_time(second)
    assert isinstance(elapsed, float)
    assert elapsed >= 0.0 and second.elapsed_time(third) >= 0.0
    # Intervals add up, and the reverse order gives the negative interval.
    assert first.elapsed_time(third) == pytest.approx(elapsed + second.elapsed_time(third), abs=1e-3)
    assert second.elapsed_time(first) == pytest.approx(-elapsed, abs=1e-3)


@pytest.mark.parametrize("timing", [(False, False), (True, False), (False, True)], ids=["none", "end", "start"])
def test_elapsed_time_without_timing_raises(timing):
    start = torch.mydev.Event(enable_timing=timing[0])
    end = torch.mydev.Event(enable_timing=timing[1])
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        start.elapsed_time(end)
    ok_start = torch.mydev.Event(enable_timing=True)
    ok_end = torch.mydev.Event(enable_timing=True)
    ok_start.record()
    ok_end.record()
    ok_end.synchronize()
    assert ok_start.elapsed_time(ok_end) >= 0.0


def test_elapsed_time_of_unrecorded_event_raises():
    start = torch.mydev.Event(enable_timing=True)
    end = torch.mydev.Event(enable_timing=True)
    start.record()
    start.synchronize()
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(end)


def test_elapsed_time_before_completion_raises():
    start = torch.mydev.Event(enable_timing=True)
    end = torch.mydev.Event(enable_timing=True)
    start.record()
    with hold_stream():
        end.record()
        with pytest.raises(RuntimeError, match="completed"):
            start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def _producer_consumer(order_streams):
    """Stream A is held, then produces x; stream B computes x + 1 once
    `order_streams(A, B)` made it wait. Returns (B's result, whether B was
    still waiting while A was held). The ordering call returns while A is
    held: if it blocked the host, A's latch would time out and fail."""
    a = torch.mydev.Stream()
    b = torch.mydev.Stream()
    x = torch.zeros(1000, device="mydev")
    a.wait_stream(torch.mydev.current_stream())  # x's zeros are in place
    with hold_stream(a) as latch:
        with torch.mydev.stream(a):
            x.fill_(7.0)
        order_streams(a, b)
        with torch.mydev.stream(b):
            y = x + 1
        b_waited = b.query() is False
        latch.release()
    b.synchronize()
    return y.cpu(), b_waited


def _wait_stream(a, b):
    b.wait_stream(a)


def _event_wait(a, b):
    event = torch.mydev.Event()
    event.record(a)
    event.wait(b)


def _generic_event_wait(a, b):
    event = a.record_event()
    b.wait_event(event)


@pytest.mark.parametrize(
    "order_streams",
    [_wait_stream, _event_wait, _generic_event_wait],
    ids=["wait_stream", "event.wait", "stream.wait_event"],
)
def test_cross_stream_ordering(order_streams):
    result, b_waited = _producer_consumer(order_streams)
    assert b_waited  # B waits for A's latch
    assert torch.equal(result, torch.full((1000,), 8.0))


@needs_two_devices
def test_cross_device_event_wait():
    a = torch.mydev.Stream(device=0)
    x0 = torch.zeros(1000, device="mydev:0")
    a.wait_stream(torch.mydev.current_stream(0))
    with hold_stream(a) as latch:
        with torch.mydev.stream(a):
            x0.fill_(5.0)
            ready = torch.mydev.Event()
            ready.record()
        stream1 = torch.mydev.Stream(device=1)
        ready.wait(stream1)
        with torch.mydev.stream(stream1):
            # The copy runs on stream1 after mydev:0's *current* stream (the idle
            # default stream), so only the event orders it after A's fill.
            y1 = x0.to("mydev:1") * 2
        assert stream1.query() is False
        latch.release()
    stream1.synchronize()
    assert y1.device == torch.device("mydev", 1)
    assert torch.equal(y1.cpu(), torch.full((1000,), 10.0))


# ------------------------------------------------------- errors in kernels --


def _sync_device(stream, tensor):
    torch.mydev.synchronize()


def _sync_stream(stream, tensor):
    stream.synchronize()


def _sync_event(stream, tensor):
    event = torch.mydev.Event()
    event.record(stream)
    event.synchronize()


def _sync_item(stream, tensor):
    tensor.sum().item()


def _sync_cpu(stream, tensor):
    tensor.cpu()


@pytest.mark.parametrize(
    "surface",
    [_sync_device, _sync_stream, _sync_event, _sync_item, _sync_cpu],
    ids=["device.synchronize", "stream.synchronize", "event.synchronize", "item", "cpu"],
)
@pytest.mark.parametrize("on_side_stream", [False, True], ids=["default", "side"])
def test_kernel_error_surfaces_at_next_sync_and_stream_recovers(surface, on_side_stream, request):
    stream = torch.mydev.Stream() if on_side_stream else torch.mydev.default_stream()
    message = f"boom-{request.node.callspec.id}"
    with torch.mydev.stream(stream):
        x = torch.arange(6, dtype=torch.float32, device="mydev")
        device_ext._C._fail_on_stream(message)  # returns at once
        with pytest.raises(RuntimeError) as info:
            surface(stream, x)
        text = str(info.value)
        assert "'_fail'" in text
        assert message in text
        assert "mydev:0" in text
        # Reported once: the same stream and device keep working.
        y = (x * 3 + 1).cpu()
        assert torch.equal(y, torch.arange(6, dtype=torch.float32) * 3 + 1)
        assert (x * 2).sum().item() == 30.0
    torch.mydev.synchronize()
    stream.synchronize()


@needs_two_devices
@pytest.mark.parametrize("failing, other", [(0, 1), (1, 0)])
def test_kernel_error_stays_on_its_device(failing, other):
    with torch.mydev.device(failing):
        device_ext._C._fail_on_stream("isolated")
        # Once the stream reaches the latch the failure has certainly
        # happened (query would not report it).
        with hold_stream() as latch:
            assert latch.wait_until_reached()
    torch.mydev.synchronize(other)
    y = (torch.arange(4.0, device=f"mydev:{other}") + 1).cpu()
    assert torch.equal(y, torch.arange(4.0) + 1)
    with pytest.raises(RuntimeError, match=f"_fail.*mydev:{failing}.*isolated"):
        torch.mydev.synchronize(failing)
    z = (torch.arange(4.0, device=f"mydev:{failing}") * 2).cpu()
    assert torch.equal(z, torch.arange(4.0) * 2)


# ------------------------------------------------------- host threads --


def _thread_worker(index, stream, iterations, errors, finished):
    try:
        generator = torch.Generator().manual_seed(1000 + index)
        device = torch.device("mydev", stream.device_index if stream is not None else 0)
        context = torch.mydev.stream(stream) if stream is not None else contextlib.nullcontext()
        with context:
            expected_stream = stream if stream is not None else torch.mydev.default_stream(0)
            assert _same_stream(torch.mydev.current_stream(device.index), expected_stream)
            for iteration in range(iterations):
                host = torch.randn(257, generator=generator)
                dev = host.to(device)
                out = (dev * (iteration + 1)).add_(index).relu_()
                reduced = torch.stack([out.sum(), out.max(), out.min()])
                if iteration % 10 == 0:
                    hold_stream().release()  # a kernel that blocks, now and then
                ref = (host * (iteration + 1)).add_(index).relu_()
                torch.testing.assert_close(out.cpu(), ref)
                torch.testing.assert_close(reduced.cpu(), torch.stack([ref.sum(), ref.max(), ref.min()]))
        finished[index] = True
    except BaseException as error:  # reported by the main thread
        errors.append((index, repr(error)))


@pytest.mark.parametrize("own_streams", [True, False], ids=["own-streams", "shared-default-stream"])
def test_many_host_threads(own_streams):
    n_threads, iterations = 8, 50
    streams = [torch.mydev.Stream(device=i % N_DEVICES) if own_streams else None for i in range(n_threads)]
    errors, finished = [], [False] * n_threads
    threads = [
        threading.Thread(target=_thread_worker, args=(i, streams[i], iterations, errors, finished), daemon=True)
        for i in range(n_threads)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "threads deadlocked"
    assert errors == []
    assert all(finished)
    # The main thread's streams were not touched by the workers.
    assert torch.mydev.current_stream().stream_id == 0


# ------------------------------------------------------- device synchronize --


@pytest.mark.parametrize("index", range(N_DEVICES))
@pytest.mark.parametrize(
    "form", [int, lambda i: f"mydev:{i}", lambda i: torch.device("mydev", i)], ids=["int", "str", "torch.device"]
)
def test_synchronize_each_device_waits_for_all_its_streams(index, form):
    side = torch.mydev.Stream(device=index)
    with torch.mydev.stream(side):
        x = torch.zeros(64, device="mydev")
        latch = hold_stream()
        x.add_(9.0)
    assert side.query() is False
    # Released by another thread, before or while this one synchronizes:
    # either way synchronize returns only after the add behind the latch.
    releaser = threading.Thread(target=latch.release)
    releaser.start()
    torch.mydev.synchronize(form(index))
    releaser.join()
    assert side.query() is True
    assert torch.mydev.current_device() == 0
    assert torch.equal(x.cpu(), torch.full((64,), 9.0))


@needs_two_devices
def test_synchronize_of_one_device_does_not_wait_for_another():
    stream1 = torch.mydev.Stream(device=1)
    with hold_stream(stream1):
        # Returns while mydev:1 is held (waiting for it would time the latch out).
        torch.mydev.synchronize(0)
        assert stream1.query() is False
    torch.mydev.synchronize(1)
    assert stream1.query() is True


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (N_DEVICES, RuntimeError, f"Invalid device index mydev:{N_DEVICES}: there are {N_DEVICES} mydev devices"),
        (64, RuntimeError, "Invalid device index mydev:64"),
        ("mydev:9", RuntimeError, "Invalid device index mydev:9"),
        ("cpu", ValueError, "Expected a mydev device"),
        (1.5, TypeError, "Invalid device argument"),
    ],
)
def test_synchronize_bad_device(bad, error, match):
    with pytest.raises(error, match=match):
        torch.mydev.synchronize(bad)
    torch.mydev.synchronize()
    assert (torch.arange(3.0, device="mydev") + 2).cpu().tolist() == [2.0, 3.0, 4.0]


# --- messages that say what happened ----------------------------------------------------------


def test_several_kernel_failures_raise_the_first_and_count_the_others():
    for message in ("first-failure", "second-failure", "third-failure"):
        device_ext._C._fail_on_stream(message)
    failed = torch.mydev.Event()
    failed.record()
    while not failed.query():  # the failures are recorded as the kernels run
        time.sleep(0.001)
    with pytest.raises(RuntimeError) as info:
        torch.mydev.synchronize()
    text = str(info.value)
    assert "kernel '_fail' failed on mydev:0: first-failure" in text
    assert "(and 2 more kernel failures on mydev:0 after it, before this report)" in text
    assert "second-failure" not in text
    torch.mydev.synchronize()  # all of them were reported at once
    assert (torch.arange(3.0, device="mydev") + 1).cpu().tolist() == [1.0, 2.0, 3.0]


def test_kernel_error_message_under_launch_blocking_is_not_asynchronous():
    probe = """
        import torch
        x = torch.arange(3.0, device="mydev")
        index = torch.tensor([7], device="mydev")
        try:
            x.index_select(0, index)
            torch.mydev.synchronize()
        except IndexError as err:
            print("ERROR", str(err).replace("\\n", " "))
    """
    blocking = run_python(probe, {"MYDEV_LAUNCH_BLOCKING": "1"})
    default = run_python(probe, {"MYDEV_LAUNCH_BLOCKING": "0"})
    assert blocking.returncode == 0 and default.returncode == 0, blocking.stderr + default.stderr
    assert "index out of range" in blocking.stdout and "index out of range" in default.stdout
    assert "asynchronously" not in blocking.stdout
    assert "reported at its launch (MYDEV_LAUNCH_BLOCKING=1)" in blocking.stdout
    assert "raised asynchronously by a mydev kernel" in default.stdout


def test_set_stream_of_another_device_type_says_so():
    with pytest.raises(ValueError, match="set_stream expects a mydev stream, got a stream on cpu"):
        torch.mydev.set_stream(torch.Stream("cpu"))
    with pytest.raises(TypeError, match="set_stream expects a torch.Stream, got str"):
        torch.mydev.set_stream("mydev")
    assert torch.mydev.current_stream().stream_id == 0


def test_wait_stream_of_none_says_so():
    stream = torch.mydev.Stream()
    with pytest.raises(TypeError, match="wait_stream expects a torch.Stream, got NoneType"):
        stream.wait_stream(None)
    with pytest.raises(ValueError, match="wait_stream expects a mydev stream, got a stream on cpu"):
        stream.wait_stream(torch.Stream("cpu"))
    stream.wait_stream(torch.mydev.current_stream())  # still usable
    stream.synchronize()


@needs_two_devices
def test_elapsed_time_between_devices_is_an_error():
    events = []
    for index in (0, 1):
        with torch.mydev.device(index):
            event = torch.mydev.Event(enable_timing=True)
            event.record()
            events.append(event)
    torch.mydev.synchronize(0)
    torch.mydev.synchronize(1)
    with pytest.raises(
        RuntimeError, match=r"elapsed_time: the events are on different devices \(mydev:0 and mydev:1\)"
    ):
        events[0].elapsed_time(events[1])
    with torch.mydev.device(0):
        end = torch.mydev.Event(enable_timing=True)
        end.record()
    end.synchronize()
    assert events[0].elapsed_time(end) >= 0.0
