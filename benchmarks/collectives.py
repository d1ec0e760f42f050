"""Collective bus bandwidth of myccl (mydev) against gloo (CPU) in the same run.

Each row times one collective at one message size, with 2 or 4 processes on
this host, once through the ``myccl`` backend on mydev float32 tensors and
once through ``gloo`` on CPU float32 tensors, in the same process group
(``"mydev:myccl,cpu:gloo"``), and prints both bus bandwidths and their ratio
myccl / gloo (higher is better):

* ``all_reduce`` (SUM): busbw = size * 2 * (n - 1) / n / time;
* ``all_gather_into_tensor``: busbw = size * (n - 1) / n / time, size = the
  full output (n times the input);
* ``reduce_scatter_tensor`` (SUM): busbw = size * (n - 1) / n / time, size =
  the full input (n times the output).

These are the nccl-tests definitions (GB/s = 10^9 bytes per second), with
``size`` in the ``size`` column. Sizes 4 KiB, 64 KiB, 1 MiB, 16 MiB, 64 MiB
and 256 MiB (``--quick``: up to 16 MiB).

The cross-host path: each row also times myccl over gloo's TCP transport
(``MYCCL_TRANSPORT=gloo``, the path ranks on different hosts take), in a
second set of rank processes per world size, since every rank of a group
must use the same transport. Those processes time gloo on CPU tensors too,
alternating with it as above, and the row prints that path's bandwidth
("x-host"), the gloo figure taken alongside it ("its gloo") and their ratio
("x-host/gloo"). It has no target: all_reduce of float32 SUM (the benchmarked
case) runs gloo's own ring all-reduce on the host views and should be on par
with gloo; all_gather only moves bytes; reduce_scatter reduces in rank order
itself (see gloo_transport_backend.h). The ratio of two figures taken in separate processes
at different times would measure the machine's load as much as the backends,
hence the second gloo figure.

Targets (from the collectives performance issue), for the shared-memory path
only: myccl at least 3x gloo's bandwidth from 16 MiB up, and no slower than
gloo (ratio >= 1) for small messages (<= 64 KiB). 1 MiB has no target ("-").
Nothing here asserts on time; PASS / MISS only compares the measured ratio
with the target.

How it measures: the parent starts one fresh interpreter per rank (this file
with ``--worker``); every rank runs the same rows. Per row and backend, one
first call apart, then repetitions of N calls, each starting on a gloo
barrier and, for myccl, ending with ``torch.mydev.synchronize()`` after the
last call (myccl's ``wait()`` does not block the host; gloo is synchronous).
N is found by doubling, as in harness.py, until a repetition lasts at least
100 ms (30 ms quick) on the slowest rank, so 256 MiB rows make one call per
repetition; the ranks agree on N through a gloo all_reduce. The myccl and
gloo repetitions alternate (myccl, gloo, gloo, myccl, ...) as in
harness.paired(), so both see the same load. A repetition's time is its
slowest rank's (the barrier lines the ranks' repetitions up); a row's
figures are the medians of those, and its ratio is the median of the
repetitions' ratios, with their quartiles in brackets. Every
rank has an ``init_process_group`` timeout and the parent kills all ranks of
a set that has not finished within its time limit (those rows then show
ERROR, or an "x-host:" note for the cross-host set, whose failures leave the
verdict alone), so the benchmark cannot hang. Ranks end with ``os._exit(0)``
(see tests/test_distributed.py: gloo can abort the interpreter at exit).

Which myccl algorithm runs: on shared memory, messages below 256 KiB are
staged through the shared segment's slots, larger ones read the peers'
device memory directly (peer-memory handles, no staging copy); see
csrc/distributed/shm_transport_backend.h. Cross-host, see
csrc/distributed/gloo_transport_backend.h. The simulator runs every rank's
device streams on host threads, so with 4 ranks on a 2-core machine ranks
compete for cores; gloo runs on the same cores.

    python benchmarks/collectives.py               # full run, about 4-5 minutes (2-core host)
    python benchmarks/collectives.py --quick       # short run, about 50 s
    python benchmarks/collectives.py --json out.json
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
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
    Pairing,
    format_ratio,
    format_value,
    pairing_of,
    progress,
    render_sectioned_table,
    report_entry,
    run_benchmark,
    verdict_summary,
)

# ------------------------------------------------------------------ budget --


@dataclass(frozen=True)
class CollectiveBudget(Budget):
    """The harness's budget plus the sizes, the world sizes and the time
    limit of one world size's ranks. The calls per repetition are found by
    doubling as in the harness, each rank's decision taken on the slowest
    rank's time so that all ranks make the same number of calls."""

    sizes: Tuple[int, ...]
    world_sizes: Tuple[int, ...]
    world_timeout_s: float


