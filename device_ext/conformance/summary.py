"""The figures a vendor tracks, computed from the per-(op, dtype) results.

Definitions (the report repeats them):
- An (op, dtype) pair passes when every sample compared at that dtype
  passed; it is skipped when no sample could be compared (random or
  uninitialised output, or no valid input on the CPU).
- An op passes when all its pairs that were not skipped pass.
- A pass rate is passed / (passed + failed): skipped pairs and ops are
  counted and listed, but neither pass nor fail.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

from .results import ALL_STATUSES, FAILURES, Status, TaskResult


@dataclass
class Rate:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def rate(self) -> Optional[float]:
        checked = self.passed + self.failed
        return self.passed / checked if checked else None

    def to_dict(self) -> Dict[str, Any]:
        return {"passed": self.passed, "failed": self.failed, "skipped": self.skipped, "rate": self.rate}

    def add(self, status: Status) -> None:
        if status == Status.PASS:
            self.passed += 1
        elif status == Status.SKIPPED:
            self.skipped += 1
        else:
            self.failed += 1


def op_statuses(results: Iterable[TaskResult]) -> Dict[str, Status]:
    """Each op's status over the dtypes checked: its worst pair status,
    skipped only when every pair was skipped."""
    by_op: Dict[str, List[Status]] = defaultdict(list)
    for result in results:
        by_op[result.op].append(result.status)
    statuses: Dict[str, Status] = {}
    for op, pair_statuses in by_op.items():
        worst = next((s for s in FAILURES if s in pair_statuses), None)
        statuses[op] = worst or (Status.PASS if Status.PASS in pair_statuses else Status.SKIPPED)
    return statuses


def op_rate(results: Iterable[TaskResult]) -> Rate:
    rate = Rate()
    for status in op_statuses(results).values():
        rate.add(status)
    return rate


def pair_rate(results: Iterable[TaskResult]) -> Rate:
    rate = Rate()
    for result in results:
        rate.add(result.status)
    return rate


def status_counts(results: Iterable[TaskResult]) -> Dict[str, int]:
    counts = Counter(r.status for r in results)
    return {status.value: counts[status] for status in ALL_STATUSES}


def summarize(results: List[TaskResult], dtypes: List[str], not_applicable: List[str]) -> Dict[str, Any]:
    by_dtype: Dict[str, List[TaskResult]] = defaultdict(list)
    for result in results:
        by_dtype[result.dtype].append(result)
    ops = op_statuses(results)
    summary: Dict[str, Any] = {
        "dtypes": dtypes,
        "ops": len(ops),
        "pairs": len(results),
        "op_status_counts": {s.value: sum(1 for v in ops.values() if v == s) for s in ALL_STATUSES},
        "pair_status_counts": status_counts(results),
        "op_pass_rate": op_rate(results).to_dict(),
        "pair_pass_rate": pair_rate(results).to_dict(),
        "by_dtype": {
            dtype: {"ops": status_counts(by_dtype[dtype]), "op_pass_rate": pair_rate(by_dtype[dtype]).to_dict()}
            for dtype in dtypes
            if dtype in by_dtype
        },
        "not_applicable": sorted(not_applicable),
    }
    if "float32" in by_dtype:
        summary["float32_op_pass_rate"] = pair_rate(by_dtype["float32"]).to_dict()
    return summary


def format_rate(rate: Dict[str, Any]) -> str:
    value = rate["rate"]
    share = "n/a" if value is None else f"{100 * value:.1f}%"
    return f"{share} ({rate['passed']} of {rate['passed'] + rate['failed']}; {rate['skipped']} skipped)"
