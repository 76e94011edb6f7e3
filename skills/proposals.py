"""What the server proposes and the calling agent decides: the rules closest to a wording, and groups of
look-alike rules for a deduplication pass.

Runs in the process that owns a ``SkillStore``. Nothing here writes: closeness only ranks, with a
reason a person (or an agent) can check; whether two rules say the same thing is the agent's call
(``record_failure(same_as=...)``, ``merge_rules``). Where the memory has embeddings of the wordings
(``semantic``), their cosine similarity joins the lexical signals: it finds paraphrases that share
no construct or key word ("the dot product" for ``tl.dot``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from .concepts import canonical_text, concepts
from .keys import constructs, describe_key, forbidden, rule_keys, subject
from .semantic import best_cosines
from .similarity import tokens, weighted_jaccard

PROPOSE_MIN = 0.12
"""Below this closeness a rule is not worth an agent's attention."""
RRF_K = 10
"""Reciprocal rank fusion's constant: a candidate ranked r-th (from 0) by one signal scores 1 / (RRF_K + r)."""
SEMANTIC_WEIGHT = 10.0
"""How much the meaning ranking counts in the fusion against the lexical one (which counts 1). The tuned model
outranks the lexical signals, which break its near ties and can still lift a candidate it ranks 6th or 7th into
the five (a shared construct or error signature): on heldout11 and heldout12 (order 0), the match at 5 was
0.946 and 0.950 with 3, 0.954 and 0.957 with 10, 0.958 and 0.957 with meaning alone (benchmarks/RESULTS.md)."""
SEMANTIC_MIN = 0.35
"""A rule this similar by embedding is worth proposing even with no lexical signal."""
GROUP_MIN = 0.45
"""Two rules this close are listed in one look-alike group for the distill pass."""
BUCKET_CAP = 400
"""A construct named by more rules than this is too common to pair rules on (e.g. ``tl.load``)."""
_CONTEXT = frozenset({"triton.jit", "triton.language", "triton", "torch", "tl"})


@dataclass(frozen=True)
class Wording:
    """What closeness compares of one wording: weighted tokens, constructs, what it forbids and is
    about, the failure concepts it names and its merge keys (without the wording's own hash)."""

    text: str
    toks: dict[str, float]
    cons: frozenset[str]
    bad: str | None
    subj: str | None = None
    concepts: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()


@lru_cache(maxsize=65536)
def wording(text: str) -> Wording:
    return Wording(text, tokens(canonical_text(text)), frozenset(c for c in constructs(text) if c not in _CONTEXT),
                   forbidden(text), subject(text), frozenset(c.name for c in concepts(canonical_text(text))),
                   frozenset(rule_keys(text)[1:]))


@dataclass
class Candidate:
    """One rule cluster as a proposal candidate: its id, served wording, count, every wording, signatures."""

    rule_id: str
    text: str
    count: int
    wordings: list[str]
    signatures: set[str] = field(default_factory=set)
    vectors: list[bytes] = field(default_factory=list)  # embeddings of its wordings, where the memory has them


def closeness(a: Wording, b: Wording, shared_signature: bool = False) -> tuple[float, str]:
    """How close two wordings are (0..~4) and why, in words.

    Weighted token overlap, plus shared constructs, plus the same subject construct, plus the
    failure concepts both name, plus a merge key both have (evidence that, alone, would merge them).
    """
    sim = weighted_jaccard(a.toks, b.toks)
    shared = a.cons & b.cons
    union = a.cons | b.cons
    score = sim + (0.4 * len(shared) / len(union) if union else 0.0)
    why = []
    same_key = a.keys & b.keys
    if same_key:
        score += 1.0
        why.append(describe_key(sorted(same_key)[0]))
    if a.subj and a.subj == b.subj:
        score += 0.4
        why.append(f"both about {a.subj}")
    elif a.bad and a.bad == b.bad:
        score += 0.3
        why.append(f"both forbid {a.bad}")
    elif shared:
        why.append("both name " + ", ".join(sorted(shared)[:4]))
    both = a.concepts & b.concepts
    if both:
        score += 0.3 * len(both) / len(a.concepts | b.concepts)
        why.append("both say " + ", ".join(sorted(both)))
    if shared_signature:
        score += 0.5
        why.append("explains the same failure signature")
    why.append(f"wording overlap {sim:.2f}")
    return score, "; ".join(why)


