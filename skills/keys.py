"""Strong evidence that two rules are one: merge keys computed from a rule's wording and its error.

Runs wherever a ``SkillStore`` runs (the server process, the ``adaexplore memory`` command).

The memory merges two rules by itself only on a key that cannot be a near miss
(:data:`AUTO_MERGE`):

- ``w:<hash>``: the same wording (up to case, spacing and word order);
- ``ecf:<signature>|<construct>|<fix>``: the same normalized error, naming the construct the
  rule forbids, with the same fix.

Every other key is evidence that ranks proposals (the agent decides): ``cf:<construct>|<fix>``
(the same forbidden construct with the same fix: "do not call tl.float32(x); use x.to(...)"),
``err:<signature>`` (the same normalized error naming what the rule is about: a rule about
``tl.tanh`` tied to "module 'triton.language' has no attribute 'tanh'"; an error that names none
of the rule's constructs is too coarse to be evidence), ``sc:``, ``c:`` and ``pair:`` (below).
Two mistakes with one construct share these ("tl.dot needs tiles of 16" and "tl.dot accumulates
in fp32"): a wrong automatic merge is worse than a missed one, which the agent can still confirm.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from .concepts import GENERIC, canonical_text, concepts
from .signature import (
    API_RE,
    BUILTIN_NAMES,
    TL_DTYPES,
    _canon_api,
    construct_family,
    forbidden_part,
    normalize_message,
    split_excerpt,
)
from .signature import signature as error_signature

_METHOD_RE = re.compile(r"(?<=[\w\])])\.([a-z_]\w*)\s*\(|(?<![\w.])\.([a-z_]\w*)\(")
_CALL_RE = re.compile(r"(?<![\w.])([a-z_]\w*)\s*\(")
_KWARG_RE = re.compile(r"(?<![\w.])(mask|other|axis|eviction_policy|num_warps|num_stages|input_precision|"
                       r"allow_tf32|dtype|boundary_check|padding_option)\s*=")
_VALUE_RE = re.compile(r"-\s*(?:float\(\s*['\"]inf['\"]\s*\)|inf\b|math\.inf|torch\.inf|infinity)|"
                       r"\bnegative infinity\b|\bminus infinity\b", re.I)
_WORD_CONSTRUCTS = {
    "constexpr": "constexpr", "power of two": "power-of-two", "power of 2": "power-of-two",
    "powers of two": "power-of-two", "powers of 2": "power-of-two", "next_power_of_2": "power-of-two",
    "contiguous": ".contiguous", "libdevice": "libdevice",
}
_IGNORED_METHODS = frozenset({"format", "join", "split", "append", "get"})
_STATEMENT_RE = re.compile(r"(?:\bpython\s+|`)(if|while|break|continue|for|return|lambda|max|min)\b`?|"
                           r"\b(if|break|continue|return|lambda)(?:\s+|-)statements?\b", re.I)
_CONTEXT = frozenset({"triton.jit", "triton.language", "tl", "triton", "torch", "triton.autotune"})
_NEGATED_RE = re.compile(r"(?:is not|isn't|are not|aren't|does not|doesn't|do not|don't|cannot|can't|must not|"
                         r"has no|have no|is never|returns None|is unsupported|is not supported)\b", re.I)


def _clean(name: str) -> str:
    return construct_family(_canon_api(name.rstrip(".,;:"))) or name


def constructs(text: str) -> list[str]:
    """The code constructs a text names, in order of appearance, each once.

    API names (``tl.dot``, ``torch.zeros``, ``nn.Linear``; dtypes folded into their family),
    method calls (``.item``, ``.to``), builtin calls (``max``), keyword arguments (``mask=``),
    a negative-infinity value (``-inf``) and a few words that name a construct (``constexpr``,
    "power of two").
    """
    return list(_constructs(text or ""))


@lru_cache(maxsize=16384)
def _constructs(text: str) -> tuple[str, ...]:
    found: list[tuple[int, str]] = []
    text = canonical_text(text)
    spans = []
    for m in API_RE.finditer(text):
        found.append((m.start(), _clean(m.group(1))))
        spans.append((m.start(), m.end()))
    for m in _METHOD_RE.finditer(text):
        name = m.group(1) or m.group(2)
        if name not in _IGNORED_METHODS and not any(a <= m.start() < b for a, b in spans):
            found.append((m.start(), "." + name))
    for m in _STATEMENT_RE.finditer(text):
        g = 1 if m.group(1) else 2
        found.append((m.start(g), m.group(g).lower()))
    for m in _CALL_RE.finditer(text):
        if m.group(1) in BUILTIN_NAMES and m.group(1) not in ("float", "int", "str", "print", "range", "len"):
            found.append((m.start(), m.group(1)))
    for m in _KWARG_RE.finditer(text):
        found.append((m.start(), m.group(1) + "="))
    for m in _VALUE_RE.finditer(text):
        found.append((m.start(), "-inf"))
    low = text.lower()
    for word, construct in _WORD_CONSTRUCTS.items():
        for m in re.finditer(r"(?<![\w.])" + re.escape(word) + r"\b(?!\.\w)", low):
            found.append((m.start(), construct))
    out: list[str] = []
    for _, c in sorted(found):
        if c not in out:
            out.append(c)
    return tuple(out)


_FAILS_RE = re.compile(r"\b(?:calling|using|call(?:ing)?)\s+(\S+)\s+(?:raises|fails|breaks|is wrong|errors)\b|"
                       r"(\S+)\s+(?:raises|fails|breaks)\b", re.I)


def forbidden(text: str) -> str | None:
    """The construct a rule forbids (the first one named in its "do not" part), if it names one."""
    text = canonical_text(text or "")
    part = forbidden_part(text or "")
    if not part:
        m = _FAILS_RE.search(text)
        part = (m.group(1) or m.group(2)) if m else None
    found = constructs(part) if part else []
    if found:
        return found[0]
    neg = _NEGATED_RE.search(text or "")  # "tl.float16(y) is not callable", "X returns None"
    if neg:
        clause = re.split(r"[;:.]\s", (text or "")[: neg.start()])[-1]
        before = constructs(clause)
        if before:
            return before[-1]
    return None


def fix_of(text: str, bad: str | None) -> frozenset[str]:
    """The constructs of the rule's remedy: everything it names outside its "do not" part, but the forbidden one."""
    text = canonical_text(text or "")
    part = forbidden_part(text or "") or ""
    rest = (text or "").replace(part, " ", 1) if part else (text or "")
    return frozenset(c for c in constructs(rest) if c != bad and c not in _CONTEXT)


