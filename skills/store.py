"""Team-wide skill memory over SQLite: experiences, rules, evidence, contradictions.

Every write is one ``BEGIN IMMEDIATE`` transaction on a fresh connection, so threads and
processes sharing the file serialize their read-modify-write steps: no count is lost and
no duplicate rule is created.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from .evidence import forbidden_construct, uses_forbidden
from .relevance import relevance, task_keywords
from .render import render_rules
from .signature import construct_of, forbidden_part, normalize_message, signature, split_excerpt
from .similarity import RuleView, explained_by, family_of, match_rule, mentions, tokens

SKIPPED_STATUSES = frozenset({"infra_error", "correct", "wrong_output"})
"""Never experiences: our faults, successes and plain numerical mismatches."""

EXPORT_FORMAT = "adaexplore-skill-memory"

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


class UnknownRuleError(KeyError):
    """No rule has this id."""


class RecordOutcome(BaseModel):
    rule_id: str
    merged: bool
    merged_into_text: str | None = None
    count: int
    active: bool
    reason: str


class SignatureCount(BaseModel):
    signature: str
    count: int
    error_class: str
    example: str
    normalized: str


class MemoryView(BaseModel):
    rules: list[RuleView] = Field(default_factory=list)
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


def text_key(text: str) -> str:
    """Identity of a wording up to case, spacing and word order of its weighted tokens."""
    return hashlib.sha256(" ".join(sorted(tokens(text))).encode()).hexdigest()[:16]


_DO_RE = re.compile(r"\b(use|cast|call|mark|declare|replace|prefer|convert|keep|pass|write|compute|make|"
                    r"load|store|add|set|check|apply|accumulate|launch|wrap)\b", re.I)


def wording_key(text: str) -> tuple:
    """Sort key of wordings, best first: has both a do and a don't part, then shorter."""
    dont = forbidden_part(text)
    rest = text.replace(dont, " ") if dont else text
    both = bool(dont) and bool(_DO_RE.search(rest))
    return (not both, not dont, len(text), text)


