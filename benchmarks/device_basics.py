"""Device basics of mydev, measured against the CPU in the same run.

The groups of measurements, each row a ratio mydev / CPU:

* copy bandwidth (GB/s): host->device, device->host (pageable and pinned),
  device->device on one device and between two devices; baseline: a CPU
  ``dst.copy_(src)`` of the same size;
* allocation latency (us): ``torch.empty`` + free through the caching
  allocator (and with the cache emptied before every allocation); baseline:
  ``torch.empty`` on the CPU;
* launch latency (us): an empty kernel (``torch.mydev._sleep(0)``) and a
  launch + synchronize round trip, mydev only (the CPU launches nothing, so
  no ratio); a one-element ``x + 1``, many calls then one synchronize and
  each call synchronized, against the same ``x + 1`` on the CPU;
* the first kernel after a host pause (us): a 256x256 matmul, synchronized,
  issued after the host slept 1, 3 or 10 ms (a data-loading step, a
  ``.item()`` and some Python), against the same in a CPU-only process;
  information, no target (csrc/runtime/host_threads.h: the kernels'
  OpenMP team, kept between kernels and parked after those that used it,
  given back after 50 ms of idle);
  and the first kernels (a 1024x1024 matmul) 0.3 s after other processes
  that held every core for a second while the device idled have stopped
  (information, no target: the idle executor's load measure);
* CPU code beside an idle device (ms): a small CPU training step after a
  mydev kernel has run parallel loops and the device has been idle for
  100 ms, against the same step before any mydev kernel ran, both in one
  fresh interpreter, in several interpreters (target: at most 1.1x;
  csrc/runtime/host_threads.h says why it was 3.5x).

The repetitions of a mydev figure and of its CPU baseline alternate, so
both see the same machine load. Every figure is the median of its
repetitions after warm-up; the ratio is the median of the repetitions'
ratios, with their quartiles in brackets (``harness.paired``). The
idle-device row's two sides cannot alternate, so its repetition is a fresh
interpreter, which times both. Device work is timed
up to the return of ``torch.mydev.synchronize()``, so asynchronous launches
cannot flatter the numbers. Nothing here asserts on time.

    python benchmarks/device_basics.py               # full run, about 1-2 minutes
    python benchmarks/device_basics.py --quick       # short run, under 20 s
    python benchmarks/device_basics.py --json out.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

# harness.py sits next to this script; the insert lets the script be imported
# from elsewhere too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402
    FIGURE_HEADERS,
    Budget,
    KiB,
    MiB,
    Op,
    Pairing,
    Timed,
    format_ratio,
    format_value,
    median_seconds,
    paired,
    pairing_of,
    progress,
    render_sectioned_table,
    report_entry,
    run_benchmark,
    sync_devices,
)

# ------------------------------------------------------------------ budget --


@dataclass(frozen=True)
class BasicsBudget(Budget):
    """The harness's budget plus the sizes to copy and to allocate, and the
    number of fresh interpreters that time the CPU beside an idle device."""

    copy_sizes: Tuple[int, ...]
    alloc_sizes: Tuple[int, ...]
    idle_device_processes: int


FULL = BasicsBudget(
    name="full",
    warmup_reps=2,
    reps=9,
    target_rep_seconds=0.04,
    max_calls_per_rep=100_000,
    copy_sizes=(4 * KiB, 1 * MiB, 16 * MiB, 256 * MiB),
    alloc_sizes=(512, 64 * KiB, 4 * MiB, 64 * MiB),
    idle_device_processes=9,
)
QUICK = replace(
    FULL,
    name="quick",
    warmup_reps=1,
    reps=5,
    target_rep_seconds=0.01,
    copy_sizes=(4 * KiB, 1 * MiB, 16 * MiB),
    idle_device_processes=5,
)


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line of the table: a mydev figure and its CPU baseline (medians),
    their ratio mydev / CPU in ``unit`` (the median of the repetitions'
    ratios, with its quartiles in ``spread``)."""

    section: str
    what: str
    size: str
    unit: str
    higher_is_better: bool
    mydev: Optional[float] = None
    cpu: Optional[float] = None
    ratio: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None
    note: str = ""
    target: Optional[float] = None  # the ratio's bound, on the side ``higher_is_better`` says

    @property
    def verdict(self) -> str:
        if self.target is None or self.ratio is None:
            return "-"
        passed = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
        return "PASS" if passed else "MISS"

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
        entry = report_entry(
            self.what if self.size == "-" else f"{self.what} {self.size}",
            self.ratio,
            self.target,
            "higher" if self.higher_is_better else "lower",
            self.verdict,
            self.note or "the same operation on mydev and CPU",
            self.spread,
        )
        return {**asdict(self), "reading": self.reading(), "report": [entry]}


