"""Static checks of a candidate source: milliseconds, no execution, no GPU, no subprocess.

``check_candidate(source)`` parses the candidate with :mod:`ast` and reports problems that
are certain to fail before the candidate ever reaches a GPU:

* a syntax error (``Status.syntax_error``);
* no top-level ``ModelNew`` (``Status.import_error``);
* unknown names on ``triton`` / ``triton.language`` modules, checked against the *installed*
  Triton (``tl.relu``, ``tl.float``, ``tl.math.tanh``), with the closest existing names;
* dtypes called as functions (``tl.float32(x)``): a ``triton.language.dtype`` is not callable;
* Python constructs inside ``@triton.jit`` functions that Triton's code generator has no
  lowering for (``break``, ``lambda``, ``try``, nested ``def``, ...);
* ``tl.arange`` with bounds that are not ``tl.constexpr`` or whose range is not a power of two;
* non-constexpr module globals read inside a kernel;
* kernel launches ``kernel[grid](...)`` that miss a required argument.

Severity rule: a finding is an *error* only when the installed Triton compiler (or Python
itself) is sure to reject the code; anything that merely *might* fail is a *warning*.
A false positive blocks a correct kernel, so doubtful rules are warnings. Each rule below
says which it is and why. Errors make the report fatal; warnings never do.

Every issue message starts with ``"error: "`` or ``"warning: "``; ``construct`` is a short
canonical text of the offending construct (``"tl.float32("``, ``"break"``), with the
``triton.language`` alias always written as ``tl``.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import types
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from .types import ErrorInfo, LintIssue, Model, Status

__all__ = ["StaticReport", "check_candidate", "is_error"]

ERROR_PREFIX = "error: "
WARNING_PREFIX = "warning: "

# --------------------------------------------------------------------------------------------
# The installed Triton, introspected once at import time.
# --------------------------------------------------------------------------------------------

try:  # Triton may be absent on a machine that only lints; name checks are then skipped.
    import triton as _triton
    import triton.language as _tl

    _TL_NAMES: frozenset[str] = frozenset(dir(_tl))
    _DTYPE_CLS: type | None = _tl.dtype
    _JIT_OBJ: Any = _triton.jit
    _DECORATOR_OBJS: tuple[Any, ...] = tuple(
        o for o in (getattr(_triton, "autotune", None), getattr(_triton, "heuristics", None)) if o is not None)
except Exception:  # pragma: no cover - exercised only without triton
    _triton = None
    _tl = None
    _TL_NAMES = frozenset()
    _DTYPE_CLS = None
    _JIT_OBJ = None
    _DECORATOR_OBJS = ()

# Only these top-level packages are ever imported while linting (they are installed
# libraries, not candidate code). Any other import in the candidate is left alone.
_IMPORTABLE_ROOTS = frozenset({"triton", "math"})

# Names that Triton's code generator resolves itself inside a kernel (CodeGenerator.builtin_namespace).
_KERNEL_BUILTINS = frozenset({"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr",
                              "print", "min", "max"})

# Well-known names that do not exist in triton.language, with the idiom that replaces them.
_KNOWN_REPLACEMENTS = {
    "relu": "use tl.maximum(x, 0.0)",
    "tanh": "use libdevice.tanh(x) (from triton.language.extra import libdevice) or 2 * tl.sigmoid(2 * x) - 1",
    "gelu": "write it out: 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))",
    "pow": "use libdevice.pow(x, y) (from triton.language.extra import libdevice) or tl.exp2(y * tl.log2(x))",
    "float": "use tl.float32",
    "int": "use tl.int32",
    "bool": "use tl.int1",
    "half": "use tl.float16",
    "double": "use tl.float64",
    "mean": "use tl.sum(x, axis) / n",
    "exp10": "use tl.exp2(x * 3.321928094887362)",
    "log10": "use tl.log(x) * 0.4342944819032518",
    "abs_": "use tl.abs(x)",
    "select": "use tl.where(cond, a, b)",
    "masked_fill": "use tl.where(mask, value, x)",
    "matmul": "use tl.dot(a, b)",
    "transpose": "use tl.trans(x)",
    "concat": "use tl.cat(a, b)",
}

# tl calls whose result is always a tensor (used to tell tensors from compile-time values).
_TENSOR_PRODUCERS = frozenset({"load", "arange", "program_id", "num_programs", "zeros", "zeros_like", "full",
                               "dot", "rand", "randn", "randint", "atomic_add", "make_block_ptr", "where"})


def is_error(issue: LintIssue) -> bool:
    """True when an issue is an error (the build will fail), False for a warning."""
    return issue.message.startswith(ERROR_PREFIX)


class StaticReport(Model):
    """Outcome of the static checks. ``status`` is None when nothing fatal was found."""

    status: Status | None = None
    error: ErrorInfo | None = None
    issues: list[LintIssue] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is None

    @property
    def errors(self) -> list[LintIssue]:
        return [i for i in self.issues if is_error(i)]

    @property
    def warnings(self) -> list[LintIssue]:
        return [i for i in self.issues if not is_error(i)]


@dataclass
class _Finding:
    line: int
    message: str
    construct: str
    severity: str  # "error" | "warning"
    status: Status | None = None  # the fatal status an error maps to
    hint: str | None = None
    error_class: str = "LintError"

    def issue(self) -> LintIssue:
        prefix = ERROR_PREFIX if self.severity == "error" else WARNING_PREFIX
        msg = self.message + (f" ({self.hint})" if self.hint else "")
        return LintIssue(line=self.line, message=prefix + msg, construct=self.construct)


# --------------------------------------------------------------------------------------------
# Module resolution (installed libraries only, cached).
# --------------------------------------------------------------------------------------------

_MISSING = object()
_import_cache: dict[str, Any] = {}


def _import(name: str) -> Any:
    if name.split(".")[0] not in _IMPORTABLE_ROOTS:
        return _MISSING
    if name not in _import_cache:
        try:
            _import_cache[name] = importlib.import_module(name)
        except Exception:
            _import_cache[name] = _MISSING
    return _import_cache[name]


_submodule_cache: dict[str, bool] = {}
_spec_cache: dict[str, bool] = {}


def _is_submodule(mod: types.ModuleType, attr: str) -> bool:
    full = f"{mod.__name__}.{attr}"
    if full not in _submodule_cache:
        try:
            _submodule_cache[full] = importlib.util.find_spec(full) is not None
        except Exception:
            _submodule_cache[full] = False
    return _submodule_cache[full]


def _canon(mod: types.ModuleType) -> str:
    name = mod.__name__
    if name == "triton.language":
        return "tl"
    if name.startswith("triton.language."):
        return "tl." + name[len("triton.language."):]
    return name


def _public(mod: types.ModuleType) -> list[str]:
    return [n for n in dir(mod) if not n.startswith("_")]


def _unknown_hint(mod: types.ModuleType, attr: str) -> str:
    canon = _canon(mod)
    parts = []
    if canon == "tl" and attr in _KNOWN_REPLACEMENTS:
        parts.append(_KNOWN_REPLACEMENTS[attr])
    close = difflib.get_close_matches(attr, _public(mod), n=3, cutoff=0.6)
    if close:
        parts.append("closest names: " + ", ".join(f"{canon}.{c}" for c in close))
    if not parts:
        parts.append(f"{canon}.{attr} does not exist in the installed Triton "
                     f"{getattr(_triton, '__version__', '?')}")
    return "; ".join(parts)


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


# --------------------------------------------------------------------------------------------
# The checker.
# --------------------------------------------------------------------------------------------


@dataclass
class _JitInfo:
    node: ast.FunctionDef
    top_level: bool
    params: list[str]
    constexpr_params: set[str]
    locals: set[str]
    tensors: set[str]
    extra_decorators: bool  # autotune / heuristics / unknown decorators supply arguments


class _Checker:
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
    def add(self, node: ast.AST | int, message: str, construct: str, severity: str,
            status: Status | None = None, hint: str | None = None) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        self.findings.append(_Finding(line, message, construct, severity, status, hint))

    def resolve(self, node: ast.AST) -> Any:
        """The installed object an expression like tl.foo.bar names, or _MISSING."""
        parts = _dotted(node)
        if not parts:
            return _MISSING
        root = parts[0]
        if root in self.modules:
            obj: Any = self.modules[root]
        elif root in self.objects:
            obj = self.objects[root]
        else:
            return _MISSING
        for attr in parts[1:]:
            nxt = getattr(obj, attr, _MISSING)
            if nxt is _MISSING and isinstance(obj, types.ModuleType) and _is_submodule(obj, attr):
                nxt = _import(f"{obj.__name__}.{attr}")
            if nxt is _MISSING:
                return _MISSING
            obj = nxt
        return obj

    def canon_call(self, func: ast.AST) -> str:
        parts = _dotted(func)
        if not parts:
            return ast.unparse(func)
        root = parts[0]
        if root in self.modules:
            return ".".join([_canon(self.modules[root])] + parts[1:])
        return ".".join(parts)

    # ---------------------------------------------------------------- imports and aliases
    def collect_aliases(self) -> None:
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    root = a.name.split(".")[0]
                    if root == "torch":
                        self.torch_aliases.add(a.asname or "torch")
                        continue
                    if a.asname:
                        mod = _import(a.name)
                        target = a.asname
                    else:
                        mod = _import(root)
                        target = root
                    if isinstance(mod, types.ModuleType):
                        self.modules[target] = mod
                        if mod.__name__ == "math":
                            self.math_aliases.add(target)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] == "torch":
                    continue
                base = _import(node.module)
                if base is _MISSING:
                    continue
                for a in node.names:
                    if a.name == "*":
                        continue
                    obj = getattr(base, a.name, _MISSING)
                    if obj is _MISSING and _is_submodule(base, a.name):
                        obj = _import(f"{node.module}.{a.name}")
                    if obj is _MISSING:
                        # from triton.language import relu: an ImportError at import time.
                        if isinstance(base, types.ModuleType) and node.module.startswith("triton"):
                            at_top = node in self.tree.body  # executed on import, outside any try
                            self.add(node, f"cannot import name '{a.name}' from '{node.module}'",
                                     f"from {_canon(base)} import {a.name}", "error" if at_top else "warning",
                                     Status.import_error if at_top else None, _unknown_hint(base, a.name))
                        continue
                    target = a.asname or a.name
                    if isinstance(obj, types.ModuleType):
                        self.modules[target] = obj
                        if obj.__name__ == "math":
                            self.math_aliases.add(target)
                    else:
                        self.objects[target] = obj
        # `tl = triton.language` at top level.
        for stmt in self.tree.body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Attribute)):
                obj = self.resolve(stmt.value)
                if isinstance(obj, types.ModuleType):
                    self.modules[stmt.targets[0].id] = obj
        # An alias that the candidate also assigns to something else is not trusted.
        assigned: set[str] = set()
        for node in self.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)):
                tgt = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in tgt:
                    assigned |= _stored_names(t)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assigned.add(node.name)
            elif isinstance(node, ast.arg):
                assigned.add(node.arg)
        for stmt in self.tree.body:  # the `tl = triton.language` form itself is fine
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if stmt.targets[0].id in self.modules and isinstance(stmt.value, ast.Attribute):
                    assigned.discard(stmt.targets[0].id)
        for name in list(self.modules):
            if name in assigned:
                del self.modules[name]
                self.math_aliases.discard(name)
        for name in list(self.objects):
            if name in assigned:
                del self.objects[name]
        self.torch_aliases -= assigned

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
        return bool(parts) and parts[-1] == "constexpr"

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
                static = bool(parts) and parts[-1] == "static_range"  # unrolled: constexpr loop variable
                scf = bool(parts) and parts[-1] == "range"  # scf.for induction variables are tensors
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
            for targets, reads, produces, never in flows:
                if never or not (produces or reads & tensors):
                    continue
                new = targets - tensors
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
                produces = bool(parts) and len(parts) == 2 and parts[0] in self.modules \
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
                self.module_literals[name] = values[0].lineno

    # ---------------------------------------------------------------- walking
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
                    self.add(stmt, f"No module named '{root}'", f"import {root}", "error", Status.import_error,
                             "use only torch, triton and the standard library")

    def run(self) -> None:
        self.check_missing_modules()
        self.collect_aliases()
        self.collect_jit()
        self.collect_module_literals()
        self.walk_block(self.tree.body, ctx="module", jit=None, guarded=False, maybe_dead=False)
        self.check_launches()

    def walk_block(self, stmts: list[ast.stmt], ctx: str, jit: _JitInfo | None, guarded: bool,
                   maybe_dead: bool) -> None:
        for s in stmts:
            self.walk_stmt(s, ctx, jit, guarded, maybe_dead)
            if ctx == "jit" and isinstance(s, ast.Return):
                break  # Triton stops code generation at a return: the rest is dead code.

    def walk_stmt(self, s: ast.stmt, ctx: str, jit: _JitInfo | None, guarded: bool, maybe_dead: bool) -> None:
        if ctx == "jit":
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
            if ctx == "jit" and not self.is_tensor_expr(s.test, jit.tensors):
                # A compile-time condition: Triton compiles only the branch taken.
                sub_dead = True
            self.walk_block(s.body, sub_ctx, jit, sub_guarded, sub_dead)
            self.walk_block(s.orelse, sub_ctx, jit, sub_guarded, sub_dead)
            return
        # Generic statement: visit child expressions and nested statement lists.
        for field, value in ast.iter_fields(s):
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

    def severity_for(self, ctx: str, guarded: bool, maybe_dead: bool) -> tuple[str, Status | None] | None:
        """How sure a failure of this code is, given where it sits."""
        if guarded:
            return None  # inside try/except or a hasattr() probe: the candidate handles it
        if ctx == "jit":
            return ("warning", None) if maybe_dead else ("error", Status.compile_error)
        if ctx == "module":
            return ("error", Status.import_error)
        # Inside an ordinary function: fails only if that code runs, which we cannot know.
        return ("warning", None)

    def walk_expr(self, e: ast.expr, ctx: str, jit: _JitInfo | None, guarded: bool, maybe_dead: bool,
                  shallow: bool = False) -> None:
        sev = self.severity_for(ctx, guarded, maybe_dead)
        nodes = [e] if shallow else ast.walk(e)
        for n in nodes:
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                self.check_attribute(n, sev)
            elif isinstance(n, ast.Call):
                self.check_call(n, sev, ctx, jit, maybe_dead)
            elif isinstance(n, ast.Name) and ctx == "jit" and isinstance(n.ctx, ast.Load):
                self.check_global(n, jit, maybe_dead)
            if ctx == "jit" and not shallow:
                self.check_jit_expr(n, jit, maybe_dead)

    # ---------------------------------------------------------------- the checks
    def check_attribute(self, n: ast.Attribute, sev: tuple[str, Status | None] | None) -> None:
        """Unknown names on an installed module alias (tl.relu, tl.math.tanh, triton.cdvi)."""
        if sev is None or n.attr.startswith("__"):
            return
        parts = _dotted(n)
        if not parts or parts[0] not in self.modules:
            return
        # Only the outermost attribute of a chain is examined; walk resolves each link.
        obj: Any = self.modules[parts[0]]
        for i, attr in enumerate(parts[1:], start=1):
            if not isinstance(obj, types.ModuleType):
                return  # attributes of non-module objects are not checked
            nxt = getattr(obj, attr, _MISSING)
            if nxt is _MISSING:
                if _is_submodule(obj, attr):
                    nxt = _import(f"{obj.__name__}.{attr}")
                    if nxt is _MISSING:
                        return
                else:
                    if i != len(parts) - 1:
                        return  # reported when the inner Attribute node is visited
                    canon = _canon(obj)
                    if canon == "math":
                        return  # Python's math: an AttributeError, but not our business here
                    severity, status = sev
                    self.add(n, f"{canon}.{attr} does not exist in the installed Triton", f"{canon}.{attr}",
                             severity, status, _unknown_hint(obj, attr))
                    return
            obj = nxt

    def check_call(self, n: ast.Call, sev: tuple[str, Status | None] | None, ctx: str, jit: _JitInfo | None,
                   maybe_dead: bool) -> None:
        if sev is None:
            return
        severity, status = sev
        obj = self.resolve(n.func)
        # A triton.language.dtype is not callable in any Triton version (TypeError), on host or device.
        if _DTYPE_CLS is not None and obj is not _MISSING and isinstance(obj, _DTYPE_CLS):
            name = self.canon_call(n.func)
            arg = ast.unparse(n.args[0]) if n.args else "x"
            if len(arg) > 24 or not arg.replace("_", "").replace(".", "").isalnum():
                arg = "x"
            self.add(n, f"{name} is a dtype and cannot be called", f"{name}(", severity, status,
                     f"use {arg}.to({name})")
            return
        if ctx != "jit" or _tl is None:
            return
        if obj is not _MISSING and obj is getattr(_tl, "arange", None):
            self.check_arange(n, jit, severity, status)

    def check_arange(self, n: ast.Call, jit: _JitInfo, severity: str, status: Status | None) -> None:
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
                 "non-constexpr global", "warning" if maybe_dead else "error",
                 None if maybe_dead else Status.compile_error,
                 f"write {name} = tl.constexpr(...) at module level, or pass it as a tl.constexpr parameter")

    def check_jit_stmt(self, s: ast.stmt, jit: _JitInfo, maybe_dead: bool) -> None:
        """Statements with no lowering in Triton's CodeGenerator (installed code_generator.py).

        CodeGenerator has no visit_Break / visit_Continue / visit_Try / visit_Raise / visit_Global /
        visit_Nonlocal / visit_Delete / visit_Import / visit_ClassDef / async visitors: generic_visit
        raises 'unsupported AST node type' -> sure errors. Nested FunctionDef raises explicitly.
        Code under a compile-time `if` is compiled only when that branch is taken, so there the
        same findings are warnings.
        """
        err = ("warning", None) if maybe_dead else ("error", Status.compile_error)
        sure = {
            ast.Break: ("break", "use a loop bound or a mask (tl.where) instead of break"),
            ast.Continue: ("continue", "guard the loop body with a mask or an if instead of continue"),
            ast.Raise: ("raise", "use tl.device_assert or tl.static_assert"),
            ast.Global: ("global", "pass values as kernel arguments"),
            ast.Nonlocal: ("nonlocal", "pass values as kernel arguments"),
            ast.Delete: ("del", "remove the del statement"),
            ast.ClassDef: ("class", "define classes outside the kernel"),
            ast.Import: ("import", "import at module level"),
            ast.ImportFrom: ("import", "import at module level"),
            ast.AsyncFunctionDef: ("nested def", "move the helper to module level and decorate it with @triton.jit"),
            ast.FunctionDef: ("nested def", "move the helper to module level and decorate it with @triton.jit"),
            ast.AsyncFor: ("async for", "use a plain for loop"),
            ast.AsyncWith: ("async with", "remove it"),
            ast.Try: ("try", "kernels cannot catch exceptions; remove try/except"),
        }
        if hasattr(ast, "TryStar"):
            sure[ast.TryStar] = sure[ast.Try]
        if hasattr(ast, "Match"):
            sure[ast.Match] = ("match", "use if/elif")
        if type(s) in sure:
            construct, hint = sure[type(s)]
            self.add(s, f"`{construct}` is not supported inside a @triton.jit function", construct, *err, hint)
            return
        if isinstance(s, ast.With):
            # visit_With exists (for Triton's own context managers) and calls the manager with a
            # _semantic= keyword: torch / Python context managers fail. Unknown ones: warning.
            for item in s.items:
                parts = _dotted(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else None
                if parts and (parts[0] in self.torch_aliases or parts[0] in ("open", "contextlib")):
                    self.add(s, "`with` over a non-Triton context manager cannot compile in a kernel", "with",
                             *err, "remove the with block")
                    return
                if not parts or parts[0] not in self.modules:
                    self.add(s, "`with` inside a @triton.jit function works only with Triton context managers",
                             "with", "warning", None)
                    return

    def check_jit_expr(self, n: ast.AST, jit: _JitInfo, maybe_dead: bool) -> None:
        err = ("warning", None) if maybe_dead else ("error", Status.compile_error)
        # No visit_Lambda / visit_Yield / visit_Await / visit_Dict / visit_Set / visit_*Comp except
        # ListComp: 'unsupported AST node type' -> sure errors.
        sure = {
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
        if type(n) in sure:
            construct, hint = sure[type(n)]
            self.add(n, f"`{construct}` is not supported inside a @triton.jit function", construct, *err, hint)
            return
        if isinstance(n, ast.ListComp):
            # visit_ListComp accepts one generator over a tuple (a tuple comprehension); nested
            # comprehensions and ranges raise. Anything else is left alone.
            it = n.generators[0].iter
            parts = _dotted(it.func) if isinstance(it, ast.Call) else None
            if len(n.generators) != 1:
                self.add(n, "nested comprehensions are not supported inside a @triton.jit function",
                         "list comprehension", *err, "use a loop")
            elif parts and parts[-1] in ("range", "static_range", "arange"):
                self.add(n, "only comprehensions over tuples are supported inside a @triton.jit function",
                         "list comprehension", *err, "use a for loop over tl.static_range")
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
                         "print(", "warning", None, "remove it before timing; use tl.device_print for debugging")
            else:
                self.add(n, "print inside a kernel is tl.device_print, which needs a string prefix first",
                         "print(", *err, 'use tl.device_print("x", x) or tl.static_print for compile-time values')
            return
        parts = _dotted(func)
        if not parts:
            return
        if parts[0] in self.torch_aliases and parts[0] not in jit.locals and len(parts) > 1:
            # torch functions receive Triton tensors they cannot handle: a TypeError at compile time.
            name = "torch." + ".".join(parts[1:])
            self.add(n, f"{name} cannot be called inside a @triton.jit function", f"{name}(", *err,
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
                self.add(n, f"math.{fn} on a Triton tensor cannot compile", f"math.{fn}(", *err, f"use {alt}")
            elif not all(_is_literal(a) or (isinstance(a, ast.Name) and (a.id in jit.constexpr_params
                                                                         or a.id in self.module_literals))
                         for a in all_args):
                self.add(n, f"math.{fn} works in a kernel only on compile-time constants", f"math.{fn}(",
                         "warning", None, f"use {alt} for tensors")

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
                self.add(info.node, f"kernel {name} is never launched or called", "unlaunched kernel", "warning",
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
                     f"{len(call.args)}", f"{fn.name}[grid](too many arguments)", "error", Status.runtime_error)
            return
        missing = [p for p in required if p not in given]
        if missing:
            kinds = ", ".join(f"{p}" + (" (tl.constexpr)" if p in info.constexpr_params else "") for p in missing)
            self.add(call, f"launch of kernel {fn.name} misses required argument(s): {kinds}",
                     "missing constexpr launch argument" if any(p in info.constexpr_params for p in missing)
                     else "missing launch argument", "error", Status.runtime_error,
                     "pass every kernel parameter, e.g. " + ", ".join(f"{p}={p}" for p in missing[:3]))


# --------------------------------------------------------------------------------------------
# Public entry point.
# --------------------------------------------------------------------------------------------


def _source_line(lines: list[str], line: int | None) -> str | None:
    if line is None or line < 1 or line > len(lines):
        return None
    return lines[line - 1]


def check_candidate(source: str) -> StaticReport:
    """Static checks of an untrusted candidate source. Never executes it."""
    lines = source.splitlines()
    try:
        tree = ast.parse(source, filename="candidate.py", mode="exec")
        # compile() catches what the parser lets through (e.g. 'return' outside function,
        # nonlocal at module level); it only builds a code object and runs nothing.
        compile(tree, "candidate.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno
        msg = exc.msg or str(exc)
        issue = LintIssue(line=line or 0, message=ERROR_PREFIX + msg, construct=type(exc).__name__)
        return StaticReport(status=Status.syntax_error,
                            error=ErrorInfo(error_class=type(exc).__name__, message=msg, line=line,
                                            source_line=_source_line(lines, line) if line else exc.text,
                                            hint="fix the syntax; the file must be valid Python"),
                            issues=[issue])
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return StaticReport(status=Status.syntax_error,
                            error=ErrorInfo(error_class=type(exc).__name__, message=str(exc)[:300]),
                            issues=[LintIssue(line=0, message=ERROR_PREFIX + str(exc)[:300],
                                              construct=type(exc).__name__)])

    checker = _Checker(source, tree)
    findings: list[_Finding] = []
    try:
        checker.run()
        findings = checker.findings
    except RecursionError:  # pathological nesting: skip the lint rather than fail the evaluation
        findings = checker.findings
    if not checker.has_model_new():
        first_line = 1
        findings.append(_Finding(first_line, "candidate defines no class ModelNew", "ModelNew", "error",
                                 Status.import_error,
                                 "define `class ModelNew(nn.Module)` at module level with the same __init__ "
                                 "arguments and forward signature as Model"))
        findings[-1].error_class = "ImportError"

    # Deduplicate (the same node can be reached twice through nested expressions).
    seen: set[tuple[int, str, str]] = set()
    unique: list[_Finding] = []
    for f in findings:
        key = (f.line, f.construct, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    unique.sort(key=lambda f: (f.line, f.severity != "error"))

    fatal: _Finding | None = None
    for f in unique:
        if f.severity == "error" and f.status is Status.import_error and f.construct == "ModelNew":
            fatal = f
            break
    if fatal is None:
        errors = [f for f in unique if f.severity == "error"]
        fatal = errors[0] if errors else None

    report = StaticReport(issues=[f.issue() for f in unique])
    if fatal is not None:
        report.status = fatal.status or Status.compile_error
        error_class = fatal.error_class
        if error_class == "LintError":
            error_class = {Status.compile_error: "CompilationError", Status.import_error: "ImportError",
                           Status.runtime_error: "TypeError"}.get(report.status, "LintError")
        report.error = ErrorInfo(error_class=error_class, message=fatal.message,
                                 line=fatal.line if fatal.construct != "ModelNew" else None,
                                 source_line=_source_line(lines, fatal.line) if fatal.construct != "ModelNew"
                                 else None, hint=fatal.hint)
    return report

