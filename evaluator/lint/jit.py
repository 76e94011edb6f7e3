"""Kernel discovery: which functions are ``@triton.jit`` kernels, and what is known about their names.

For each kernel: its parameters, which are ``tl.constexpr``, its locals, and which names are
surely tensors (taint from non-constexpr parameters and tensor-producing ``tl`` calls). Also
the module-level names bound only to plain literals, which kernels may not read.
"""

from __future__ import annotations

import ast

from .core import _CheckerState, _dotted, _is_literal, _JitInfo, _stored_names
from .names import _DECORATOR_OBJS, _JIT_OBJ, _MISSING, _canon, _tl

# tl calls whose result is always a tensor (used to tell tensors from compile-time values).
_TENSOR_PRODUCERS = frozenset({"load", "arange", "program_id", "num_programs", "zeros", "zeros_like", "full",
                               "dot", "rand", "randn", "randint", "atomic_add", "make_block_ptr", "where"})


class _JitMixin(_CheckerState):
    """Kernel discovery of :class:`checker._Checker`."""

    # ---------------------------------------------------------------- jit discovery
    def decorator_kind(self, dec: ast.AST) -> str:
        target = dec.func if isinstance(dec, ast.Call) else dec
        obj = self.resolve(target)
        if obj is _MISSING:
            return "other"
        if _JIT_OBJ is not None and obj is _JIT_OBJ:
            return "jit"
        if any(obj is d for d in _DECORATOR_OBJS):
            return "tuning"
        return "other"

    def collect_jit(self) -> None:
        def visit(stmts: list[ast.stmt], top: bool) -> None:
            for s in stmts:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    kinds = [self.decorator_kind(d) for d in s.decorator_list]
                    if "jit" in kinds and isinstance(s, ast.FunctionDef):
                        self.jit[s.name] = self.make_jit_info(s, top, any(k != "jit" for k in kinds))
                    else:
                        visit(s.body, False)
                elif isinstance(s, ast.ClassDef):
                    visit(s.body, False)
                else:
                    for field in ("body", "orelse", "finalbody", "handlers"):
                        sub = getattr(s, field, None)
                        if isinstance(sub, list):
                            visit([x for x in sub if isinstance(x, ast.stmt)], top)
                            for h in sub:
                                if isinstance(h, ast.ExceptHandler):
                                    visit(h.body, top)

        visit(self.tree.body, True)

    def is_constexpr_annotation(self, ann: ast.AST | None) -> bool:
        if ann is None:
            return False
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            return ann.value.split(".")[-1] == "constexpr"
        obj = self.resolve(ann)
        if _tl is not None and obj is not _MISSING:
            return obj is _tl.constexpr
        parts = _dotted(ann)
        return parts is not None and parts[-1] == "constexpr"

    def make_jit_info(self, fn: ast.FunctionDef, top: bool, extra: bool) -> _JitInfo:
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        params = [a.arg for a in args]
        cexpr = {a.arg for a in args if self.is_constexpr_annotation(a.annotation)}
        local: set[str] = set()
        # (targets, names read, produces a tensor for sure, never a tensor) per assignment.
        flows: list[tuple[set[str], set[str], bool, bool]] = []
        for n in ast.walk(fn):
            if n is fn:
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                local.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                local.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    local.add(a.asname or a.name.split(".")[0])
            if isinstance(n, ast.For):
                parts = _dotted(n.iter.func) if isinstance(n.iter, ast.Call) else None
                static = parts is not None and parts[-1] == "static_range"  # unrolled: constexpr loop variable
                scf = parts is not None and parts[-1] == "range"  # scf.for induction variables are tensors
                reads, produces = self.expr_facts(n.iter)
                flows.append((_stored_names(n.target), reads, scf or (produces and not static), static))
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names: set[str] = set()
                for t in targets:
                    names |= _stored_names(t)
                reads, produces = self.expr_facts(n.value)
                never = isinstance(n, ast.AnnAssign) and self.is_constexpr_annotation(n.annotation)
                flows.append((names, reads, produces, never))
        # Tensor taint: non-constexpr parameters are tensors (pointers or runtime scalars),
        # and so is anything computed from a tensor or produced by tl.load / tl.arange / ...
        tensors = {p for p in params if p not in cexpr}
        changed = True
        while changed:
            changed = False
            for stored, reads, produces, never in flows:
                if never or not (produces or reads & tensors):
                    continue
                new = stored - tensors
                if new:
                    tensors |= new
                    changed = True
        return _JitInfo(fn, top, params, cexpr, local, tensors, extra)

    def expr_facts(self, node: ast.AST) -> tuple[set[str], bool]:
        """Names an expression reads, and whether it calls a tl function that always yields a tensor."""
        reads: set[str] = set()
        produces = False
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                reads.add(n.id)
            elif isinstance(n, ast.Call) and not produces:
                parts = _dotted(n.func)
                produces = parts is not None and len(parts) == 2 and parts[0] in self.modules \
                    and parts[1] in _TENSOR_PRODUCERS and _canon(self.modules[parts[0]]) == "tl"
        return reads, produces

    def is_tensor_expr(self, node: ast.AST, tensors: set[str]) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in tensors:
                return True
            if isinstance(n, ast.Call):
                parts = _dotted(n.func)
                if parts and parts[0] in self.modules and _canon(self.modules[parts[0]]) == "tl" \
                        and len(parts) == 2 and parts[1] in _TENSOR_PRODUCERS:
                    return True
        return False

    # ---------------------------------------------------------------- module-level literals
    def collect_module_literals(self) -> None:
        bindings: dict[str, list[ast.AST]] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    for name in _stored_names(t):
                        bindings.setdefault(name, []).append(stmt.value if isinstance(t, ast.Name) else t)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                bindings.setdefault(stmt.target.id, []).append(stmt.value if stmt.value else stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bindings.setdefault(stmt.name, []).append(stmt)  # names inside its body are not globals
            else:
                for name in _stored_names(stmt):
                    bindings.setdefault(name, []).append(stmt)
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    for a in stmt.names:
                        bindings.setdefault(a.asname or a.name.split(".")[0], []).append(stmt)
        # `global X` anywhere means X can be rebound at run time.
        rebound = {name for n in self.nodes if isinstance(n, ast.Global) for name in n.names}
        for name, values in bindings.items():
            if name in rebound:
                continue
            if all(isinstance(v, ast.expr) and _is_literal(v) and not (isinstance(v, ast.Constant) and v.value is None)
                   for v in values):
                self.module_literals[name] = getattr(values[0], "lineno", 0)
