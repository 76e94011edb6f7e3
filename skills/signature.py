"""Failure signatures: abstract away what varies between kernels, keep the construct.

Two failures get the same signature when they are the same mistake on different kernels:
identifiers, numbers, addresses, paths, line numbers, shapes and user names are replaced
by placeholders, while API names (``tl.arange``, ``torch.matmul``), Python keywords and
builtins (``constexpr``, ``max``) and dtype names survive, because they name the mistake.
"""

from __future__ import annotations

import builtins
import hashlib
import keyword
import re

TL_DTYPES = frozenset({
    "float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16", "float16", "bfloat16",
    "float32", "float64", "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "fp16", "bf16", "fp32", "fp64", "half", "float", "double", "bool", "long", "int",
})
"""Dtype spellings; as ``tl.<name>`` or ``torch.<name>`` they form one construct family."""

CODE_WORDS = frozenset(keyword.kwlist) | frozenset({"constexpr", "jit", "autotune", "heuristics"})
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_") and n.islower())
KEEP_WORDS = CODE_WORDS | BUILTIN_NAMES | TL_DTYPES | frozenset({
    "cuda", "cpu", "triton", "torch", "tl", "nn", "F", "ptx", "ptxas", "llvm", "mlir", "tf32", "ieee",
    "num_warps", "num_stages", "num_ctas", "block_ptr", "make_block_ptr", "grid", "stride",
    "out_of_resources", "dtype", "device", "kernel", "shared_memory", "program_id", "num_programs", "tensor", "pointer_type",
})
"""Words kept verbatim even when they look like identifiers (underscores, digits)."""

ACRONYMS = frozenset({"AST", "CUDA", "GPU", "CPU", "PTX", "OOM", "LLVM", "MLIR", "TMA", "HIP", "ROCM", "NVCC",
                      "DSA", "API", "SM", "TF32", "IEEE", "KB", "MB", "GB", "JIT", "ID", "NCCL", "CUBLAS", "CUDNN"})
_SNIPPET_BUILTINS = frozenset({"max", "min", "abs", "print", "sum", "round", "pow", "len", "range", "any", "all",
                               "sorted", "divmod", "isinstance", "hasattr", "getattr", "map", "zip", "enumerate"})
_WRAPPER_CLASSES = frozenset({"CompilationError", "UnsupportedLanguageConstruct", "CompileTimeAssertionFailure",
                              "TritonError", "InterpreterError"})
_CLASS_ALIASES = {"AcceleratorError": "RuntimeError", "CudaError": "RuntimeError"}
_API = r"(?:tl|triton|torch|F|nn|libdevice|math)\.[A-Za-z_][\w.]*"
API_RE = re.compile(rf"(?<![\w.])({_API})")
_QUOTED_RE = re.compile(r"(['\"`])([^'\"`\n]{1,80})\1")
_HEX_RE = re.compile(r"\b0x[0-9a-fA-F]+\b")
_PATH_RE = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[\w.@+\-<>]+){2,}/?|\b[\w\-]+\.(?:py|cu|cpp|ptx|ttir|ttgir|llir|so)\b")
_LINE_RE = re.compile(r"\bline\s+\d+", re.I)
_SHAPE_ITEM = r"(?:'-?\d+'|-?\d+|constexpr\[\d+\]|<shape>)"
_SHAPE_RE = re.compile(rf"(?:torch\.Size\()?[\[(]\s*{_SHAPE_ITEM}(?:\s*,\s*{_SHAPE_ITEM})*\s*,?\s*[\])]\)?")
_NUM_RE = re.compile(r"(?<![\w<])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w>])", re.I)
_WORD_RE = re.compile(r"(?<![\w.<])[A-Za-z_][A-Za-z0-9_]*(?![\w>])")
_CODE_WORD_RE = re.compile(r"(?<![\w.<])[A-Za-z_]\w*(?=\s*=[^=]|[(\[\])])|(?<=[(\[])[A-Za-z_]\w*(?![\w.>])")
_WRAPPED_ERROR_RE = re.compile(r"\b(\w+(?:Error|Exception))\((['\"])(.*)\2\)")
_NO_ATTR_RE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_MODULE_ALIASES = {"triton.language": "tl", "triton.language.math": "tl.math", "torch.nn.functional": "F"}


