"""Skill memory: failure signatures, rule merge keys and proposals, the team-wide store, synthesis briefs.

Imported by the server process and the ``adaexplore memory`` command; never imports the evaluator,
the search or the server."""

from .signature import construct_of, normalize_message, signature
from .similarity import RuleView
from .skill_store import ImportSummary, MemoryView, RecordOutcome, SkillStore, UnknownRuleError

__all__ = [
    "ImportSummary", "SkillStore", "MemoryView", "RecordOutcome", "RuleView", "SynthesisBrief",
    "UnknownRuleError", "construct_of", "normalize_message", "operators", "signature",
    "synthesis_brief",
]


def __getattr__(name: str) -> object:
    """Synthesis imports torch; load it only when asked for."""
    if name in ("SynthesisBrief", "operators", "synthesis_brief"):
        from . import synthesis

        return getattr(synthesis, name)
    raise AttributeError(name)
