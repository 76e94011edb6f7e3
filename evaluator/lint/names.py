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
import os
import types
from dataclasses import dataclass
from typing import Any

from ...common.vocab import Severity
from ..results import Status
from .core import _CheckerState, _dotted, _JitInfo, _stored_names

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



def interpreting() -> bool:
    """True when candidates run in Triton's interpreter: TRITON_INTERPRET says so, or (unset) there is
    no CUDA device, as the evaluator decides for its workers. Hints depend on it."""
    v = os.environ.get("TRITON_INTERPRET")
    if v is not None:
        return v not in ("", "0")
    return not _cuda_available()


_cuda_cache: list[bool] = []


def _cuda_available() -> bool:
    if not _cuda_cache:
        try:
            import torch

            _cuda_cache.append(bool(torch.cuda.is_available()))
        except Exception:  # pragma: no cover - torch is always there in the evaluator
            _cuda_cache.append(False)
    return _cuda_cache[0]


@dataclass(frozen=True)
class Replacement:
    """An idiom that replaces a missing name. ``expr`` is a Triton expression over ``x`` and ``y`` (1-D
    float tensors) or ``a`` and ``b`` (2-D, when ``two_d``); it works in every mode and tests run it in
    the interpreter and, with a GPU, compiled. ``gpu_expr`` is preferred when compiling for a GPU (it is
    never proposed to the interpreter). ``note`` is a condition of validity."""

    expr: str
    gpu_expr: str | None = None
    note: str = ""
    two_d: bool = False

    def hint(self, interpret: bool) -> str:
        cond = f" ({self.note})" if self.note else ""
        if self.gpu_expr and not interpret:
            return (f"use {self.gpu_expr} (from triton.language.extra import libdevice) or "
                    f"{self.expr}{cond}")
        return f"use {self.expr}{cond}"


# Well-known names that do not exist in triton.language, with the idiom that replaces them.
KNOWN_REPLACEMENTS: dict[str, Replacement] = {
    "relu": Replacement("tl.maximum(x, 0.0)"),
    "tanh": Replacement("2 * tl.sigmoid(2 * x) - 1", gpu_expr="libdevice.tanh(x)"),
    "gelu": Replacement("0.5 * x * (1 + tl.erf(x * 0.7071067811865476))"),
    "pow": Replacement("tl.exp2(y * tl.log2(x))", gpu_expr="libdevice.pow(x, y)", note="for x > 0"),
    "float": Replacement("x.to(tl.float32)"),
    "int": Replacement("x.to(tl.int32)"),
    "bool": Replacement("x != 0"),
    "half": Replacement("x.to(tl.float16)"),
    "double": Replacement("x.to(tl.float64)"),
    "mean": Replacement("tl.sum(x, axis=0) / N", note="N = the number of elements summed"),
    "exp10": Replacement("tl.exp2(x * 3.321928094887362)"),
    "log10": Replacement("tl.log(x) * 0.4342944819032518"),
    "abs_": Replacement("tl.abs(x)"),
    "select": Replacement("tl.where(x > y, x, y)"),
    "masked_fill": Replacement("tl.where(x > y, 0.0, x)", note="tl.where(mask, value, x)"),
    "matmul": Replacement("tl.dot(a, b)", note="each dimension at least 16", two_d=True),
    "transpose": Replacement("tl.trans(a)", two_d=True),
    "concat": Replacement("tl.join(x, y)", note="stacks along a new last axis; reshape to concatenate"),
}

# libdevice functions do not run in Triton's interpreter (they return None there). What does instead,
# for the common ones; any other libdevice.f that triton.language also has is replaced by tl.f.
LIBDEVICE_IN_INTERPRETER: dict[str, Replacement] = {
    "tanh": KNOWN_REPLACEMENTS["tanh"],
    "pow": KNOWN_REPLACEMENTS["pow"],
    "log1p": Replacement("tl.log(1 + x)"),
    "expm1": Replacement("tl.exp(x) - 1"),
    "fast_expf": Replacement("tl.exp(x)"),
    "fast_logf": Replacement("tl.log(x)"),
    "isnan": Replacement("x != x"),
    "erf": Replacement("tl.erf(x)"),
    "exp": Replacement("tl.exp(x)"),
    "sqrt": Replacement("tl.sqrt(x)"),
    "rsqrt": Replacement("tl.rsqrt(x)"),
    "floor": Replacement("tl.floor(x)"),
    "log": Replacement("tl.log(x)"),
    "sin": Replacement("tl.sin(x)"),
    "cos": Replacement("tl.cos(x)"),
    "abs": Replacement("tl.abs(x)"),
    "sigmoid": Replacement("tl.sigmoid(x)"),
}
LIBDEVICE_NOT_INTERPRETED = ("libdevice does not run in Triton's interpreter, which this server uses "
                             "(no GPU: TRITON_INTERPRET=1); there it returns None")


