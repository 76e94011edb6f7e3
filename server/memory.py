"""The skill memory as the server process uses it (over the same database file).

Runs in the server process. Writes to the memory take the store's write turn, so tool calls
that write to the tree queue behind them in this process rather than in SQLite's busy handler.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from .models import (
    ImportMemoryResult,
    MemoryDocument,
    RecordFailureResult,
    RuleDetail,
    RuleInfo,
    SignatureInfo,
    SkillMemoryResult,
)

log = logging.getLogger("adaexplore.server")

RENDER_TTL_S = 2.0


class MemoryAdapter:
    def __init__(self, db_path: Path, threshold: int = 3, write_turn: AbstractContextManager | None = None):
        self.db_path = db_path
        self._turn = write_turn if write_turn is not None else nullcontext()
        self.threshold = int(threshold)
        self._store: Any = None
        self._failed = False
        self._lock = threading.Lock()
        self._rendered: dict[tuple[int, int], tuple[float, str]] = {}

    @property
    def store(self) -> Any:
        if self._store is None and not self._failed:
            with self._lock:
                if self._store is None and not self._failed:
                    try:
                        from ..skills.store import MemoryStore

                        self._store = MemoryStore(self.db_path, threshold=self.threshold)
                    except Exception:
                        log.exception("skill memory unavailable")
                        self._failed = True
        return self._store

    def render(self, task_source: str | None, token_budget: int) -> str:
        """The rendered memory for a task, reused for RENDER_TTL_S (expand_node must not wait on memory writes)."""
        if self.store is None:
            return ""
        key = (hash(task_source), token_budget)
        now = time.monotonic()
        hit = self._rendered.get(key)
        if hit is not None and now - hit[0] < RENDER_TTL_S:
            return hit[1]
        try:
            text = self.store.memory(task_source=task_source, token_budget=token_budget).rendered
        except Exception:
            log.exception("memory rendering failed")
            return ""
        if len(self._rendered) > 256:
            self._rendered.clear()
        self._rendered[key] = (now, text)
        return text

    def view(self, task_source: str | None, token_budget: int, include_candidates: bool,
             include_signatures: bool = False) -> SkillMemoryResult:
        if self.store is None:
            return SkillMemoryResult(rendered="", rules=[], available=False, threshold=self.threshold)
        v = self.store.memory(task_source=task_source, token_budget=token_budget,
                              include_candidates=include_candidates, include_signatures=include_signatures,
                              limit=50)
        return SkillMemoryResult(
            rendered=v.rendered,
            rules=[RuleInfo(rule_id=r.id, text=r.text, count=r.count, active=r.active) for r in v.rules[:50]],
            threshold=v.threshold, total_rules=v.total_rules, active_rules=v.active_rules,
            candidate_rules=v.candidate_rules, experiences=v.experiences,
            frequent_signatures=[SignatureInfo(signature=f.signature, count=f.count, error_class=f.error_class,
                                               example=f.example) for f in v.frequent_signatures[:20]])

    def rule_counts(self) -> dict[str, int] | None:
        """Rules by state ('active', 'candidate'), or None without a memory."""
        if self.store is None:
            return None
        try:
            v = self.store.memory(token_budget=50, limit=1)
        except Exception:
            log.exception("memory counts failed")
            return None
        return {"active": v.active_rules, "candidate": v.candidate_rules}

    def _write(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._turn:
            return fn(*args, **kwargs)

    def _need(self) -> Any:
        if self.store is None:
            raise ToolError("the skill memory is not available on this server")
        return self.store

    @staticmethod
    def _detail(r: Any) -> RuleDetail:
        return RuleDetail(rule_id=r.id, text=r.text, count=r.count, active=r.active, contradicted=r.contradicted,
                          retired=r.retired, tasks=r.tasks[:100], who=r.who[:100])

    def _rule_call(self, fn: Any, rule_id: str, *args: Any) -> RuleDetail:
        from ..skills.store import UnknownRuleError

        try:
            return self._detail(fn(rule_id, *args))
        except UnknownRuleError:
            raise ToolError(f"unknown rule_id {rule_id!r}; rule ids look like 'r-0123456789' "
                            "(see get_skill_memory with include_candidates=true)") from None
        except ValueError as exc:
            raise ToolError(f"rule not changed: {exc}") from None

    def retire(self, rule_id: str, who: str) -> RuleDetail:
        store = self._need()
        return self._rule_call(lambda rid: self._write(store.retire, rid, who=who), rule_id)

    def edit(self, rule_id: str, text: str, who: str) -> RuleDetail:
        store = self._need()
        return self._rule_call(lambda rid: self._write(store.edit, rid, text, who=who), rule_id)

    def export(self) -> MemoryDocument:
        doc = self._need().export()
        return MemoryDocument(document=doc, rules=len(doc["rules"]), experiences=len(doc["experiences"]))

    def import_(self, document: dict[str, Any], who: str) -> ImportMemoryResult:
        store = self._need()
        try:
            s = self._write(store.import_, document, who=who)
        except ValueError as exc:
            raise ToolError(f"nothing imported: {exc}; pass the 'document' returned by export_memory "
                            "(or the file written by `adaexplore memory export`)") from None
        except (KeyError, TypeError, AttributeError, sqlite3.Error) as exc:
            raise ToolError(f"nothing imported: the document is malformed ({type(exc).__name__}: {exc}); "
                            "pass an unmodified export") from None
        return ImportMemoryResult(rules_added=s.rules_added, rules_merged=s.rules_merged,
                                  evidence_added=s.evidence_added, experiences_added=s.experiences_added,
                                  contradictions_added=s.contradictions_added)

    def record_rule(self, text: str, who: str, task_id: str | None, node_id: str | None,
                    excerpt: str | None) -> RecordFailureResult:
        if self.store is None:
            raise ToolError("the skill memory is not available on this server")
        try:
            out = self._write(self.store.record_rule, text=text, who=who, task_id=task_id, node_id=node_id,
                              error_excerpt=excerpt)
        except ValueError as exc:
            raise ToolError(f"rule not recorded: {exc}") from None
        return RecordFailureResult(rule_id=out.rule_id, merged=out.merged, merged_into_text=out.merged_into_text,
                                   count=out.count, active=out.active, reason=out.reason)

    def note_correct(self, task_id: str, node_id: str, source: str) -> None:
        if self.store is not None:
            self._write(self.store.note_correct_kernel, task_id=task_id, node_id=node_id, source=source)

    def experience(self, task_id: str, node_id: str, result: Any, who: str) -> None:
        if self.store is None:
            return
        err = result.error
        construct = result.lint[0].construct if result.lint else None
        if err is not None:
            error_class, message = err.error_class, err.message
        elif result.lint:
            error_class, message = "LintError", result.lint[0].message
        else:
            error_class, message = result.status.value, result.cheat_reason or result.feedback(400)
        self._write(self.store.record_experience, task_id=task_id, node_id=node_id, status=result.status.value,
                    error_class=error_class, message=message, construct=construct, who=who)
