"""Team-wide skill memory over SQLite: experiences, rules, evidence, contradictions.

Every write is one ``BEGIN IMMEDIATE`` transaction on a fresh connection, so threads and
processes sharing the file serialize their read-modify-write steps: no count is lost and
no duplicate rule is created. Commits do not wait for the disk (WAL with ``synchronous=NORMAL``,
as the server's own tables): the write lock is held for microseconds, and a power loss can
lose the last commits but never corrupts the file.

``MemoryStore`` owns the connections, the schema and the transactions; the merging of rules
lives in ``merging``, the read side in ``views`` and export/import in ``exchange``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .evidence import forbidden_construct, uses_forbidden
from .exchange import EXPORT_FORMAT, check_format, export_memory, import_memory
from .merging import (add_evidence, first_match, fold_linked, new_rule, prefer_wording, resolve, text_key,
                      unclaimed_failures, unclaimed_signature, wording_key)
from .models import ImportSummary, MemoryView, RecordOutcome, SignatureCount, UnknownRuleError
from .models import now as _now
from .signature import construct_of, normalize_message, signature, split_excerpt
from .similarity import RuleView
from .views import frequent_signature_rows, rule_views, serve

__all__ = [
    "EXPORT_FORMAT", "SKIPPED_STATUSES", "ImportSummary", "MemoryStore", "MemoryView", "RecordOutcome",
    "SignatureCount", "UnknownRuleError", "text_key", "wording_key",
]

SKIPPED_STATUSES = frozenset({"infra_error", "correct", "wrong_output"})
"""Never experiences: our faults, successes and plain numerical mismatches."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS skill_rules (
    id TEXT PRIMARY KEY, text TEXT NOT NULL, construct TEXT, created REAL NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0, retired_by TEXT, edited_by TEXT, pinned INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS skill_evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT, rule_id TEXT NOT NULL, task_id TEXT NOT NULL DEFAULT '',
    node_id TEXT NOT NULL DEFAULT '', who TEXT NOT NULL, text TEXT NOT NULL, text_key TEXT NOT NULL,
    error_excerpt TEXT, first_seen REAL NOT NULL, last_seen REAL NOT NULL,
    UNIQUE (rule_id, task_id, node_id, who, text_key));
CREATE INDEX IF NOT EXISTS skill_evidence_rule ON skill_evidence (rule_id);
CREATE TABLE IF NOT EXISTS skill_rule_signatures (
    rule_id TEXT NOT NULL, signature TEXT NOT NULL, PRIMARY KEY (rule_id, signature));
CREATE INDEX IF NOT EXISTS skill_rule_signatures_sig ON skill_rule_signatures (signature);
CREATE TABLE IF NOT EXISTS skill_experiences (
    id TEXT PRIMARY KEY, task_id TEXT NOT NULL, node_id TEXT, status TEXT NOT NULL, error_class TEXT NOT NULL,
    message TEXT NOT NULL, normalized TEXT NOT NULL, signature TEXT NOT NULL, construct TEXT, who TEXT NOT NULL,
    created REAL NOT NULL, rule_id TEXT);
