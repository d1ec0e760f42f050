"""A progress bar on stderr, in plain text (no dependency).

On a terminal it redraws one line; elsewhere (CI logs) it prints a line
every tenth of the run, so a log shows the run is alive without flooding."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Optional, TextIO

from .results import FAILURES, Status, TaskResult


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream: Optional[TextIO] = None) -> None:
        self.total = total
        self.enabled = enabled and total > 0
        self.stream = stream or sys.stderr
        self.interactive = self.stream.isatty()
        self.done = 0
        self.counts: Counter = Counter()
        self.started = time.monotonic()
        self._next_report = 0.1

    def update(self, result: TaskResult) -> None:
        self.done += 1
        self.counts[result.status] += 1
        if not self.enabled:
            return
        if self.interactive:
            self.stream.write("\r" + self._line(f"{result.op} {result.dtype}") + "\x1b[K")
            self.stream.flush()
        elif self.done / self.total >= self._next_report or self.done == self.total:
            self._next_report += 0.1
            self.stream.write(self._line("") + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.interactive:
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, label: str, width: int = 30) -> str:
        filled = int(width * self.done / self.total)
        elapsed = time.monotonic() - self.started
        remaining = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        failed = sum(self.counts[s] for s in FAILURES)
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"pass {self.counts[Status.PASS]} fail {failed} skip {self.counts[Status.SKIPPED]} "
            f"{elapsed:.0f}s elapsed, ~{remaining:.0f}s left {label}"
        )