def format_size(nbytes: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


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
    return Timed(lambda: dst.copy_(src, non_blocking=non_blocking), sync_devices(route.devices))


def measure_copy(row: Row, route: CopyRoute, nbytes: int, budget: BasicsBudget) -> None:
    """Fills ``row`` with the GB/s (1e9 bytes copied per second) of ``route``
    and of the CPU copy, and their ratio."""
    # The CPU copy is the subject: a repetition's CPU seconds / mydev seconds
    # is mydev's bandwidth / the CPU's, the ratio a GB/s row reports.
    pairing = paired(_copy_timed(CPU_COPY, nbytes), _copy_timed(route, nbytes), budget)
    row.mydev, row.cpu = nbytes / pairing.baseline / 1e9, nbytes / pairing.subject / 1e9
    row.ratio, row.spread = pairing.ratio, pairing.spread


def copy_rows(budget: BasicsBudget, device_count: int) -> List[Row]:
    rows: List[Row] = []
    for nbytes in budget.copy_sizes:
        size = format_size(nbytes)
        progress(f"copies, {size}")
        for route in DEVICE_COPIES:
            row = Row(section="copy", what=route.name, size=size, unit="GB/s", higher_is_better=True)
            if max(route.devices) < device_count:
                measure_copy(row, route, nbytes, budget)
            else:
                row.note = f"needs {max(route.devices) + 1} devices"
            rows.append(row)
        torch.mydev.empty_cache()
    return rows


# ------------------------------------------------------------- allocation --


def _allocator(nbytes: int, device: str) -> Op:
    """Allocates and (the result being dropped at once) frees ``nbytes``."""
    return lambda: torch.empty(nbytes, dtype=torch.uint8, device=device)


def with_latency(row: Row, pairing: Pairing, per_second: float = 1e6) -> Row:
    """``row`` with the time per call (in 1 / ``per_second`` s: microseconds
    unless said) and the ratio of ``pairing``, whose subject is mydev."""
    row.mydev, row.cpu = pairing.subject * per_second, pairing.baseline * per_second
    row.ratio, row.spread = pairing.ratio, pairing.spread
    return row


def allocation_latency(nbytes: int, uncached: bool, budget: Budget) -> Pairing:
    """``torch.empty(nbytes)`` + free on mydev:0 against the CPU.
    ``uncached`` empties the mydev cache (untimed) before every allocation,
    so that each one reaches the driver."""
    mydev = Timed(_allocator(nbytes, "mydev:0"), sync_devices((0,)), torch.mydev.empty_cache if uncached else None)
    return paired(mydev, Timed(_allocator(nbytes, "cpu")), budget)


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


def allocation_rows(budget: BasicsBudget) -> List[Row]:
    rows: List[Row] = []
    torch.mydev.empty_cache()
    for nbytes in budget.alloc_sizes:
        size = format_size(nbytes)
        progress(f"allocation, {size}")
        for what, uncached in (("empty + free, cached", False), ("empty + free, uncached", True)):
            pairing = allocation_latency(nbytes, uncached, budget)
            mallocs = driver_mallocs_per_call(nbytes, uncached)
            note = f"driver mallocs/call {mallocs:.2f}"
            row = Row(section="alloc", what=what, size=size, unit="us", higher_is_better=False, note=note)
            rows.append(with_latency(row, pairing))
    torch.mydev.empty_cache()
    return rows


# ----------------------------------------------------------------- launch --


def empty_kernel() -> Tuple[Timed, Optional[Timed]]:
    """``_sleep(0)`` launches, many queued before one synchronize. The CPU
    launches nothing, so there is no CPU side: the ``x + 1`` rows give the
    same work on both sides."""
    sleep = torch.mydev._sleep
    return Timed(lambda: sleep(0), sync_devices((0,))), None


def round_trip() -> Tuple[Timed, Optional[Timed]]:
    """``_sleep(0)`` launches, each followed at once by its synchronize (no
    CPU side, as above)."""
    sleep = torch.mydev._sleep
    synchronize = torch.mydev.synchronize

    def launch_and_wait() -> None:
        sleep(0)
        synchronize(0)

    return Timed(launch_and_wait), None


def add_one() -> Tuple[Timed, Optional[Timed]]:
    """``x + 1`` on a one-element float tensor, mydev (many calls, then
    synchronize) and CPU."""
    on_device = torch.ones(1, device="mydev:0")
    on_cpu = torch.ones(1)
    return Timed(lambda: on_device + 1, sync_devices((0,))), Timed(lambda: on_cpu + 1)


def add_one_and_wait() -> Tuple[Timed, Optional[Timed]]:
    """``x + 1`` whose result is ready when the call returns: on mydev the
    launch and its synchronize, on the CPU the op."""
    on_device = torch.ones(1, device="mydev:0")
    on_cpu = torch.ones(1)
    synchronize = torch.mydev.synchronize

    def add_and_wait() -> None:
        on_device + 1
        synchronize(0)

    return Timed(add_and_wait), Timed(lambda: on_cpu + 1)


# What each row times: its mydev side and its CPU side, if it has one.
LAUNCH_MEASUREMENTS: Tuple[Tuple[str, Callable[[], Tuple[Timed, Optional[Timed]]], str], ...] = (
    ("empty kernel, N launches + sync", empty_kernel, "mydev only: the CPU has no launch"),
    ("empty kernel, launch + sync", round_trip, "mydev only: the CPU has no launch"),
    ("x + 1, 1 element, N calls + sync", add_one, "both: x + 1, results ready after the sync"),
    ("x + 1, 1 element, each call + sync", add_one_and_wait, "both: x + 1, each result ready on return"),
)


def launch_rows(budget: Budget) -> List[Row]:
    progress("launch latency")
    rows: List[Row] = []
    for what, sides, note in LAUNCH_MEASUREMENTS:
        row = Row(section="launch", what=what, size="-", unit="us", higher_is_better=False, note=note)
        mydev, cpu = sides()
        if cpu is None:
            row.mydev = median_seconds(mydev, budget) * 1e6
        else:
            with_latency(row, paired(mydev, cpu, budget))
        rows.append(row)
    return rows


# Pauses of the host before a kernel, all shorter than an idle executor
# keeps its team (host_threads.h): a 2 ms release made the last two cost
# milliseconds.
PAUSES_MS = (1, 3, 10)
PAUSE_CALLS = 31

# Each side in a fresh interpreter: in one process, a mydev launch gives back
# the launching thread's OpenMP team (host_threads.h), which the CPU's next
# parallel kernel would have to start again, so the CPU figure would not be a
# CPU-only program's. Prints the median seconds per call for each pause.
_AFTER_PAUSE = """
import json, statistics, sys, time
import torch

device, pauses, calls = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
sync = torch.mydev.synchronize if device == "mydev" else (lambda: None)
a = torch.randn(256, 256, device=device)
for _ in range(5):
    a @ a
sync()
medians = []
for pause_ms in pauses:
    seconds = []
    for _ in range(calls):
        time.sleep(pause_ms / 1e3)
        start = time.perf_counter()
        a @ a
        sync()
        seconds.append(time.perf_counter() - start)
    medians.append(statistics.median(seconds))
print(json.dumps(medians))
"""


def _fresh_interpreter_stdout(script: str, *args: str) -> str:
    """What ``script`` (one of this module's scripts) prints, run with
    ``args`` in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return result.stdout


def _medians_after_pauses(device: str) -> List[float]:
    return json.loads(_fresh_interpreter_stdout(_AFTER_PAUSE, device, json.dumps(PAUSES_MS), str(PAUSE_CALLS)))


def _pause_row(what: str, mydev_s: float, cpu_s: float, how: str) -> Row:
    """A row of the "pause" section from the two sides' seconds per call,
    each measured in a fresh interpreter of its own."""
    return Row(
        section="pause",
        what=what,
        size="-",
        unit="us",
        higher_is_better=False,
        mydev=mydev_s * 1e6,
        cpu=cpu_s * 1e6,
        ratio=mydev_s / cpu_s,
        note=f"{how}; each side in a fresh interpreter of its own",
    )


def after_pause_rows() -> List[Row]:
    progress("first kernel after a host pause")
    mydev, cpu = _medians_after_pauses("mydev"), _medians_after_pauses("cpu")
    return [
        _pause_row(
            f"256x256 matmul after a {pause_ms} ms pause",
            mydev_s,
            cpu_s,
            f"median of {PAUSE_CALLS} calls, each synchronized after the host slept",
        )
        for pause_ms, mydev_s, cpu_s in zip(PAUSES_MS, mydev, cpu)
    ]


# Other processes hold every core while the device idles, then stop: the
# first kernels after are timed 0.3 s later. An executor that measured the
# load only at kernels sized their team from the whole second's average, a
# team of one on the 2-core host (host_threads.h). Each side in a fresh
# interpreter, as above. Prints the median seconds per call.
LOAD_GONE_CALLS = 5
_AFTER_LOAD_WENT_AWAY = """
import os, statistics, subprocess, sys, time
import torch

device, calls = sys.argv[1], int(sys.argv[2])
sync = torch.mydev.synchronize if device == "mydev" else (lambda: None)
a = torch.randn(1024, 1024, device=device)
for _ in range(3):
    a @ a
sync()
spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count())]
try:
    time.sleep(1.0)
