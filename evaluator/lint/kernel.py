"""Checks inside ``@triton.jit`` bodies.

Python constructs Triton's code generator cannot lower (``break``, ``lambda``, ``try``, nested
``def``, ...), ``tl.arange`` bounds, non-constexpr module globals, ``print``, and ``math`` /
``torch`` calls on Triton tensors.
"""

from __future__ import annotations

import ast

from ...common.vocab import Severity
from ..results import Status
from .core import _CheckerState, _dotted, _int_literal, _is_literal, _is_pow2, _JitInfo
from .names import _TL_NAMES, _tl

# Names that Triton's code generator resolves itself inside a kernel (CodeGenerator.builtin_namespace).
_KERNEL_BUILTINS = frozenset({"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr",
                              "print", "min", "max"})

_NESTED_DEF = ("nested def", "move the helper to module level and decorate it with @triton.jit")
# Statements with no visitor in Triton's CodeGenerator: generic_visit raises 'unsupported AST node type'.
_UNSUPPORTED_STMTS: dict[type, tuple[str, str]] = {
    ast.Break: ("break", "use a loop bound or a mask (tl.where) instead of break"),
    ast.Continue: ("continue", "guard the loop body with a mask or an if instead of continue"),
    ast.Raise: ("raise", "use tl.device_assert or tl.static_assert"),
    ast.Global: ("global", "pass values as kernel arguments"),
    ast.Nonlocal: ("nonlocal", "pass values as kernel arguments"),
    ast.Delete: ("del", "remove the del statement"),
    ast.ClassDef: ("class", "define classes outside the kernel"),
    ast.Import: ("import", "import at module level"),
    ast.ImportFrom: ("import", "import at module level"),
    ast.AsyncFunctionDef: _NESTED_DEF,
    ast.FunctionDef: _NESTED_DEF,
    ast.AsyncFor: ("async for", "use a plain for loop"),
    ast.AsyncWith: ("async with", "remove it"),
    ast.Try: ("try", "kernels cannot catch exceptions; remove try/except"),
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = _UNSUPPORTED_STMTS[ast.Try]
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMTS[ast.Match] = ("match", "use if/elif")
# Expressions likewise: no visit_Lambda / visit_Yield / visit_Await / visit_Dict / visit_Set /
# visit_*Comp except ListComp.
_UNSUPPORTED_EXPRS: dict[type, tuple[str, str]] = {
    ast.Lambda: ("lambda", "define a @triton.jit function at module level (e.g. for tl.reduce)"),
    ast.Yield: ("yield", "kernels cannot be generators"),
    ast.YieldFrom: ("yield", "kernels cannot be generators"),
    ast.Await: ("await", "remove it"),
    ast.Dict: ("dict", "use separate variables or a tuple"),
    ast.DictComp: ("dict comprehension", "use a tuple or tl.static_range"),
    ast.Set: ("set", "use a tuple"),
    ast.SetComp: ("set comprehension", "use a tuple or tl.static_range"),
    ast.GeneratorExp: ("generator expression", "use a loop with tl.static_range"),
}



class _KernelMixin(_CheckerState):
    """Kernel-body checks of :class:`checker._Checker`."""

    # ---------------------------------------------------------------- kernel bodies
    def check_arange(self, n: ast.Call, jit: _JitInfo, severity: Severity, status: Status | None) -> None:
        """semantic.arange: both bounds constexpr ints, end > start, end - start a power of two."""
        args = list(n.args)
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        start = args[0] if len(args) > 0 else kw.get("start")
        end = args[1] if len(args) > 1 else kw.get("end")
        if start is None or end is None:
            return
        for b in (start, end):
            if isinstance(b, ast.Name) and b.id in jit.params and b.id not in jit.constexpr_params \
                    and b.id not in jit.locals:
                self.add(n, f"tl.arange bounds must be tl.constexpr, but parameter {b.id} is not annotated "
                         "tl.constexpr", "tl.arange(non-constexpr)", severity, status,
                         f"declare {b.id}: tl.constexpr and pass it as a compile-time value")
                return
        lo, hi = _int_literal(start), _int_literal(end)
        if lo is not None and hi is not None:
            if hi <= lo:
                self.add(n, f"tl.arange end ({hi}) must be greater than start ({lo})", "tl.arange(empty)",
                         severity, status)
            elif not _is_pow2(hi - lo):
                p = 1 << (hi - lo - 1).bit_length()
                self.add(n, f"tl.arange range {hi - lo} is not a power of two", "tl.arange(non-power-of-2)",
                         severity, status, f"use tl.arange(0, {p}) with a mask")

    def check_global(self, n: ast.Name, jit: _JitInfo, maybe_dead: bool) -> None:
        """CodeGenerator only lets a kernel read globals that are constexpr, modules, jit functions or dtypes.

        A module-level name bound only to plain literals (BLOCK = 128) is none of these: NameError
        'Cannot access global variable' at compile time. Only checked for top-level kernels (a kernel
        nested in a function may capture enclosing names) and when the candidate does not turn on
        TRITON_ALLOW_NON_CONSTEXPR_GLOBALS.
        """
        name = n.id
        if (not jit.top_level or self.allow_globals or name in jit.params or name in jit.locals
                or name in _KERNEL_BUILTINS or name not in self.module_literals):
            return
        self.add(n, f"kernel {jit.node.name} reads module global {name}, which is not a tl.constexpr",
                 "non-constexpr global", Severity.warning if maybe_dead else Severity.error,
                 None if maybe_dead else Status.compile_error,
                 f"write {name} = tl.constexpr(...) at module level, or pass it as a tl.constexpr parameter")

    def _unsupported(self, node: ast.AST, table: dict, err: tuple) -> bool:
        """Report `node` if its type is in `table` (construct, hint); True if it was."""
        if type(node) not in table:
            return False
        construct, hint = table[type(node)]
        self.add(node, f"`{construct}` is not supported inside a @triton.jit function", construct, err[0], err[1], hint)
        return True

    def check_jit_stmt(self, s: ast.stmt, jit: _JitInfo, maybe_dead: bool) -> None:
        """Statements with no lowering in Triton's CodeGenerator (installed code_generator.py).

        CodeGenerator has no visit_Break / visit_Continue / visit_Try / visit_Raise / visit_Global /
        visit_Nonlocal / visit_Delete / visit_Import / visit_ClassDef / async visitors: generic_visit
        raises 'unsupported AST node type' -> sure errors. Nested FunctionDef raises explicitly.
        Code under a compile-time `if` is compiled only when that branch is taken, so there the
        same findings are warnings.
        """
        err = (Severity.warning, None) if maybe_dead else (Severity.error, Status.compile_error)
        if self._unsupported(s, _UNSUPPORTED_STMTS, err):
            return
        if isinstance(s, ast.With):
            # visit_With exists (for Triton's own context managers) and calls the manager with a
            # _semantic= keyword: torch / Python context managers fail. Unknown ones: warning.
            for item in s.items:
                parts = _dotted(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else None
                if parts and (parts[0] in self.torch_aliases or parts[0] in ("open", "contextlib")):
                    self.add(s, "`with` over a non-Triton context manager cannot compile in a kernel", "with",
                             err[0], err[1], "remove the with block")
                    return
                if not parts or parts[0] not in self.modules:
                    self.add(s, "`with` inside a @triton.jit function works only with Triton context managers",
                             "with", Severity.warning, None)
                    return

    def check_jit_expr(self, n: ast.AST, jit: _JitInfo, maybe_dead: bool) -> None:
        err = (Severity.warning, None) if maybe_dead else (Severity.error, Status.compile_error)
        if self._unsupported(n, _UNSUPPORTED_EXPRS, err):
            return
        if isinstance(n, ast.ListComp):
            # visit_ListComp accepts one generator over a tuple (a tuple comprehension); nested
            # comprehensions and ranges raise. Anything else is left alone.
            it = n.generators[0].iter
            parts = _dotted(it.func) if isinstance(it, ast.Call) else None
            if len(n.generators) != 1:
                self.add(n, "nested comprehensions are not supported inside a @triton.jit function",
                         "list comprehension", err[0], err[1], "use a loop")
            elif parts and parts[-1] in ("range", "static_range", "arange"):
                self.add(n, "only comprehensions over tuples are supported inside a @triton.jit function",
                         "list comprehension", err[0], err[1], "use a for loop over tl.static_range")
            return
        if not isinstance(n, ast.Call):
            return
        func = n.func
        if isinstance(func, ast.Name) and func.id == "print" and "print" not in jit.locals:
            # print maps to tl.device_print, whose first argument must be a string literal prefix.
            first = n.args[0] if n.args else None
            if isinstance(first, (ast.Constant, ast.JoinedStr)) and (
                    not isinstance(first, ast.Constant) or isinstance(first.value, str)):
                self.add(n, "print in a kernel runs tl.device_print on every thread and slows it down",
                         "print(", Severity.warning, None, "remove it before timing; use tl.device_print for debugging")
            else:
                self.add(n, "print inside a kernel is tl.device_print, which needs a string prefix first",
                         "print(", err[0], err[1], 'use tl.device_print("x", x) or tl.static_print for compile-time values')
            return
        parts = _dotted(func)
        if not parts:
            return
        if parts[0] in self.torch_aliases and parts[0] not in jit.locals and len(parts) > 1:
            # torch functions receive Triton tensors they cannot handle: a TypeError at compile time.
            name = "torch." + ".".join(parts[1:])
            self.add(n, f"{name} cannot be called inside a @triton.jit function", f"{name}(", err[0], err[1],
                     "use the matching tl.* function")
            return
        if parts[0] in self.math_aliases and parts[0] not in jit.locals and len(parts) == 2:
            # Python's math works on compile-time numbers (math.sqrt(2.0), math.log2(BLOCK)) but raises
            # TypeError on a Triton tensor. Error only when an argument is surely a tensor.
            fn = parts[1]
            alt = f"tl.{fn}" if fn in _TL_NAMES else (
                f"tl.math.{fn}" if _tl is not None and hasattr(_tl.math, fn) else "a tl.* function")
            all_args = list(n.args) + [k.value for k in n.keywords]
            if any(self.is_tensor_expr(a, jit.tensors) for a in all_args):
                self.add(n, f"math.{fn} on a Triton tensor cannot compile", f"math.{fn}(", err[0], err[1], f"use {alt}")
            elif not all(_is_literal(a) or (isinstance(a, ast.Name) and (a.id in jit.constexpr_params
                                                                         or a.id in self.module_literals))
                         for a in all_args):
                self.add(n, f"math.{fn} works in a kernel only on compile-time constants", f"math.{fn}(",
                         Severity.warning, None, f"use {alt} for tensors")
