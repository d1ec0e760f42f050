"""The machine-readable report: everything, for dashboards and diffs
between releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from .results import TaskResult

FORMAT = "mydev-conformance/1"


def build(
    environment: Dict[str, Any],
    settings: Dict[str, Any],
    summary: Dict[str, Any],
    results: List[TaskResult],
    seconds: float,
) -> Dict[str, Any]:
    return {
        "format": FORMAT,
        "environment": environment,
        "settings": settings,
        "duration_s": round(seconds, 1),
        "summary": summary,
        "results": [r.to_dict() for r in results],
    }


def write(report: Dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")


def load_results(report: Dict[str, Any]) -> List[TaskResult]:
    return [TaskResult.from_dict(r) for r in report["results"]]
