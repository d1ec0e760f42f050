"""Measurement harness shared by the benchmark scripts in this folder.

Timing (warm-up, calibrated repetitions, medians, mydev and CPU repetitions
alternating), the run budget, the environment block, value formatting, the
table layout, progress messages, the JSON file and the command line common to
every script. Each script supplies its rows and how to print them.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, TypeVar

import torch

# core_latency.py sits next to this module; the insert lets the module be
# imported from elsewhere too (the tests import benchmarks.harness).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_latency import core_round_trip_ns  # noqa: E402

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
    repetition lasts at least ``target_rep_seconds``, up to
    ``max_calls_per_rep``. Then ``warmup_reps`` repetitions are discarded
    and the median of ``reps`` is kept. Scripts subclass it to add their own
    sizes and counts.
    """

    name: str
    warmup_reps: int
    reps: int
    target_rep_seconds: float
    max_calls_per_rep: int


BudgetT = TypeVar("BudgetT", bound=Budget)


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

    The very first call is made apart (by ``paired`` and ``median_seconds``):
    it may pay one-time costs (a new op's first pass through the
    device-kernel path, milliseconds since the C++ meta kernels; allocator
    growth, lazy initialisation) that would otherwise shrink the number of
    calls per repetition.
    """
    calls = 1
    while calls < budget.max_calls_per_rep:
        start = time.perf_counter()
        _repetition(timed, calls)
        if time.perf_counter() - start >= budget.target_rep_seconds:
            break
        calls = min(2 * calls, budget.max_calls_per_rep)
    return calls


@dataclass(frozen=True)
class Pairing:
    """Two operations timed with their repetitions alternating: the median
    seconds per call of each, and ``ratio``, the median of the repetitions'
    ratios subject / baseline, with its quartiles in ``spread``. Each
    repetition's ratio sets two measurements taken back to back against each
    other, so a load that moves during the run moves both sides of it; a
    ratio of the two medians mixes repetitions taken under different loads.
    A ``spread`` that contains a target says the run cannot tell the ratio
    from it."""

    subject: float
    baseline: float
    ratio: float
    spread: Tuple[float, float]


def paired(subject: Timed, baseline: Timed, budget: Budget, fixed_calls: Optional[int] = None) -> Pairing:
    """Times ``subject`` against ``baseline``. A repetition makes
    ``fixed_calls`` calls if given, else a number calibrated for each side.
    Their repetitions alternate (subject, baseline, baseline, subject, ...),
    so that both see the same load on a shared machine."""
    pair = (subject, baseline)
    for timed in pair:
        _repetition(timed, 1)  # the first call, apart: see _calls_per_rep
    if fixed_calls is None:
        calls = [_calls_per_rep(timed, budget) for timed in pair]
    else:
        calls = [fixed_calls, fixed_calls]
    samples: Tuple[List[float], List[float]] = ([], [])
    for rep in range(budget.warmup_reps + budget.reps):
        for i in (0, 1) if rep % 2 == 0 else (1, 0):
            seconds = _repetition(pair[i], calls[i])
            if rep >= budget.warmup_reps:
                samples[i].append(seconds)
    return pairing_of(*samples)


def pairing_of(subject: Sequence[float], baseline: Sequence[float]) -> Pairing:
    """The ``Pairing`` of two sides' seconds per call, repetition by
    repetition (``subject[i]`` was timed beside ``baseline[i]``)."""
    ratios = [a / b for a, b in zip(subject, baseline)]
    low, _, high = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    return Pairing(statistics.median(subject), statistics.median(baseline), statistics.median(ratios), (low, high))


def median_seconds(timed: Timed, budget: Budget) -> float:
    """Median seconds per call of ``timed`` alone, for a figure that cannot
    alternate with its baseline (one that must be taken before something
    happens in the process and the other after): the first call apart, the
    calibrated calls per repetition, warm-up repetitions, then the median."""
    _repetition(timed, 1)
    calls = _calls_per_rep(timed, budget)
    samples = [_repetition(timed, calls) for _ in range(budget.warmup_reps + budget.reps)]
    return statistics.median(samples[budget.warmup_reps :])


def mydev_over_cpu(mydev: Optional[float], cpu: Optional[float]) -> Optional[float]:
    """mydev / CPU, or None when either figure is missing or the CPU's is 0."""
    if mydev is None or cpu is None or cpu == 0:
        return None
    return mydev / cpu


