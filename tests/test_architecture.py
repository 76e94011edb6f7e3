"""How the package is put together, where a rule keeps users from a known failure."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from adaexplore.common import pysource

PACKAGE = Path(pysource.__file__).resolve().parents[1]  # the installed package's root
SUBPACKAGES = ("common", "evaluator", "search", "server", "skills")


def test_every_parse_of_python_source_in_the_trusted_processes_goes_through_one_lock():
    """Two threads parsing at once can fail with "AST constructor recursion depth mismatch" on
    CPython 3.11; the server and the evaluator parse from many threads, so none parses directly."""
    raw = re.compile(r"\bast\.parse\(|(?<![\w.])compile\(")  # the builtin compile, not re.compile
    sources = [path for sub in SUBPACKAGES for path in (PACKAGE / sub).rglob("*.py")]
    assert len(sources) > 50  # the package itself, wherever it is installed
    offenders = [f"{path.relative_to(PACKAGE)}:{n}" for path in sources
                 if path.name != "pysource.py" and "worker" not in path.parts
                 for n, line in enumerate(path.read_text().splitlines(), 1) if raw.search(line.split("#")[0])]
    assert offenders == []


def test_parsing_from_many_threads_at_once_gives_every_thread_its_tree():
    source = (Path(__file__).resolve().parents[1] / "examples" / "kernels" / "softmax.py").read_text()
    results: list[int] = []

    def work() -> None:
        for _ in range(50):
            tree = pysource.parse(source, filename="candidate.py")
            pysource.compile_tree(tree, "candidate.py")
            results.append(len(tree.body))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 400 and len(set(results)) == 1
