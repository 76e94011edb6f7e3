"""Records the skill memory hands out: outcomes, served views, import summaries, errors."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from .similarity import RuleView


class UnknownRuleError(KeyError):
    """No rule has this id."""


class CloseRule(BaseModel):
    """An existing rule close to a new wording, and why; the agent decides whether it is the same."""

    rule_id: str
    text: str
    count: int
    active: bool
    score: float
    why: str


class RecordOutcome(BaseModel):
    rule_id: str
    merged: bool
    merged_into_text: str | None = None
    count: int
    active: bool
    reason: str
    merged_rules: list[str] = Field(default_factory=list)
    merge_ids: list[str] = Field(default_factory=list)
    link: str | None = None
    kept_apart_from: list[str] = Field(default_factory=list)
    closest: list[CloseRule] = Field(default_factory=list)


class MergeOutcome(BaseModel):
    merge_id: str | None
    rule_id: str
    members: list[str]
    text: str
    count: int
    active: bool


class GroupMember(BaseModel):
    rule_id: str
    text: str
    count: int
    active: bool
    why: str


class MemoryBusyError(RuntimeError):
    """The memory's write lock stayed taken longer than this operation may wait."""


class SignatureCount(BaseModel):
    signature: str
    count: int
    error_class: str
    example: str
    normalized: str


class WithheldRule(BaseModel):
    """A stored rule that is not served, and why: correct kernels used what it forbids, or an admin retired it."""

    id: str
    text: str
    why: str
    nodes: list[str] = Field(default_factory=list)  # the correct kernels (nodes) that used what it forbids


class MemoryView(BaseModel):
    rules: list[RuleView] = Field(default_factory=list)
    withheld: list[WithheldRule] = Field(default_factory=list)
    not_listed: int = 0  # rules neither listed nor withheld: unconfirmed ones when not asked for, or past the limit
    rendered: str = ""
    frequent_signatures: list[SignatureCount] = Field(default_factory=list)
    threshold: int = 3
    total_rules: int = 0
    active_rules: int = 0
    candidate_rules: int = 0
    experiences: int = 0


class ImportSummary(BaseModel):
    rules_added: int = 0
    rules_merged: int = 0
    evidence_added: int = 0
    experiences_added: int = 0
    contradictions_added: int = 0
    id_map: dict[str, str] = Field(default_factory=dict)


def now() -> float:
    """The clock every timestamp of the memory is taken from."""
    return time.time()
