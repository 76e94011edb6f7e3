"""Shared building blocks of the static checks: findings, kernel facts and pure AST helpers.

Nothing here looks at the installed libraries; every other module of this package builds on it.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...common.vocab import Severity
from ..results import LintIssue, Status


@dataclass
class _Finding:
    line: int
    message: str
    construct: str
    severity: Severity
    status: Status | None = None  # the fatal status an error maps to
    hint: str | None = None
    error_class: str = "LintError"
    error_message: str | None = None  # what the verdict's error says, where it is not the lint line's message
    whole_module: bool = False  # about the module, not one line of it: its error names no line

    def issue(self) -> LintIssue:
        msg = self.message + (f" ({self.hint})" if self.hint else "")
        return LintIssue(line=self.line, message=msg, construct=self.construct, severity=self.severity)


@dataclass
class _JitInfo:
    node: ast.FunctionDef
    top_level: bool
    params: list[str]
    constexpr_params: set[str]
    locals: set[str]
    tensors: set[str]
    extra_decorators: bool  # autotune / heuristics / unknown decorators supply arguments


class _CheckerState:
    """What the checker's parts share. `_Checker.__init__` sets it; it is declared here so that each part
    (names, jit, kernel, launch) is type-checked on its own."""

    source: str
    lines: list[str]
    tree: ast.Module
    nodes: list[ast.AST]
    findings: list[_Finding]
    modules: dict[str, types.ModuleType]  # alias -> installed module
    objects: dict[str, Any]  # alias -> object imported from an installed module
    torch_aliases: set[str]
    math_aliases: set[str]
    jit: dict[str, _JitInfo]
    module_literals: dict[str, int]
    allow_globals: bool

    if TYPE_CHECKING:  # defined by one part, called by others
        def add(self, node: ast.AST | int, message: str, construct: str, severity: Severity,
                status: Status | None = None, hint: str | None = None) -> None: ...

        def resolve(self, node: ast.AST) -> Any: ...

        def is_tensor_expr(self, node: ast.AST, tensors: set[str]) -> bool: ...

        def check_arange(self, n: ast.Call, jit: _JitInfo, severity: Severity, status: Status | None) -> None: ...


# --------------------------------------------------------------------------------------------
# AST helpers.
# --------------------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> list[str] | None:
    """['a', 'b', 'c'] for the expression a.b.c, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_literal(node.operand)
        return -v if v is not None else None
    return None


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_literal(node.left) and _is_literal(node.right)
    if isinstance(node, ast.Tuple):
        return all(_is_literal(e) for e in node.elts)
    return False


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _stored_names(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
    return out
