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

Targets (from the collectives performance issue): myccl at least 3x gloo's
bandwidth from 16 MiB up, and no slower than gloo (ratio >= 1) for small
messages (<= 64 KiB). 1 MiB has no target ("-"). Nothing here asserts on
time; PASS / MISS only compares the measured ratio with the target.

How it measures: the parent starts one fresh interpreter per rank (this file
with ``--worker``); every rank runs the same rows. Per row and backend, one
first call apart, then repetitions of N calls, each starting on a gloo
barrier and, for myccl, ending with ``torch.mydev.synchronize()`` after the
last call (myccl's ``wait()`` does not block the host; gloo is synchronous).
N is found by doubling, as in harness.py, until a repetition lasts at least
100 ms (30 ms quick) on the slowest rank, so 256 MiB rows make one call per
repetition; the ranks agree on N through a gloo all_reduce. The myccl and
gloo repetitions alternate (myccl, gloo, gloo, myccl, ...) as in
harness.compare(), so both see the same load. A rank's figure is the median over repetitions; the row's time
is the maximum of the ranks' medians. Every rank has an
``init_process_group`` timeout and the parent kills all ranks of a world size
that has not finished within its time limit (those rows then show ERROR), so
the benchmark cannot hang. Ranks end with ``os._exit(0)`` (see
tests/test_distributed.py: gloo can abort the interpreter at exit).

Which myccl algorithm runs: messages below 256 KiB are staged through the
shared segment's slots, larger ones read the peers' device memory directly
(peer-memory handles, no staging copy); see csrc/distributed/myccl_backend.h.

Not measured: myccl's cross-host path (``MYCCL_TRANSPORT=gloo``, myccl over
gloo's TCP transport); it was not in the committed tree when this benchmark
last changed. The simulator runs every rank's device streams on host
threads, so with 4 ranks on a 2-core machine ranks compete for cores; gloo
runs on the same cores.

    python benchmarks/collectives.py               # full run, about 2 minutes (2-core host)
    python benchmarks/collectives.py --quick       # short run, about 25 s
    python benchmarks/collectives.py --json out.json
"""

from __future__ import annotations

import json
import os
import socket
import statistics
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
    FIGURE_HEADERS, KiB, MiB, Budget, figure_cells, format_value, mydev_over_cpu, progress,
    render_sectioned_table, run_benchmark, verdict_summary,
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


FULL = CollectiveBudget(name="full", warmup_reps=1, reps=5, target_rep_seconds=0.1,
                        max_calls_per_rep=10_000,
                        sizes=(4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB),
                        world_sizes=(2, 4), world_timeout_s=170)
QUICK = CollectiveBudget(name="quick", warmup_reps=1, reps=3, target_rep_seconds=0.03,
                         max_calls_per_rep=10_000,
                         sizes=(4 * KiB, 64 * KiB, MiB, 16 * MiB),
                         world_sizes=(2, 4), world_timeout_s=45)

OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
INIT_TIMEOUT_S = 60


def bus_factor(op: str, world: int) -> float:
    return (2.0 if op == "all_reduce" else 1.0) * (world - 1) / world


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line: myccl and gloo bus bandwidth (GB/s) for one collective."""

    section: str
    what: str
    size: int
    world: int
    calls: Tuple[int, int] = (0, 0)  # calls per repetition: myccl, gloo
    unit: str = "GB/s"
    mydev: Optional[float] = None  # myccl busbw
    cpu: Optional[float] = None  # gloo busbw
    mydev_us: Optional[float] = None
    cpu_us: Optional[float] = None
    error: str = ""

    @property
    def target(self) -> Optional[float]:
        if self.size >= 16 * MiB:
            return 3.0
        if self.size <= 64 * KiB:
            return 1.0
        return None

    @property
    def ratio(self) -> Optional[float]:
        return mydev_over_cpu(self.mydev, self.cpu)

    @property
    def verdict(self) -> str:
        if self.error or self.ratio is None:
            return "ERROR"
        if self.target is None:
            return "-"
        return "PASS" if self.ratio >= self.target else "MISS"

    def to_json(self) -> Dict[str, Any]:
        return {**asdict(self), "target": self.target, "ratio": self.ratio,
                "verdict": self.verdict}


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

    dist.init_process_group("mydev:myccl,cpu:gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=INIT_TIMEOUT_S))
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

                def repetition(i: int, calls: int) -> float:
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
                result["mydev_s"] = statistics.median(samples[0])
                result["cpu_s"] = statistics.median(samples[1])
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


def _run_world(world: int, budget: CollectiveBudget) -> List[Row]:
    progress(f"{world} processes: sizes {', '.join(size_text(s) for s in budget.sizes)}")
    port = _free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1")
    procs = [
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(rank),
                          str(world), budget.name],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in range(world)
    ]
    deadline = time.monotonic() + budget.world_timeout_s
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

    per_rank: List[Dict[Tuple[str, int], Dict[str, Any]]] = []
    for out, _ in outputs:
        results = {}
        for line in out.splitlines():
            if line.startswith("RESULT "):
                item = json.loads(line[len("RESULT "):])
                results[(item["op"], item["size"])] = item
        per_rank.append(results)

    rows = []
    for size in budget.sizes:
        for op in OPS:
            row = Row(section=f"world{world}", what=op, size=size, world=world)
            items = [r.get((op, size)) for r in per_rank]
            errors = [i["error"] for i in items if i and "error" in i]
            if errors:
                row.error = errors[0]
            elif any(i is None for i in items):
                if timed_out:
                    row.error = f"not finished within {budget.world_timeout_s:.0f} s (ranks killed)"
                else:
                    codes = [p.returncode for p in procs]
                    tail = next((e.strip().splitlines()[-1] for o, e in outputs if e.strip()), "")
                    row.error = f"no result (exit codes {codes}) {tail[:100]}"
            else:
                row.calls = tuple(items[0]["calls"])
                mydev_s = max(i["mydev_s"] for i in items)
                cpu_s = max(i["cpu_s"] for i in items)
                factor = bus_factor(op, world) * size / 1e9
                row.mydev, row.cpu = factor / mydev_s, factor / cpu_s
                row.mydev_us, row.cpu_us = mydev_s * 1e6, cpu_s * 1e6
            rows.append(row)
    return rows


def measure_all(budget: CollectiveBudget) -> List[Row]:
    rows: List[Row] = []
    for world in budget.world_sizes:
        rows += _run_world(world, budget)
    return rows


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    f"world{n}": (f"{n} processes, bus bandwidth GB/s (higher is better); mydev = myccl on "
                  f"mydev, CPU = gloo on CPU. Target: mydev/CPU >= 3 from 16 MiB, >= 1 up "
                  f"to 64 KiB.")
    for n in (2, 4)
}
HEADERS = ("what", "size", "calls myccl/gloo", *FIGURE_HEADERS, "myccl us", "gloo us", "target",
           "verdict", "note")


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.what,
        size_text(row.size),
        f"{row.calls[0]}/{row.calls[1]}" if row.calls[0] else "-",
        *figure_cells(row.mydev, row.cpu, row.unit),
        format_value(row.mydev_us),
        format_value(row.cpu_us),
        f">= {row.target:g}" if row.target is not None else "-",
        row.verdict,
        row.error,
    )


def render_table(rows: Sequence[Row]) -> str:
    return "\n".join([render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES), "",
                      verdict_summary(rows)])


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), int(sys.argv[3]),
                FULL if sys.argv[4] == "full" else QUICK)
    sys.exit(run_benchmark("collectives", __doc__,
                           "short run: sizes up to 16 MiB, fewer and shorter repetitions",
                           (FULL, QUICK), measure_all, render_table))