finally:
    for spinner in spinners:
        spinner.kill()
        spinner.wait()
time.sleep(0.3)
seconds = []
for _ in range(calls):
    start = time.perf_counter()
    a @ a
    sync()
    seconds.append(time.perf_counter() - start)
print(statistics.median(seconds))
"""


def after_load_went_away_row() -> Row:
    progress("first kernels after other processes' load went away")
    mydev, cpu = (
        float(_fresh_interpreter_stdout(_AFTER_LOAD_WENT_AWAY, device, str(LOAD_GONE_CALLS)))
        for device in ("mydev", "cpu")
    )
    return _pause_row(
        "1024x1024 matmul, 0.3 s after other processes held every core for 1 s",
        mydev,
        cpu,
        f"median of the first {LOAD_GONE_CALLS} calls, synchronized, after the device idled beside the load",
    )


# The measurement runs in a fresh interpreter: the "before" figure needs a
# process in which no mydev kernel has started OpenMP threads yet. It times
# with the harness, whose folder and budget it is given.
_BESIDE_IDLE_DEVICE = """
import json, sys, time
import torch
from torch import nn

sys.path.insert(0, sys.argv[1])
from harness import Budget, Timed, median_seconds

budget = Budget(**json.loads(sys.argv[2]))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32))
x = torch.randn(64, 32)
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=True)

