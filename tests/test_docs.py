"""The documentation's code cannot drift from the code: every ```python block
in README.md, docs/*.md and benchmarks/README.md runs as a self-contained
script in a fresh interpreter, as a reader would paste it. A block that is
only an excerpt (generated code, a fragment of a source file, commands that
need torchrun) has the line ``<!-- excerpt -->`` right before its fence and
is not run. Other fences (bash, cpp, text) are shown, not run, and must name
their language, so that no Python hides in an untagged fence.
docs/user_guide.md ("Code in these docs") states the convention."""

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md"]
EXCERPT_MARKER = "<!-- excerpt -->"
FENCE = re.compile(r"^(\s*)```(.*)$")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    excerpt: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _blocks(path: Path) -> List[Block]:
    lines = path.read_text().splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.relative_to(REPO)}:{index + 1}: code fence never closed")
        code = textwrap.dedent("\n".join(lines[index + 1 : end]))
        excerpt = index > 0 and lines[index - 1].strip() == EXCERPT_MARKER
        blocks.append(Block(path, index + 1, opening.group(2).strip(), code, excerpt))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for path in DOC_FILES for block in _blocks(path)]
RUNNABLE = [block for block in ALL_BLOCKS if block.language == "python" and not block.excerpt]


def test_doc_files_have_runnable_python():
    # The collection itself works: the README's examples are among the runnable blocks.
    assert any(block.path.name == "README.md" for block in RUNNABLE)


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[block.name for block in ALL_BLOCKS])
def test_every_fence_names_its_language(block):
    assert block.language, f"{block.name}: name the fence's language (```python, ```bash, ```cpp or ```text)"


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_python_block_runs_as_a_script(block, tmp_path):
    # A file, as a reader would save it (Triton reads a kernel's source from
    # its file), run in a scratch directory, so that files a snippet writes go
    # nowhere near the repo; this checkout first on the path, as the test
    # process has it.
    script = tmp_path / "snippet.py"
    script.write_text(block.code + "\n")
    pythonpath = os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{block.name} failed as a script (mark a block that is only an excerpt with "
        f"{EXCERPT_MARKER} on the line before its fence):\n{result.stderr[-4000:]}"
    )


def _conformance_reports():
    """tools/regenerate_conformance_docs.py, imported from its file."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import regenerate_conformance_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    return regenerate_conformance_docs


@pytest.mark.parametrize("report", sorted(_conformance_reports().REPORTS))
def test_conformance_report_is_current(report):
    """The reports in docs/ record a hash of the sources that decide their
    results (tools/regenerate_conformance_docs.py says which); a change to
    those sources makes them stale until they are regenerated."""
    reports = _conformance_reports()
    recorded = reports.recorded_hash(REPO / report)
    assert recorded == reports.source_hash(), (
        f"{report} (source hash {recorded}) is stale against the code; regenerate with `{reports.COMMAND}`"
    )
