"""The README is what CI runs and what users read: it must match the code."""

import re
from pathlib import Path

from adaexplore.server.face.docs import END, START, tool_table

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_tool_table_is_generated_from_the_server():
    block = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), README, re.S)
    assert block, "README lacks the generated tool table"
    assert block.group(1) == tool_table(), "stale: run python -m adaexplore.server.face.docs --write"


def test_ci_runs_the_readme_commands():
    blocks = re.findall(r"<!-- ci: [^>]*-->\s*```(?:bash|sh|console)?\n(.*?)```", README, re.S)
    assert len(blocks) == 2
    assert "adaexplore demo" in blocks[0] and "pytest" in blocks[1]
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "README.md" in ci
