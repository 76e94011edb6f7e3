"""Names against the installed Triton: module aliases, attribute lookups, close-match hints.

Resolves what ``tl`` / ``triton`` / ``math`` aliases in the candidate name (importing only
installed libraries, never candidate code), reports unknown names such as ``tl.relu`` with the
closest existing ones, and dtypes called as functions (``tl.float32(x)``).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import types
from typing import Any

from ..types import Status
from .core import _dotted, _JitInfo, _stored_names

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


class _NamesMixin:
    """Alias collection and name checks of :class:`checker._Checker`."""

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

    # ---------------------------------------------------------------- name checks
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
