"""Where the time of one small eager op goes: ``x * 2`` on a one-element
float32 tensor (the device's own elementwise kernel), and
``x.gather(0, idx)`` (the generic path: a CPU kernel launched over host
views), on mydev against the CPU, split into the steps of the
device-kernel path. Information, no target.

Rows (us per op, medians of repetitions of many ops then one synchronize):

* the op: wall time on the CPU and on mydev (the eager.py overhead figure),
  and the CPU time the CPU op costs its thread;
* mydev's two threads: CPU time of the host thread that issues the op and of
  the stream's executor that runs its kernel (from /proc's per-thread
  schedstat, nanoseconds), so host work and device work are seen apart;
* the host steps, each timed alone: the op on the meta device (dispatch and
  the Meta kernel, what an uncached output-metadata lookup costs), a
  one-element ``torch.empty`` on mydev (the allocation), and an empty kernel
  launch (``torch.mydev._sleep(0)``: binding and enqueue).

    python benchmarks/op_path.py --quick
    python benchmarks/op_path.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Callable, Dict, List

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import report_entry  # noqa: E402


def _thread_ns() -> Dict[str, int]:
    """CPU nanoseconds so far of this process's threads, by thread name."""
    out: Dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as handle:
                name = handle.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as handle:
                out[f"{name}:{tid}"] = int(handle.read().split()[0])
        except OSError:  # the thread ended meanwhile
            continue
    return out


def _per_op(op: Callable[[], object], sync: Callable[[], None], calls: int, reps: int) -> Dict[str, float]:
    """Median us per op: wall, host (this) thread CPU and executor CPU."""
    main = f"{threading.current_thread().native_id}"
    for _ in range(calls // 10):
        op()
    sync()
    walls, hosts, executors = [], [], []
    for _ in range(reps):
        before = _thread_ns()
        start = time.perf_counter()
        for _ in range(calls):
            op()
        sync()
        walls.append((time.perf_counter() - start) / calls * 1e6)
        after = _thread_ns()
        delta = {key: after[key] - before.get(key, 0) for key in after}
        hosts.append(sum(v for k, v in delta.items() if k.endswith(f":{main}")) / calls / 1e3)
        executors.append(sum(v for k, v in delta.items() if k.startswith("mydev")) / calls / 1e3)
    return {
        "wall": statistics.median(walls),
        "host": statistics.median(hosts),
        "executor": statistics.median(executors),
    }


def _row(op: str, what: str, value: float, baseline: float, compares: str) -> dict:
    return {
        "op": op,
        "what": what,
        "us": value,
        "report": [report_entry(f"{op} path: {what}, / CPU op", value / baseline, None, "lower", "-", compares)],
    }


def _no_sync() -> None:
    pass


def _mydev_sync() -> None:
    torch.mydev.synchronize()


def _op_rows(op: str, make: Callable[[str], Callable[[], object]], calls: int, reps: int) -> List[dict]:
    """The op on the CPU, on mydev (wall, host thread, executor) and on the
    meta device; ``make(device)`` builds it over inputs made on that device."""
    cpu = _per_op(make("cpu"), _no_sync, calls, reps)
    mydev = _per_op(make("mydev"), _mydev_sync, calls, reps)
    meta = _per_op(make("meta"), _no_sync, calls, reps)
    base = cpu["wall"]
    return [
        _row(op, "CPU op, wall", cpu["wall"], base, "the baseline itself"),
        _row(op, "CPU op, thread CPU", cpu["host"], base, "what the CPU op costs its thread"),
        _row(op, "mydev op, wall", mydev["wall"], base, "the same op on mydev, N calls then synchronize"),
        _row(op, "mydev op, host thread CPU", mydev["host"], base, "what the issuing thread spends per op"),
        _row(
            op,
            "mydev op, executor CPU",
            mydev["executor"],
            base,
            "what the stream's executor spends per op (the kernel)",
        ),
        _row(op, "meta op (dispatch + Meta kernel)", meta["wall"], base, f"{op} on the meta device"),
    ]


def _times_two(device: str) -> Callable[[], object]:
    x = torch.ones(1, device=device)
    return lambda: x * 2


def _gather(device: str) -> Callable[[], object]:
    x = torch.ones(4, device=device)
    index = torch.zeros(1, dtype=torch.long, device=device)
    return lambda: x.gather(0, index)


def measure(calls: int, reps: int) -> List[dict]:
    times_two = _op_rows("x * 2", _times_two, calls, reps)
    gather = _op_rows("gather", _gather, calls, reps)
    cpu_wall = times_two[0]["us"]
    empty = _per_op(lambda: torch.empty(1, device="mydev"), _mydev_sync, calls, reps)
    launch = _per_op(lambda: torch.mydev._sleep(0), _mydev_sync, calls, reps)
    steps = [
        _row("x * 2", "torch.empty(1) on mydev", empty["wall"], cpu_wall, "the allocation step, with its own dispatch"),
        _row("x * 2", "empty kernel launch", launch["wall"], cpu_wall, "torch.mydev._sleep(0): binding and enqueue"),
    ]
    return times_two + steps + gather


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="fewer repetitions")
    mode.add_argument("--full", action="store_true", help="more repetitions (the default)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH")
    args = parser.parse_args()
    calls, reps = (20_000, 5) if args.quick else (50_000, 9)
    rows = measure(calls, reps)
    width = max(len(row["what"]) for row in rows)
    for op in dict.fromkeys(row["op"] for row in rows):
        print(f"{op + ', one element':{width}}  us/op  / CPU op")
        for row in (row for row in rows if row["op"] == op):
            print(f"{row['what']:{width}}  {row['us']:5.2f}  {row['report'][0]['ratio']:7.2f}")
        print()
    print(f"{calls} ops per repetition, median of {reps}; load average {[round(v, 2) for v in os.getloadavg()]}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"benchmark": "op_path", "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