def wording_hash(text: str) -> str:
    """Identity of a wording up to case, spacing, punctuation and word order."""
    words = sorted(re.findall(r"[\w.]+", (text or "").lower()))
    return hashlib.sha256(" ".join(words).encode()).hexdigest()[:16]


def names_construct(construct: str, error_text: str) -> bool:
    """True when the error text names the construct (by its last name part; a dtype family by any dtype)."""
    low = (error_text or "").lower()
    words = set(re.findall(r"[a-z_][a-z0-9_]*", low))
    if construct in ("-inf",):
        return False
    name = construct.rstrip("=").split(".")[-1].lower()
    if name == "<dtype>":
        return bool(words & (TL_DTYPES | {"dtype"}))
    if construct == "power-of-two":
        return re.search(r"power of (?:2|two)", low) is not None
    return bool(name) and name in words


def names_construct_of(rule_text: str, error_text: str) -> str | None:
    """The first construct of the rule that the error text names, or None."""
    return next((c for c in constructs(rule_text) if names_construct(c, error_text)), None)


def error_key(rule_text: str, error_class: str, message: str) -> str | None:
    """``err:<signature>`` when the error is specific to the rule; None for a coarse error.

    Specific: the error names the rule's subject construct (see :func:`subject`), or the rule has
    no subject and the error names one of its constructs, or the rule names none and the error
    names an API (``tl.float32``, ``tl.constexpr``). An error that names nothing the rule is about
    ("compilation failed", "expected 16.0, got 1250.0") is never evidence.
    """
    if not message:
        return None
    normalized = normalize_message(error_class, message)
    subj = subject(rule_text)
    if subj:  # one error text can come from several constructs ("Shape element 0 must have type constexpr")
        if not names_construct(subj, f"{message} {normalized}"):
            return None
    elif constructs(rule_text):
        if not names_construct_of(rule_text, f"{message} {normalized}"):
            return None
    elif not API_RE.search(normalized):
        return None
    return "err:" + error_signature(error_class, message)


