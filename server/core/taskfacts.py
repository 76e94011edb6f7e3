"""Facts of a task read from its reference source without running it: the inputs' shapes and dtypes.

Runs in the server process, which never executes task code: ``get_inputs()`` is read as a syntax
tree. Each element of the returned list that is a tensor factory call (``torch.randn``,
``torch.rand``, ``torch.zeros``, ``torch.ones``, ``torch.empty``, ``torch.randint``,
``torch.full``) gets its shape from literal integers and module-level integer constants
(``batch_size = 128``, also simple arithmetic on them) and its dtype from a ``dtype=``
keyword (float32 when absent; int64 for randint). Anything else is reported with an unknown
shape and dtype rather than guessed.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterable
from typing import Any

from ...common import pysource

_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "randint", "full", "randn_like", "rand_like"}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Pow: operator.pow}
UNKNOWN_DTYPE = "unknown"


def _constants(tree: ast.Module) -> dict[str, int]:
    env: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
            if len(targets) == 1 and isinstance(targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                pairs: Iterable[tuple[ast.expr, ast.expr]] = zip(targets[0].elts, stmt.value.elts)
            else:
                pairs = ((t, stmt.value) for t in targets)
            for t, v in pairs:
                if isinstance(t, ast.Name):
                    val = _int(v, env)
                    if val is not None:
                        env[t.id] = val
                    else:
                        env.pop(t.id, None)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            val = _int(stmt.value, env)
            if val is not None:
                env[stmt.target.id] = val
    return env


def _int(node: ast.AST, env: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _int(node.left, env), _int(node.right, env)
        if a is None or b is None or (isinstance(node.op, ast.Pow) and b > 64):
            return None
        try:
            return _BINOPS[type(node.op)](a, b)
        except ZeroDivisionError:
            return None
    return None


def _dims(args: list[ast.expr], env: dict[str, int]) -> list[int] | None:
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    out = []
    for a in args:
        v = _int(a, env)
        if v is None:
            return None
        out.append(v)
    return out


def _tensor(call: ast.AST, env: dict[str, int]) -> dict[str, Any]:
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _FACTORIES):
        return {"shape": None, "dtype": UNKNOWN_DTYPE}
    kind = call.func.attr
    args = list(call.args)
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    if kind == "randint":  # randint(low?, high, size)
        args = [kw["size"]] if "size" in kw else args[-1:]
    elif kind == "full":
        args = [kw["size"]] if "size" in kw else args[:1]
    elif "size" in kw:
        args = [kw["size"]]
    shape = None if kind.endswith("_like") else _dims(args, env)
    dtype = "int64" if kind == "randint" else "float32"
    d = kw.get("dtype")
    if d is not None:
        dtype = d.attr if isinstance(d, ast.Attribute) else UNKNOWN_DTYPE
    return {"shape": shape, "dtype": dtype}


def input_specs(source: str) -> list[dict[str, Any]]:
    """[{"shape": [..] or None, "dtype": str}] for each element of ``get_inputs()``'s returned list,
    read from the source; [] when there is no such function or its return is not a literal list."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return []
    env = _constants(tree)
    fn = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "get_inputs"), None)
    if fn is None:
        return []
    local = dict(env)
    calls: dict[str, ast.expr] = {}
    ret = None
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            val = _int(stmt.value, local)
            name = stmt.targets[0].id
            calls[name] = stmt.value
            if val is not None:
                local[name] = val
            else:
                local.pop(name, None)
        if isinstance(stmt, ast.Return):
            ret = stmt.value
    if not isinstance(ret, (ast.List, ast.Tuple)):
        return []
    return [_tensor(calls.get(e.id, e) if isinstance(e, ast.Name) else e, local) for e in ret.elts]