WRITE_IT_WITH_TL = "write it with triton.language operations (tl.exp, tl.log, tl.sqrt, tl.where, ...)"


def libdevice_hint(name: str) -> str:
    """What to use instead of libdevice.<name> under the interpreter."""
    r = LIBDEVICE_IN_INTERPRETER.get(name)
    if r is not None:
        return r.hint(interpret=True)
    if _tl is not None and callable(getattr(_tl, name, None)):
        return f"use tl.{name}(x)"
    return WRITE_IT_WITH_TL


def moved_libdevice_hint(name: str | None, interpret: bool) -> str:
    """What replaces tl.libdevice.<name> (gone from triton.language: libdevice lives in
    triton.language.extra.libdevice), in the mode kernels run in; `name` None when unknown."""
    moved = "tl.libdevice moved to triton.language.extra.libdevice"
    if interpret:
        instead = libdevice_hint(name) if name else "use the tl.* functions (tl.exp, tl.log, tl.sqrt, tl.rsqrt, ...)"
        return f"{instead}: {moved}, which Triton's interpreter (used by this server) does not run"
    call = f"libdevice.{name}(x)" if name else "libdevice.<name>(x)"
    tl_way = libdevice_hint(name) if name else WRITE_IT_WITH_TL
    also = f"; or {tl_way.removeprefix('use ')}" if tl_way.startswith("use ") else ""
    return f"use {call} after `from triton.language.extra import libdevice` ({moved}){also}"


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
    if canon in ("tl", "tl.math") and attr in KNOWN_REPLACEMENTS:
        # The idiom that works is the answer; a look-alike name (tl.trans for tl.tanh) only misleads.
        return KNOWN_REPLACEMENTS[attr].hint(interpreting())
    if canon in ("tl", "tl.math") and attr == "libdevice":
        return moved_libdevice_hint(None, interpreting())
    close = difflib.get_close_matches(attr, _public(mod), n=3, cutoff=0.6)
    if close:
        return "closest names: " + ", ".join(f"{canon}.{c}" for c in close)
    return WRITE_IT_WITH_TL if canon.startswith("tl") else f"check the spelling against dir({mod.__name__})"


class _NamesMixin(_CheckerState):
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
                                     f"from {_canon(base)} import {a.name}", Severity.error if at_top else Severity.warning,
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
    def check_attribute(self, n: ast.Attribute, sev: tuple[Severity, Status | None] | None) -> None:
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
                    canon = _canon(obj)
                    if attr == "libdevice" and canon in ("tl", "tl.math") and i == len(parts) - 2:
                        # tl.libdevice.rsqrt: reported here, where the function is known, with the same
                        # message and construct the inner node gives (the checks keep the first of the two).
                        severity, status = sev
                        self.add(n, f"{canon}.libdevice does not exist in the installed Triton", f"{canon}.libdevice",
                                 severity, status, moved_libdevice_hint(parts[-1], interpreting()))
                        return
                    if i != len(parts) - 1:
                        return  # reported when the inner Attribute node is visited
                    if canon == "math":
                        return  # Python's math: an AttributeError, but not our business here
                    severity, status = sev
                    self.add(n, f"{canon}.{attr} does not exist in the installed Triton", f"{canon}.{attr}",
                             severity, status, _unknown_hint(obj, attr))
                    return
            obj = nxt

    def check_call(self, n: ast.Call, sev: tuple[Severity, Status | None] | None, ctx: str, jit: _JitInfo | None,
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
        if ctx != "jit" or jit is None or _tl is None:
            return
        if (obj is not _MISSING and callable(obj) and str(getattr(obj, "__module__", "")).startswith(
                "triton.language.extra") and interpreting()):
            name = self.canon_call(n.func)
            self.add(n, f"{name}: {LIBDEVICE_NOT_INTERPRETED}", name + "(", severity, status,
                     libdevice_hint(name.rsplit(".", 1)[-1]))
            return
        if obj is not _MISSING and obj is getattr(_tl, "arange", None):
            self.check_arange(n, jit, severity, status)
