"""Skill memory: failure signatures, rule merging, the team-wide store, synthesis briefs."""

from .signature import construct_of, normalize_message, signature
from .similarity import MergeDecision, RuleView, match_rule
from .store import ImportSummary, MemoryStore, MemoryView, RecordOutcome, UnknownRuleError

__all__ = [
    "ImportSummary", "MemoryStore", "MemoryView", "MergeDecision", "RecordOutcome", "RuleView", "SynthesisBrief",
    "UnknownRuleError", "construct_of", "match_rule", "normalize_message", "operators", "signature",
    "synthesis_brief",
]


def __getattr__(name: str):
    """Synthesis imports torch; load it only when asked for."""
    if name in ("SynthesisBrief", "operators", "synthesis_brief"):
        from . import synthesis

        return getattr(synthesis, name)
    raise AttributeError(name)
