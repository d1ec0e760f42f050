"""The result model: what one (op, dtype) check produced, and its JSON form.

Workers send these across a pipe as JSON, the reports read them back, so
every type here round-trips through plain dicts."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List


class Status(str, enum.Enum):
    """Outcome of one sample, and of one (op, dtype) pair."""

    PASS = "pass"
    MISMATCH = "mismatch"
    MISSING_KERNEL = "missing kernel"
    ERROR = "error"
    SKIPPED = "skipped"


# Statuses that count as a failure, worst first: an (op, dtype) pair takes the
# worst status any of its samples had. A missing kernel ranks first because
# it is what a vendor fixes first (and it usually explains the rest).
FAILURES = (Status.MISSING_KERNEL, Status.ERROR, Status.MISMATCH)
ALL_STATUSES = (Status.PASS,) + FAILURES + (Status.SKIPPED,)


@dataclass
class Cause:
    """One distinct reason for a non-pass, with how many samples hit it."""

    status: Status
    variant: str  # "function", "inplace" or "out": which call form failed
    message: str  # exception type + first line, or the value difference
    count: int = 1
    first_sample: int = -1  # index of the first sample that hit it
    sample: str = ""  # a short description of that sample's inputs

    @staticmethod
    def from_dict(data: Dict[str, Any]) -> "Cause":
        return Cause(**{**data, "status": Status(data["status"])})


@dataclass
class TaskResult:
    """Everything known about one op at one dtype."""

    op: str
    dtype: str
    status: Status
    # Samples per status (a sample run in several variants counts once per
    # variant, so these are sample-variant runs).
    counts: Dict[str, int] = field(default_factory=dict)
    causes: List[Cause] = field(default_factory=list)  # non-pass, non-skip
    skip_reasons: Dict[str, int] = field(default_factory=dict)
    samples: int = 0  # sample inputs the op got at this dtype (after --max-samples)
    seconds: float = 0.0

    @property
    def reason(self) -> str:
        """The one-line explanation a report shows next to the status."""
        if self.causes:
            return self.causes[0].message
        if self.skip_reasons:
            return max(self.skip_reasons.items(), key=lambda item: item[1])[0]
        return ""

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        for cause in data["causes"]:
            cause["status"] = Status(cause["status"]).value
        return data

    @staticmethod
    def from_dict(data: Dict[str, Any]) -> "TaskResult":
        return TaskResult(
            op=data["op"],
            dtype=data["dtype"],
            status=Status(data["status"]),
            counts=dict(data.get("counts", {})),
            causes=[Cause.from_dict(c) for c in data.get("causes", [])],
            skip_reasons=dict(data.get("skip_reasons", {})),
            samples=int(data.get("samples", 0)),
            seconds=float(data.get("seconds", 0.0)),
        )

    @staticmethod
    def failed_to_run(op: str, dtype: str, message: str, seconds: float = 0.0) -> "TaskResult":
        """A pair whose check could not finish (timeout, crashed worker)."""
        return TaskResult(
            op=op,
            dtype=dtype,
            status=Status.ERROR,
            counts={Status.ERROR.value: 1},
            causes=[Cause(Status.ERROR, "function", message)],
            seconds=seconds,
        )


# The dtype under which the error-input check reports its ops: error inputs
# choose their own dtypes.
ERROR_INPUTS_DTYPE = "any"


def dtype_name(dtype: Any) -> str:
    """'float32' for torch.float32: the spelling reports and --dtypes use."""
    return str(dtype).replace("torch.", "")