CREATE INDEX IF NOT EXISTS skill_experiences_sig ON skill_experiences (signature);
CREATE INDEX IF NOT EXISTS skill_experiences_node ON skill_experiences (node_id);
CREATE TABLE IF NOT EXISTS skill_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
INSERT OR IGNORE INTO skill_meta (k, v) VALUES ('version', 0);
CREATE TABLE IF NOT EXISTS skill_rule_aliases (old_id TEXT PRIMARY KEY, rule_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS skill_contradictions (
    rule_id TEXT NOT NULL, source_hash TEXT NOT NULL, task_id TEXT, node_id TEXT, seen REAL NOT NULL,
    PRIMARY KEY (rule_id, source_hash));
"""


class MemoryStore:
    """Skill memory in the SQLite file ``db_path`` (tables prefixed ``skill_``)."""

    def __init__(self, db_path: str | Path, threshold: int = 3, contradiction_min: int = 2):
        self.db_path = str(db_path)
        self.threshold = int(threshold)
        self.contradiction_min = int(contradiction_min)
        self._memory_cache: dict[tuple, MemoryView] = {}  # keyed by the memory's version
        with self._conn() as conn:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:  # pragma: no cover - e.g. a read-only medium
                pass
        with self._tx() as conn:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)

    # -- connections ---------------------------------------------------------------------
    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.row_factory = sqlite3.Row
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its first statement."""
        with self._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            # Every write moves the version, so readers can cache what they derive from it.
            conn.execute("UPDATE skill_meta SET v = v + 1 WHERE k = 'version'")
            conn.execute("COMMIT")

    def _views(self, conn: sqlite3.Connection, rule_ids: list[str] | None = None,
               with_variants: bool = False) -> list[RuleView]:
        return rule_views(conn, self.threshold, self.contradiction_min, rule_ids=rule_ids,
                          with_variants=with_variants)

    # -- experiences ---------------------------------------------------------------------
    def record_experience(self, *, task_id: str, node_id: str | None, status: str, error_class: str,
                          message: str, construct: str | None = None, who: str = "local") -> str | None:
        """Store a failed evaluation with its signature; None for statuses memory ignores."""
        status = getattr(status, "value", status)
        if status in SKIPPED_STATUSES:
            return None
        normalized = normalize_message(error_class, message)
        sig = signature(error_class, message)
        exp_id = "e-" + uuid.uuid4().hex[:12]
        with self._tx() as conn:
            row = conn.execute("SELECT rule_id FROM skill_rule_signatures WHERE signature=? ORDER BY rule_id LIMIT 1",
                               (sig,)).fetchone()
            conn.execute(
                "INSERT INTO skill_experiences VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (exp_id, task_id, node_id, status, error_class, message[:4000], normalized, sig,
                 construct or construct_of(normalized), who, _now(), row["rule_id"] if row else None))
        return exp_id

    def experience_rule(self, experience_id: str) -> str | None:
        """The rule an experience's failure is explained by, if any."""
        with self._conn() as conn:
            row = conn.execute("""SELECT COALESCE(e.rule_id, (SELECT rule_id FROM skill_rule_signatures s
                                  WHERE s.signature=e.signature ORDER BY rule_id LIMIT 1)) AS r
                                  FROM skill_experiences e WHERE id=?""", (experience_id,)).fetchone()
        return row["r"] if row else None

    # -- rules ---------------------------------------------------------------------------
    def record_rule(self, *, text: str, who: str, task_id: str | None = None, node_id: str | None = None,
                    error_excerpt: str | None = None) -> RecordOutcome:
        """Merge ``text`` into an equivalent rule or add it; count distinct occasions."""
        text = " ".join((text or "").split())
        if not text:
            raise ValueError("rule text is empty")
        now = _now()
        with self._tx() as conn:
            sigs: list[str] = []
            if error_excerpt:
                sigs.append(signature(*split_excerpt(error_excerpt)))
            if node_id:
                q = "SELECT DISTINCT signature FROM skill_experiences WHERE node_id=?"
                args: tuple = (node_id,)
                if task_id:
                    q, args = q + " AND task_id=?", (node_id, task_id)
                sigs += [r["signature"] for r in conn.execute(q, args) if r["signature"] not in sigs]
            views = self._views(conn, with_variants=True)
            decision = first_match(text, sigs, views, unclaimed_failures(conn))
            merged = bool(decision and decision.rule_id)
            if merged:
                rule_id = decision.rule_id
                prefer_wording(conn, rule_id, text)
            else:
                rule_id = new_rule(conn, text, now)
                if not sigs:
                    sigs = unclaimed_signature(conn, text)
            add_evidence(conn, rule_id, task_id or "", node_id or "", who, text, error_excerpt, now, now)
            for sig in sigs:
                conn.execute("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)", (rule_id, sig))
                conn.execute("UPDATE skill_experiences SET rule_id=? WHERE signature=? AND rule_id IS NULL",
                             (rule_id, sig))
            fold_linked(conn, self._views, rule_id, text, sigs)
            view = self._views(conn, rule_ids=[rule_id])[0]
        return RecordOutcome(rule_id=rule_id, merged=merged, merged_into_text=view.text if merged else None,
                             count=view.count, active=view.active, reason=decision.reason if decision else "new rule")

    def resolve(self, rule_id: str) -> str:
        """The id a rule has now (rules folded into another keep their old id as an alias)."""
        with self._conn() as conn:
            return resolve(conn, rule_id)

    def get_rule(self, rule_id: str) -> RuleView:
        with self._conn() as conn:
            views = self._views(conn, rule_ids=[resolve(conn, rule_id)])
        if not views:
            raise UnknownRuleError(rule_id)
        return views[0]

    def retire(self, rule_id: str, who: str) -> RuleView:
        """Stop serving a rule; later equivalent rules merge into it and stay retired."""
        with self._tx() as conn:
            rule_id = resolve(conn, rule_id)
            if not conn.execute("UPDATE skill_rules SET retired=1, retired_by=? WHERE id=?", (who, rule_id)).rowcount:
                raise UnknownRuleError(rule_id)
        return self.get_rule(rule_id)

    def edit(self, rule_id: str, text: str, who: str) -> RuleView:
        """Replace a rule's wording; the edited wording is kept from then on."""
        text = " ".join((text or "").split())
        if not text:
            raise ValueError("rule text is empty")
        with self._tx() as conn:
            rule_id = resolve(conn, rule_id)
            if not conn.execute("UPDATE skill_rules SET text=?, construct=?, edited_by=?, pinned=1 WHERE id=?",
                                (text, construct_of(text), who, rule_id)).rowcount:
                raise UnknownRuleError(rule_id)
        return self.get_rule(rule_id)

    def forbidden_construct(self, rule_id: str) -> str | None:
        """What a rule forbids, as a construct (for explanations)."""
        return forbidden_construct(self.get_rule(rule_id).text)

    # -- contradictions ------------------------------------------------------------------
    def note_correct_kernel(self, *, task_id: str, node_id: str, source: str) -> list[str]:
        """Count, for every rule, whether this correct kernel uses what the rule forbids.

        Returns the ids of the rules it used the forbidden construct of.
        """
        src_hash = hashlib.sha256(source.encode()).hexdigest()[:20]
        hit: list[str] = []
        with self._tx() as conn:
            for rule in conn.execute("SELECT id, text FROM skill_rules WHERE retired=0 ORDER BY id").fetchall():
                if uses_forbidden(rule["text"], source):
                    conn.execute("INSERT OR IGNORE INTO skill_contradictions VALUES (?,?,?,?,?)",
                                 (rule["id"], src_hash, task_id, node_id, _now()))
                    hit.append(rule["id"])
        return hit

    # -- serving -------------------------------------------------------------------------
    def memory(self, *, task_source: str | None = None, token_budget: int = 1500, include_candidates: bool = False,
               include_signatures: bool = False, limit: int = 50) -> MemoryView:
        """Rules to serve, most relevant to the task first, then most frequent, then most recent."""
        with self._conn() as conn:
            version = conn.execute("SELECT v FROM skill_meta WHERE k = 'version'").fetchone()[0]
            key = (version, task_source, token_budget, include_candidates, include_signatures, limit)
            cached = self._memory_cache.get(key)
            if cached is not None:
                return cached
            views = self._views(conn)
            sig_rows = frequent_signature_rows(conn, limit) if include_signatures else []
            n_exp = conn.execute("SELECT COUNT(*) FROM skill_experiences").fetchone()[0]
        view = serve(views, sig_rows, n_exp, threshold=self.threshold, task_source=task_source,
                     token_budget=token_budget, include_candidates=include_candidates, limit=limit)
        if len(self._memory_cache) > 64:
            self._memory_cache.clear()
        self._memory_cache[key] = view
        return view

    # -- exchange ------------------------------------------------------------------------
    def export(self) -> dict:
        """Everything another server needs to start from this memory (JSON-able)."""
        with self._conn() as conn:
            return export_memory(conn, self.threshold)

    def import_(self, data: dict, who: str) -> ImportSummary:
        """Merge an export into this memory; importing the same file twice changes nothing."""
        check_format(data)
        with self._tx() as conn:
            return import_memory(conn, self._views, data, who)
