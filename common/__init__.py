"""What every part of adaexplore shares and none of them owns: the vocabulary and the database policy.

Imported by every process (server, CLI, the evaluator's processes). `evaluator`, `search` and `skills`
never import each other, and only `server` joins them; all four may import this package, which imports
none of them (and neither torch nor MCP).
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

# The modules are the face: each is small and named for what it holds.
__all__ = ["db", "pysource", "redact", "vocab"]


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return import_module(f".{name}", __name__)