def _now() -> float:
    return time.time()


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
            unclaimed = [r["norm"] for r in conn.execute(
                """SELECT MIN(normalized) AS norm FROM skill_experiences
                   WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) GROUP BY signature""")]
            decision = None
            for sig in sigs or [None]:
                decision = match_rule(text, sig, views, unclaimed_failures=unclaimed)
                if decision.rule_id:
                    break
            merged = bool(decision and decision.rule_id)
            if merged:
                rule_id = decision.rule_id
                row = conn.execute("SELECT text, pinned FROM skill_rules WHERE id=?", (rule_id,)).fetchone()
                if not row["pinned"] and wording_key(text) < wording_key(row["text"]):
                    conn.execute("UPDATE skill_rules SET text=?, construct=? WHERE id=?",
                                 (text, construct_of(text), rule_id))
            else:
                rule_id = self._new_rule(conn, text, now)
                if not sigs:
                    sigs = self._unclaimed_signature(conn, text)
            self._add_evidence(conn, rule_id, task_id or "", node_id or "", who, text, error_excerpt, now, now)
            for sig in sigs:
                conn.execute("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)", (rule_id, sig))
                conn.execute("UPDATE skill_experiences SET rule_id=? WHERE signature=? AND rule_id IS NULL",
                             (rule_id, sig))
            self._fold_linked(conn, rule_id, text, sigs)
            view = self._views(conn, rule_ids=[rule_id])[0]
        return RecordOutcome(rule_id=rule_id, merged=merged, merged_into_text=view.text if merged else None,
                             count=view.count, active=view.active, reason=decision.reason if decision else "new rule")

    def _fold_linked(self, conn: sqlite3.Connection, rule_id: str, text: str, sigs: list[str]) -> list[str]:
        """Fold into ``rule_id`` every other rule that ``text`` alone would also have merged with.

        Without this, merging depends on the order rules arrive in: B and C, both equivalent to a
        later A but not to each other, would stay apart if they came first. A rule that links two
        clusters joins them (single linkage on the same explainable criteria as a merge: a shared
        failure signature or similar wording, never the weaker "explains the construct" link).
        """
        folded: list[str] = []
        while True:
            others = [v for v in self._views(conn, with_variants=True) if v.id != rule_id]
            if not others:
                return folded
            found = None
            for sig in sigs or [None]:
                d = match_rule(text, sig, others)
                if d.rule_id and d.score > 0:
                    found = d.rule_id
                    break
            if found is None:
                break
            self._fold(conn, found, rule_id)
            folded.append(found)
        # Untied rules that came before this cluster's failures: now that the cluster explains a failure
        # with the construct they forbid (and no other failure involves it), they are about it too.
        views = self._views(conn, with_variants=True)
        me = next(v for v in views if v.id == rule_id)
        unclaimed = [r["norm"] for r in conn.execute(
            """SELECT MIN(normalized) AS norm FROM skill_experiences
               WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) GROUP BY signature""")]
        for v in views:
            if v.id == rule_id or v.signatures:
                continue
            fam = family_of(v.text)
            if not fam[0] or not fam[1] or not any(mentions(fam[0], f) for f in me.failures):
                continue
            if explained_by(fam, [x for x in views if x.id != v.id], unclaimed) == rule_id:
                self._fold(conn, v.id, rule_id)
                folded.append(v.id)
        return folded

    def _fold(self, conn: sqlite3.Connection, old: str, into: str) -> None:
        """Move everything of rule ``old`` to rule ``into`` and delete ``old`` (its id stays an alias)."""
        for r in conn.execute("""SELECT task_id, node_id, who, text, error_excerpt, first_seen, last_seen
                                 FROM skill_evidence WHERE rule_id=?""", (old,)).fetchall():
            self._add_evidence(conn, into, r["task_id"], r["node_id"], r["who"], r["text"], r["error_excerpt"],
                               r["first_seen"], r["last_seen"])
        conn.execute("DELETE FROM skill_evidence WHERE rule_id=?", (old,))
        conn.execute("""INSERT OR IGNORE INTO skill_rule_signatures SELECT ?, signature FROM skill_rule_signatures
                        WHERE rule_id=?""", (into, old))
        conn.execute("DELETE FROM skill_rule_signatures WHERE rule_id=?", (old,))
        conn.execute("""INSERT OR IGNORE INTO skill_contradictions SELECT ?, source_hash, task_id, node_id, seen
                        FROM skill_contradictions WHERE rule_id=?""", (into, old))
        conn.execute("DELETE FROM skill_contradictions WHERE rule_id=?", (old,))
        conn.execute("UPDATE skill_experiences SET rule_id=? WHERE rule_id=?", (into, old))
        a = conn.execute("SELECT * FROM skill_rules WHERE id=?", (into,)).fetchone()
        b = conn.execute("SELECT * FROM skill_rules WHERE id=?", (old,)).fetchone()
        if b["pinned"] and not a["pinned"]:
            text, pinned = b["text"], 1  # an admin's wording wins
        elif a["pinned"]:
            text, pinned = a["text"], 1
        else:
            text, pinned = min(a["text"], b["text"], key=wording_key), 0
        retired = int(bool(a["retired"] or b["retired"]))  # an admin retired one half: keep it retired
        conn.execute("""UPDATE skill_rules SET text=?, construct=?, pinned=?, retired=?, retired_by=COALESCE(retired_by, ?),
                        created=min(created, ?) WHERE id=?""",
                     (text, construct_of(text), pinned, retired, b["retired_by"], b["created"], into))
        conn.execute("DELETE FROM skill_rules WHERE id=?", (old,))
        conn.execute("UPDATE skill_rule_aliases SET rule_id=? WHERE rule_id=?", (into, old))
        conn.execute("INSERT OR REPLACE INTO skill_rule_aliases VALUES (?,?)", (old, into))

    @staticmethod
    def _resolve(conn: sqlite3.Connection, rule_id: str) -> str:
        """The current id of a rule that may have been folded into another."""
        row = conn.execute("SELECT rule_id FROM skill_rule_aliases WHERE old_id=?", (rule_id,)).fetchone()
        return row["rule_id"] if row else rule_id

    @staticmethod
    def _unclaimed_signature(conn: sqlite3.Connection, text: str) -> list[str]:
        """The one failure cluster no rule explains yet that uses what ``text`` forbids, if unique."""
        fam = family_of(text)
        if not fam[0] or not fam[1]:
            return []
        rows = conn.execute("""SELECT signature, MIN(normalized) AS norm FROM skill_experiences
                               WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures)
                               GROUP BY signature""").fetchall()
        hits = [r["signature"] for r in rows if mentions(fam[0], r["norm"])]
        return hits if len(hits) == 1 else []

    def _new_rule(self, conn: sqlite3.Connection, text: str, now: float, rule_id: str | None = None) -> str:
        base = hashlib.sha256(text_key(text).encode()).hexdigest()
        candidate, salt = rule_id or "r-" + base[:10], 0
        while conn.execute("SELECT 1 FROM skill_rules WHERE id=?", (candidate,)).fetchone():
            salt += 1
            candidate = "r-" + hashlib.sha256(f"{base}:{salt}".encode()).hexdigest()[:10]
        conn.execute("INSERT INTO skill_rules (id, text, construct, created) VALUES (?,?,?,?)",
                     (candidate, text, construct_of(text), now))
        return candidate

    @staticmethod
    def _add_evidence(conn, rule_id, task_id, node_id, who, text, excerpt, first, last) -> bool:
        """Add one evidence row, or widen the seen-interval of the same occasion; True if new."""
        key = (rule_id, task_id, node_id, who, text_key(text))
        exists = conn.execute("""SELECT 1 FROM skill_evidence WHERE rule_id=? AND task_id=? AND node_id=? AND who=?
                                 AND text_key=?""", key).fetchone()
        conn.execute(
            """INSERT INTO skill_evidence (rule_id, task_id, node_id, who, text, text_key, error_excerpt,
               first_seen, last_seen) VALUES (?,?,?,?,?,?,?,?,?)
               ON CONFLICT (rule_id, task_id, node_id, who, text_key) DO UPDATE SET
               first_seen=min(first_seen, excluded.first_seen), last_seen=max(last_seen, excluded.last_seen)""",
            (*key[:4], text, key[4], excerpt, first, last))
        return exists is None

    def _views(self, conn: sqlite3.Connection, rule_ids: list[str] | None = None,
               with_variants: bool = False) -> list[RuleView]:
        where, args = "", ()
        if rule_ids is not None:
            where, args = f"WHERE id IN ({','.join('?' * len(rule_ids))})", tuple(rule_ids)
        rules = conn.execute(f"SELECT * FROM skill_rules {where} ORDER BY id", args).fetchall()
        ev: dict[str, list] = {}
        for r in conn.execute(f"SELECT rule_id, task_id, who, text, text_key, first_seen, last_seen FROM skill_evidence "
                              f"{where.replace('id IN', 'rule_id IN')} ORDER BY id", args):
            ev.setdefault(r["rule_id"], []).append(r)
        sigs: dict[str, list[str]] = {}
        for r in conn.execute(f"SELECT rule_id, signature FROM skill_rule_signatures "
                              f"{where.replace('id IN', 'rule_id IN')} ORDER BY signature", args):
            sigs.setdefault(r["rule_id"], []).append(r["signature"])
        fails: dict[str, list[str]] = {}
        if with_variants:
            for r in conn.execute("""SELECT s.rule_id, MIN(e.normalized) AS normalized FROM skill_rule_signatures s
                                     JOIN skill_experiences e ON e.signature = s.signature
                                     GROUP BY s.rule_id, s.signature ORDER BY s.signature"""):
                fails.setdefault(r["rule_id"], []).append(r["normalized"])
        contra: dict[str, int] = {r["rule_id"]: r["n"] for r in conn.execute(
            "SELECT rule_id, COUNT(*) AS n FROM skill_contradictions GROUP BY rule_id")}
        out = []
        for rule in rules:
            rows = ev.get(rule["id"], [])
            tasks = sorted({r["task_id"] for r in rows if r["task_id"]})
            untied = {(r["who"], r["text_key"]) for r in rows if not r["task_id"]}
            count = len(tasks) + len(untied)
            contradicted = contra.get(rule["id"], 0) >= self.contradiction_min
            out.append(RuleView(
                id=rule["id"], text=rule["text"], count=count,
                active=count >= self.threshold and not contradicted and not rule["retired"],
                contradicted=contradicted, retired=bool(rule["retired"]), construct=rule["construct"], tasks=tasks,
                first_seen=min((r["first_seen"] for r in rows), default=rule["created"]),
                last_seen=max((r["last_seen"] for r in rows), default=rule["created"]),
                who=sorted({r["who"] for r in rows}), signatures=sigs.get(rule["id"], []),
                variants=sorted({r["text"] for r in rows} - {rule["text"]}) if with_variants else [],
                failures=fails.get(rule["id"], [])))
        return out

    def resolve(self, rule_id: str) -> str:
        """The id a rule has now (rules folded into another keep their old id as an alias)."""
        with self._conn() as conn:
            return self._resolve(conn, rule_id)

    def get_rule(self, rule_id: str) -> RuleView:
        with self._conn() as conn:
            views = self._views(conn, rule_ids=[self._resolve(conn, rule_id)])
        if not views:
            raise UnknownRuleError(rule_id)
        return views[0]

    def retire(self, rule_id: str, who: str) -> RuleView:
        """Stop serving a rule; later equivalent rules merge into it and stay retired."""
        with self._tx() as conn:
            rule_id = self._resolve(conn, rule_id)
            if not conn.execute("UPDATE skill_rules SET retired=1, retired_by=? WHERE id=?", (who, rule_id)).rowcount:
                raise UnknownRuleError(rule_id)
        return self.get_rule(rule_id)

    def edit(self, rule_id: str, text: str, who: str) -> RuleView:
        """Replace a rule's wording; the edited wording is kept from then on."""
        text = " ".join((text or "").split())
        if not text:
            raise ValueError("rule text is empty")
        with self._tx() as conn:
            rule_id = self._resolve(conn, rule_id)
            if not conn.execute("UPDATE skill_rules SET text=?, construct=?, edited_by=?, pinned=1 WHERE id=?",
                                (text, construct_of(text), who, rule_id)).rowcount:
                raise UnknownRuleError(rule_id)
        return self.get_rule(rule_id)

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
            sig_rows = conn.execute(
                """SELECT signature, COUNT(DISTINCT task_id) AS n, MIN(error_class) AS ec, MIN(message) AS msg,
                   MIN(normalized) AS norm FROM skill_experiences
                   WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) AND rule_id IS NULL
                   GROUP BY signature ORDER BY n DESC, signature LIMIT ?""", (max(1, limit),)).fetchall() \
                if include_signatures else []
            n_exp = conn.execute("SELECT COUNT(*) FROM skill_experiences").fetchone()[0]
        keywords = task_keywords(task_source)
        served = [v for v in views if v.active or (include_candidates and not v.retired and not v.contradicted)]
        served.sort(key=lambda v: (-relevance(v.text, v.construct, keywords), not v.active, -v.count,
                                   -(v.last_seen or 0), v.id))
        served = served[: max(0, limit)]
        view = MemoryView(
            rules=served, rendered=render_rules(served, token_budget), threshold=self.threshold, total_rules=len(views),
            active_rules=sum(v.active for v in views), experiences=n_exp,
            candidate_rules=sum(not v.active and not v.retired and not v.contradicted for v in views),
            frequent_signatures=[SignatureCount(signature=r["signature"], count=r["n"], error_class=r["ec"],
                                                example=r["msg"][:300], normalized=r["norm"][:300]) for r in sig_rows])
        if len(self._memory_cache) > 64:
            self._memory_cache.clear()
        self._memory_cache[key] = view
        return view

    # -- exchange ------------------------------------------------------------------------
    def export(self) -> dict:
        """Everything another server needs to start from this memory (JSON-able)."""
        with self._conn() as conn:
            rules = []
            for rule in conn.execute("SELECT * FROM skill_rules ORDER BY id").fetchall():
                rid = rule["id"]
                rules.append({
                    "id": rid, "text": rule["text"], "construct": rule["construct"], "created": rule["created"],
                    "retired": bool(rule["retired"]), "pinned": bool(rule["pinned"]),
                    "signatures": [r[0] for r in conn.execute(
                        "SELECT signature FROM skill_rule_signatures WHERE rule_id=? ORDER BY signature", (rid,))],
                    "evidence": [dict(r) for r in conn.execute(
                        """SELECT task_id, node_id, who, text, error_excerpt, first_seen, last_seen
                           FROM skill_evidence WHERE rule_id=? ORDER BY id""", (rid,))],
                    "contradictions": [dict(r) for r in conn.execute(
                        "SELECT source_hash, task_id, node_id, seen FROM skill_contradictions WHERE rule_id=?", (rid,))],
                })
            exps = [dict(r) for r in conn.execute("SELECT * FROM skill_experiences ORDER BY created, id")]
        return {"format": EXPORT_FORMAT, "version": 1, "exported_at": _now(), "threshold": self.threshold,
                "rules": rules, "experiences": exps}

    def import_(self, data: dict, who: str) -> ImportSummary:
        """Merge an export into this memory; importing the same file twice changes nothing."""
        if data.get("format") != EXPORT_FORMAT:
            raise ValueError(f"not a skill memory export (format {data.get('format')!r}, want {EXPORT_FORMAT!r})")
        summary = ImportSummary()
        with self._tx() as conn:
            for rule in data.get("rules", []):
                text = " ".join(str(rule["text"]).split())
                views = self._views(conn, with_variants=True)
                decision = None
                for sig in rule.get("signatures") or [None]:
                    decision = match_rule(text, sig, views)
                    if decision.rule_id:
                        break
                if decision and decision.rule_id:
                    rid = decision.rule_id
                    summary.rules_merged += 1
                    row = conn.execute("SELECT text, pinned FROM skill_rules WHERE id=?", (rid,)).fetchone()
                    if not row["pinned"] and wording_key(text) < wording_key(row["text"]):
                        conn.execute("UPDATE skill_rules SET text=?, construct=? WHERE id=?", (text, construct_of(text), rid))
                else:
                    rid = self._new_rule(conn, text, float(rule.get("created") or _now()), rule_id=rule.get("id"))
                    conn.execute("UPDATE skill_rules SET retired=?, pinned=? WHERE id=?",
                                 (int(bool(rule.get("retired"))), int(bool(rule.get("pinned"))), rid))
                    summary.rules_added += 1
                summary.id_map[rule["id"]] = rid
                for e in rule.get("evidence", []):
                    summary.evidence_added += self._add_evidence(
                        conn, rid, e.get("task_id") or "", e.get("node_id") or "", e.get("who") or who,
                        e.get("text") or text, e.get("error_excerpt"), float(e.get("first_seen") or _now()),
                        float(e.get("last_seen") or _now()))
                for sig in rule.get("signatures", []):
                    conn.execute("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)", (rid, sig))
                for c in rule.get("contradictions", []):
                    summary.contradictions_added += conn.execute(
                        "INSERT OR IGNORE INTO skill_contradictions VALUES (?,?,?,?,?)",
                        (rid, c["source_hash"], c.get("task_id"), c.get("node_id"), float(c.get("seen") or _now()))).rowcount
            cols = ("id", "task_id", "node_id", "status", "error_class", "message", "normalized", "signature",
                    "construct", "who", "created", "rule_id")
            for x in data.get("experiences", []):
                vals = [x.get(c) for c in cols]
                vals[11] = summary.id_map.get(x.get("rule_id"), x.get("rule_id"))
                vals[9] = vals[9] or who
                summary.experiences_added += conn.execute(
                    f"INSERT OR IGNORE INTO skill_experiences VALUES ({','.join('?' * len(cols))})", vals).rowcount
        return summary

    def forbidden_construct(self, rule_id: str) -> str | None:
        """What a rule forbids, as a construct (for explanations)."""
        return forbidden_construct(self.get_rule(rule_id).text)
