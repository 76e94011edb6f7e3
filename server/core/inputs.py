"""Caller inputs that Python or the OS would choke on, and server paths kept out of replies.

Runs in the server process. Task paths resolve against the task roots only, and a path that
is missing and one outside the roots get the same answer, so a caller cannot probe which
files exist. Sources too deeply nested for Python's parser get a message that says what to
change. `scrub_pairs` names the server's own folders (data directory, task roots) that `common.redact`
replaces, beside the interpreter's, in any text sent back to a caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...common import pysource
from .errors import InvalidRequest, NotFound

TOO_DEEP = ("{what} nests too deeply for Python's parser (a very long chained expression, or deeply nested "
            "lambdas, calls or brackets); split it into several statements of moderate size and send it again")
NUL = "{what} contains a NUL byte (\\x00); remove it and send it again"


def check_parsable(source: str, what: str) -> None:
    """InvalidRequest if Python cannot even build a syntax tree of `source` for reasons other than a syntax error."""
    if "\x00" in source:
        raise InvalidRequest(NUL.format(what=what))
    try:
        pysource.parse(source)
    except SyntaxError:
        return  # reported with its line by the checks that follow
    except (RecursionError, MemoryError):
        raise InvalidRequest(TOO_DEEP.format(what=what)) from None
    except ValueError:
        raise InvalidRequest(NUL.format(what=what)) from None


def missing_task_file(path: str) -> NotFound:
    return NotFound(f"no readable task file {path!r} inside this server's task roots; give a path relative to a "
                     "task root (e.g. 'level1/19_ReLU.py'), or send the module's source text instead")


def resolve_task_path(path: str, roots: Sequence[Path]) -> Path:
    """The task file `path` names (relative paths against each root in turn), confined to the roots."""
    if "\x00" in path:
        raise InvalidRequest(NUL.format(what="the path"))
    if not path.strip():
        raise InvalidRequest("the path is empty; give a path relative to a task root, or the source text")
    real_roots = [Path(r).resolve() for r in roots]
    p = Path(path)
    for candidate in ([p] if p.is_absolute() else [r / p for r in real_roots]):
        try:
            resolved = candidate.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if any(resolved.is_relative_to(r) for r in real_roots) and resolved.is_file():
            return resolved
    raise missing_task_file(path)


def scrub_pairs(config) -> tuple[tuple[str, str], ...]:
    """The server's own paths and what stands for them in messages (resolved once, at start)."""
    extra = tuple((str(Path(r).resolve()), "<task-root>") for r in config.task_roots)
    return extra + ((str(Path(config.data_dir).resolve()), "<data>"), (str(config.data_dir), "<data>"))