FULL = CollectiveBudget(
    name="full",
    warmup_reps=1,
    reps=5,
    target_rep_seconds=0.1,
    max_calls_per_rep=10_000,
    sizes=(4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB),
    world_sizes=(2, 4),
    world_timeout_s=170,
)
QUICK = CollectiveBudget(
    name="quick",
    warmup_reps=1,
    reps=3,
    target_rep_seconds=0.03,
    max_calls_per_rep=10_000,
    sizes=(4 * KiB, 64 * KiB, MiB, 16 * MiB),
    world_sizes=(2, 4),
    world_timeout_s=45,
)

OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
INIT_TIMEOUT_S = 60


def bus_factor(op: str, world: int) -> float:
    return (2.0 if op == "all_reduce" else 1.0) * (world - 1) / world


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line: myccl and gloo bus bandwidth (GB/s) for one collective, and
    myccl's cross-host path with the gloo figure measured alongside it. Each
    ratio is myccl / gloo bandwidth, the median of the repetitions' ratios,
    with its quartiles in its spread."""

    section: str
    what: str
    size: int
    world: int
    calls: Tuple[int, int] = (0, 0)  # calls per repetition: myccl, gloo
    unit: str = "GB/s"
    mydev: Optional[float] = None  # myccl busbw (shared memory)
    cpu: Optional[float] = None  # gloo busbw
    mydev_us: Optional[float] = None
    cpu_us: Optional[float] = None
    ratio: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None
    error: str = ""
    # myccl with MYCCL_TRANSPORT=gloo, in rank processes of its own, and gloo
    # timed alternately with it in those processes: a ratio of two figures
    # taken under the same load, as for the shared-memory path.
    cross_host_calls: Tuple[int, int] = (0, 0)
    cross_host: Optional[float] = None
    cross_host_gloo: Optional[float] = None
    cross_host_us: Optional[float] = None
    cross_host_gloo_us: Optional[float] = None
    cross_host_ratio: Optional[float] = None
    cross_host_spread: Optional[Tuple[float, float]] = None
    cross_host_error: str = ""

    @property
    def target(self) -> Optional[float]:
        if self.size >= 16 * MiB:
            return 3.0
        if self.size <= 64 * KiB:
            return 1.0
        return None

    @property
    def verdict(self) -> str:
        """Of the shared-memory path only: the cross-host one has no target."""
        if self.error or self.ratio is None:
            return "ERROR"
        if self.target is None:
            return "-"
        return "PASS" if self.ratio >= self.target else "MISS"

    def to_json(self) -> Dict[str, Any]:
        return {
            **asdict(self),
            "target": self.target,
            "ratio": self.ratio,
            "verdict": self.verdict,
            "report": [
                report_entry(
                    f"{self.what} {size_text(self.size)}, {self.world} ranks",
                    self.ratio,
                    self.target,
                    "higher",
                    self.verdict,
                    "myccl over shared memory against gloo, same collective",
                    self.spread,
                )
            ],
        }


def size_text(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB"


# ------------------------------------------------------------------ worker --


def _make_op(op: str, size: int, world: int, device: str) -> Callable[[], None]:
    import torch.distributed as dist

    numel = size // 4
    if op == "all_reduce":
        t = torch.ones(numel, device=device)
        return lambda: dist.all_reduce(t, op=dist.ReduceOp.SUM)
    if op == "all_gather_into_tensor":
        out = torch.empty(numel, device=device)
        inp = torch.ones(numel // world, device=device)
        out.fill_(0)
        return lambda: dist.all_gather_into_tensor(out, inp)
    out = torch.empty(numel // world, device=device)
    inp = torch.ones(numel, device=device)
    out.fill_(0)
    return lambda: dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)


def _worker(rank: int, world: int, budget: CollectiveBudget) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "mydev:myccl,cpu:gloo", rank=rank, world_size=world, timeout=timedelta(seconds=INIT_TIMEOUT_S)
    )
    token = torch.zeros(1)

    def barrier() -> None:
        dist.all_reduce(token)  # gloo, synchronous

    def mydev_sync() -> None:
        torch.mydev.synchronize()

    def calibrate(rep: Callable[[int], float]) -> int:
        """Doubles the calls per repetition until a repetition lasts at least
        ``target_rep_seconds`` on the slowest rank (agreed on through gloo,
        so that all ranks make the same number of calls)."""
        calls = 1
        while calls < budget.max_calls_per_rep:
            elapsed = torch.tensor([rep(calls) * calls])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if elapsed.item() >= budget.target_rep_seconds:
                break
            calls = min(2 * calls, budget.max_calls_per_rep)
        return calls

    for size in budget.sizes:
        for op in OPS:
            result: Dict[str, Any] = {"op": op, "size": size}
            sides: List[Tuple[Callable[[], None], Callable[[], None]]] = []
            try:
                for device, sync in (("mydev", mydev_sync), ("cpu", lambda: None)):
                    fn = _make_op(op, size, world, device)
                    sync()
                    fn()  # the first call, apart (one-time costs)
                    sync()
                    sides.append((fn, sync))

                def repetition(i: int, calls: int, sides=sides) -> float:
                    fn, sync = sides[i]
                    barrier()
                    start = time.perf_counter()
                    for _ in range(calls):
                        fn()
                    sync()
                    return (time.perf_counter() - start) / calls

                calls = [calibrate(lambda n, i=i: repetition(i, n)) for i in (0, 1)]
                samples: Tuple[List[float], List[float]] = ([], [])
                for rep in range(budget.warmup_reps + budget.reps):
                    for i in (0, 1) if rep % 2 == 0 else (1, 0):
                        seconds = repetition(i, calls[i])
                        if rep >= budget.warmup_reps:
                            samples[i].append(seconds)
                result["calls"] = calls
                result["mydev_reps_s"], result["cpu_reps_s"] = samples
            except Exception as exc:  # noqa: BLE001 (a failing row must not end the run)
                text = str(exc)
                result["error"] = f"{type(exc).__name__}: {text.splitlines()[0][:120] if text else ''}"
            sides.clear()  # free the buffers before the next row
            torch.mydev.synchronize()
            torch.mydev.empty_cache()
            print("RESULT " + json.dumps(result), flush=True)
            if "error" in result:
                break  # the group may be unusable now; later rows of this world size fail
        else:
            continue
        break
    print("WORKER DONE", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ------------------------------------------------------------------ parent --


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The MYCCL_TRANSPORT of each set of rank processes: set explicitly for both,
# so that a value in the caller's environment cannot swap the two paths.
SHARED_MEMORY = "shm"
CROSS_HOST = "gloo"


@dataclass
class Outcome:
    """One row as one set of rank processes measured it: the calls per
    repetition, myccl and gloo timed (``times``, with gloo as its subject, so
    that a repetition's ratio gloo / myccl seconds is myccl's bandwidth over
    gloo's), or why there are none."""

    calls: Tuple[int, int] = (0, 0)
    times: Optional[Pairing] = None
    error: str = ""


def _slowest_rank(items: Sequence[Dict[str, Any]]) -> Pairing:
    """The ranks' results for one row as one pairing: a repetition's time is
    the slowest rank's, as a collective is done only when every rank is."""
    myccl = [max(rep) for rep in zip(*(item["mydev_reps_s"] for item in items))]
    gloo = [max(rep) for rep in zip(*(item["cpu_reps_s"] for item in items))]
    return pairing_of(gloo, myccl)


def _run_ranks(world: int, budget: CollectiveBudget, transport: str) -> Dict[Tuple[str, int], Outcome]:
    """Starts ``world`` rank processes with ``MYCCL_TRANSPORT=transport``
    and collects every row's outcome, keyed by (collective, size)."""
    progress(f"{world} processes, MYCCL_TRANSPORT={transport}: sizes {', '.join(size_text(s) for s in budget.sizes)}")
    port = _free_port()
    env = dict(
        os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1", MYCCL_TRANSPORT=transport
    )
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", str(rank), str(world), budget.name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    started = time.monotonic()
    deadline = started + budget.world_timeout_s
    outputs: List[Tuple[str, str]] = []
    timed_out = False
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            out, err = proc.communicate()
        outputs.append((out, err))
    if timed_out:
        for proc in procs:  # stragglers the loop above has already waited for are dead
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # Shows how close a set came to its time limit.
    progress(
        f"{world} processes, MYCCL_TRANSPORT={transport}: {time.monotonic() - started:.0f} s "
        f"(limit {budget.world_timeout_s:.0f} s)"
    )

    per_rank: List[Dict[Tuple[str, int], Dict[str, Any]]] = []
    for out, _ in outputs:
        results = {}
        for line in out.splitlines():
            if line.startswith("RESULT "):
                item = json.loads(line[len("RESULT ") :])
                results[(item["op"], item["size"])] = item
        per_rank.append(results)

    outcomes: Dict[Tuple[str, int], Outcome] = {}
    for size in budget.sizes:
        for op in OPS:
            items = [r.get((op, size)) for r in per_rank]
            errors = [i["error"] for i in items if i and "error" in i]
            if errors:
                outcome = Outcome(error=errors[0])
            elif any(i is None for i in items):
                if timed_out:
                    outcome = Outcome(error=f"not finished within {budget.world_timeout_s:.0f} s (ranks killed)")
                else:
                    codes = [p.returncode for p in procs]
                    tail = next((e.strip().splitlines()[-1] for o, e in outputs if e.strip()), "")
                    outcome = Outcome(error=f"no result (exit codes {codes}) {tail[:100]}")
            else:
                outcome = Outcome(calls=tuple(items[0]["calls"]), times=_slowest_rank(items))
            outcomes[(op, size)] = outcome
    return outcomes


def measure_all(budget: CollectiveBudget) -> List[Row]:
    rows: List[Row] = []
    for world in budget.world_sizes:
        shared_memory = _run_ranks(world, budget, SHARED_MEMORY)
        cross_host = _run_ranks(world, budget, CROSS_HOST)
        for size in budget.sizes:
            for op in OPS:
                row = Row(section=f"world{world}", what=op, size=size, world=world)
                bus_gigabytes = bus_factor(op, world) * size / 1e9
                shm = shared_memory[(op, size)]
                if shm.times is None:
                    row.error = shm.error
                else:
                    myccl_s, gloo_s = shm.times.baseline, shm.times.subject
                    row.calls = shm.calls
                    row.mydev, row.cpu = bus_gigabytes / myccl_s, bus_gigabytes / gloo_s
                    row.mydev_us, row.cpu_us = myccl_s * 1e6, gloo_s * 1e6
                    row.ratio, row.spread = shm.times.ratio, shm.times.spread
                tcp = cross_host[(op, size)]
                if tcp.times is None:
                    row.cross_host_error = tcp.error
                else:
                    myccl_s, gloo_s = tcp.times.baseline, tcp.times.subject
                    row.cross_host_calls = tcp.calls
                    row.cross_host, row.cross_host_gloo = bus_gigabytes / myccl_s, bus_gigabytes / gloo_s
                    row.cross_host_us, row.cross_host_gloo_us = myccl_s * 1e6, gloo_s * 1e6
                    row.cross_host_ratio, row.cross_host_spread = tcp.times.ratio, tcp.times.spread
                rows.append(row)
    return rows


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    f"world{n}": (
        f"{n} processes, bus bandwidth GB/s (higher is better); mydev = myccl on "
        f"mydev, CPU = gloo on CPU. Target: mydev/CPU >= 3 from 16 MiB, >= 1 up "
        f"to 64 KiB. x-host = myccl's cross-host path (MYCCL_TRANSPORT=gloo), its "
        f"gloo = gloo timed alongside it in the same rank processes; no target."
    )
    for n in (2, 4)
}
HEADERS = (
    "what",
    "size",
    "calls myccl/gloo",
    *FIGURE_HEADERS,
    "myccl us",
    "gloo us",
    "target",
    "verdict",
    "x-host",
    "its gloo",
    "x-host/gloo",
    "x-host us",
    "note",
)


