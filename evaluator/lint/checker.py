"""The checker: one walk over the candidate, with the severity each place in it deserves.

:class:`_Checker` holds the per-candidate state, walks module, function and kernel bodies, and
hands each statement and expression to the rules of this package's mixins. Where the code sits
(module level, an ordinary function, a kernel, under ``try`` or a compile-time ``if``) decides
whether a finding is an error or a warning.
"""

from __future__ import annotations

import ast
import types
from typing import Any, cast

from ...common.vocab import Severity
from ..results import Status
from .core import _Finding, _JitInfo
from .jit import _JitMixin
from .kernel import _KernelMixin
from .launch import _LaunchMixin
from .names import _NamesMixin


class _Checker(_NamesMixin, _JitMixin, _KernelMixin, _LaunchMixin):
    """Static checks of one parsed candidate; ``run()`` fills ``findings``."""

    def __init__(self, source: str, tree: ast.Module):
        self.source = source
        self.lines = source.splitlines()
        self.tree = tree
        self.nodes = list(ast.walk(tree))  # one traversal, reused by every pass
        self.findings: list[_Finding] = []
        self.modules: dict[str, types.ModuleType] = {}  # alias -> installed module
        self.objects: dict[str, Any] = {}  # alias -> object imported from an installed module
        self.torch_aliases: set[str] = set()
        self.math_aliases: set[str] = set()
        self.jit: dict[str, _JitInfo] = {}
        self.module_literals: dict[str, int] = {}  # top-level name bound only to plain literals -> line
        self.allow_globals = "TRITON_ALLOW_NON_CONSTEXPR_GLOBALS" in source

    # ---------------------------------------------------------------- helpers
    def add(self, node: ast.AST | int, message: str, construct: str, severity: Severity,
            status: Status | None = None, hint: str | None = None) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.findings.append(_Finding(line, message, construct, severity, status, hint))

    def run(self) -> None:
        self.check_missing_modules()
        self.collect_aliases()
        self.collect_jit()
        self.collect_module_literals()
        self.walk_block(self.tree.body, ctx="module", jit=None, guarded=False, maybe_dead=False)
        self.check_launches()

    # ---------------------------------------------------------------- walking
    def walk_block(self, stmts: list[ast.stmt], ctx: str, jit: _JitInfo | None, guarded: bool,
                   maybe_dead: bool) -> None:
        for s in stmts:
            self.walk_stmt(s, ctx, jit, guarded, maybe_dead)
            if ctx == "jit" and isinstance(s, ast.Return):
                break  # Triton stops code generation at a return: the rest is dead code.

    def walk_stmt(self, s: ast.stmt, ctx: str, jit: _JitInfo | None, guarded: bool, maybe_dead: bool) -> None:
        if ctx == "jit" and jit is not None:
            self.check_jit_stmt(s, jit, maybe_dead)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Decorators, defaults and annotations run where the def is; the body runs later.
            for e in s.decorator_list + s.args.defaults + [d for d in s.args.kw_defaults if d is not None]:
                self.walk_expr(e, ctx, jit, guarded, maybe_dead)
            info = self.jit.get(s.name)
            is_jit = info is not None and info.node is s
            for a in s.args.posonlyargs + s.args.args + s.args.kwonlyargs:
                if a.annotation is not None:
                    self.walk_expr(a.annotation, "jit" if is_jit else ctx, info if is_jit else jit, guarded,
                                   maybe_dead)
            if ctx == "jit":
                return  # nested def inside a kernel: already reported, do not lint its body
            if is_jit:
                self.walk_block(s.body, "jit", info, guarded, False)
            else:
                self.walk_block(s.body, "func", None, guarded, False)
            return
        if isinstance(s, ast.ClassDef):
            for e in s.decorator_list + s.bases + [k.value for k in s.keywords]:
                self.walk_expr(e, ctx, jit, guarded, maybe_dead)
            self.walk_block(s.body, ctx if ctx != "jit" else "jit", jit, guarded, maybe_dead)
            return
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            s = cast(ast.Try, s)  # try/except* has the same fields
            self.walk_block(s.body, ctx, jit, guarded or bool(s.handlers), maybe_dead)
            for h in s.handlers:
                if h.type is not None:
                    self.walk_expr(h.type, ctx, jit, guarded, maybe_dead)
                self.walk_block(h.body, ctx, jit, guarded, maybe_dead)
            self.walk_block(s.orelse, ctx, jit, guarded, maybe_dead)
            self.walk_block(s.finalbody, ctx, jit, guarded, maybe_dead)
            return
        if isinstance(s, ast.If):
            self.walk_expr(s.test, ctx, jit, guarded, maybe_dead)
            probe = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                        and n.func.id in ("hasattr", "getattr") for n in ast.walk(s.test))
            sub_guarded = guarded or probe
            sub_ctx = ctx
            if ctx == "module" and self.is_main_guard(s.test):
                sub_ctx = "func"  # not executed on import
            sub_dead = maybe_dead
            if ctx == "jit" and jit is not None and not self.is_tensor_expr(s.test, jit.tensors):
                # A compile-time condition: Triton compiles only the branch taken.
                sub_dead = True
            self.walk_block(s.body, sub_ctx, jit, sub_guarded, sub_dead)
            self.walk_block(s.orelse, sub_ctx, jit, sub_guarded, sub_dead)
            return
        # Generic statement: visit child expressions and nested statement lists.
        for _field, value in ast.iter_fields(s):
            if isinstance(value, list):
                sub_stmts = [v for v in value if isinstance(v, ast.stmt)]
                if sub_stmts:
                    self.walk_block(sub_stmts, ctx, jit, guarded, maybe_dead)
                for v in value:
                    if isinstance(v, ast.expr):
                        self.walk_expr(v, ctx, jit, guarded, maybe_dead)
                    elif isinstance(v, (ast.withitem, ast.match_case, ast.keyword)):
                        for sub in ast.walk(v):
                            if isinstance(sub, ast.expr):
                                self.walk_expr(sub, ctx, jit, guarded, maybe_dead, shallow=True)
                        if isinstance(v, ast.match_case):
                            self.walk_block(v.body, ctx, jit, guarded, maybe_dead)
            elif isinstance(value, ast.expr):
                self.walk_expr(value, ctx, jit, guarded, maybe_dead)

    def is_main_guard(self, test: ast.AST) -> bool:
        return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__")

    def severity_for(self, ctx: str, guarded: bool, maybe_dead: bool) -> tuple[Severity, Status | None] | None:
        """How sure a failure of this code is, given where it sits."""
        if guarded:
            return None  # inside try/except or a hasattr() probe: the candidate handles it
        if ctx == "jit":
            return (Severity.warning, None) if maybe_dead else (Severity.error, Status.compile_error)
        if ctx == "module":
            return (Severity.error, Status.import_error)
        # Inside an ordinary function: fails only if that code runs, which we cannot know.
        return (Severity.warning, None)

    def walk_expr(self, e: ast.expr, ctx: str, jit: _JitInfo | None, guarded: bool, maybe_dead: bool,
                  shallow: bool = False) -> None:
        sev = self.severity_for(ctx, guarded, maybe_dead)
        nodes = [e] if shallow else ast.walk(e)
        for n in nodes:
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                self.check_attribute(n, sev)
            elif isinstance(n, ast.Call):
                self.check_call(n, sev, ctx, jit, maybe_dead)
            elif isinstance(n, ast.Name) and ctx == "jit" and jit is not None and isinstance(n.ctx, ast.Load):
                self.check_global(n, jit, maybe_dead)
            if ctx == "jit" and jit is not None and not shallow:
                self.check_jit_expr(n, jit, maybe_dead)
