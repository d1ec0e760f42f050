"""Runs tasks in a pool of worker processes, each task under a time limit.

A task that exceeds its limit, or whose worker dies, is reported as an
error for that (op, dtype) and a new worker takes over: one bad op cannot
stop or hang the run. Single-threaded: one selector waits on every worker's
result pipe, with a timeout at the nearest deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Deque, Dict, List, Optional

from .opdb import Task
from .results import TaskResult
from .runner import RunOptions

# Importing torch and building the OpInfo database takes a few seconds; on
# a loaded machine much more. A worker that is not up by then is broken.
STARTUP_TIMEOUT_S = 300.0
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class _Worker:
    process: "subprocess.Popen[bytes]"
    reader: int  # our end of its result pipe
    log: IO[bytes]  # its stdout and stderr
    started: float
    ready: bool = False
    buffer: bytes = b""
    task: Optional[Task] = None
    deadline: float = float("inf")
    task_started: float = 0.0
    hello: Dict[str, Any] = field(default_factory=dict)

    def last_output(self, limit: int = 400) -> str:
        """The end of what the worker printed: why it died, usually."""
        self.log.flush()
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - 4096))
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines() if line.strip()]
        text = " | ".join(lines[-3:])
        return text[-limit:]


class WorkerStartupError(RuntimeError):
    pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class WorkerPool:
    def __init__(
        self, jobs: int, timeout_s: float, options: RunOptions, extra_ops: List[str], env: Dict[str, str]
    ) -> None:
        self.jobs = max(1, jobs)
        self.timeout_s = timeout_s
        self.options = options
        self.extra_ops = extra_ops
        self.env = dict(env)
        # Workers must import this very package, wherever the CLI found it.
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH", "")]))
        self.selector = selectors.DefaultSelector()
        self.workers: List[_Worker] = []
        self.device_info: Dict[str, Any] = {}
        # Every binary a worker loaded: more than one if a new build was
        # installed during the run (restarted workers load the new one).
        self.builds: List[str] = []
        self.restarts = 0
        self._pending: Deque[Task] = deque()

    # -- worker lifecycle -------------------------------------------------

    def _start(self) -> _Worker:
        reader, writer = os.pipe()
        log = tempfile.TemporaryFile()
        command = [
            sys.executable,
            "-m",
            "device_ext.conformance.worker",
            "--result-fd",
            str(writer),
            "--options",
            json.dumps(dataclasses.asdict(self.options)),
        ]
        for spec in self.extra_ops:
            command += ["--extra-ops", spec]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(writer,), env=self.env
        )
        os.close(writer)  # the worker holds it now: EOF on our end means it exited
        worker = _Worker(process, reader, log, started=time.monotonic())
        self.selector.register(reader, selectors.EVENT_READ, worker)
        self.workers.append(worker)
        return worker

    def _retire(self, worker: _Worker, kill: bool) -> None:
        self.selector.unregister(worker.reader)
        os.close(worker.reader)
        if kill:
            worker.process.kill()  # only this worker, which we started
        if worker.process.stdin is not None:
            with contextlib.suppress(OSError):  # a killed worker's pipe is broken
                worker.process.stdin.close()  # an idle worker exits at end of input
        try:
            worker.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        worker.log.close()
        self.workers.remove(worker)

    def _replace(self, worker: _Worker, kill: bool) -> None:
        self._retire(worker, kill)
        self.restarts += 1
        if self._pending:
            self._start()

    # -- running ----------------------------------------------------------

    def run(self, tasks: List[Task], on_result: Callable[[TaskResult], None]) -> None:
        pending = self._pending = deque(tasks)
        for _ in range(min(self.jobs, len(pending))):
            self._start()
        try:
            while pending or any(w.task is not None for w in self.workers):
                for worker in self.workers:
                    if worker.ready and worker.task is None and pending:
                        self._assign(worker, pending.popleft())
                self._wait(on_result)
        finally:
            for worker in list(self.workers):
                self._retire(worker, kill=worker.task is not None)

    def _assign(self, worker: _Worker, task: Task) -> None:
        assert worker.process.stdin is not None
        try:
            worker.process.stdin.write((json.dumps(dataclasses.asdict(task)) + "\n").encode())
            worker.process.stdin.flush()
        except BrokenPipeError:
            # It died while idle; the end of its result pipe will replace it.
            # The task is not its fault: it goes back to the queue.
            self._pending.appendleft(task)
            return
        worker.task = task
        worker.task_started = time.monotonic()
        worker.deadline = worker.task_started + self.timeout_s

    def _wait(self, on_result: Callable[[TaskResult], None]) -> None:
        now = time.monotonic()
        deadlines = [w.deadline if w.ready else w.started + STARTUP_TIMEOUT_S for w in self.workers]
        # Capped: with every worker idle (one just died) there is no deadline.
        timeout = min(max(0.0, min(deadlines, default=now) - now), 10.0)
        for key, _ in self.selector.select(timeout=timeout):
            worker: _Worker = key.data
            if worker in self.workers:
                self._read(worker, on_result)
        now = time.monotonic()
        for worker in list(self.workers):
            if not worker.ready and now > worker.started + STARTUP_TIMEOUT_S:
                raise WorkerStartupError(
                    f"a worker did not start within {STARTUP_TIMEOUT_S:.0f} s: {worker.last_output()}"
                )
            if worker.task is not None and now > worker.deadline:
                task = worker.task
                on_result(
                    TaskResult.failed_to_run(
                        task.op,
                        task.dtype,
                        f"Timeout: no result after {self.timeout_s:g} s (the op hung or is too slow); its worker was killed",
                        seconds=now - worker.task_started,
                    )
                )
                self._replace(worker, kill=True)

    def _read(self, worker: _Worker, on_result: Callable[[TaskResult], None]) -> None:
        data = os.read(worker.reader, 1 << 16)
        if not data:
            self._died(worker, on_result)
            return
        worker.buffer += data
        while b"\n" in worker.buffer:
            line, worker.buffer = worker.buffer.split(b"\n", 1)
            message = json.loads(line)
            if message["type"] == "hello":
                worker.ready = True
                self.device_info = self.device_info or message["device"]
                build = message["device"]["extension_build"]
                if build not in self.builds:
                    self.builds.append(build)
            elif message["type"] == "result":
                worker.task = None
                worker.deadline = float("inf")
                on_result(TaskResult.from_dict(message["result"]))
                if message.get("restart"):
                    self._replace(worker, kill=False)
                    return

    def _died(self, worker: _Worker, on_result: Callable[[TaskResult], None]) -> None:
        code = worker.process.wait()
        how = f"signal {_signal_name(-code)}" if code < 0 else f"exit code {code}"
        if not worker.ready:
            output = worker.last_output()
            self._retire(worker, kill=False)
            raise WorkerStartupError(f"a worker exited during start-up ({how}): {output}")
        if worker.task is not None:
            task = worker.task
            on_result(
                TaskResult.failed_to_run(
                    task.op,
                    task.dtype,
                    f"WorkerCrash: the worker process died ({how}) while running this op: {worker.last_output()}",
                    seconds=time.monotonic() - worker.task_started,
                )
            )
            worker.task = None
        self._replace(worker, kill=False)
