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


def test_busy_processes_run_beside_the_block_and_are_gone_after():
    from benchmarks.__main__ import busy_processes

    with busy_processes(2):
        spinners = subprocess.run(["pgrep", "-f", "while True: pass"], capture_output=True, text=True).stdout.split()
        assert len(spinners) >= 2, spinners
    left = subprocess.run(["pgrep", "-f", "while True: pass"], capture_output=True, text=True).stdout.split()
    assert not set(spinners) & set(left), (spinners, left)


def test_report_sets_another_runs_ratios_beside_its_own():
    from benchmarks import report

    entries = [
        {"script": "eager", "what": "conv2d", "ratio": 1.05, "target": 1.1, "better": "lower", "verdict": "PASS"},
        {"script": "eager", "what": "new row", "ratio": 0.5, "target": None, "better": "lower", "verdict": "-"},
    ]
    idle = report.ratios_by_row([{**entries[0], "ratio": 0.97}])
    table = report.markdown(entries, "# busy", ("ratio idle", idle))
    assert "| # | script | what | ratio | ratio idle | target | verdict | compared |" in table
    assert "| 1 | eager | conv2d | 1.05 | 0.97 | <= 1.1 | PASS |  |" in table
    assert "| 2 | eager | new row | 0.5 | n/a | - | - |  |" in table