def _canon_api(name: str) -> str:
    """Canonical spelling of a dotted API name (``triton.language.x`` -> ``tl.x``)."""
    name = name.rstrip(".")
    for long, short in sorted(_MODULE_ALIASES.items(), key=lambda kv: -len(kv[0])):
        if name == long or name.startswith(long + "."):
            return short + name[len(long):]
    return name


def _is_identifier_like(word: str) -> bool:
    """A user-chosen name: has an underscore or digit, or is ALLCAPS, or mixes case inside."""
    if word in KEEP_WORDS or word.lower() in KEEP_WORDS or word.endswith(("Error", "Exception", "Warning")):
        return False
    if "_" in word or any(c.isdigit() for c in word):
        return True
    if len(word) > 1 and word.isupper():
        return word not in ACRONYMS
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def _is_code_name(word: str) -> bool:
    """A word in code position (``name(``, ``name =``, ``(name``) that a user chose."""
    return word not in KEEP_WORDS and not word.endswith(("Error", "Exception", "Warning"))


def _quoted(match: re.Match[str]) -> str:
    inner: str = match.group(2).strip()
    if " " in inner:  # a quoted sentence, not a name: keep its words
        return inner
    if API_RE.fullmatch(inner) or inner in KEEP_WORDS:
        return _canon_api(inner)
    if re.fullmatch(r"[A-Z][a-z]+", inner):  # AST node kinds, e.g. 'Continue', 'Lambda'
        return inner
    return "<name>"


