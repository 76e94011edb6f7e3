"""Checking a rule's forbidden construct against kernel source: contradictions and node links.

Runs in the process that owns a ``SkillStore``. Only code counts: a construct named in a
comment, a string or a function's own name (``def gelu_tanh``) is not a use of it.

A correct kernel contradicts a rule only when the rule forbids a construct itself ("do not call
tl.float32(x)", "never call tl.program_id inside a kernel"), never when it forbids a construct in
a role the code's names cannot show: "the buffer tl.atomic_add accumulates into must come from
torch.zeros, not torch.empty" forbids a pattern (an atomic target made by ``torch.empty``), and
"do not feed bf16 operands to tl.dot" a dtype of the operands; every correct kernel may use
``torch.empty`` and ``tl.dot`` elsewhere. Such rules are not checked by name (:func:`checkable`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from ..common import pysource
from .keys import constructs
from .signature import TL_DTYPES, construct_family, construct_of, forbidden_part

STATEMENT_KEYWORDS = frozenset({"if", "for", "while", "else", "elif", "break", "continue", "return",
                                "with", "try", "lambda", "assert", "global", "del", "yield"})
"""Forbidden statements are legal elsewhere in correct kernels, so they are never counted as used."""


MODULES = frozenset({"tl", "triton", "torch", "triton.language", "triton.jit", "nn", "F"})
"""Names of whole modules: "tl has no tanh" forbids nothing a kernel's code could be checked for."""
FILLER = frozenset("""
a an the any ever use using call calling calls called write writing pass passing it them python python's
builtin built-in function functions directly inside in within kernel kernels jit body code method on
tensor tensors value values tile tiles block blocks forward
""".split())
"""Words around a forbidden construct that do not narrow it to a role."""
_WORD_RE = re.compile(r"[A-Za-z_][\w'.-]*")


def checkable(rule_text: str) -> bool:
    """Whether a correct kernel's code can contradict the rule: it forbids one construct itself (nothing in
    its "do not" part but the construct, its call and filler words), names at most one other construct
    (its fix), and the construct is not a whole module."""
    part = forbidden_part(rule_text) or ""
    construct = construct_of(part) if part else None
    if not construct or construct in MODULES:
        return False
    rest = re.sub(r"\([^()]*\)", " ", part.split(":")[0].replace("`", " "))
    leftover = [w for w in _WORD_RE.findall(rest) if w.lower().strip(".") not in FILLER
                and construct_family(w.strip(".")) != construct and w.strip(".") != construct
                and not construct.endswith("." + w.strip("."))]
    if leftover:
        return False  # "bf16 operands to tl.dot", "with runtime bounds": a role, not the construct itself
    named = [c for c in constructs(rule_text) if c not in MODULES]
    return len(named) <= 2


def forbidden_construct(rule_text: str) -> str | None:
    """What the rule says not to do, as a construct (``tl.float32``, ``max``), if it says so."""
    part = forbidden_part(rule_text)
    return construct_of(part) if part else None


def forbidden_pattern(rule_text: str) -> re.Pattern[str] | None:
    """A regex finding uses of the forbidden construct, or None when none can be checked.

    A construct written as a call in the rule (``tl.float32(x)``, ``max()``) only matches calls,
    so ``x.to(tl.float32)`` in a correct kernel does not contradict "do not call tl.float32(x)".
    A dtype construct matches any dtype of its family called as a function.
    """
    part = forbidden_part(rule_text) or ""
    construct = construct_of(part) if part else None
    if not construct or construct in STATEMENT_KEYWORDS or not checkable(rule_text):
        return None
    as_call = re.search(re.escape(construct) + r"\s*\(", part) is not None or "(" in part or "call" in rule_text.lower()
    if construct == "constexpr":
        return None  # a rule about constexpr is about its absence; uses never contradict it
    if construct_family(construct) != construct:
        head = construct.split(".")[0]
        name = "(?:" + "|".join(sorted(TL_DTYPES)) + ")"
        return re.compile(rf"(?<![\w.]){head}\.{name}\s*\(")
    body = rf"(?<![\w.]){re.escape(construct)}"
    return re.compile(body + (r"\s*\(" if as_call else r"(?!\w)"))


def kernel_code(source: str) -> str:
    """The source of the ``@triton.jit`` functions in a module (the whole source if none parse)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [ast.unparse(d) for d in node.decorator_list]
            if any("jit" in n for n in names):
                parts.append("\n".join(lines[node.lineno - 1: node.end_lineno]))
    return "\n".join(parts) if parts else source


def code_only(code: str) -> str:
    """``code`` without comments, string literals and the names after ``def``/``class``."""
    out: list[str] = []
    try:
        prev = ""
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                out.append('""' if tok.type == tokenize.STRING else " ")
            elif tok.type == tokenize.NAME and prev in ("def", "class"):
                out.append("_")
            elif tok.type in (tokenize.NEWLINE, tokenize.NL):
                out.append("\n")
            else:
                out.append(tok.string)
            if tok.type == tokenize.NAME or tok.type == tokenize.OP:
                prev = tok.string
            out.append(" " if tok.type == tokenize.NAME else "")
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "\n".join(line.split("#", 1)[0] for line in code.splitlines())
    return re.sub(r"[ \t]*\.[ \t]*(?=[A-Za-z_])", ".", "".join(out))


def code_uses(construct: str, source: str) -> bool:
    """True when ``source`` uses ``construct`` (``tl.tanh``, ``.item``, ``max``) in code."""
    if not construct or not source:
        return False
    if construct.startswith("."):
        pattern = re.compile(re.escape(construct) + r"\s*\(")
    else:
        pattern = re.compile(r"(?<![\w.])" + re.escape(construct).replace(r"\.", r"\s*\.\s*") + r"(?!\w)")
    return pattern.search(code_only(source)) is not None


def uses_forbidden(rule_text: str, source: str) -> bool:
    """True when a correct kernel's source uses what the rule forbids.

    ``tl.*`` constructs and builtins are looked for inside the jit functions only (launch code
    may use ``max`` legitimately); ``torch.*`` constructs anywhere outside imports.
    """
    pattern = forbidden_pattern(rule_text)
    if pattern is None:
        return False
    construct = forbidden_construct(rule_text) or ""
    if construct.startswith(("torch.", "F.", "nn.")):
        code = "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("import ", "from ")))
    else:
        code = kernel_code(source)
    return pattern.search(code_only(code)) is not None
