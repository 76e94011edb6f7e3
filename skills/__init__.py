"""Skill memory: failure signatures, rule merge keys and proposals, the team-wide store, synthesis briefs.

Imported by the server process and the ``adaexplore memory`` command; never imports the evaluator,
the search or the server."""

from typing import TYPE_CHECKING

from .merging import UnknownMergeError
from .records import MemoryBusyError
from .semantic import mode as retrieval_mode
from .semantic import preload as preload_embeddings
from .signature import construct_of, normalize_message, signature
from .similarity import RuleView
from .skill_store import ImportSummary, MemoryView, RecordOutcome, SkillStore, UnknownRuleError

__all__ = [
    "ImportSummary", "MemoryBusyError", "MemoryView", "RecordOutcome", "RuleView", "SkillStore", "SynthesisBrief",
    "UnknownMergeError", "UnknownRuleError", "construct_of", "normalize_message", "operators",
    "preload_embeddings", "retrieval_mode", "signature", "synthesis_brief",
]

if TYPE_CHECKING:  # loaded lazily below; named here for the type checker
    from .synthesis import SynthesisBrief, operators, synthesis_brief


def __getattr__(name: str) -> object:
    """Synthesis imports torch; load it only when asked for."""
    if name in ("SynthesisBrief", "operators", "synthesis_brief"):
        from . import synthesis

        return getattr(synthesis, name)
    raise AttributeError(name)