_LOCATION_RE = re.compile(r"^\s*at\s+\d+:\d+:?\s*")
_ERROR_START_RE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b\s*[(:]|\bunsupported AST node\b|\bCannot\b|\bcannot\b")
_BOILERPLATE_RE = re.compile(
    r"(?:Did you mean|CUDA kernel errors might|For debugging consider|Compile with `?TORCH_USE_CUDA_DSA|"
    r"See https?://|If reserved but unallocated|Including non-PyTorch memory|Of the allocated memory)[^.\n]*(?:\.|\?|$)")
_STATEMENTS_IN_CODE = ("if", "for", "while", "break", "continue", "return", "with", "lambda", "assert")


def _snippet_constructs(code: str) -> list[str]:
    """API names, builtin calls and statements in a compiler error's source excerpt."""
    found = [_canon_api(m.group(1)) for m in API_RE.finditer(code)]
    found += [m.group(1) + "()" for m in re.finditer(r"(?<![\w.])([a-z_]\w*)\s*\(", code) if m.group(1) in _SNIPPET_BUILTINS]
    found += [w for w in _STATEMENTS_IN_CODE if re.search(rf"(?<![\w.]){w}\b", code)]
    return sorted(set(found))


def _split_compiler_message(message: str) -> str:
    """``at L:C: <code> ^ <error>`` -> ``in [constructs of the code]: <error>``."""
    m = _LOCATION_RE.match(message)
    if not m:
        return message
    body = message[m.end():]
    lines = [ln for ln in body.splitlines() if ln.strip() and not re.fullmatch(r"\s*[\^~]+\s*", ln)]
    body = " ".join(" ".join(lines).split())
    err = _ERROR_START_RE.search(body)
    code, error = (body[: err.start()], body[err.start():]) if err else ("", body)
    constructs = _snippet_constructs(code)
    named = [w for w in re.findall(r"[A-Za-z_]\w*", error) if _is_identifier_like(w)]
    if API_RE.search(error) or named or re.search(r"\b(?:max|min|print|abs)\(", error):
        constructs = []  # the error names its culprit itself; the rest of the line is noise
    return (f"in [{', '.join(constructs)}]: " if constructs else "") + error


def normalize_message(error_class: str, message: str) -> str:
    """The message with everything kernel-specific abstracted (see module doc).

    A compiler message pointing at a source line keeps the constructs on that line (the
    offending ``tl.float32(`` or ``max(``), not its variable names.
    """
    text = _split_compiler_message((message or "").strip())
    text = _BOILERPLATE_RE.sub("", text.split("\n")[0] if "\n" in text and not _LOCATION_RE.match(message or "") else text)
    text = " ".join(text.split())[:600]
    text = _WRAPPED_ERROR_RE.sub(lambda m: f"{m.group(1)}: {m.group(3)}", text)
    text = _NO_ATTR_RE.sub(lambda m: f"no attribute {_canon_api(m.group(1) + '.' + m.group(2))}", text)
    text = _HEX_RE.sub("<addr>", text)
    text = _PATH_RE.sub("<path>", text)
    text = _LINE_RE.sub("line <n>", text)
    text = re.sub(r'File "<path>"|File <path>', "<path>", text)
    for _ in range(3):  # nested shapes: [[16, 8], [8, 32]]
        text = _SHAPE_RE.sub("<shape>", text)
    text = _QUOTED_RE.sub(_quoted, text)
    protected: list[str] = []

    def protect(m: re.Match[str]) -> str:
        protected.append(_canon_api(m.group(1)))
        return chr(0xE000 + len(protected) - 1)

    text = API_RE.sub(protect, text)
    text = _NUM_RE.sub("<n>", text)
    text = _WORD_RE.sub(lambda m: "<id>" if _is_identifier_like(m.group(0)) else m.group(0), text)
    text = _CODE_WORD_RE.sub(lambda m: m.group(0) if not _is_code_name(m.group(0)) else "<id>", text)
    text = re.sub("[\ue000-\uf8ff]", lambda m: protected[ord(m.group(0)) - 0xE000], text)
    text = re.sub(r"(<(\w+)>)(?:[\s,:]*(?:and\s+)?<\2>)+", r"\1", text)  # runs of one placeholder
    return text.strip()


def short_error_class(error_class: str) -> str:
    """``triton.compiler.errors.CompilationError`` -> ``CompilationError``."""
    return (error_class or "Error").strip().split(".")[-1] or "Error"


def signature(error_class: str, message: str) -> str:
    """A short stable id of the failure cluster: ``sig-`` + 10 hex digits.

    Dtype names are folded into their family first (see :func:`construct_family`), so calling
    ``tl.int32(x)`` and ``tl.float32(x)`` is one failure, as it is one rule.
    """
    norm = normalize_message(error_class, message)
    cls = short_error_class(error_class)
    cls = "Compilation" if cls in _WRAPPER_CLASSES else _CLASS_ALIASES.get(cls, cls)
    inner = re.match(r"(?:in \[[^\]]*\]: )?(\w+(?:Error|Exception)): ", norm)
    if inner:  # the error a compiler wrapper carries is the real class
        cls = inner.group(1)
        norm = norm[: inner.start(1)] + norm[inner.end():]
    norm = norm.rstrip(" .!?")
    norm = API_RE.sub(lambda m: construct_family(m.group(1)) or m.group(1), norm)  # tl.int32( ~ tl.float32(
    norm = re.sub(r"(?<![\w.<])(?:" + "|".join(sorted(TL_DTYPES, key=len, reverse=True)) + r")(?![\w>])", "<dtype>", norm)
    norm = re.sub(r"(<dtype>)(?:\s*(?:,|and)\s*<dtype>)+", r"\1", norm)
    norm = re.sub(r"\b(\w{3,}?)s\b", r"\1", norm)  # plural and singular wordings of one message
    key = cls + "|" + norm.lower()
    return "sig-" + hashlib.sha256(key.encode()).hexdigest()[:10]


def split_excerpt(excerpt: str) -> tuple[str, str]:
    """Split ``"SomeError: message"`` into its class and message (class ``Error`` if none)."""
    m = re.match(r"\s*((?:[a-z_]\w*\.)*[A-Z]\w*)\s*:\s*(.*)", excerpt or "", re.S)
    if m and m.group(1) in ("CUDA", "GPU", "Triton", "Error"):  # a sentence, not a class
        m = None
    return (m.group(1), m.group(2)) if m else ("Error", excerpt or "")


_FORBID_RE = re.compile(
    r"\b(?:do not|don't|dont|never|avoid|instead of|rather than|not)\b\s+(?:(?:use|call|using|calling|write|writing|pass|passing)\b)?\s*"
    r"(.+?)(?=;|\.\s|\.$|,\s|\binstead\b|\buse\b|\bbecause\b|\bsince\b|$)",
    re.I,
)
_REPLACE_RE = re.compile(r"\breplace\s+(.+?)\s+(?:with|by)\b", re.I)
_MISSING_RE = re.compile(
    rf"({_API}|`[^`]+`|\w+\(\))\s+(?:does not|doesn't|is not|isn't|cannot be|can't be)\s+"
    r"(?:exist|supported|allowed|callable|available|valid|defined|used|called)", re.I)


def forbidden_part(text: str) -> str | None:
    """The part of a rule that says what NOT to do, if the rule has one."""
    m = _REPLACE_RE.search(text or "")
    if m:
        return m.group(1)
    m = _MISSING_RE.search(text or "")
    if m:
        return m.group(1)
    m = _FORBID_RE.search(text or "")
    return m.group(1).strip() if m and m.group(1).strip() else None


_CALL_RE = re.compile(r"(?<![\w.])([a-z_]+)\s*\(\s*\)?")
_STATEMENT_WORDS = ("if", "for", "while", "break", "continue", "return", "lambda", "assert", "print",
                    "try", "global", "del", "yield", "with", "constexpr", "else", "elif")


def _construct_in(segment: str, bare_keywords: bool) -> str | None:
    """First construct in a text segment, in order: dotted API, builtin call, code keyword."""
    found: list[tuple[int, str]] = []
    for m in API_RE.finditer(segment):
        found.append((m.start(), _canon_api(m.group(1)).rstrip(".")))
    for m in _CALL_RE.finditer(segment):
        if m.group(1) in BUILTIN_NAMES or m.group(1) in _STATEMENT_WORDS:
            found.append((m.start(), m.group(1)))
    for m in re.finditer(r"`(\w+)`", segment):
        if m.group(1) in _STATEMENT_WORDS or m.group(1) in BUILTIN_NAMES:
            found.append((m.start(), m.group(1)))
    for m in re.finditer(r"(?<![\w.])(constexpr)\b", segment):
        found.append((m.start(), "constexpr"))
    if bare_keywords:  # words that are also common English (with, for, else) only count in code form
        bare = [w for w in _STATEMENT_WORDS if w not in ("with", "for", "else", "try", "del", "global")]
        for m in re.finditer(r"(?<![\w.<])(" + "|".join(bare) + r"|max|min|abs|range|len|sum)\b(?![\w.])", segment):
            found.append((m.start(), m.group(1)))
    return min(found)[1] if found else None


def construct_of(text: str) -> str | None:
    """The main API construct a rule or message is about (``tl.float32``, ``max``, ``constexpr``).

    The forbidden part of a rule ("instead of X", "do not X") wins, because it names the mistake.
    """
    part = forbidden_part(text or "")
    if part:
        c = _construct_in(part, bare_keywords=True)
        if c:
            return c
    return _construct_in(text or "", bare_keywords=False)


def construct_family(construct: str | None) -> str | None:
    """Constructs that are one mistake share a family: every ``tl.<dtype>`` is ``tl.<dtype>``.

    Calling ``tl.float32(x)`` and calling ``tl.int32(x)`` are the same misuse (a dtype called
    as a cast function) with the same fix (``x.to(dtype)``), so a rule about either merges.
    Different functions (``tl.where`` vs ``tl.maximum``) stay apart.
    """
    if not construct:
        return None
    head, _, tail = construct.partition(".")
    if tail and head in ("tl", "torch") and tail in TL_DTYPES:
        return f"{head}.<dtype>"
    return construct