# ---------------------------------------------------------- host memory --

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc accepts on 64-bit hosts.
_MMAP_THRESHOLD_MAX = 32 * MiB
_TRIM_THRESHOLD = 1024 * MiB


def _keep_freed_host_memory() -> str:
    """Has glibc keep freed host memory for the next allocation; returns
    how the host allocator is set, for the environment block.

    By default glibc returns the top of its heap to the system once more
    than twice its (adaptive) mmap threshold is free there, and serves
    blocks above that threshold by mmap. A CPU op whose output and scratch
    are several MiB (a [8, 64, 56, 56] convolution: 6.4 MiB each) then
    page-faults its memory in again on every call, or not, depending on
    the allocator's history in the process. On this 2-core VM host a fault
    costs about 2 us a page: the CPU's depthwise conv took 11-13 ms per call
    faulting and 1.4-1.6 ms not, so the same row read mydev/CPU 0.09 in one
    run and 1.22 in another. mydev's outputs come from its caching
    allocator, so the faults were a handicap of the baseline, not the
    device's speed. With both thresholds fixed, memory stays resident
    after warm-up on both sides (mydev kernels' host scratch too); blocks
    over 32 MiB, which glibc always maps, still fault on the CPU side."""
    path = ctypes.util.find_library("c")
    libc = ctypes.CDLL(path) if path else None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return "the C library's defaults (no mallopt)"
    if not (mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)):
        return "the C library's defaults (mallopt refused)"
    return (
        f"freed memory kept (glibc mmap threshold {_MMAP_THRESHOLD_MAX // MiB} MiB, "
        f"trim threshold {_TRIM_THRESHOLD // MiB} MiB)"
    )


HOST_ALLOCATOR = _keep_freed_host_memory()


# ------------------------------------------------------------ environment --


def environment(core_round_trips: Tuple[Optional[float], Optional[float]]) -> Dict[str, Any]:
    """The run's environment; ``core_round_trips``, the core-to-core round
    trip before and after the measurements (``core_latency.py``)."""
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
        "host_allocator": HOST_ALLOCATOR,
        "mydev_device_count": count,
        "mydev_launch_blocking": torch.mydev.is_launch_blocking(),
        "mydev_devices": devices,
        "core_round_trip_ns": list(core_round_trips),
    }


def _round_trip_text(ns: Optional[float]) -> str:
    return "not measured" if ns is None else f"{ns:.0f} ns"


