"""Relevance of a rule to a task: which operators the task's reference uses."""

from __future__ import annotations

import re

from .similarity import tokens

OPERATOR_KEYWORDS: dict[str, tuple[str, ...]] = {
    "softmax": ("softmax", "tl.max", "tl.exp", "tl.sum", "max", "exp", "reduction", "row", "online"),
    "logsumexp": ("logsumexp", "tl.max", "tl.exp", "tl.log", "reduction", "max"),
    "conv": ("conv", "convolution", "im2col", "tl.dot", "kernel_size", "padding", "stride"),
    "matmul": ("matmul", "gemm", "tl.dot", "dot", "linear", "tf32", "allow_tf32", "input_precision", "k"),
    "norm": ("norm", "mean", "var", "variance", "rsqrt", "tl.rsqrt", "tl.sum", "reduction", "eps"),
    "pool": ("pool", "pooling", "tl.max", "window", "max"),
    "activation": ("relu", "gelu", "silu", "tanh", "sigmoid", "erf", "tl.maximum", "tl.sigmoid", "libdevice",
                   "tl.math", "activation", "elementwise"),
    "reduce": ("reduction", "tl.sum", "tl.max", "tl.min", "sum", "mean", "axis", "reduce"),
    "cumsum": ("cumsum", "tl.cumsum", "scan", "tl.associative_scan", "prefix"),
    "attention": ("attention", "softmax", "tl.dot", "tl.max", "tl.exp", "scale"),
    "loss": ("loss", "reduction", "tl.sum", "mean", "tl.log"),
    "dropout": ("dropout", "tl.rand", "seed", "philox"),
    "embedding": ("embedding", "gather", "tl.load", "index"),
    "transpose": ("transpose", "tl.trans", "permute", "stride", "contiguous"),
}

_OP_PATTERNS: list[tuple[str, str]] = [
    (r"softmax|softmin", "softmax"), (r"logsumexp", "logsumexp"), (r"conv", "conv"),
    (r"matmul|linear|bmm|\bmm\b|addmm|baddbmm|einsum|bilinear|gemm", "matmul"),
    (r"norm", "norm"), (r"pool", "pool"),
    (r"relu|gelu|silu|mish|tanh|sigmoid|elu|swish|hardtanh|softplus|softsign|hardswish|hardsigmoid|leaky|clamp",
     "activation"),
    (r"\bsum\b|\bmean\b|\bamax\b|\bamin\b|\bmax\b|\bmin\b|\bargmax\b|\bargmin\b|\bprod\b|\bvar\b|\bstd\b",
     "reduce"),
    (r"cumsum|cumprod|cummax", "cumsum"), (r"attention|multihead", "attention"),
    (r"loss|cross_entropy|nll|mse|kl_div", "loss"), (r"dropout", "dropout"), (r"embedding", "embedding"),
    (r"transpose|permute|\.t\(|\.mT", "transpose"),
]
_CALL_RE = re.compile(r"(?:nn|torch|F|torch\.nn\.functional)\.([A-Za-z_]\w*)|\.([a-z_]\w*)\(")


def task_operators(source: str | None) -> set[str]:
    """Operator families (keys of OPERATOR_KEYWORDS) a task's reference source uses."""
    if not source:
        return set()
    names = " ".join(a or b for a, b in _CALL_RE.findall(source)).lower()
    return {family for pattern, family in _OP_PATTERNS if re.search(pattern, names)}


def task_keywords(source: str | None) -> set[str]:
    """Keywords (API names and words) that make a rule relevant to the task."""
    out: set[str] = set()
    for family in task_operators(source):
        out.update(OPERATOR_KEYWORDS[family])
    return out


def relevance(rule_text: str, construct: str | None, keywords: set[str]) -> int:
    """How many task keywords the rule mentions; its construct counts double."""
    if not keywords:
        return 0
    toks = set(tokens(rule_text)) | {w.lower() for w in re.findall(r"[A-Za-z_]\w*", rule_text)}
    score = len(toks & keywords)
    if construct and construct in keywords:
        score += 2
    return score
