"""``python -m benchmarks`` as a user runs it: each script in its own
interpreter, one report. Speed is not asserted (benchmarks measure it);
what is checked is that a script's rows reach the report, so a script whose
rows cannot be written as JSON shows up here rather than as an ERROR line in
someone's report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_report_collects_the_graph_and_op_path_rows(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "graphs", "op_path", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode in (0, 1), result.stderr  # 1: some ratio missed its target
    report = json.loads((tmp_path / "report.json").read_text())
    scripts = {entry["script"] for entry in report["ratios"]}
    assert scripts == {"graphs", "op_path"}, scripts
    errors = [entry for entry in report["ratios"] if entry["verdict"] == "ERROR"]
    assert errors == [], errors
    graph_rows = [entry["what"] for entry in report["ratios"] if entry["script"] == "graphs"]
    assert any("replay" in what for what in graph_rows) and any("decode" in what for what in graph_rows), graph_rows
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.png").is_file()
