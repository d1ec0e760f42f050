"""Timing of candidate kernels on mydev for autotuning (max-autotune), with
mydev events on the current stream, like Triton's do_bench on CUDA."""

import statistics
from typing import Any, Callable

import torch
from torch._inductor.runtime import benchmarking

from .device_interface import DEVICE

_ESTIMATE_RUNS = 5


def benchmark_on_mydev(
    benchmarker: benchmarking.Benchmarker,
    fn: Callable[[], Any],
    *,
    warmup: int,
    rep: int,
    **_ignored: Any,
) -> float:
    """Median milliseconds of one ``fn()``; ``warmup`` and ``rep`` are time
    budgets in milliseconds."""
    fn()
    torch.mydev.synchronize()
    start = torch.mydev.Event(enable_timing=True)
    end = torch.mydev.Event(enable_timing=True)
    start.record()
    for _ in range(_ESTIMATE_RUNS):
        fn()
    end.record()
    end.synchronize()
    estimate_ms = max(start.elapsed_time(end) / _ESTIMATE_RUNS, 1e-3)
    for _ in range(max(1, int(warmup / estimate_ms))):
        fn()
    runs = max(1, min(1000, int(rep / estimate_ms)))
    starts = [torch.mydev.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.mydev.Event(enable_timing=True) for _ in range(runs)]
    for before, after in zip(starts, ends):
        before.record()
        fn()
        after.record()
    torch.mydev.synchronize()
    return statistics.median(b.elapsed_time(a) for b, a in zip(starts, ends))


def time_on_device(fn: Callable[[], Any], device: torch.device) -> float:
    """Median milliseconds of ``fn()`` (which launches on the current stream
    of ``device``), for autotuning's benchmark requests; errors the kernels
    raised surface here, not at a later synchronize."""
    with torch.mydev.device(device):
        milliseconds = benchmarking.benchmarker.benchmark(fn, device=device)
        torch.mydev.synchronize()
    return milliseconds


def register_benchmarker() -> None:
    benchmarking.register_benchmarker(DEVICE, benchmark_on_mydev, override=True)