def table_cells(row: Row) -> Tuple[str, ...]:
    notes = [row.error] if row.error else []
    if row.cross_host_error:
        notes.append(f"x-host: {row.cross_host_error}")
    return (
        row.what,
        size_text(row.size),
        f"{row.calls[0]}/{row.calls[1]}" if row.calls[0] else "-",
        format_value(row.mydev),
        format_value(row.cpu),
        row.unit,
        format_ratio(row.ratio, row.spread),
        format_value(row.mydev_us),
        format_value(row.cpu_us),
        f">= {row.target:g}" if row.target is not None else "-",
        row.verdict,
        format_value(row.cross_host),
        format_value(row.cross_host_gloo),
        format_ratio(row.cross_host_ratio, row.cross_host_spread),
        format_value(row.cross_host_us),
        "; ".join(notes),
    )


def cross_host_summary(rows: Sequence[Row]) -> str:
    failed = sum(1 for row in rows if row.cross_host_ratio is None)
    return f"cross-host (no target): {len(rows) - failed} measured, {failed} ERROR"


def render_table(rows: Sequence[Row]) -> str:
    return "\n".join(
        [
            render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES),
            "",
            verdict_summary(rows),
            cross_host_summary(rows),
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]), FULL if sys.argv[4] == "full" else QUICK)
    sys.exit(
        run_benchmark(
            "collectives",
            __doc__,
            "short run: sizes up to 16 MiB, fewer and shorter repetitions",
            (FULL, QUICK),
            measure_all,
            render_table,
        )
    )
