"""What a rule is about, beyond its API names: the rule's subject construct and the kernel-failure concepts it names.

Runs wherever a ``SkillStore`` runs (the server process, the ``adaexplore memory`` command); pure
functions, no I/O.

Agents describe one mistake in many voices: "tl.arange needs compile-time bounds", "arange's
arguments must be of type tl.constexpr", "Never call tl.arange with runtime bounds". What they
share is the construct the rule is about (its *subject*: ``tl.arange``) and the *concept* of the
failure (``constexpr``: compile-time, runtime bound, constexpr). :data:`CONCEPTS` is a small
thesaurus of such failure concepts of Triton kernels, each a set of phrasings that mean one thing.

A concept is either *general* (``constexpr``, ``axis``, ``dtype-mismatch``): it only identifies a
mistake together with the subject construct (``tl.arange`` + ``constexpr`` is not ``tl.zeros`` +
``constexpr``, nor ``tl.arange`` + ``power-of-two``); or *specific* (``grid-tuple``,
``linear-weight-layout``): its phrasings name the mistake on their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Concept:
    name: str
    pattern: re.Pattern[str]
    specific: bool = False
    also: re.Pattern[str] | None = None  # a second pattern that must match too


def _c(name: str, pattern: str, specific: bool = False, also: str | None = None) -> Concept:
    return Concept(name, re.compile(pattern, re.I), specific, re.compile(also, re.I) if also else None)


CONCEPTS: tuple[Concept, ...] = (
    # general: meaningful only with the construct they are said of
    _c("missing", r"\b(?:does ?n[o']t exist|no attribute|not available\b|not defined in (?:tl|triton)|is missing|missing from|"
                  r"there is no|has no \w+\b|not in (?:tl|triton\.language)\b|not (?:part of|provided by))"),
    _c("none-result", r"\b(?:returns?|gives?|yields?|produces?)\s+None\b|->\s*None\b|\bNoneType\b"),
    _c("interpreter", r"\binterpret(?:er|ed|ing)?\b|TRITON_INTERPRET"),
    _c("constexpr", r"constexpr|compile[- ]time|\bruntime\b|\brun-time\b|known only at launch|"
                    r"plain int (?:argument|parameter)"),
    _c("power-of-two", r"power[s]? of (?:two|2)\b|next_power_of_2|\bpow2\b"),
    _c("min-size-16", r"(?:at least|>=|minimum(?: tile)?(?: is)?|below|<|or more than)\s*16\b|\b16 or more\b|"
                      r"\b8x8\b|\(< ?16\)"),
    _c("dtype-mismatch", r"\bsame dtype|different dtypes?|\bone dtype\b|mixed[- ]precision|"
                         r"\b(?:fp|float|bf)(?:16|32)\b\W+(?:\w+\W+)?(?:and|with|vs\.?)\W+(?:\w+\W+)?(?:fp|float|bf)(?:16|32)\b"),
    _c("rank", r"\b[12]-?d\b|\brank(?:-1|-2|s)?\b|\bvectors?\b|\bscalar(?:s)? and\b"),
    _c("axis", r"\baxis\b|\baxes\b|\b[34]-?d\b|\bthree axes\b|\bfourth\b"),
    _c("tail-mask", r"\bunmasked\b|without (?:a )?mask|\bmask\s*=\s*\w+\s*<|past (?:the end|n\b)|"
                    r"\bat the tail\b|\bthe tail block\b|\bexceed the\b|not a multiple of|reads? out of bounds"),
    _c("float-input", r"floating[- ]point input|\bonly takes? floats?\b|expects? (?:fp32|float)|"
                      r"\binteger (?:tensors?|tiles?|blocks?|inputs?)\b|\bint32 block|\bof an integer\b|"
                      r"convert (?:it )?to float|\bcast (?:the )?ints?\b|\bcast integers\b"),
    _c("host-side", r"\bhost[- ]side\b|\binside (?:a |the )?@triton\.jit\b|\bdevice code\b"),
    _c("loaded-scalar", r"\balready (?:a |the |gives a )?scalar\b|\bloaded scalar\b|\bis already the scalar\b"),
    _c("layout", r"\bstrides?\b|row[- ]major|\bpacked rows\b|\blayout\b|non-contiguous|\bpermuted\b|\bsliced\b"),
    # specific: the phrasing names the mistake on its own
    _c("dtype-not-callable", r"\bnot callable\b|\bnot (?:a )?(?:cast )?functions?\b|\bdtypes? (?:are|is) not functions?\b", True),
    _c("atomic-zero-init", r"\batomic(?:_add|ally)?\b", True,
       also=r"\btorch\.zeros\b|\bzero[- ]?init|\bstart at zero\b|\bzeroed\b"),
    _c("linear-weight-layout", r"[(\[]\s*out(?:_features)?\s*,\s*in(?:_features)?\s*[)\]]", True),
    _c("mask-shape", r"\bmask(?:'s)?\b[^.;]{0,60}\b(?:shapes?|dimensions?|2-d|1-d)\b|"
                     r"\b(?:shapes?|dimensions?)\b[^.;]{0,40}\bmask\b|make_shape_compatible", True),
    _c("masked-max-fill", r"\b(?:other\s*=|fill(?:ed)?|pad(?:ded)?|masked[- ]out)\b", True,
       also=r"-\s*(?:float\(\s*['\"]inf['\"]\s*\)|inf\b)|minus infinity|negative infinity"),
    _c("running-max-start", r"\b(?:running|loop-carried|online(?:-softmax)?)\s+(?:max|maximum|softmax running max)\b|"
                            r"\brunning max(?:imum)?\b", True,
       also=r"\b(?:start|init|initial|initiali[sz]e|begin|seed|begins?)\w*|-inf|minus infinity"),
    _c("grid-tuple", r"\bgrids?\b[^.;]{0,50}\btuples?\b|\btuples?\b[^.;]{0,50}\bgrid\b|\bkernel\[(?!grid\])\w+\]\(|"
                     r"\bkernel\[\(\w+,\)\]|\bbare int\b[^.;]{0,30}\bgrid\b", True),
    _c("jit-helper", r"\bhelpers?\b|\bnested python functions?\b|\bplain python function\b", True,
       also=r"\bjit\b|\bdecorat|\bundecorated\b|not defined inside the kernel"),
    _c("integer-offsets", r"\bpointers?\b|\bptr\b", True,
       also=r"\bfloat\b|\bfloat32\b|\bintegers?\b|\b1\.0\b"),
    _c("reshape-numel", r"\breshape", True,
       also=r"\bnumel\b|number of elements|element count|as many elements|multiply out|"
            r"total number of elements"),
    _c("block-to-scalar-pointer", r"\bscalar (?:pointer|address)\b|pointer argument is not a block|"
                                  r"pointer must be a (?:tile|block)|\btl\.store\(\s*\w+\s*,\s*\w+\s*\)\s+with", True),
    _c("list-argument", r"\b(?:python )?lists?\b|python sequences?\b", True,
       also=r"\btensors?\b|\bpointers?\b|\blaunch|\bkernel\b"),
    _c("output-dtype", r"\boutputs?\b[^.;]{0,60}\b(?:dtype|float32|fp32|float16|fp16|half)\b|"
                       r"\b(?:dtype|float32|fp32|float16|fp16)\b[^.;]{0,40}\boutputs?\b|"
                       r"\boutput (?:buffers|tensors?)\b[^.;]{0,40}\bdtype\b", True),
)

GENERIC = frozenset({
    "tl", "torch", "triton", "triton.jit", "triton.language", "triton.autotune", "constexpr", "tl.constexpr",
    "power-of-two", "triton.next_power_of_2", ".to", "tl.<dtype>", "torch.<dtype>", "mask=", "other=",
    "axis=", "dtype=", "-inf", "triton.cdiv",
})
"""Constructs that qualify a rule (a cast, a keyword, a fill value) rather than say what it is about."""

_BARE_TL = ("arange", "program_id", "static_range", "atomic_add", "atomic_max", "atomic_cas", "make_block_ptr",
            "num_programs", "static_assert", "multiple_of", "max_contiguous")
_BARE_RE = re.compile(r"(?<![\w.])(" + "|".join(_BARE_TL) + r")\b(?=\s*(?:\(|'s\b|\s))")
_NO_ATTR_RE = re.compile(r"(?:\btl\b|triton\.language)[^.;:]{0,30}?\b(?:has )?no (?:attribute )?['\"`]?(\w+)['\"`]?", re.I)
_NOT_IN_RE = re.compile(r"(?<![\w.])(\w+)['\"`]?\W{0,3}\s*(?:is )?not in (?:tl|triton\.language)\b", re.I)
_LINEAR_RE = re.compile(r"\b(?:F\.linear|linear layers?|nn\.linear)\b", re.I)


@lru_cache(maxsize=16384)
def canonical_text(text: str) -> str:
    """The rule's text with API synonyms spelled one way.

    ``arange(`` and ``arange's`` are ``tl.arange``; "triton.language has no attribute tanh" and
    "tanh: not in tl" name ``tl.tanh``; ``F.linear`` and "Linear layers" are ``nn.Linear``.
    """
    text = text or ""
    text = _NO_ATTR_RE.sub(lambda m: f"{m.group(0)} (tl.{m.group(1)})", text)
    text = _NOT_IN_RE.sub(lambda m: f"tl.{m.group(1)} {m.group(0)[len(m.group(1)):]}"
                          if m.group(1).lower() not in ("is", "it", "are", "tl") else m.group(0), text)
    text = _BARE_RE.sub(lambda m: "tl." + m.group(1), text)
    text = _LINEAR_RE.sub("nn.Linear", text)
    return text


@lru_cache(maxsize=16384)
def concepts(text: str) -> tuple[Concept, ...]:
    """The failure concepts a text names, in the order of :data:`CONCEPTS`."""
    text = text or ""
    return tuple(c for c in CONCEPTS if c.pattern.search(text) and (c.also is None or c.also.search(text)))

