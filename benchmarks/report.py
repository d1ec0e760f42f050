"""The combined report of ``python -m benchmarks``: every script's ratios in
one Markdown table and one JSON file.

A script's JSON (``--json PATH``) holds its rows under ``"rows"`` (or is a
list of rows); each row lists the ratios it reports under ``"report"`` as
``harness.report_entry`` builds them. A row without ``"report"`` is read
from its common fields instead: ``what`` (or ``name``, ``op``, ``model``)
with ``shape`` or ``size``, ``ratio``, ``target``, ``verdict`` and
``higher_is_better``, so a script that writes harness-style rows joins the
report without more work.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

LABEL_KEYS = ("what", "name", "op", "model")
DETAIL_KEYS = ("shape", "size")


def _fallback_entry(row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A report entry from a row's common fields; None without a ratio."""
    ratio = row.get("ratio")
    if not isinstance(ratio, (int, float)):
        return None
    label = next((str(row[key]) for key in LABEL_KEYS if row.get(key)), "row")
    detail = next((str(row[key]) for key in DETAIL_KEYS if row.get(key) not in (None, "", "-")), "")
    target = row.get("target")
    return {
        "what": f"{label} {detail}".strip(),
        "ratio": ratio,
        "target": target if isinstance(target, (int, float)) else None,
        "better": "higher" if row.get("higher_is_better") else "lower",
        "verdict": row.get("verdict") or "-",
        "compares": row.get("note", ""),
    }


def entries_of(script: str, payload: Any) -> List[Dict[str, Any]]:
    """Every ratio a script's JSON reports, each tagged with the script."""
    rows = payload.get("rows", []) if isinstance(payload, dict) else payload
    out = []
    for row in rows or []:
        if not isinstance(row, dict):
            continue
        found = row.get("report")
        if found is None:
            fallback = _fallback_entry(row)
            found = [] if fallback is None else [fallback]
        for entry in found:
            out.append({"script": script, **entry})
    return out


def failed_entry(script: str, reason: str) -> Dict[str, Any]:
    """The line of a script that produced no JSON (it failed or timed out)."""
    return {
        "script": script,
        "what": "(script did not finish)",
        "ratio": None,
        "target": None,
        "better": "lower",
        "verdict": "ERROR",
        "compares": reason,
    }


def _number(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3g}"


def _ratio(entry: Dict[str, Any]) -> str:
    """The ratio, and the quartiles of its repetitions where the script
    took it per repetition (``harness.Pairing``)."""
    spread = entry.get("spread")
    if entry["ratio"] is None or not spread:
        return _number(entry["ratio"])
    return f"{_number(entry['ratio'])} ({_number(spread[0])}-{_number(spread[1])})"


def _target(entry: Dict[str, Any]) -> str:
    if entry["target"] is None:
        return "-"
    return f"{'<=' if entry['better'] == 'lower' else '>='} {entry['target']:g}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def ratios_by_row(entries: Sequence[Dict[str, Any]]) -> Dict[Tuple[str, str], Optional[float]]:
    """An earlier report's ratios, keyed by (script, what), to set beside a new run's."""
    return {(entry["script"], entry["what"]): entry.get("ratio") for entry in entries}


def markdown(
    entries: Sequence[Dict[str, Any]],
    header: str,
    beside: Optional[Tuple[str, Dict[Tuple[str, str], Optional[float]]]] = None,
) -> str:
    """One table: a numbered line per ratio (the numbers label the plot).
    ``beside`` is (column title, ratios_by_row of another run): the same
    rows measured in other conditions (idle against busy), in one more column.
    A ratio taken per repetition shows its quartiles in brackets."""
    extra_title, extra = beside if beside else ("", {})
    lines = [
        header,
        "",
        "| # | script | what | ratio |" + (f" {extra_title} |" if beside else "") + " target | verdict | compared |",
        "| ---: | --- | --- | ---: |" + (" ---: |" if beside else "") + " --- | --- | --- |",
    ]
    for number, entry in enumerate(entries, 1):
        cells = [str(number), entry["script"], entry["what"], _ratio(entry)]
        if beside:
            cells.append(_number(extra.get((entry["script"], entry["what"]))))
        cells += [_target(entry), entry["verdict"], entry.get("compares", "")]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    verdicts = [entry["verdict"] for entry in entries]
    lines += [
        "",
        f"{verdicts.count('PASS')} PASS, {verdicts.count('MISS')} MISS, "
        f"{verdicts.count('ERROR')} ERROR, {len(entries)} ratios in all "
        "(ratios without a target are information).",
    ]
    return "\n".join(lines) + "\n"


def write_json(path: str, entries: Sequence[Dict[str, Any]], meta: Dict[str, Any]) -> None:
    with open(path, "w") as handle:
        json.dump({**meta, "ratios": list(entries)}, handle, indent=2)
        handle.write("\n")
