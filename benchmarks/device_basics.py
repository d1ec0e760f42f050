"""Device basics of mydev, measured against the CPU in the same run.

Three groups of measurements, each row a ratio mydev / CPU:

* copy bandwidth (GB/s): host->device, device->host (pageable and pinned),
  device->device on one device and between two devices; baseline: a CPU
  ``dst.copy_(src)`` of the same size;
* allocation latency (us): ``torch.empty`` + free through the caching
  allocator (and with the cache emptied before every allocation); baseline:
  ``torch.empty`` on the CPU;
* launch latency (us): an empty kernel (``torch.mydev._sleep(0)``), a launch +
  synchronize round trip and a one-element ``x + 1``; baselines: CPU
  ``torch.empty(0)`` and CPU ``x + 1``.

Every figure is the median of several repetitions after warm-up; the
repetitions of a mydev figure and of its CPU baseline alternate, so both see
the same machine load. Device work is timed up to the return of
``torch.mydev.synchronize()``, so asynchronous launches cannot flatter the
numbers. Nothing here asserts on time.

    python benchmarks/device_basics.py               # full run, about 1-2 minutes
    python benchmarks/device_basics.py --quick       # short run, under 20 s
    python benchmarks/device_basics.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

KiB = 1024
MiB = 1024 * KiB

Op = Callable[[], object]
Sync = Callable[[], None]


# ------------------------------------------------------------------ budget --


@dataclass(frozen=True)
class Budget:
    """How long each measurement runs.

    One repetition calls the operation ``calls`` times and then synchronizes;
    ``calls`` is chosen by doubling (which also warms up) so that a
    repetition lasts at least ``target_rep_seconds``. Then ``warmup_reps``
    repetitions are discarded and the median of ``reps`` is kept.
    """

    name: str
    warmup_reps: int
    reps: int
    target_rep_seconds: float
    max_calls_per_rep: int
    copy_sizes: Tuple[int, ...]
    alloc_sizes: Tuple[int, ...]


FULL = Budget(
    name="full",
    warmup_reps=2,
    reps=9,
    target_rep_seconds=0.04,
    max_calls_per_rep=100_000,
    copy_sizes=(4 * KiB, 1 * MiB, 16 * MiB, 256 * MiB),
    alloc_sizes=(512, 64 * KiB, 4 * MiB, 64 * MiB),
)
QUICK = Budget(
    name="quick",
    warmup_reps=1,
    reps=5,
    target_rep_seconds=0.01,
    max_calls_per_rep=100_000,
    copy_sizes=(4 * KiB, 1 * MiB, 16 * MiB),
    alloc_sizes=(512, 64 * KiB, 4 * MiB, 64 * MiB),
)


# ------------------------------------------------------------------ timing --


def no_sync() -> None:
    """Synchronizer for pure host work."""


def sync_devices(indices: Sequence[int]) -> Sync:
    """A synchronizer that waits for all work on the given mydev devices."""
    devices = tuple(indices)

    def sync() -> None:
        for index in devices:
            torch.mydev.synchronize(index)

    return sync


@dataclass(frozen=True)
class Timed:
    """An operation to time: ``op`` is called repeatedly, ``sync`` ends each
    repetition, and ``prepare`` (if any) runs untimed before every call."""

    op: Op
    sync: Sync = no_sync
    prepare: Optional[Op] = None


def _repetition(timed: Timed, calls: int) -> float:
    """Seconds per call of one repetition: ``calls`` calls, then ``sync()``."""
    clock = time.perf_counter
    op, prepare = timed.op, timed.prepare
    if prepare is None:
        start = clock()
        for _ in range(calls):
            op()
        timed.sync()
        return (clock() - start) / calls
    spent = 0.0
    for _ in range(calls):
        prepare()
        start = clock()
        op()
        spent += clock() - start
    start = clock()
    timed.sync()
    spent += clock() - start
    return spent / calls


def _calls_per_rep(timed: Timed, budget: Budget) -> int:
    """Doubles the number of calls until a repetition lasts long enough.

    The very first call is made apart: it may pay one-time costs (the first
    op through the device-kernel path takes the better part of a second)
    that would otherwise shrink the number of calls per repetition to one.
    """
    _repetition(timed, 1)
    calls = 1
    while calls < budget.max_calls_per_rep:
        start = time.perf_counter()
        _repetition(timed, calls)
        if time.perf_counter() - start >= budget.target_rep_seconds:
            break
        calls = min(2 * calls, budget.max_calls_per_rep)
    return calls


def compare(mydev: Timed, cpu: Timed, budget: Budget) -> Tuple[float, float]:
    """Median seconds per call of ``mydev`` and of its baseline ``cpu``.

    Their repetitions alternate (mydev, cpu, cpu, mydev, ...), so that both
    see the same load on a shared machine and the ratio stays meaningful
    when the absolute numbers drift.
    """
    pair = (mydev, cpu)
    calls = [_calls_per_rep(timed, budget) for timed in pair]
    samples: Tuple[List[float], List[float]] = ([], [])
    for rep in range(budget.warmup_reps + budget.reps):
        for i in (0, 1) if rep % 2 == 0 else (1, 0):
            seconds = _repetition(pair[i], calls[i])
            if rep >= budget.warmup_reps:
                samples[i].append(seconds)
    return statistics.median(samples[0]), statistics.median(samples[1])


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line of the table: a mydev figure, its CPU baseline, their ratio."""

    section: str
    what: str
    size: str
    unit: str
    higher_is_better: bool
    mydev: Optional[float]
    cpu: Optional[float]
    note: str = ""

    @property
    def ratio(self) -> Optional[float]:
        if self.mydev is None or self.cpu is None or self.cpu == 0:
            return None
        return self.mydev / self.cpu

    def reading(self) -> str:
        """The ratio in words: how many times faster or slower mydev is."""
        ratio = self.ratio
        if ratio is None or ratio == 0:
            return "n/a"
        speedup = ratio if self.higher_is_better else 1.0 / ratio
        if speedup >= 1.0:
            return f"{speedup:.2f}x faster"
        return f"{1.0 / speedup:.2f}x slower"

    def to_json(self) -> Dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "reading": self.reading()}


