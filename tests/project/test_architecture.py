"""How the package is put together: which part may import which, and rules that keep users from known failures."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import adaexplore.common
import adaexplore.evaluator
import adaexplore.search
import adaexplore.server
import adaexplore.skills
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


@pytest.mark.parametrize("package", ["evaluator", "skills", "search"])
def test_the_server_reaches_each_package_only_through_its_face(package):
    module = importlib.import_module(f"adaexplore.{package}")
    face = {f"adaexplore.{package}"} | {f"adaexplore.{package}.{name}" for name in module.__all__}
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "server").rglob("*.py")
                 for name in imports_of(path) if name.startswith(f"adaexplore.{package}.") and name not in face]
    assert offenders == []


def test_the_sandbox_imports_neither_the_worker_nor_the_profile():
    """The sandbox starts and confines processes; what runs in them is the worker's (its job table too)."""
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "evaluator" / "sandbox").rglob("*.py")
                 for name in imports_of(path)
                 if name.startswith(("adaexplore.evaluator.worker", "adaexplore.evaluator.profile"))]
    assert offenders == []


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Every module's imports (absolute names, and relative ones as '.name' with their dots)."""
    out: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add("." * node.level + (node.module or ""))
        out[str(path.relative_to(folder))] = names
    return out


def package_folder(module) -> Path:
    return Path(module.__file__).parent


def speaks_mcp(imports: set[str]) -> bool:
    return any(i in ("mcp", "mcp_types") or i.startswith(("mcp.", "mcp_types.")) for i in imports)


def test_the_application_core_never_imports_mcp():
    core = imported_modules(package_folder(adaexplore.server) / "core")
    assert core and [name for name, imports in core.items() if speaks_mcp(imports)] == []


def test_only_the_servers_face_and_the_bench_client_import_mcp():
    rooms = set()
    for part in (adaexplore.common, adaexplore.evaluator, adaexplore.search, adaexplore.server, adaexplore.skills):
        for name, imports in imported_modules(package_folder(part)).items():
            if speaks_mcp(imports):
                rooms.add(part.__name__ + "." + name.partition("/")[0] if "/" in name else part.__name__)
    assert rooms == {"adaexplore.server.face", "adaexplore.server.bench"}


def test_the_bench_speaks_mcp_only_as_a_client():
    bench = imported_modules(package_folder(adaexplore.server) / "bench")
    assert bench and [name for name, imports in bench.items()
                      if any(i == "mcp.server" or i.startswith("mcp.server.") for i in imports)] == []


def parts_imported_by(module) -> set[str]:
    """The other parts of adaexplore (evaluator, search, ...) that a part's modules import."""
    found = set()
    for path, imports in imported_modules(package_folder(module)).items():
        out_of_part = "." * (path.count("/") + 2)  # the dots of a relative import that leave the part
        for i in imports:
            if i.startswith("adaexplore."):
                found.add(i.split(".")[1])
            elif i.startswith(out_of_part) and not i.startswith(out_of_part + "."):
                found.add(i[len(out_of_part):].split(".")[0])
    return found - {module.__name__.split(".")[1]}


def test_evaluator_search_and_skills_never_import_each_other_and_common_imports_none_of_them():
    assert parts_imported_by(adaexplore.evaluator) <= {"common"}
    assert parts_imported_by(adaexplore.search) <= {"common"}
    assert parts_imported_by(adaexplore.skills) <= {"common"}
    assert parts_imported_by(adaexplore.common) == set()
    assert parts_imported_by(adaexplore.server) == {"common", "evaluator", "search", "skills"}


def test_the_vocabulary_and_the_search_load_without_torch_or_a_database():
    code = ("import sys, adaexplore.common.vocab, adaexplore.search; "
            "print(sorted(m for m in ('torch', 'sqlite3', 'mcp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