def step():
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)

before = median_seconds(Timed(step), budget)
a = torch.randn(512, 512, device="mydev")
(a @ a).sum().item()  # a kernel with parallel loops, then the device idles
time.sleep(0.1)  # longer than an idle executor keeps its team (50 ms)
print(median_seconds(Timed(step), budget), before)
"""


def cpu_beside_idle_device_rows(budget: BasicsBudget) -> List[Row]:
    progress("CPU code beside an idle device")
    befores, afters = [], []
    for _ in range(budget.idle_device_processes):
        printed = _fresh_interpreter_stdout(
            _BESIDE_IDLE_DEVICE,
            os.path.dirname(os.path.abspath(__file__)),
            json.dumps({f.name: getattr(budget, f.name) for f in fields(Budget)}),
        )
        after, before = (float(v) for v in printed.split())
        afters.append(after)
        befores.append(before)
    # "before" must be timed before any mydev kernel ran in the process and
    # "after" after one, so their repetitions cannot alternate; a process is
    # the repetition instead: its ratio sets two figures of one interpreter
    # against each other (the step's time moves by a third from one
    # interpreter to the next on a 2-core host, more than the effect measured).
    row = Row(
        section="host",
        what="CPU training step, small MLP",
        size="-",
        unit="ms",
        higher_is_better=False,
        note="both CPU: after a mydev kernel, device idle / before any mydev kernel, per fresh interpreter",
        target=1.1,
    )
    return [with_latency(row, pairing_of(afters, befores), per_second=1e3)]


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    "copy": "Copy bandwidth, GB/s (higher is better; ratio > 1: mydev faster). "
    "CPU baseline: dst.copy_(src) on the CPU, same size.",
    "alloc": "Allocation latency, us per torch.empty + free (lower is better; "
    "ratio < 1: mydev faster). CPU baseline: torch.empty on the CPU.",
    "launch": "Launch latency, us per call (lower is better; ratio < 1: mydev faster). The note says what each side runs.",
    "pause": "First kernel after a host pause, us per call (lower is better; information, no target): "
    "the same call after the same pause, mydev and the CPU each in a process of its own.",
    "host": "CPU code beside an idle device, ms per step (lower is better; target <= 1.1): the same CPU work, "
    "in one fresh process, after and before mydev ran a parallel kernel.",
}
HEADERS = ("what", "size", *FIGURE_HEADERS, "better", "reading", "note")


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.what,
        row.size,
        format_value(row.mydev),
        format_value(row.cpu),
        row.unit,
        format_ratio(row.ratio, row.spread),
        "higher" if row.higher_is_better else "lower",
        row.reading(),
        row.note,
    )


def render_table(rows: Sequence[Row]) -> str:
    return render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES)


# -------------------------------------------------------------------- main --


def measure(budget: BasicsBudget) -> List[Row]:
    rows = copy_rows(budget, torch.mydev.device_count())
    rows += allocation_rows(budget)
    rows += launch_rows(budget)
    rows += after_pause_rows()
    rows.append(after_load_went_away_row())
    rows += cpu_beside_idle_device_rows(budget)
    return rows


if __name__ == "__main__":
    sys.exit(
        run_benchmark(
            "device_basics",
            __doc__,
            "short run: fewer repetitions, no 256 MiB copies",
            (FULL, QUICK),
            measure,
            render_table,
        )
    )
