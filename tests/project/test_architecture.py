"""How the package is put together, where a rule keeps users from a known failure."""

from __future__ import annotations

import ast
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
    source = (Path(__file__).resolve().parents[2] / "examples" / "kernels" / "softmax.py").read_text()
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


def imports_of(path: Path) -> list[str]:
    """The modules a source file imports, absolute, as Python would resolve its relative imports."""
    module = ".".join(("adaexplore", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                absolute = f"{base}.{node.module}" if node.module else base
            else:
                absolute = node.module or ""
            # `from . import x` may name a module: count `base.x` too.
            found += [absolute] + [f"{absolute}.{alias.name}" for alias in node.names]
    return found


def test_the_server_reaches_the_evaluator_only_through_its_face():
    import adaexplore.evaluator

    face = {"adaexplore.evaluator"} | {f"adaexplore.evaluator.{name}" for name in adaexplore.evaluator.__all__}
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "server").rglob("*.py")
                 for name in imports_of(path) if name.startswith("adaexplore.evaluator.") and name not in face]
    assert offenders == []


def test_the_sandbox_imports_neither_the_worker_nor_the_profile():
    """The sandbox starts and confines processes; what runs in them is the worker's (its job table too)."""
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "evaluator" / "sandbox").rglob("*.py")
                 for name in imports_of(path)
                 if name.startswith(("adaexplore.evaluator.worker", "adaexplore.evaluator.profile"))]
    assert offenders == []
