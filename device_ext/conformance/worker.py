"""A worker process: checks the (op, dtype) tasks the CLI sends it.

Ops run in workers rather than in the CLI's process so that one that hangs
(a kernel that never finishes, a deadlock in a stream) or crashes the
process can be killed and reported without losing the run. Protocol, one
JSON object per line: tasks {"op", "dtype"} on stdin; on the result file
descriptor first {"type": "hello", "device": {...}}, then one
{"type": "result", "result": {...}, "restart": bool} per task. Anything the
ops print goes to stdout/stderr, which the CLI keeps out of the results."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, TextIO

import torch

import device_ext  # noqa: F401  (registers mydev even with autoload off)

from . import opdb
from .environment import device_description
from .results import FAILURES
from .runner import RunOptions, device_problem, run_op


def _send(channel: TextIO, message: Dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def serve(channel: TextIO, tasks: TextIO, options: RunOptions, extra_ops: List[str]) -> None:
    ops = opdb.load_ops(extra_ops)
    _send(channel, {"type": "hello", "device": device_description(options.device)})
    device = torch.device(options.device)
    for line in tasks:
        task = json.loads(line)
        op, layout = opdb.resolve(ops, task["op"])
        result = run_op(op, opdb.parse_dtype(task["dtype"]), options, layout)
        # A failure can leave the device broken (a kernel that corrupted the
        # arena, a stream that no longer runs): then a fresh process must
        # take the next task, or its failures would be this op's.
        problem: Optional[str] = device_problem(device) if result.status in FAILURES else None
        _send(channel, {"type": "result", "result": result.to_dict(), "restart": problem is not None})
        if problem is not None:
            return


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m device_ext.conformance.worker")
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--options", required=True, help="RunOptions as JSON")
    parser.add_argument("--extra-ops", action="append", default=[])
    args = parser.parse_args(argv)
    fields = json.loads(args.options)
    options = RunOptions(**{**fields, "variants": tuple(fields["variants"])})
    with os.fdopen(args.result_fd, "w") as channel:
        serve(channel, sys.stdin, options, args.extra_ops)


if __name__ == "__main__":
    main()
