"""Whether a candidate surely runs no Triton kernel, read from its source alone. Runs in the trusted evaluator
process (and in the server, for an answer that needs no queue), before anything of the candidate runs.

A candidate written in plain PyTorch gets `no_triton_kernel` at once instead of after its task's reference and a
sandboxed run. The rule says so only when it is certain, since a wrong answer would fail a real kernel: the
module imports nothing but torch and a few standard modules, names nothing of Triton, torch.compile, inductor or
dynamo (which make Triton kernels of their own), and uses no dynamic import, `exec`, `eval` or `getattr` that
could reach them unseen. Anything else is left to the run, which counts the kernels actually launched.
"""

from __future__ import annotations

import ast

from ...common.vocab import Severity, Status
from ..results import NO_TRITON_KERNEL, NO_TRITON_KERNEL_HINT
from .core import _Finding

# Modules a candidate may import and still be known to launch no Triton kernel (torch's own submodules are
# checked by name below: inductor, dynamo and their kin generate Triton code).
PLAIN_MODULES = frozenset({"torch", "math", "numpy", "typing", "functools", "itertools", "collections",
                           "dataclasses", "__future__", "operator", "enum", "abc", "numbers"})
# Any of these as a name, an attribute or an imported name makes the answer uncertain.
UNCERTAIN_NAMES = frozenset({
    "triton", "compile", "_inductor", "inductor", "_dynamo", "dynamo", "compiler", "cpp_extension", "load_inline",
    "library", "ops", "sparse", "nested", "flex_attention", "jit", "export", "aot_compile", "_higher_order_ops",
    "__import__", "import_module", "importlib", "exec", "eval", "getattr", "globals", "locals", "vars",
    "__builtins__", "builtins", "sys", "modules", "__dict__", "__getattribute__", "runpy", "pickle", "load",
})
MESSAGE = "the candidate never imports or names Triton, so no Triton kernel can run"
NO_TRITON = "no triton"  # the finding's construct


def _uncertain(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] not in PLAIN_MODULES or set(a.name.split(".")) & UNCERTAIN_NAMES
                   for a in node.names)
    if isinstance(node, ast.ImportFrom):
        parts = (node.module or "").split(".")
        return (node.level > 0 or parts[0] not in PLAIN_MODULES or bool(set(parts) & UNCERTAIN_NAMES)
                or any(a.name in UNCERTAIN_NAMES or a.name == "*" for a in node.names))
    if isinstance(node, ast.Name):
        return node.id in UNCERTAIN_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in UNCERTAIN_NAMES
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "triton" in node.value.lower()  # a kernel built from text
    return False


def surely_no_triton(tree: ast.Module) -> _Finding | None:
    """A `no_triton_kernel` finding when `tree` can launch no Triton kernel (see the module's rule), else None."""
    if any(_uncertain(node) for node in ast.walk(tree)):
        return None
    # The verdict's error is the one a run that launches no kernel gives: one failure signature for the memory.
    return _Finding(1, MESSAGE, NO_TRITON, Severity.error, Status.no_triton_kernel, NO_TRITON_KERNEL_HINT,
                    error_class="NoTritonKernel", error_message=NO_TRITON_KERNEL, whole_module=True)
