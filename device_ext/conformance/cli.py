"""`python -m device_ext.conformance`: options, the run, the reports, the
exit status."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch

from ..device_name import DEVICE_NAME
from . import error_inputs, modules, opdb, report_json, report_markdown
from .environment import device_description, run_description
from .pool import WorkerPool, WorkerStartupError
from .progress import Progress
from .results import TaskResult
from .runner import VARIANTS, RunOptions, run_op
from .summary import format_rate, summarize

# The number is about the device's own kernels, so running ops on the CPU
# instead is off during a run: in this process (--jobs 0) and in the workers.
CPU_FALLBACK_POLICY = "off"

EXIT_BELOW_MIN_PASS_RATE = 1
EXIT_RUN_FAILED = 3
# A worker keeps about one CPU busy: its own thread and the stream's executor
# take turns (the whole float32 run on a 2-CPU host: 194 s of CPU in 183 s
# with one worker; two workers took 116-139 s). Each holds up to ~1.1 GiB
# (torch, the OpInfo database, samples), so a large host stops at 8.
DEFAULT_JOBS = max(1, min(len(os.sched_getaffinity(0)), 8))


def _fraction(text: str) -> float:
    """0.97, or 97%."""
    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("expected a fraction between 0 and 1, or a percentage like 97%")
    return value


def _variants(text: str) -> List[str]:
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = set(chosen) - set(VARIANTS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown call forms {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    return chosen


def _layouts(text: str) -> List[str]:
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = set(chosen) - {opdb.STRIDED, *opdb.SPARSE_LAYOUTS}
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown layouts {sorted(unknown)}; choose from {opdb.STRIDED}, {', '.join(opdb.SPARSE_LAYOUTS)}"
        )
    return chosen


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m device_ext.conformance",
        description="Run PyTorch's OpInfo database on the device, compare every result with the CPU's, "
        "and report per op and dtype: pass, mismatch, missing kernel, error or skipped.",
    )
    parser.add_argument(
        "--dtypes",
        default="float32",
        help='comma-separated dtypes, or "all": every dtype the op supports on cuda or the CPU (default float32)',
    )
    parser.add_argument(
        "--layouts",
        type=_layouts,
        default=[opdb.STRIDED, *opdb.SPARSE_LAYOUTS],
        metavar="LIST",
        help="input layouts: strided and the sparse ones the OpInfo supports (the sparse section; default all: "
        + ",".join((opdb.STRIDED,) + opdb.SPARSE_LAYOUTS)
        + ")",
    )
    parser.add_argument(
        "--ops",
        action="append",
        default=[],
        metavar="REGEX",
        help="check only ops whose full name matches (searched, so a substring works); repeatable",
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="REGEX", help="skip ops whose full name matches; repeatable"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the full report as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the report as Markdown")
    parser.add_argument(
        "--min-pass-rate",
        type=_fraction,
        metavar="X",
        help="exit with status 1 when the op pass rate at the checked dtypes is below X (0.97 or 97%%)",
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="at most N sample inputs per op and dtype, evenly spread (default: all)",
    )
    parser.add_argument(
        "--timeout-per-op",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="time limit for one op at one dtype; past it the op is an error and its worker is replaced (default 180)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        metavar="N",
        help=f"worker processes (default {DEFAULT_JOBS}: one per usable CPU, at most 8); 0 runs in this process, without time limits",
    )
    parser.add_argument(
        "--variants",
        type=_variants,
        default=list(VARIANTS),
        metavar="LIST",
        help="call forms to check: function,inplace,out (default all; the function always runs)",
    )
    parser.add_argument(
        "--inputs",
        choices=("sample", "reference"),
        default="sample",
        help="OpInfo sample inputs (default) or the larger reference inputs",
    )
    parser.add_argument(
        "--samples-on-device",
        action="store_true",
        help="generate the sample inputs on the device (op.sample_inputs(device, dtype)) and copy them to the CPU, and also compare the outputs' strides: the output metadata check",
    )
    parser.add_argument(
        "--modules",
        action="store_true",
        help="also check PyTorch's ModuleInfo database (torch.nn modules, inputs generated on the device; outputs' metadata incl. strides, and values), in this process; reported as ops named module:<name>",
    )
    parser.add_argument(
        "--error-inputs",
        action="store_true",
        help="also check every OpInfo's error inputs (each must raise at the call the error the OpInfo names, nothing from the stream), in this process; reported as ops named error_inputs:<name> at dtype any",
    )
    parser.add_argument(
        "--extra-ops",
        action="append",
        default=[],
        metavar="MODULE[:ATTR]",
        help="also check the OpInfos in this module or .py file (attribute op_db by default)",
    )
    parser.add_argument("--device", default=DEVICE_NAME, help=argparse.SUPPRESS)
    parser.add_argument(
        "--list", action="store_true", help="list the (op, dtype) pairs that would be checked, and exit"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress output on stderr")
    return parser


def _run_tasks(
    args: argparse.Namespace, selection: opdb.Selection, ops: Dict[str, Any], options: RunOptions
) -> Tuple[List[TaskResult], Dict[str, Any]]:
    """Every selected (op, dtype), in the database's order (not the order
    they finished in), and the description of the device they ran on."""
    progress = Progress(len(selection.tasks), enabled=not args.no_progress)
    results: Dict[opdb.Task, TaskResult] = {}

    def on_result(result: TaskResult) -> None:
        results[opdb.Task(result.op, result.dtype)] = result
        progress.update(result)

    try:
        if args.jobs == 0:
            device_info = device_description(options.device)
            for task in selection.tasks:
                op, layout = opdb.resolve(ops, task.op)
                on_result(run_op(op, opdb.parse_dtype(task.dtype), options, layout))
        else:
            env = {**os.environ, "MYDEV_CPU_FALLBACK": CPU_FALLBACK_POLICY}
            pool = WorkerPool(args.jobs, args.timeout_per_op, options, args.extra_ops, env)
            pool.run(selection.tasks, on_result)
            device_info = {**pool.device_info, "extension_build": " + ".join(pool.builds)}
            if len(pool.builds) > 1:
                print("warning: the extension was rebuilt during the run; results mix builds", file=sys.stderr)
    finally:
        progress.close()
    return [results[task] for task in selection.tasks], device_info


@contextlib.contextmanager
def _device_kernels_only() -> Iterator[None]:
    """No CPU fallback in this process while the run lasts."""
    previous = torch.mydev.cpu_fallback_policy()
    torch.mydev.set_cpu_fallback_policy(CPU_FALLBACK_POLICY)
    try:
        yield
    finally:
        torch.mydev.set_cpu_fallback_policy(previous)


def _settings(args: argparse.Namespace, argv: Optional[List[str]]) -> Dict[str, Any]:
    """What the report must say about how it was made, to be reproducible."""
    return {
        "command": shlex.join(
            ["python", "-m", "device_ext.conformance"] + list(sys.argv[1:] if argv is None else argv)
        ),
        "dtypes": args.dtypes,
        "ops": args.ops,
        "exclude": args.exclude,
        "layouts": list(args.layouts),
        "max_samples": args.max_samples,
        "inputs": args.inputs,
        "samples_on_device": args.samples_on_device,
        "modules": args.modules,
        "error_inputs": args.error_inputs,
        "variants": list(args.variants),
        "timeout_s": args.timeout_per_op,
        "jobs": args.jobs,
        "extra_ops": args.extra_ops,
    }


def _print_summary(summary: Dict[str, Any], seconds: float) -> None:
    print(f"{summary['ops']} ops, {summary['pairs']} (op, dtype) pairs in {seconds:.0f} s")
    if "float32_op_pass_rate" in summary:
        print(f"op pass rate at float32: {format_rate(summary['float32_op_pass_rate'])}")
    print(f"(op, dtype) pair pass rate: {format_rate(summary['pair_pass_rate'])}")
    print(f"op pass rate over the checked dtypes: {format_rate(summary['op_pass_rate'])}")
    print("pairs: " + ", ".join(f"{n} {status}" for status, n in summary["pair_status_counts"].items()))


def _meets(summary: Dict[str, Any], min_pass_rate: float) -> bool:
    rate = summary["op_pass_rate"]["rate"]
    if rate is not None and rate >= min_pass_rate:
        return True
    shown = "n/a" if rate is None else f"{100 * rate:.1f}%"
    print(f"FAIL: op pass rate {shown} is below the required {100 * min_pass_rate:.1f}%", file=sys.stderr)
    return False


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    ops = opdb.load_ops(args.extra_ops)
    selection = opdb.select(ops, args.dtypes, args.ops, args.exclude, args.layouts)
    if args.list:
        for task in selection.tasks:
            print(f"{task.op}\t{task.dtype}")
        return 0

    options = RunOptions(
        device=args.device,
        max_samples=args.max_samples,
        variants=tuple(args.variants),
        inputs=args.inputs,
        samples_on_device=args.samples_on_device,
    )
    started = time.monotonic()
    try:
        with _device_kernels_only():
            results, device_info = _run_tasks(args, selection, ops, options)
    except WorkerStartupError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_RUN_FAILED
    if args.modules:
        module_dtypes = (
            None
            if args.dtypes.strip() == opdb.ALL_DTYPES
            else [opdb.parse_dtype(name) for name in args.dtypes.split(",") if name.strip()]
        )
        results += modules.run_modules(args.ops, args.exclude, module_dtypes, options.device)
    if args.error_inputs:
        with _device_kernels_only():
            results += error_inputs.run_all_error_inputs(ops, args.ops, args.exclude, options.device)
    seconds = time.monotonic() - started

    dtypes = list(dict.fromkeys(result.dtype for result in results))  # as asked
    if args.dtypes.strip() == opdb.ALL_DTYPES:
        dtypes.sort()
    summary = summarize(results, dtypes, selection.not_applicable)
    environment = {**run_description(), "cpu_fallback": CPU_FALLBACK_POLICY, "device": device_info}
    report = report_json.build(environment, _settings(args, argv), summary, results, seconds)
    if args.json:
        report_json.write(report, args.json)
    if args.markdown:
        report_markdown.write(report, results, args.markdown)
    _print_summary(summary, seconds)

    if args.min_pass_rate is not None and not _meets(summary, args.min_pass_rate):
        return EXIT_BELOW_MIN_PASS_RATE
    return 0
