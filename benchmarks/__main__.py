"""Runs every benchmark script and writes one report of all their ratios.

    python -m benchmarks                      # every script, quick mode
    python -m benchmarks --full               # the long versions
    python -m benchmarks --only eager first_op --out /tmp/report
    python -m benchmarks --busy 1 --beside /tmp/report/report.json --out /tmp/busy

A benchmark script is any ``benchmarks/*.py`` whose name does not start with
``_`` and that has an ``if __name__ == "__main__":`` block (the convention of
benchmarks/README.md, "One report"); each runs in its own interpreter with
``--quick`` (or ``--full``) and ``--json PATH``. The report goes to
``--out`` (default ``benchmarks/results/``): ``report.md`` (one Markdown
table of every ratio with its target and verdict), ``report.json``,
``report.png`` (ratios against targets), and each script's own table and
JSON next to them. ``--busy N`` runs N busy processes beside every script
(a user's machine runs other work; the simulator's threads compete with it
for the same cores), and ``--beside REPORT.json`` sets another run's ratios
in a column next to this run's (the same rows with and without the load).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plot  # noqa: E402
import report  # noqa: E402
from core_latency import BUSY_ENV  # noqa: E402

MAIN_GUARD = 'if __name__ == "__main__":'


def discover() -> List[str]:
    """The benchmark scripts' names (without .py), sorted."""
    names = []
    for file in sorted(os.listdir(HERE)):
        if not file.endswith(".py") or file.startswith("_"):
            continue
        with open(os.path.join(HERE, file)) as handle:
            if MAIN_GUARD in handle.read():
                names.append(file[:-3])
    return names


def run_script(name: str, full: bool, out: str, timeout: float) -> Tuple[List[Dict[str, Any]], List[Optional[float]]]:
    """Runs one script; returns its report entries (one ERROR line if it
    produced no JSON) and the core-to-core round trips it recorded (None:
    not measured). Its table goes to ``out/<name>.txt``."""
    json_path = os.path.join(out, f"{name}.json")
    if os.path.exists(json_path):
        os.remove(json_path)
    command = [sys.executable, os.path.join(HERE, f"{name}.py"), "--full" if full else "--quick", "--json", json_path]
    print(f"== {name}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    reason = ""
    with open(os.path.join(out, f"{name}.txt"), "w") as table:
        try:
            result = subprocess.run(command, stdout=table, timeout=timeout)
            if result.returncode != 0:
                reason = f"exit status {result.returncode}"
        except subprocess.TimeoutExpired:
            reason = f"timed out after {timeout:.0f} s"
    print(f"== {name}: {time.perf_counter() - started:.0f} s {reason}", file=sys.stderr, flush=True)
    if not os.path.exists(json_path):
        return [report.failed_entry(name, reason or "no JSON written")], [None]
    with open(json_path) as handle:
        payload = json.load(handle)
    entries = report.entries_of(name, payload)
    if reason:
        entries.append(report.failed_entry(name, reason))
    return entries, payload.get("environment", {}).get("core_round_trip_ns") or [None]


BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes that each keep one core busy while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the long versions of every script")
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these scripts (names without .py)")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for the report")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script (900 quick, 3600 full)")
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="run N busy processes beside every script")
    parser.add_argument(
        "--beside", metavar="REPORT_JSON", help="another run's report.json: its ratios in a column next to this run's"
    )
    args = parser.parse_args()
    scripts = discover()
    if args.only:
        unknown = sorted(set(args.only) - set(scripts))
        if unknown:
            parser.error(f"no benchmark script named {', '.join(unknown)}; scripts: {', '.join(scripts)}")
        scripts = [name for name in scripts if name in args.only]
    os.makedirs(args.out, exist_ok=True)
    timeout = args.timeout or (3600.0 if args.full else 900.0)
    started = time.perf_counter()
    entries: List[Dict[str, Any]] = []
    round_trips: List[str] = []
    os.environ[BUSY_ENV] = str(args.busy)  # for the scripts' environment blocks
    with busy_processes(args.busy):
        for name in scripts:
            script_entries, script_round_trips = run_script(name, args.full, args.out, timeout)
            entries += script_entries
            round_trips.append(f"{name} " + "/".join("-" if ns is None else f"{ns:.0f}" for ns in script_round_trips))
    mode = "full" if args.full else "quick"
    beside = None
    if args.beside:
        with open(args.beside) as handle:
            other = json.load(handle)
        other_busy = other.get("busy_processes", 0)
        title = f"ratio with {other_busy} busy" if other_busy else "ratio idle"
        beside = (title, report.ratios_by_row(other["ratios"]))
    load = [round(value, 2) for value in os.getloadavg()]
    header = (
        f"# Benchmark report ({mode})\n\n"
        f"Ratios are mydev / baseline, each measured in one run; `compared` says what each side runs. "
        f"Scripts: {', '.join(scripts)}. {time.perf_counter() - started:.0f} s, "
        f"load average at the end {load}, {os.cpu_count()} cores, "
        f"{args.busy} busy process(es) beside the run (`ratio` column).\n\n"
        f"Core-to-core round trip, ns before/after each script (`benchmarks/core_round_trip.c`; "
        f"'-': not measured, as beside busy processes): {', '.join(round_trips)}. "
        f"mydev's small ops hand data between two cores, the CPU's do not: on the 2-core VM "
        f"these figures were about 100 ns at some times and 500 ns at others, and the chains of "
        f"small ops read about 1.5x higher at 500."
    )
    table = report.markdown(entries, header, beside)
    with open(os.path.join(args.out, "report.md"), "w") as handle:
        handle.write(table)
    meta = {
        "mode": mode,
        "scripts": scripts,
        "load_average": load,
        "cpu_count": os.cpu_count(),
        "busy_processes": args.busy,
    }
    report.write_json(os.path.join(args.out, "report.json"), entries, meta)
    drawn_by = plot.write_png(os.path.join(args.out, "report.png"), entries, f"mydev benchmark ratios ({mode})")
    print(table)
    print(f"wrote report.md, report.json and report.png (drawn by {drawn_by}) in {args.out}")
    verdicts = [entry["verdict"] for entry in entries]
    return 1 if "ERROR" in verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
