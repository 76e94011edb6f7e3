"""Module-level checks: imports of missing packages, ``ModelNew``, kernel launches.

A top-level import of a package that is not installed, a candidate without ``ModelNew``,
``kernel[grid](...)`` launches that miss or exceed the kernel's arguments, and kernels that
are never launched or called.
"""

from __future__ import annotations

import ast
import importlib.util

from ...common.vocab import Severity
from ..results import Status
from .core import _CheckerState, _JitInfo
from .names import _spec_cache


class _LaunchMixin(_CheckerState):
    """Module-level checks of :class:`checker._Checker`."""

    # ---------------------------------------------------------------- imports
    def check_missing_modules(self) -> None:
        """`import X` at module top level (outside try) where no X is installed: a sure ImportError.

        Only the root package is looked up (importlib.util.find_spec on a top-level name searches
        sys.path without importing anything)."""
        for stmt in self.tree.body:
            roots: list[str] = []
            if isinstance(stmt, ast.Import):
                roots = [a.name.split(".")[0] for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                roots = [stmt.module.split(".")[0]]
            for root in roots:
                if root not in _spec_cache:
                    try:
                        _spec_cache[root] = importlib.util.find_spec(root) is not None
                    except Exception:
                        _spec_cache[root] = True  # unsure: say nothing
                if not _spec_cache[root]:
                    self.add(stmt, f"No module named '{root}'", f"import {root}", Severity.error, Status.import_error,
                             "use only torch, triton and the standard library")

    # ---------------------------------------------------------------- ModelNew
    def has_model_new(self) -> bool:
        def scan(stmts: list[ast.stmt]) -> bool | None:
            for s in stmts:
                if isinstance(s, ast.ClassDef) and s.name == "ModelNew":
                    return True
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(s, (ast.Import, ast.ImportFrom)):
                    for a in s.names:
                        if a.name == "*" or (a.asname or a.name.split(".")[0]) == "ModelNew":
                            return True
                    continue
                for n in ast.walk(s):
                    if isinstance(n, ast.Name) and n.id == "ModelNew" and isinstance(n.ctx, ast.Store):
                        return True
                    if isinstance(n, ast.ClassDef) and n.name == "ModelNew":
                        return True
                    if isinstance(n, ast.Constant) and n.value == "ModelNew" and isinstance(s, (ast.Assign, ast.Expr)):
                        return True  # globals()["ModelNew"] = ... / setattr(module, "ModelNew", ...)
            return False

        return bool(scan(self.tree.body))

    # ---------------------------------------------------------------- launches
    def check_launches(self) -> None:
        """kernel[grid](...) arity against the kernel signature; kernels never used at all.

        Missing a required argument is a TypeError from the launcher's binder whenever the launch runs:
        an error (status runtime_error, since that is what running it would report). Skipped when the
        kernel has autotune/heuristics decorators (they supply arguments) or the call uses *args/**kw.
        """
        loads: dict[str, int] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in self.jit:
                loads[node.id] = loads.get(node.id, 0) + 1
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in self.jit:
                self.check_launch(node, self.jit[node.func.value.id])
        for name, info in self.jit.items():
            inside = sum(1 for n in ast.walk(info.node)
                         if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
            if loads.get(name, 0) - inside <= 0:
                self.add(info.node, f"kernel {name} is never launched or called", "unlaunched kernel", Severity.warning,
                         None, f"launch it as {name}[grid](...) from ModelNew.forward")

    def check_launch(self, call: ast.Call, info: _JitInfo) -> None:
        if info.extra_decorators:
            return
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return
        fn = info.node
        positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if fn.args.vararg or fn.args.kwarg:
            return
        n_def = len(fn.args.defaults)
        required = positional[:len(positional) - n_def] if n_def else list(positional)
        required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
        given = set(positional[:len(call.args)]) | {k.arg for k in call.keywords}
        if len(call.args) > len(positional):
            self.add(call, f"kernel {fn.name} takes {len(positional)} positional arguments but the launch passes "
                     f"{len(call.args)}", f"{fn.name}[grid](too many arguments)", Severity.error, Status.runtime_error)
            return
        missing = [p for p in required if p not in given]
        if missing:
            kinds = ", ".join(f"{p}" + (" (tl.constexpr)" if p in info.constexpr_params else "") for p in missing)
            self.add(call, f"launch of kernel {fn.name} misses required argument(s): {kinds}",
                     "missing constexpr launch argument" if any(p in info.constexpr_params for p in missing)
                     else "missing launch argument", Severity.error, Status.runtime_error,
                     "pass every kernel parameter, e.g. " + ", ".join(f"{p}={p}" for p in missing[:3]))
