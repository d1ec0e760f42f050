"""Turning what happened to each sample into a status, and a pair's samples
into the pair's status."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .results import FAILURES, Cause, Status, TaskResult

# A missing kernel: the dispatcher has nothing for the device ("Could not run
# 'aten::x' with arguments from the 'mydev' backend"), mydev's own "has no
# kernel" error, a kernel without the dtype ("not implemented for 'Half'"),
# or a CPU kernel's DispatchStub without an entry for the device
# ("DispatchStub: missing kernel for mydev", an internal assert). PyTorch
# raises NotImplementedError for most; the patterns catch the others.
_MISSING_KERNEL = re.compile(
    r"no kernel|missing kernel|could not run '.*' with arguments from the|not implemented for|MYDEV_CPU_FALLBACK",
    re.IGNORECASE,
)

MESSAGE_LIMIT = 300


def first_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe_exception(error: BaseException) -> str:
    """'Type: first line of the message', the cause shown in reports."""
    return f"{type(error).__name__}: {first_line(str(error))}"


def cause_group(message: str) -> str:
    """The shape of a cause, to count one bug once however many samples
    (and ops) it hits: numbers, quoted names and op names blanked, value
    differences reduced to where they are."""
    if "values differ" in message:
        return message.split("values differ")[0] + "values differ"
    text = re.sub(r"\[OpInfo notes:.*\]", "", message)
    # The dispatcher's advice after "Could not run ..." differs only in how
    # much of it survived truncation.
    text = re.sub(r"\. This could be because.*", "", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\b\d+(\.\d+)?(e-?\d+)?\b", "N", text)
    text = re.sub(r"aten::[\w.]+", "aten::…", text)
    return text.strip()


def classify_exception(error: BaseException) -> Status:
    """The status of a sample whose device run raised (the CPU's did not)."""
    if isinstance(error, NotImplementedError) or _MISSING_KERNEL.search(str(error)):
        return Status.MISSING_KERNEL
    return Status.ERROR


@dataclass
class Tally:
    """Collects sample outcomes of one (op, dtype) pair."""

    op: str
    dtype: str
    counts: Counter = field(default_factory=Counter)
    causes: Dict[Tuple[Status, str, str], Cause] = field(default_factory=dict)
    skip_reasons: Counter = field(default_factory=Counter)

    def passed(self) -> None:
        self.counts[Status.PASS] += 1

    def skipped(self, reason: str) -> None:
        self.counts[Status.SKIPPED] += 1
        self.skip_reasons[reason] += 1

    def failed(self, status: Status, variant: str, message: str, sample_index: int, sample: str) -> None:
        """Counts a failing sample; samples failing the same way (same cause
        group) share one Cause, which keeps the first one's message."""
        self.counts[status] += 1
        key = (status, variant, cause_group(message))
        if key in self.causes:
            self.causes[key].count += 1
        else:
            self.causes[key] = Cause(status, variant, message, 1, sample_index, sample)

    def status(self) -> Status:
        """The pair passes when every compared sample passed; it takes the
        worst failure otherwise, and is skipped when nothing was compared."""
        for failure in FAILURES:
            if self.counts[failure]:
                return failure
        return Status.PASS if self.counts[Status.PASS] else Status.SKIPPED

    def result(self, samples: int, seconds: float, note: Optional[str] = None) -> TaskResult:
        causes: List[Cause] = sorted(self.causes.values(), key=lambda c: (FAILURES.index(c.status), -c.count))
        if note:
            for cause in causes:
                if cause.status == Status.MISMATCH:
                    cause.message += f" [OpInfo notes: {note}]"
        return TaskResult(
            op=self.op,
            dtype=self.dtype,
            status=self.status(),
            counts={status.value: n for status, n in self.counts.items()},
            causes=causes,
            skip_reasons=dict(self.skip_reasons),
            samples=samples,
            seconds=round(seconds, 3),
        )
