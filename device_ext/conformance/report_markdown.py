"""The human-readable report (docs/conformance_float32.md is one): the
figures, every failure with its cause, every skip with its reason, and the
status of every (op, dtype) pair."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Tuple

from .classify import cause_group
from .results import ERROR_INPUTS_DTYPE, FAILURES, Status, TaskResult
from .summary import format_rate, op_statuses

# One letter per status in the op x dtype matrix of multi-dtype reports.
_SHORT = {Status.PASS: "✓", Status.MISMATCH: "M", Status.MISSING_KERNEL: "K", Status.ERROR: "E", Status.SKIPPED: "S"}


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: Any) -> str:
    return f"`{text}`"


def _table(header: List[str], rows: List[List[Any]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _environment(report: Dict[str, Any]) -> List[str]:
    env = report["environment"]
    settings = report["settings"]
    device = env.get("device", {})
    properties = ", ".join(f"{k}={v}" for k, v in device.get("properties", {}).items())
    rows = [
        ["date (UTC)", env["date"]],
        ["torch", env["torch"]],
        ["torch-mydev", f"{env['torch_mydev']}, source {env['source_revision']}, {device.get('extension_build', '?')}"],
        ["device", f"{device.get('device', '?')} ({device.get('device_count', '?')} devices): {properties}"],
        ["host", f"{env['host']}, Python {env['python']}"],
        ["MYDEV_CPU_FALLBACK", env["cpu_fallback"]],
        ["command", _code(settings["command"])],
        [
            "settings",
            f"dtypes {settings['dtypes']}; samples per op and dtype: {settings['max_samples'] or 'all'} "
            f"({settings['inputs']} inputs"
            f"{', generated on the device; strides compared' if settings.get('samples_on_device') else ''}); "
            f"call forms: {', '.join(settings['variants'])}; "
            f"timeout {settings['timeout_s']:g} s per op and dtype; {settings['jobs']} worker(s)",
        ],
        ["duration", f"{report['duration_s']:.0f} s"],
    ]
    return ["## Environment", ""] + _table(["", ""], rows)


def _summary(report: Dict[str, Any]) -> List[str]:
    summary = report["summary"]
    lines = ["## Summary", ""]
    if "float32_op_pass_rate" in summary:
        lines.append(f"- **Op pass rate at float32: {format_rate(summary['float32_op_pass_rate'])}**")
    lines.append(f"- (op, dtype) pair pass rate over the checked dtypes: {format_rate(summary['pair_pass_rate'])}")
    lines.append(
        f"- Op pass rate over the checked dtypes (an op passes when all its dtypes pass): {format_rate(summary['op_pass_rate'])}"
    )
    lines.append(
        f"- {summary['ops']} ops, {summary['pairs']} (op, dtype) pairs checked; "
        f"{len(summary['not_applicable'])} selected ops support none of the requested dtypes on cuda or the CPU."
    )
    checked = set(summary["by_dtype"])
    lines.append("")
    if checked - {ERROR_INPUTS_DTYPE}:
        lines += [
            "A pair passes when every sample input compared at that dtype gave the CPU's result (within the "
            "tolerances below), through every call form (function, in-place variant, out=). It is skipped when "
            "no sample could be compared. Pass rates are passed / (passed + failed); skipped pairs count in "
            "neither. Tolerances: torch.testing.assert_close's defaults for the dtype, widened only where the "
            "OpInfo's own toleranceOverride/precisionOverride says so; NaN equals NaN.",
            "",
        ]
    if ERROR_INPUTS_DTYPE in checked:
        lines += [
            f"Ops named error_inputs:<name> (dtype {ERROR_INPUTS_DTYPE}: error inputs choose their own dtypes) "
            "check the OpInfo's error inputs: each must raise at the call, with the exception type and message "
            "the OpInfo names, and leave nothing for the next synchronize; one that raises nothing on mydev must "
            "raise nothing on the CPU either, and one that raises on neither is skipped.",
            "",
        ]
    header = ["dtype"] + [s.value for s in Status] + ["pass rate"]
    rows = [
        [dtype] + [counts["ops"][s.value] for s in Status] + [format_rate(counts["op_pass_rate"])]
        for dtype, counts in summary["by_dtype"].items()
    ]
    lines += _table(header, rows)
    return lines


def _failures(results: List[TaskResult]) -> List[str]:
    failed = [r for r in results if r.status in FAILURES]
    lines = ["## Failures", ""]
    if not failed:
        return lines + ["None."]
    groups: Dict[Tuple[Status, str], List[TaskResult]] = defaultdict(list)
    for result in failed:
        groups[(result.status, cause_group(result.causes[0].message))].append(result)
    lines += ["### By cause", "", "Failing pairs grouped by the shape of their first cause (details below).", ""]
    rows = [
        [status.value, len(group), ", ".join(sorted({f"{r.op}" for r in group})), group_key]
        for (status, group_key), group in sorted(
            groups.items(), key=lambda item: (FAILURES.index(item[0][0]), -len(item[1]))
        )
    ]
    lines += _table(["status", "pairs", "ops", "cause"], rows)
    for status in FAILURES:
        of_status = [r for r in failed if r.status == status]
        if not of_status:
            continue
        lines += ["", f"### {status.value} ({len(of_status)})", ""]
        rows = []
        for result in of_status:
            compared = sum(n for s, n in result.counts.items() if s != Status.SKIPPED.value)
            for cause in result.causes:
                rows.append(
                    [
                        result.op,
                        result.dtype,
                        cause.status.value,
                        cause.variant,
                        f"{cause.count}/{compared}",
                        cause.message,
                        f"#{cause.first_sample}: {cause.sample}",
                    ]
                )
        lines += _table(["op", "dtype", "status", "call", "samples", "cause", "first failing sample"], rows)
    return lines


def _skipped(results: List[TaskResult]) -> List[str]:
    skipped = [r for r in results if r.status == Status.SKIPPED]
    lines = [
        "## Skipped",
        "",
        "Pairs where no sample's values could be compared, with the reason and the number of sample runs. "
        "They still ran on the device: an exception, or outputs of the wrong structure, device, dtype or "
        "shape, would have made them fail.",
        "",
    ]
    if not skipped:
        return lines + ["None."]
    rows = [[r.op, r.dtype, "; ".join(f"{reason} ({n})" for reason, n in r.skip_reasons.items())] for r in skipped]
    return lines + _table(["op", "dtype", "reason (samples)"], rows)


def _all_results(results: List[TaskResult], dtypes: List[str]) -> List[str]:
    lines = ["## All results", ""]
    by_op: Dict[str, Dict[str, TaskResult]] = defaultdict(dict)
    for result in results:
        by_op[result.op][result.dtype] = result
    if len(dtypes) == 1:
        rows = [
            [op, r.status.value, f"{r.counts.get(Status.PASS.value, 0)}/{sum(r.counts.values())}", f"{r.seconds:.2f}"]
            for op, by_dtype in by_op.items()
            for r in by_dtype.values()
        ]
        return lines + _table(["op", "status", "passed sample runs", "seconds"], rows)
    legend = ", ".join(f"{mark} {status.value}" for status, mark in _SHORT.items())
    lines += [f"{legend}; empty: the CPU does not support the dtype for this op.", ""]
    op_status = op_statuses(results)
    rows = [
        [op, op_status[op].value] + [_SHORT[by_dtype[d].status] if d in by_dtype else "" for d in dtypes]
        for op, by_dtype in by_op.items()
    ]
    return lines + _table(["op", "over all dtypes"] + dtypes, rows)


def _sparse_section(results: List[TaskResult]) -> List[str]:
    """Per sparse layout: the ops whose OpInfo has samples of that layout,
    checked with them (named op[layout] in the other tables)."""
    by_layout: Dict[str, Counter] = defaultdict(Counter)
    for result in results:
        if result.op.endswith("]") and "[sparse_" in result.op:
            by_layout[result.op[result.op.rindex("[") + 1 : -1]][result.status] += 1
    lines = [
        "## Sparse layouts",
        "",
        "The ops whose OpInfo supports a sparse layout (`supports_sparse`, `supports_sparse_csr`, ...), with inputs "
        "of that layout (the OpInfo's sparse samples, or its dense samples converted) on the device, compared with "
        "the CPU. These pairs are named `op[layout]` in the other tables.",
        "",
    ]
    if not by_layout:
        return lines + ["Not checked in this run."]
    statuses = [Status.PASS, *FAILURES, Status.SKIPPED]
    rows = [[layout] + [str(counts[s]) for s in statuses] for layout, counts in by_layout.items()]
    return lines + _table(["layout"] + [s.value for s in statuses], rows)


def render(report: Dict[str, Any], results: List[TaskResult]) -> str:
    dtypes = list(report["summary"]["dtypes"])
    if dtypes == [ERROR_INPUTS_DTYPE]:
        title = "error inputs"
    else:
        title = dtypes[0] if len(dtypes) == 1 else f"{len(dtypes)} dtypes"
    lines = [
        f"# mydev OpInfo conformance report: {title}",
        "",
        "Generated by `python -m device_ext.conformance` (do not edit by hand): PyTorch's OpInfo "
        "database run on mydev and compared with the CPU.",
        "",
    ]
    sections = (
        _summary(report),
        _environment(report),
        _failures(results),
        _sparse_section(results),
        _skipped(results),
        _all_results(results, dtypes),
    )
    for section in sections:
        lines += section + [""]
    not_applicable = report["summary"]["not_applicable"]
    if not_applicable:
        lines += [
            "## Not run",
            "",
            "Ops that support none of the requested dtypes on cuda or the CPU: " + ", ".join(not_applicable),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def write(report: Dict[str, Any], results: List[TaskResult], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(report, results))