def format_size(nbytes: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def progress(message: str) -> None:
    print(f"  ... {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- tensors --


def host_tensor(nbytes: int, pinned: bool = False) -> torch.Tensor:
    """A touched (so page faults are not timed) host buffer of ``nbytes``."""
    tensor = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    tensor.fill_(1)
    return tensor


def device_tensor(nbytes: int, index: int) -> torch.Tensor:
    """A device buffer of ``nbytes`` on mydev:``index``, written once so its
    arena pages are resident before timing."""
    tensor = torch.empty(nbytes, dtype=torch.uint8, device=f"mydev:{index}")
    tensor.fill_(1)
    torch.mydev.synchronize(index)
    return tensor


# ------------------------------------------------------------------ copies --


@dataclass(frozen=True)
class CopyRoute:
    """``dst.copy_(src, non_blocking)`` between two buffers made by the
    factories; ``devices`` are synchronized at the end of each repetition."""

    name: str
    make_src: Callable[[int], torch.Tensor]
    make_dst: Callable[[int], torch.Tensor]
    non_blocking: bool
    devices: Tuple[int, ...]


def _pageable(nbytes: int) -> torch.Tensor:
    return host_tensor(nbytes, pinned=False)


def _pinned(nbytes: int) -> torch.Tensor:
    return host_tensor(nbytes, pinned=True)


def _on_device(index: int) -> Callable[[int], torch.Tensor]:
    return lambda nbytes: device_tensor(nbytes, index)


CPU_COPY = CopyRoute("CPU dst.copy_(src)", _pageable, _pageable, False, ())
DEVICE_COPIES = (
    CopyRoute("H2D pageable", _pageable, _on_device(0), False, (0,)),
    CopyRoute("H2D pinned, non_blocking", _pinned, _on_device(0), True, (0,)),
    CopyRoute("D2H pageable", _on_device(0), _pageable, False, (0,)),
    CopyRoute("D2H pinned, non_blocking", _on_device(0), _pinned, True, (0,)),
    CopyRoute("D2D mydev:0", _on_device(0), _on_device(0), False, (0,)),
    CopyRoute("D2D mydev:0 -> mydev:1", _on_device(0), _on_device(1), False, (0, 1)),
)


def _copy_timed(route: CopyRoute, nbytes: int) -> Timed:
    src = route.make_src(nbytes)
    dst = route.make_dst(nbytes)
    non_blocking = route.non_blocking
    return Timed(lambda: dst.copy_(src, non_blocking=non_blocking),
                 sync_devices(route.devices))


def copy_bandwidth(route: CopyRoute, nbytes: int, budget: Budget) -> Tuple[float, float]:
    """GB/s (1e9 bytes copied per second) of ``route`` and of the CPU copy."""
    seconds = compare(_copy_timed(route, nbytes), _copy_timed(CPU_COPY, nbytes), budget)
    return nbytes / seconds[0] / 1e9, nbytes / seconds[1] / 1e9


def copy_rows(budget: Budget, device_count: int) -> List[Row]:
    rows: List[Row] = []
    for nbytes in budget.copy_sizes:
        size = format_size(nbytes)
        progress(f"copies, {size}")
        for route in DEVICE_COPIES:
            row = Row(section="copy", what=route.name, size=size, unit="GB/s",
                      higher_is_better=True, mydev=None, cpu=None)
            if max(route.devices) < device_count:
                row.mydev, row.cpu = copy_bandwidth(route, nbytes, budget)
            else:
                row.note = f"needs {max(route.devices) + 1} devices"
            rows.append(row)
        torch.mydev.empty_cache()
    return rows


# ------------------------------------------------------------- allocation --


def _allocator(nbytes: int, device: str) -> Op:
    """Allocates and (the result being dropped at once) frees ``nbytes``."""
    return lambda: torch.empty(nbytes, dtype=torch.uint8, device=device)


def allocation_latency(nbytes: int, uncached: bool, budget: Budget) -> Tuple[float, float]:
    """Microseconds per ``torch.empty(nbytes)`` + free on mydev:0 and on the
    CPU. ``uncached`` empties the mydev cache (untimed) before every
    allocation, so that each one reaches the driver."""
    mydev = Timed(_allocator(nbytes, "mydev:0"), sync_devices((0,)),
                  torch.mydev.empty_cache if uncached else None)
    cpu = Timed(_allocator(nbytes, "cpu"))
    seconds = compare(mydev, cpu, budget)
    return seconds[0] * 1e6, seconds[1] * 1e6


def driver_mallocs_per_call(nbytes: int, uncached: bool, calls: int = 20) -> float:
    """How many times the allocator called the driver per allocation, from
    the allocator's own counters: tells whether a path was really (un)cached."""
    allocate = _allocator(nbytes, "mydev:0")
    allocate()  # leaves a cached block behind for the cached path
    before = torch.mydev.memory_stats(0)["num_device_alloc"]
    for _ in range(calls):
        if uncached:
            torch.mydev.empty_cache()
        allocate()
    return (torch.mydev.memory_stats(0)["num_device_alloc"] - before) / calls


def allocation_rows(budget: Budget) -> List[Row]:
    rows: List[Row] = []
    torch.mydev.empty_cache()
    for nbytes in budget.alloc_sizes:
        size = format_size(nbytes)
        progress(f"allocation, {size}")
        for what, uncached in (("empty + free, cached", False),
                               ("empty + free, uncached", True)):
            mydev, cpu = allocation_latency(nbytes, uncached, budget)
            mallocs = driver_mallocs_per_call(nbytes, uncached)
            rows.append(Row(section="alloc", what=what, size=size, unit="us",
                            higher_is_better=False, mydev=mydev, cpu=cpu,
                            note=f"driver mallocs/call {mallocs:.2f}"))
    torch.mydev.empty_cache()
    return rows


# ----------------------------------------------------------------- launch --


def _cpu_empty0() -> Timed:
    """The CPU's do-nothing op, ``torch.empty(0)``: one dispatcher round with
    no work, the baseline for launch overhead."""
    return Timed(lambda: torch.empty(0))


def empty_kernel_latency(budget: Budget) -> Tuple[float, float]:
    """Microseconds per ``_sleep(0)`` launch when many are queued before one
    synchronize, and per CPU ``torch.empty(0)``."""
    sleep = torch.mydev._sleep
    seconds = compare(Timed(lambda: sleep(0), sync_devices((0,))), _cpu_empty0(), budget)
    return seconds[0] * 1e6, seconds[1] * 1e6


def round_trip_latency(budget: Budget) -> Tuple[float, float]:
    """Microseconds per ``_sleep(0)`` launch followed at once by its
    synchronize, and per CPU ``torch.empty(0)``."""
    sleep = torch.mydev._sleep
    synchronize = torch.mydev.synchronize

    def launch_and_wait() -> None:
        sleep(0)
        synchronize(0)

    seconds = compare(Timed(launch_and_wait), _cpu_empty0(), budget)
    return seconds[0] * 1e6, seconds[1] * 1e6


def add_one_latency(budget: Budget) -> Tuple[float, float]:
    """Microseconds per ``x + 1`` on a one-element float tensor, mydev
    (many calls, then synchronize) and CPU."""
    on_device = torch.ones(1, device="mydev:0")
    on_cpu = torch.ones(1)
    seconds = compare(Timed(lambda: on_device + 1, sync_devices((0,))),
                      Timed(lambda: on_cpu + 1), budget)
    return seconds[0] * 1e6, seconds[1] * 1e6


LAUNCH_MEASUREMENTS: Tuple[Tuple[str, Callable[[Budget], Tuple[float, float]], str], ...] = (
    ("empty kernel, N launches + sync", empty_kernel_latency, "CPU: torch.empty(0)"),
    ("empty kernel, launch + sync", round_trip_latency, "CPU: torch.empty(0)"),
    ("x + 1, 1 element, N calls + sync", add_one_latency, "CPU: x + 1"),
)


def launch_rows(budget: Budget) -> List[Row]:
    progress("launch latency")
    rows: List[Row] = []
    for what, measure, note in LAUNCH_MEASUREMENTS:
        mydev, cpu = measure(budget)
        rows.append(Row(section="launch", what=what, size="-", unit="us",
                        higher_is_better=False, mydev=mydev, cpu=cpu, note=note))
    return rows


# ------------------------------------------------------------ environment --


def environment() -> Dict[str, Any]:
    count = torch.mydev.device_count()
    devices = []
    for index in range(count):
        props = torch.mydev.get_device_properties(index)
        devices.append(
            {
                "name": props.name,
                "total_memory_mib": props.total_memory // MiB,
                "compute_units": props.multi_processor_count,
                "capability": f"{props.major}.{props.minor}",
                "simd_width_bytes": props.simd_width_bytes,
            }
        )
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "mydev_device_count": count,
        "mydev_launch_blocking": torch.mydev.is_launch_blocking(),
        "mydev_devices": devices,
    }


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    "copy": "Copy bandwidth, GB/s (higher is better; ratio > 1: mydev faster). "
            "CPU baseline: dst.copy_(src) on the CPU, same size.",
    "alloc": "Allocation latency, us per torch.empty + free (lower is better; "
             "ratio < 1: mydev faster). CPU baseline: torch.empty on the CPU.",
    "launch": "Launch latency, us per call (lower is better; ratio < 1: mydev "
              "faster). Baseline named in the note.",
}
HEADERS = ("what", "size", "mydev", "CPU", "unit", "mydev/CPU", "better", "reading", "note")