def closest(text: str, candidates: Iterable[Candidate], signature: str | None = None, k: int = 5,
            exclude: str | None = None, vector: bytes | None = None) -> list[tuple[Candidate, float, str]]:
    """The ``k`` candidates closest to ``text`` (best first), each with its score and why; never ``exclude``.

    With ``vector`` (the embedding of ``text``), the ranking fuses two: by lexical closeness and by
    each candidate's best cosine similarity over its wordings' vectors, each candidate scoring
    1 / (:data:`RRF_K` + rank) in each (reciprocal rank fusion: neither scale has to be calibrated
    against the other). A candidate is offered when either signal reaches its floor.
    """
    me = wording(text)
    cands = [c for c in candidates if c.rule_id != exclude]
    sims = best_cosines(vector, [c.vectors for c in cands]) if vector is not None else [0.0] * len(cands)
    rows: list[tuple[Candidate, float, float, str]] = []
    for cand, sim in zip(cands, sims):
        best = (0.0, "")
        for w in cand.wordings:
            s = closeness(me, wording(w), bool(signature and signature in cand.signatures))
            if s[0] > best[0]:
                best = s
        rows.append((cand, best[0], sim, best[1]))
    fused = [r[1] for r in rows]
    if vector is not None:
        fused = [0.0] * len(rows)
        for weight, signal in ((1.0, [r[1] for r in rows]), (SEMANTIC_WEIGHT, [r[2] for r in rows])):
            for rank, i in enumerate(sorted(range(len(rows)), key=lambda i: -signal[i])):
                fused[i] += weight / (RRF_K + rank)
    scored = []
    for (cand, lexical, sim, why), score in zip(rows, fused):
        if sim > 0:
            why = f"{why}; meaning {sim:.2f}" if why else f"meaning {sim:.2f}"
        if lexical >= PROPOSE_MIN or sim >= SEMANTIC_MIN:
            scored.append((cand, round(score, 4), why))
    scored.sort(key=lambda x: (-x[1], -x[0].count, x[0].rule_id))
    return scored[:k]


def look_alike_groups(candidates: list[Candidate], min_score: float = GROUP_MIN, max_group: int = 12,
                      apart: set[frozenset[str]] | None = None) -> list[list[tuple[Candidate, str]]]:
    """Groups of candidates that look alike (single linkage over close pairs), largest first.

    Pairs are only compared when they name a construct in common (or share a signature), so the
    cost grows with the size of each construct's bucket, not with the square of the memory. Two
    groups are never joined when a pair across them was judged different (``apart``).
    """
    apart = apart or set()
    members_of: dict[int, set[str]] = {i: {c.rule_id} for i, c in enumerate(candidates)}
    buckets: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        keys: set[str] = set()
        for w in c.wordings:
            keys |= wording(w).cons
        keys |= {"sig:" + s for s in c.signatures}
        for key in keys:
            buckets.setdefault(key, []).append(i)
    parent = list(range(len(candidates)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    why: dict[int, str] = {}
    seen: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) > BUCKET_CAP:
            continue
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                i, j = members[x], members[y]
                if (i, j) in seen or find(i) == find(j):
                    continue
                seen.add((i, j))
                a, b = candidates[i], candidates[j]
                shared_sig = bool(a.signatures & b.signatures)
                score, reason = max((closeness(wording(u), wording(v), shared_sig)
                                     for u in a.wordings for v in b.wordings), key=lambda s: s[0])
                ri, rj = find(i), find(j)
                if score >= min_score and not any(frozenset((x, y)) in apart
                                                  for x in members_of[ri] for y in members_of[rj]):
                    parent[rj] = ri
                    members_of[ri] |= members_of.pop(rj)
                    why.setdefault(i, f"close to {b.rule_id}: {reason}")
                    why.setdefault(j, f"close to {a.rule_id}: {reason}")
    groups: dict[int, list[int]] = {}
    for i in range(len(candidates)):
        groups.setdefault(find(i), []).append(i)
    out = [[(candidates[i], why.get(i, "")) for i in sorted(g, key=lambda i: -candidates[i].count)][:max_group]
           for g in groups.values() if len(g) > 1]
    out.sort(key=lambda g: (-len(g), g[0][0].rule_id))
    return out
