"""The skill memory as the server process uses it (over the same database file as the tasks).

Runs in the server process. Writes take the tree store's write turn, so tool calls that write to
the tree queue behind them here rather than in SQLite's busy handler. Availability never latches off: if the memory cannot be opened, or its write lock is held by
another process (an ``adaexplore memory import``) for longer than one operation may wait, only
that call answers "unavailable" or fails with a clear message; the next call tries again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import nullcontext
from typing import Any

from ...common.db import Database
from .errors import InvalidRequest, NotFound, Unavailable
from .tool_models import (
    CloseRuleInfo,
    GroupMemberInfo,
    ImportMemoryResult,
    KeepApartResult,
    MemoryDocument,
    MergeRulesResult,
    RecordFailureResult,
    RuleDetail,
    RuleGroup,
    RuleGroupsResult,
    RuleInfo,
    SignatureInfo,
    SkillMemoryResult,
    UnmergeResult,
    WithheldRuleInfo,
)

log = logging.getLogger("adaexplore.server")


RENDER_TTL_S = 2.0


class SkillMemory:
    """The server's view of the skill memory: opened lazily over the tree store's database, answers in
    the tools' models, raises domain errors."""

    def __init__(self, db: Database, threshold: int = 3, write_wait_s: float = 10.0):
        self.db = db
        self.db_path = db.path
        # Writes hold the database's write turn for the whole operation, so tool calls that write to the
        # tree queue behind them in this process rather than in SQLite's busy handler.
        self._turn = db.write_turn
        self._rendered: dict[tuple[int, int], tuple[float, str]] = {}
        self.threshold = int(threshold)
        self.write_wait_s = float(write_wait_s)
        self._store: Any = None
        self._lock = threading.Lock()
        self._last_error = 0.0

    @property
    def store(self) -> Any:
        """The store, opened on first use; None while it cannot be opened (retried on a later call)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    try:
                        from ...skills import SkillStore, preload_embeddings

                        self._store = SkillStore(self.db, threshold=self.threshold,
                                                  write_wait_s=self.write_wait_s)
                        preload_embeddings()  # in the background: the first record_failure need not load it
                    except Exception:
                        if time.monotonic() - self._last_error > 60:
                            log.exception("skill memory unavailable for now (retried on the next call)")
                        self._last_error = time.monotonic()
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
            text = self.store.memory(task_source=task_source, token_budget=token_budget,
                                     include_candidates=True).rendered
        except Exception:
            log.exception("memory rendering failed")
            return ""
        if len(self._rendered) > 256:
            self._rendered.clear()
        self._rendered[key] = (now, text)
        return text

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

    def view(self, task_source: str | None, token_budget: int, include_candidates: bool,
             include_signatures: bool = False) -> SkillMemoryResult:
        from ...skills import MemoryBusyError, retrieval_mode

        unavailable = SkillMemoryResult(rendered="", rules=[], available=False, threshold=self.threshold)
        if self.store is None:
            return unavailable
        try:
            v = self.store.memory(task_source=task_source, token_budget=token_budget,
                                  include_candidates=include_candidates, include_signatures=include_signatures,
                                  limit=50)
        except (MemoryBusyError, sqlite3.OperationalError):
            log.warning("skill memory busy; this call answers unavailable", exc_info=True)
            return unavailable
        return SkillMemoryResult(
            rendered=v.rendered,
            rules=[RuleInfo(rule_id=r.id, text=r.text, count=r.count, active=r.active,
                            status="confirmed" if r.active else "unconfirmed") for r in v.rules[:50]],
            withheld=[WithheldRuleInfo(rule_id=w.id, text=w.text, why=w.why, nodes=w.nodes) for w in v.withheld],
            not_listed=v.not_listed, retrieval=retrieval_mode(),
            threshold=v.threshold, total_rules=v.total_rules, active_rules=v.active_rules,
            candidate_rules=v.candidate_rules, experiences=v.experiences,
            frequent_signatures=[SignatureInfo(signature=f.signature, count=f.count, error_class=f.error_class,
                                               example=f.example) for f in v.frequent_signatures[:20]])

    def _need(self) -> Any:
        if self.store is None:
            raise Unavailable("the skill memory cannot be opened right now; nothing was changed, try again later")
        return self.store

    def _call(self, what: str, fn: Any, *args: Any, write: bool = True, **kwargs: Any) -> Any:
        """Run one store operation (a write takes the write turn); a busy memory or an unknown id
        becomes a clear domain error."""
        from ...skills import MemoryBusyError, UnknownMergeError, UnknownRuleError

        try:
            with self._turn if write else nullcontext():
                return fn(*args, **kwargs)
        except MemoryBusyError as exc:
            raise Unavailable(f"{what} failed: {exc}") from None
        except UnknownRuleError as exc:
            raise NotFound(f"unknown rule_id {exc.args[0]!r}; rule ids look like 'r-0123456789' "
                            "(see get_skill_memory or list_rule_groups)") from None
        except UnknownMergeError as exc:
            raise NotFound(f"unknown merge_id {exc.args[0]!r}, or that merge was already undone; merge ids "
                            "look like 'm-0123456789' (merge_rules and record_failure return them)") from None
        except ValueError as exc:
            raise InvalidRequest(f"{what} failed: {exc}") from None

    @staticmethod
    def _detail(r: Any) -> RuleDetail:
        return RuleDetail(rule_id=r.id, text=r.text, count=r.count, active=r.active, contradicted=r.contradicted,
                          retired=r.retired, tasks=r.tasks[:100], who=r.who[:100], members=r.members[:100])

    def _rule_call(self, fn: Any, rule_id: str, *args: Any) -> RuleDetail:
        return self._detail(self._call("rule not changed", fn, rule_id, *args))

    def retire(self, rule_id: str, who: str) -> RuleDetail:
        store = self._need()
        return self._rule_call(lambda rid: store.retire(rid, who=who), rule_id)

    def edit(self, rule_id: str, text: str, who: str) -> RuleDetail:
        store = self._need()
        return self._rule_call(lambda rid: store.edit(rid, text, who=who), rule_id)

    def groups(self, limit: int) -> RuleGroupsResult:
        store = self._need()
        groups, total = self._call("listing groups", lambda: (
            store.groups(limit=limit), store.memory(limit=0, token_budget=50).total_rules), write=False)
        return RuleGroupsResult(total_rules=total, groups=[RuleGroup(rules=[GroupMemberInfo(
            rule_id=m.rule_id, text=m.text, count=m.count, active=m.active, why=m.why) for m in g]) for g in groups])

    def merge(self, rule_ids: list[str], into: str | None, reason: str | None, who: str) -> MergeRulesResult:
        store = self._need()
        out = self._call("merge not made", store.merge_rules, rule_ids, who=who, into=into, reason=reason or "")
        return MergeRulesResult(merge_id=out.merge_id, rule_id=out.rule_id, members=out.members, text=out.text,
                                count=out.count, active=out.active)

    def keep_apart(self, rule_ids: list[str], who: str) -> KeepApartResult:
        store = self._need()
        views = self._call("rules not kept apart", store.keep_apart, rule_ids, who=who)
        return KeepApartResult(rules=[self._detail(v) for v in views])

    def unmerge(self, merge_id: str, who: str) -> UnmergeResult:
        store = self._need()
        views = self._call("merge not undone", store.unmerge, merge_id, who=who)
        return UnmergeResult(merge_id=merge_id, rules=[self._detail(v) for v in views])

    def export(self) -> MemoryDocument:
        doc = self._call("export", self._need().export, write=False)
        return MemoryDocument(document=doc, rules=len(doc["rules"]), experiences=len(doc["experiences"]))

    def import_(self, document: dict[str, Any], who: str) -> ImportMemoryResult:
        store = self._need()
        from ...skills import MemoryBusyError

        try:
            s = store.import_(document, who=who)
        except MemoryBusyError as exc:
            raise Unavailable(f"import stopped: {exc}; importing the same document again completes it") from None
        except ValueError as exc:
            raise InvalidRequest(f"nothing imported: {exc}; pass the 'document' returned by export_memory "
                            "(or the file written by `adaexplore memory export`)") from None
        except (KeyError, TypeError, AttributeError, sqlite3.Error) as exc:
            raise InvalidRequest(f"nothing imported: the document is malformed ({type(exc).__name__}: {exc}); "
                            "pass an unmodified export") from None
        return ImportMemoryResult(rules_added=s.rules_added, rules_merged=s.rules_merged,
                                  evidence_added=s.evidence_added, experiences_added=s.experiences_added,
                                  contradictions_added=s.contradictions_added)

    def record_rule(self, text: str, who: str, task_id: str | None, node_id: str | None,
                    excerpt: str | None, same_as: str | None = None, node_code: str | None = None,
                    distinct_from: list[str] | None = None) -> RecordFailureResult:
        store = self._need()
        out = self._call("rule not recorded", store.record_rule, text=text, who=who, task_id=task_id,
                         node_id=node_id, error_excerpt=excerpt, same_as=same_as, node_code=node_code,
                         distinct_from=distinct_from)
        return RecordFailureResult(
            rule_id=out.rule_id, merged=out.merged, merged_into_text=out.merged_into_text, count=out.count,
            active=out.active, reason=out.reason, merged_rules=out.merged_rules, merge_ids=out.merge_ids,
            link=out.link, kept_apart_from=out.kept_apart_from, closest=[CloseRuleInfo(rule_id=c.rule_id, text=c.text, count=c.count, active=c.active,
                                                  why=c.why) for c in out.closest])

    def note_correct(self, task_id: str, node_id: str, source: str) -> None:
        if self.store is None:
            return
        try:
            with self._turn:
                self.store.note_correct_kernel(task_id=task_id, node_id=node_id, source=source)
        except Exception:
            log.warning("a correct kernel was not checked against the rules (memory busy)", exc_info=True)

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
        try:
            with self._turn:
                self.store.record_experience(task_id=task_id, node_id=node_id, status=result.status.value,
                                             error_class=error_class, message=message, construct=construct,
                                             who=who)
        except Exception:
            log.warning("a failure was not recorded as an experience (memory busy)", exc_info=True)