def format_value(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.01:
        return f"{value:.2f}" if magnitude >= 1 else f"{value:.3f}"
    return f"{value:.2g}"


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.what,
        row.size,
        format_value(row.mydev),
        format_value(row.cpu),
        row.unit,
        format_value(row.ratio),
        "higher" if row.higher_is_better else "lower",
        row.reading(),
        row.note,
    )


def render_table(rows: Sequence[Row]) -> str:
    cells = [table_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in [HEADERS, *cells]) for i in range(len(HEADERS))]
    numeric = {2, 3, 5}

    def line(values: Sequence[str]) -> str:
        parts = (v.rjust(w) if i in numeric else v.ljust(w)
                 for i, (v, w) in enumerate(zip(values, widths)))
        return "  ".join(parts).rstrip()

    out: List[str] = []
    section = None
    for row, row_cells in zip(rows, cells):
        if row.section != section:
            section = row.section
            out += ["", SECTION_TITLES[section], line(HEADERS),
                    line(["-" * w for w in widths])]
        out.append(line(row_cells))
    return "\n".join(out)


def render_environment(env: Dict[str, Any], budget: Budget, seconds: float) -> str:
    lines = [
        "",
        "environment",
        f"  torch {env['torch']}, python {env['python']}, {env['platform']}",
        f"  cores: {env['usable_cores']} usable of {env['cpu_count']}, "
        f"torch threads {env['torch_threads']}, load average {env['load_average']}",
        f"  mydev devices: {env['mydev_device_count']}, "
        f"launch blocking: {env['mydev_launch_blocking']}",
    ]
    for index, dev in enumerate(env["mydev_devices"]):
        lines.append(
            f"  mydev:{index}: {dev['name']}, {dev['total_memory_mib']} MiB, "
            f"{dev['compute_units']} compute units, capability {dev['capability']}, "
            f"simd {dev['simd_width_bytes']} B"
        )
    lines.append(
        f"  run: {budget.name}, median of {budget.reps} reps after "
        f"{budget.warmup_reps} warm-up reps, >= {budget.target_rep_seconds * 1e3:.0f} ms "
        f"per rep, {seconds:.1f} s in all"
    )
    return "\n".join(lines)


def write_json(path: str, rows: Sequence[Row], env: Dict[str, Any], budget: Budget,
               seconds: float) -> None:
    payload = {
        "benchmark": "device_basics",
        "budget": asdict(budget),
        "seconds": seconds,
        "environment": env,
        "rows": [row.to_json() for row in rows],
    }
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


# -------------------------------------------------------------------- main --


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="short run: fewer repetitions, no 256 MiB copies")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the results (and environment) to PATH")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if not torch.mydev.is_available():
        print("mydev is not available (MYDEV_DEVICE_COUNT=0?)", file=sys.stderr)
        return 1
    budget = QUICK if args.quick else FULL
    started = time.perf_counter()
    rows = copy_rows(budget, torch.mydev.device_count())
    rows += allocation_rows(budget)
    rows += launch_rows(budget)
    seconds = time.perf_counter() - started
    env = environment()
    print(render_table(rows))
    print(render_environment(env, budget, seconds))
    if args.json:
        write_json(args.json, rows, env, budget, seconds)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
