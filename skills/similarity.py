"""Deterministic, explainable rule matching: weighted token overlap plus construct checks.

Tokens are taken from the normalized text. API names (``tl.*``, ``torch.*``, ``F.*``),
code keywords, builtins and dtype names weigh most, ordinary words weigh one, stopwords
and placeholders weigh little. Two rules merge when they explain the same failure
signature, or when their weighted Jaccard similarity reaches the threshold and they are
about the same construct family (see :func:`.signature.construct_family`): so
"use tl.where instead of if" and "use tl.maximum instead of max()" never merge, however
alike their wording, while "do not call tl.float32(x)" and "do not call tl.int32(x)" do.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

from pydantic import BaseModel, Field

from .signature import API_RE, BUILTIN_NAMES, CODE_WORDS, TL_DTYPES, _canon_api, construct_family, main_construct

STRONG_THRESHOLD = 0.25
"""Both rules forbid the same construct family: little shared wording beyond it is needed."""
MERGE_THRESHOLD = 0.4
"""Same construct family, but at least one rule only mentions it (no "do not X" part)."""
PLAIN_THRESHOLD = 0.3
"""Neither rule names a construct: wording alone decides."""
LOOSE_THRESHOLD = 0.5
"""Only one of the two rules names a construct."""
RESIDUAL_THRESHOLD = 0.1
"""Rules forbidding the same construct must also share something besides it (tl.dot is used by many)."""
DISJOINT_THRESHOLD = 0.5
"""Both rules are tied to failures, but to different failure signatures: they likely differ."""

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
        construct: str | None = None
        tasks: list[str] = Field(default_factory=list)
        first_seen: float | None = None
        last_seen: float | None = None
        who: list[str] = Field(default_factory=list)
        signatures: list[str] = Field(default_factory=list, exclude=True)
        variants: list[str] = Field(default_factory=list, exclude=True)
        members: list[str] = Field(default_factory=list)  # rule rows merged into this one
        failures: list[str] = Field(default_factory=list, exclude=True)  # normalized messages it explains


class MergeDecision(BaseModel):
    """Which rule a new one merges into (None: a new rule), with the score and the reason."""

    rule_id: str | None = None
    score: float = 0.0
    reason: str


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


def similarity(a: str, b: str) -> float:
    return weighted_jaccard(tokens(a), tokens(b))


def required_score(a: tuple[str | None, bool], b: tuple[str | None, bool], threshold: float = MERGE_THRESHOLD) -> float | None:
    """The similarity two rules need to merge, from their main constructs (None: never).

    Each side is ``(construct family, strong)``; strong means the rule forbids it.
    """
    (fa, sa), (fb, sb) = a, b
    if fa and fb:
        if fa != fb:
            return None if (sa and sb) else max(threshold, LOOSE_THRESHOLD) + 0.15
        return STRONG_THRESHOLD if (sa and sb) else threshold
    if not fa and not fb:
        return PLAIN_THRESHOLD
    return LOOSE_THRESHOLD


def family_of(text: str, construct: str | None = None) -> tuple[str | None, bool]:
    c, strong = main_construct(text)
    return construct_family(c), strong


def mentions(family: str, text: str) -> bool:
    """True when a (normalized) text uses a construct of this family."""
    return family in tokens(text) or family.rstrip("()") in tokens(text)


def explained_by(family: tuple[str | None, bool], candidates: list[RuleView],
                 unclaimed: Sequence[str] = (), signature: str | None = None) -> str | None:
    """The one rule whose failures use the construct a rule forbids.

    None when no failure, or more than one failure cluster (claimed by a rule or not), uses it:
    a construct such as ``tl.dot`` takes part in several distinct failures. None too when the
    rule comes with its own failure ``signature`` and the owner explains other failures only: the
    rule is known to explain a different failure that merely involves the same API.
    """
    fam, strong = family
    if not fam or not strong:
        return None
    if any(mentions(fam, f) for f in unclaimed):
        return None
    owners = {r.id for r in candidates if any(mentions(fam, f) for f in r.failures)}
    if len(owners) != 1:
        return None
    owner = next(r for r in candidates if r.id in owners)
    if sum(mentions(fam, f) for f in owner.failures) != 1:
        return None
    if signature and owner.signatures and signature not in owner.signatures:
        return None
    return owner.id


def match_rule(text: str, signature: str | None, existing: list[RuleView],
               threshold: float = MERGE_THRESHOLD, unclaimed_failures: Sequence[str] = ()) -> MergeDecision:
    """Decide whether ``text`` (with the failure ``signature`` it explains) is an existing rule.

    Signature first (both explain the same failure cluster and do not forbid different
    constructs), then the best wording similarity over each rule's recorded wordings, against
    the bar :func:`required_score` sets for the pair's constructs.
    """
    mine_family = family_of(text)
    mine = tokens(text)
    best: tuple[float, str, str] | None = None
    near: tuple[float, str, str] | None = None
    for rule in sorted(existing, key=lambda r: r.id):
        candidates = []
        for wording in [rule.text, *rule.variants]:
            theirs_family = family_of(wording)
            need = required_score(mine_family, theirs_family, threshold)
            theirs = tokens(wording)
            if need is not None and mine_family[0] and mine_family[0] == theirs_family[0]:
                shared = mine_family[0]
                rest = weighted_jaccard({t: w for t, w in mine.items() if t != shared},
                                        {t: w for t, w in theirs.items() if t != shared})
                if rest < RESIDUAL_THRESHOLD:
                    need = max(need, LOOSE_THRESHOLD)
            candidates.append((weighted_jaccard(mine, theirs), need, wording))
        if signature and signature in rule.signatures and any(n is not None for _, n, _ in candidates):
            return MergeDecision(rule_id=rule.id, score=1.0, reason=f"same failure signature {signature} as {rule.id}")
        disjoint = bool(signature and rule.signatures and signature not in rule.signatures)
        for score, need, wording in candidates:
            if need is not None and disjoint:
                need = max(need, DISJOINT_THRESHOLD)
            if need is None:
                if score >= STRONG_THRESHOLD and (near is None or score > near[0]):
                    near = (score, rule.id, f"{mine_family[0]} vs {family_of(wording)[0]}")
                continue
            if score >= need and (best is None or score > best[0]):
                what = f"construct {mine_family[0]}" if mine_family[0] else "no construct named"
                best = (score, rule.id, f"similar wording ({score:.2f} >= {need:.2f}), {what}")
    if best:
        return MergeDecision(rule_id=best[1], score=round(best[0], 4), reason=f"merged into {best[1]}: {best[2]}")
    owner = explained_by(mine_family, existing, unclaimed_failures, signature=signature)
    if owner:
        return MergeDecision(rule_id=owner, score=0.0, reason=(
            f"merged into {owner}: it forbids {mine_family[0]}, the construct in the failures {owner} explains, "
            f"and no other rule's failures involve it"))
    if near:
        return MergeDecision(score=round(near[0], 4),
                             reason=f"new rule: similar to {near[1]} ({near[0]:.2f}) but forbids a different construct ({near[2]})")
    return MergeDecision(reason="new rule: no equivalent rule found")
