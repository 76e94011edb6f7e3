"""The skill memory as the server uses it (over the same database file)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from .models import RecordFailureResult, RuleInfo, SkillMemoryResult

log = logging.getLogger("adaexplore.server")


class MemoryAdapter:
    def __init__(self, db_path: Path):
        self.db_path = db_path
        self._store: Any = None
        self._failed = False
        self._lock = threading.Lock()

    @property
    def store(self) -> Any:
        if self._store is None and not self._failed:
            with self._lock:
                if self._store is None and not self._failed:
                    try:
                        from ..skills.store import MemoryStore

                        self._store = MemoryStore(self.db_path)
                    except Exception:
                        log.exception("skill memory unavailable")
                        self._failed = True
        return self._store

    def render(self, task_source: str | None, token_budget: int) -> str:
        if self.store is None:
            return ""
        try:
            return self.store.memory(task_source=task_source, token_budget=token_budget).rendered
        except Exception:
            log.exception("memory rendering failed")
            return ""

    def view(self, task_source: str | None, token_budget: int, include_candidates: bool) -> SkillMemoryResult:
        if self.store is None:
            return SkillMemoryResult(rendered="", rules=[], available=False)
        v = self.store.memory(task_source=task_source, token_budget=token_budget,
                              include_candidates=include_candidates)
        return SkillMemoryResult(rendered=v.rendered, rules=[
            RuleInfo(rule_id=r.id, text=r.text, count=r.count, active=r.active) for r in v.rules[:50]])

    def record_rule(self, text: str, who: str, task_id: str | None, node_id: str | None,
                    excerpt: str | None) -> RecordFailureResult:
        if self.store is None:
            raise ToolError("the skill memory is not available on this server")
        try:
            out = self.store.record_rule(text=text, who=who, task_id=task_id, node_id=node_id, error_excerpt=excerpt)
        except ValueError as exc:
            raise ToolError(f"rule not recorded: {exc}") from None
        return RecordFailureResult(rule_id=out.rule_id, merged=out.merged, merged_into_text=out.merged_into_text,
                                   count=out.count, active=out.active, reason=out.reason)

    def note_correct(self, task_id: str, node_id: str, source: str) -> None:
        if self.store is not None:
            self.store.note_correct_kernel(task_id=task_id, node_id=node_id, source=source)

    def experience(self, task_id: str, node_id: str, result: Any, who: str) -> None:
        if self.store is None:
            return
        err = result.error
        construct = result.lint[0].construct if result.lint else None
        error_class = err.error_class if err else result.status.value
        message = err.message if err else (result.cheat_reason or result.feedback(400))
        self.store.record_experience(task_id=task_id, node_id=node_id, status=result.status.value,
                                     error_class=error_class, message=message, construct=construct, who=who)
