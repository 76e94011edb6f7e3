"""Weighted token overlap of rule wordings, and the rule view that serving and proposals work on.

Runs wherever a ``SkillStore`` runs (the server process, the ``adaexplore memory`` command).
API names (``tl.*``, ``torch.*``, ``F.*``), code keywords, builtins and dtype names weigh most,
ordinary words weigh one, stopwords and placeholders weigh little. Overlap only ranks the closest
rules offered to an agent (see ``proposals``); it never merges rules (see ``keys``).
"""

from __future__ import annotations

import re
import warnings

from pydantic import BaseModel, Field

from .signature import API_RE, BUILTIN_NAMES, CODE_WORDS, TL_DTYPES, _canon_api, construct_family

SYNONYMS = {
    "missing": "missing", "exist": "missing", "available": "missing", "absent": "missing",
    "convert": "cast", "promote": "cast", "casting": "cast",
    "tile": "block", "tiles": "block", "blocks": "block",
    "dimension": "dim", "dims": "dim", "dimensions": "dim", "axes": "axis",
    "allocate": "create", "allocating": "create", "materialize": "create",
    "fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
    "contiguous": "contiguous", "permute": "transpose", "permuted": "transpose", "transposed": "transpose",
    "masked": "mask", "masking": "mask", "bounds": "bound", "out-of-bounds": "bound",
    "branch": "if", "branching": "if", "else": "if",
    "globals": "global", "constants": "global", "constant": "global",
    "launching": "launch", "launches": "launch", "launched": "launch",
    "autotuned": "autotune", "autotuner": "autotune",
}
"""A small thesaurus of kernel-rule vocabulary: words that mean one thing map to one token."""

API_WEIGHT, CODE_WEIGHT, WORD_WEIGHT, STOP_WEIGHT, PLACEHOLDER_WEIGHT = 4.0, 2.5, 1.0, 0.15, 0.3

STOPWORDS = frozenset("""
a an the and or but of to in on at by for with from into as is are was were be been being it its
this that these those then than so such not no do does did don't dont never avoid instead use using
used call calling called when you your we our they their there here can cannot must should would
will may might also only just any all each every one via per x y z value values instead rather
always make sure which what where because since kernel kernels triton code function inside
""".split())

_TOKEN_RE = re.compile(r"<\w+>|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*|\.\w+(?=\()")


with warnings.catch_warnings():  # the field name "construct" is part of the public API
    warnings.simplefilter("ignore")

    class RuleView(BaseModel):
        """A rule as served and as matched against."""

        id: str
        text: str
        count: int = 0
        active: bool = False
        contradicted: bool = False
        retired: bool = False
        construct: str | None = None  # type: ignore[assignment]  # shadows the deprecated BaseModel.construct
        tasks: list[str] = Field(default_factory=list)
        first_seen: float | None = None
        last_seen: float | None = None
        who: list[str] = Field(default_factory=list)
        signatures: list[str] = Field(default_factory=list, exclude=True)
        variants: list[str] = Field(default_factory=list, exclude=True)
        members: list[str] = Field(default_factory=list)  # rule rows merged into this one
        failures: list[str] = Field(default_factory=list, exclude=True)  # normalized messages it explains


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> dict[str, float]:
    """Weighted tokens of a text (a set: each token once, with its weight)."""
    out: dict[str, float] = {}
    for m in _TOKEN_RE.finditer(text or ""):
        raw = m.group(0)
        if raw.startswith("<"):
            tok, w = raw, PLACEHOLDER_WEIGHT
        elif raw.startswith("."):
            tok, w = raw, CODE_WEIGHT  # a method such as .to( or .item(
        elif API_RE.fullmatch(raw):
            tok = _canon_api(raw)
            fam = construct_family(tok)
            tok, w = (fam or tok), API_WEIGHT
        elif "." in raw:  # obj.method: the method is the construct, the object a local name
            tok, w = "." + raw.rsplit(".", 1)[1].lower(), CODE_WEIGHT
        else:
            low = raw.lower()
            if low in STOPWORDS or (len(low) <= 2 and low not in CODE_WORDS):
                tok, w = low, STOP_WEIGHT
            elif low in CODE_WORDS or low in BUILTIN_NAMES or low in TL_DTYPES:
                tok, w = low, CODE_WEIGHT
            elif low in SYNONYMS:
                tok, w = SYNONYMS[low], (CODE_WEIGHT if SYNONYMS[low] in CODE_WORDS else WORD_WEIGHT)
            else:
                tok, w = _stem(low), WORD_WEIGHT
        out[tok] = max(out.get(tok, 0.0), w)
    return out


def weighted_jaccard(a: dict[str, float], b: dict[str, float]) -> float:
    """Sum of weights of shared tokens over the sum of weights of all tokens."""
    union = set(a) | set(b)
    if not union:
        return 0.0
    num = sum(min(a.get(t, 0.0), b.get(t, 0.0)) for t in union)
    den = sum(max(a.get(t, 0.0), b.get(t, 0.0)) for t in union)
    return num / den if den else 0.0