def render_environment(env: Dict[str, Any], budget: Budget, seconds: float) -> str:
    lines = [
        "",
        "environment",
        f"  torch {env['torch']}, python {env['python']}, {env['platform']}",
        f"  cores: {env['usable_cores']} usable of {env['cpu_count']}, "
        f"torch threads {env['torch_threads']}, load average {env['load_average']}",
        f"  host allocator: {env['host_allocator']}",
        "  core-to-core round trip (benchmarks/core_round_trip.c): "
        + ", ".join(
            f"{_round_trip_text(ns)} {when}" for ns, when in zip(env["core_round_trip_ns"], ("before", "after"))
        ),
        f"  mydev devices: {env['mydev_device_count']}, launch blocking: {env['mydev_launch_blocking']}",
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


# ------------------------------------------------------------------ output --


class Row(Protocol):
    """What the harness needs of a script's table row."""

    section: str

    def to_json(self) -> Dict[str, Any]: ...


RowT = TypeVar("RowT", bound=Row)

# The columns every table gives a row's figures in (see figure_cells); all
# but the unit are numbers, right-aligned.
FIGURE_HEADERS = ("mydev", "CPU", "unit", "mydev/CPU")
NUMERIC_HEADERS = frozenset(FIGURE_HEADERS) - {"unit"}


def record_failure(row: Any, exc: BaseException) -> Any:
    """Marks ``row`` as failed with ``exc`` (a failing row must not end the
    run) and clears an asynchronous device error it may have left."""
    text = str(exc)
    row.error = f"{type(exc).__name__}: {text.splitlines()[0][:120] if text else ''}"
    try:
        torch.mydev.synchronize(0)
    except Exception:  # noqa: BLE001 (the error was recorded above)
        pass
    return row


def verdict_summary(rows: Sequence[Any]) -> str:
    """``summary: 8 PASS, 1 MISS, 0 ERROR of 9 rows`` from the rows' verdicts."""
    verdicts = [row.verdict for row in rows]
    return (
        f"summary: {verdicts.count('PASS')} PASS, {verdicts.count('MISS')} MISS, "
        f"{verdicts.count('ERROR')} ERROR of {len(rows)} rows"
    )


def report_entry(
    what: str,
    ratio: Optional[float],
    target: Optional[float],
    better: str,
    verdict: str,
    compares: str = "",
    spread: Optional[Tuple[float, float]] = None,
) -> Dict[str, Any]:
    """One ratio as ``python -m benchmarks`` collects it (benchmarks/README.md,
    "One report"): a row's JSON lists its ratios under ``"report"``.
    ``better`` is "lower" or "higher": which side of ``target`` passes;
    ``compares`` says what each side runs; ``spread``, the quartiles of a
    ratio taken per repetition (``Pairing.spread``)."""
    entry = {"what": what, "ratio": ratio, "target": target, "better": better, "verdict": verdict, "compares": compares}
    if spread is not None:
        entry["spread"] = list(spread)
    return entry


def progress(message: str) -> None:
    print(f"  ... {message}", file=sys.stderr, flush=True)


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


# The width of the widest ratio ``format_ratio`` writes with its quartiles,
# for the tables that right-align that column.
RATIO_WIDTH = len("0.999x (0.999-0.999)")


def format_ratio(value: Optional[float], spread: Optional[Tuple[float, float]] = None, suffix: str = "") -> str:
    """A ratio with the quartiles of its repetitions (``Pairing.spread``):
    ``1.02x (0.98-1.05)``."""
    if value is None:
        return "n/a"
    text = format_value(value) + suffix
    return text if spread is None else f"{text} ({format_value(spread[0])}-{format_value(spread[1])})"


def figure_cells(mydev: Optional[float], cpu: Optional[float], unit: str) -> Tuple[str, ...]:
    """A row's cells under FIGURE_HEADERS."""
    return (format_value(mydev), format_value(cpu), unit, format_value(mydev_over_cpu(mydev, cpu)))


def render_sectioned_table(
    rows: Sequence[RowT],
    cells: Callable[[RowT], Sequence[str]],
    headers: Sequence[str],
    section_titles: Mapping[str, str],
) -> str:
    """One block per section (its title, then the column heads), a line per
    row; ``cells`` gives a row's columns, in the order of ``headers``."""
    table = [cells(row) for row in rows]
    widths = [max(len(line[i]) for line in [headers, *table]) for i in range(len(headers))]
    numeric = {i for i, header in enumerate(headers) if header in NUMERIC_HEADERS}

    def line(values: Sequence[str]) -> str:
        parts = (v.rjust(w) if i in numeric else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))
        return "  ".join(parts).rstrip()

    out: List[str] = []
    section = None
    for row, row_cells in zip(rows, table):
        if row.section != section:
            section = row.section
            out += ["", section_titles[section], line(headers), line(["-" * w for w in widths])]
        out.append(line(row_cells))
    return "\n".join(out)


def write_json(
    path: str, benchmark: str, rows: Sequence[Row], env: Dict[str, Any], budget: Budget, seconds: float
) -> None:
    payload = {
        "benchmark": benchmark,
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


def run_benchmark(
    benchmark: str,
    doc: Optional[str],
    quick_help: str,
    budgets: Tuple[BudgetT, BudgetT],
    measure: Callable[[BudgetT], List[RowT]],
    render: Callable[[Sequence[RowT]], str],
) -> int:
    """The command line of a benchmark script (``doc``, its docstring, gives
    the help): ``measure`` the rows under the full or (``--quick``) the quick
    budget of ``budgets``, print the table ``render`` makes and the
    environment, and write the JSON file if asked to. Progress goes to
    stderr, the table to stdout."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help=quick_help)
    mode.add_argument("--full", action="store_true", help="full run (the default)")
    parser.add_argument("--json", metavar="PATH", help="also write the results (and environment) to PATH")
    args = parser.parse_args()
    if not torch.mydev.is_available():
        print("mydev is not available (MYDEV_DEVICE_COUNT=0?)", file=sys.stderr)
        return 1
    full, quick = budgets
    budget = quick if args.quick else full
    round_trip_before = core_round_trip_ns()
    started = time.perf_counter()
    rows = measure(budget)
    seconds = time.perf_counter() - started
    env = environment((round_trip_before, core_round_trip_ns()))
    print(render(rows))
    print(render_environment(env, budget, seconds))
    if args.json:
        write_json(args.json, benchmark, rows, env, budget, seconds)
        print(f"\nwrote {args.json}")
    return 0
