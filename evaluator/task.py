"""Tasks in the KernelBench format: a reference `Model`, `get_inputs()`, `get_init_inputs()`."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from pydantic import Field

from ..common import pysource
from .results import EvalProtocol, Model

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
MAX_SOURCE_BYTES = 512 * 1024


class TaskError(ValueError):
    """The task file is not usable: the caller supplied something malformed."""


class Task(Model):
    """A reference problem: the module to beat and how to build its inputs."""

    name: str
    source: str
    protocol: EvalProtocol = Field(default_factory=EvalProtocol)

    @property
    def task_id(self) -> str:
        """Content address of the reference source (name-independent)."""
        return source_hash(self.source)[:16]


def source_hash(source: str) -> str:
    """Hash of a source text, insensitive to trailing whitespace on lines and at the end."""
    normalized = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(normalized.encode()).hexdigest()


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def check_task_source(source: str) -> None:
    """Raise TaskError unless the text parses and defines the three required names."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise TaskError(f"task source is {len(source.encode())} bytes; the limit is {MAX_SOURCE_BYTES}")
    try:
        tree = pysource.parse(source)
    except SyntaxError as exc:
        raise TaskError(f"task source does not parse: line {exc.lineno}: {exc.msg}") from None
    missing = [n for n in REQUIRED_NAMES if n not in _top_level_names(tree)]
    if missing:
        raise TaskError(
            "task source must define class Model(nn.Module), get_inputs() and get_init_inputs(); "
            f"missing: {', '.join(missing)}")


_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def task_name_from_path(path: Path) -> str:
    return _NAME_RE.sub("_", path.stem)


def load_task_file(path: str | Path) -> Task:
    """Read one task file and check its shape (it is not executed here)."""
    p = Path(path)
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"cannot read task file {p}: {exc}") from None
    check_task_source(source)
    return Task(name=task_name_from_path(p), source=source)


def load_task_folder(folder: str | Path) -> tuple[list[Task], dict[str, str]]:
    """Read every `*.py` task in a folder (e.g. a KernelBench `level1/`), sorted by name.

    Returns the tasks and, for files that are not tasks, the reason each was skipped.
    """
    root = Path(folder)
    if not root.is_dir():
        raise TaskError(f"not a folder: {root}")
    tasks: list[Task] = []
    skipped: dict[str, str] = {}
    for path in sorted(root.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            tasks.append(load_task_file(path))
        except TaskError as exc:
            skipped[path.name] = str(exc)
    return tasks, skipped
