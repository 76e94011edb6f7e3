"""Parsing Python source in the trusted processes, one thread at a time (server, CLI, evaluator).

CPython 3.11 keeps the AST converter's recursion depth in state shared by every thread, so two
threads that parse or compile a tree at once can fail with "SystemError: AST constructor recursion
depth mismatch". The server and the evaluator parse candidates and tasks from many threads; every
parse and every compile of a tree in them goes through this module, under one lock. Parsing a
module takes milliseconds, so the lock costs nothing that matters.
"""

from __future__ import annotations

import ast
import threading
import types

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source)` as a module; raises SyntaxError (and what ast.parse raises) as it does."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode="exec")


def compile_tree(tree: ast.Module, filename: str) -> types.CodeType:
    """Compile a parsed module without running it (catches what the parser lets through)."""
    with _LOCK:
        return compile(tree, filename, "exec", dont_inherit=True)
