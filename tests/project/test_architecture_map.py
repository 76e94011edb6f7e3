"""ARCHITECTURE.md names real files: every path it cites exists, so the map cannot drift from the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "ARCHITECTURE.md"
FOLDERS = ("common/", "evaluator/", "search/", "skills/", "server/", "tests/", "examples/", "benchmarks/")


def cited_paths(text: str) -> set[str]:
    """Backticked file and folder paths of the map."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        path = token.split(" ")[0].rstrip(".,;:")
        if path.endswith((".py", ".md", ".json")) or path.endswith("/"):
            found.add(path)
    return found


def resolves(path: str) -> bool:
    if "NN" in path:  # a pattern for a new file, not a file
        return True
    candidates = [ROOT / path]
    if not path.startswith(FOLDERS):  # shorthand inside a package (`sandbox/pool.py`, `judge/client.py`)
        candidates += [ROOT / "evaluator" / path, ROOT / "server" / path]
    if "/" not in path:  # a file named beside the one before it (`seccomp.py`): it exists in some package
        candidates += [f for part in FOLDERS[:5] for f in (ROOT / part).rglob(path)]
    if "*" in path:  # a family of files: at least one exists
        return any(ROOT.glob(path))
    return any(c.exists() for c in candidates)


def test_every_path_the_architecture_map_cites_exists():
    paths = cited_paths(MAP.read_text())
    assert len(paths) > 30
    assert sorted(p for p in paths if not resolves(p)) == []


def test_the_readme_links_to_the_map():
    assert "(ARCHITECTURE.md)" in (ROOT / "README.md").read_text()