def excerpt_key(rule_text: str, excerpt: str | None) -> str | None:
    """:func:`error_key` of an ``"SomeError: message"`` excerpt."""
    if not excerpt:
        return None
    return error_key(rule_text, *split_excerpt(excerpt))


def subject(text: str) -> str | None:
    """The construct a rule is about: the one it forbids, else the first it names that is not a qualifier.

    Qualifiers (:data:`.concepts.GENERIC`: a cast ``.to``, ``constexpr``, ``mask=``, ``-inf``) say
    what to do about a construct, not which construct the mistake is made with.
    """
    bad = forbidden(text)
    if bad and (bad not in GENERIC or bad.endswith(".<dtype>")):
        return bad
    return next((c for c in constructs(text) if c not in GENERIC and c not in _CONTEXT), None)


def rule_keys(text: str) -> list[str]:
    """The merge keys of a wording alone (see :func:`_rule_keys`)."""
    return list(_rule_keys(text or ""))


@lru_cache(maxsize=16384)
def _rule_keys(text: str) -> tuple[str, ...]:
    """The keys of a wording alone, strongest evidence first.

    - ``w:``: its wording; ``cf:``: its forbidden construct with its fix; ``pair:``: the two
      constructs of a rule that names exactly two (one is the mistake, the other its fix);
    - ``sc:<subject>|<concept>``: its subject construct with a failure concept it names
      (``tl.arange`` + ``constexpr``); ``c:<concept>``: a concept specific enough on its own
      (``grid-tuple``).
    """
    keys = ["w:" + wording_hash(text)]
    subj = subject(text)
    for concept in concepts(canonical_text(text)):
        if concept.specific:
            keys.append("c:" + concept.name)
        elif subj:
            keys.append(f"sc:{subj}|{concept.name}")
    if any(k.startswith("sc:") for k in keys):
        # The rule names its failure with its construct: sharper than its construct and fix, which
        # several failures of one construct share (tl.dot on tiles below 16 and on vectors: both fixed by tl.sum).
        return tuple(keys)
    bad = forbidden(text)
    fix = fix_of(text, bad)
    if bad and fix:
        keys.append(f"cf:{bad}|{','.join(sorted(fix))}")
    named = [c for c in constructs(text) if c not in _CONTEXT and c not in GENERIC]
    if len(named) == 2 and not any(c.endswith("=") for c in named):
        keys.append("pair:" + ",".join(sorted(named)))
    return tuple(keys)


AUTO_MERGE = ("w:", "ecf:")
"""The kinds of key on which the memory merges rules without asking."""


def merges_alone(key: str) -> bool:
    """Whether ``key`` is evidence enough to merge two rules without the agent's word."""
    return key.startswith(AUTO_MERGE)


def fixed_error_keys(text: str, error_keys: list[str]) -> list[str]:
    """``ecf:`` keys: each ``err:`` key of the rule joined with the construct it forbids and its fix.

    Only a rule that forbids a construct and names a fix has them; the same error with the same
    forbidden construct and the same fix is one lesson however it is worded.
    """
    bad = forbidden(text)
    fix = fix_of(text, bad) if bad else frozenset()
    if not bad or not fix:
        return []
    return [f"ecf:{k[4:]}|{bad}|{','.join(sorted(fix))}" for k in error_keys if k.startswith("err:")]


def describe_key(key: str) -> str:
    """A key as a reason a person reads."""
    kind, _, body = key.partition(":")
    if kind == "w":
        return "the same wording"
    if kind == "cf":
        bad, _, fix = body.partition("|")
        return f"the same forbidden construct {bad} with the same fix {fix.replace(',', ', ')}"
    if kind == "err":
        return f"the same normalized error {body}"
    if kind == "ecf":
        sig, bad, fix = (body.split("|") + ["", ""])[:3]
        return f"the same error {sig} with the same forbidden construct {bad} and the same fix {fix.replace(',', ', ')}"
    if kind == "pair":
        return f"the same two constructs {body.replace(',', ' and ')} (the mistake and its fix)"
    if kind == "sc":
        subj, _, concept = body.partition("|")
        return f"the same construct {subj} with the same failure ({concept})"
    if kind == "c":
        return f"the same failure ({body})"
    return key
