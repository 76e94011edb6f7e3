"""Team-wide skill memory over SQLite: experiences, rules, evidence, merges, contradictions.

Runs in every process that opens the memory file: the server (one store shared by its
threads, over the server's own `Database`) and the ``adaexplore memory`` command. Connections,
transactions and migrations follow ``adaexplore.common.db``: every write is one short ``BEGIN
IMMEDIATE`` transaction, so threads and processes sharing the file serialize their
read-modify-write steps: no count is lost and no duplicate rule is created. No operation waits
for the write lock longer than its own bound (``write_wait_s``); one that cannot get it raises
``MemoryBusyError`` and the next operation tries afresh. Import works in bounded batches.
Commits do not wait for the disk (WAL with ``synchronous=NORMAL``, as the server's own tables): a
power loss can lose the last commits but never corrupts the file.

``SkillStore`` owns its schema and transactions; rule rows and merges live
in ``merging``, merge keys in ``keys``, proposals in ``proposals``, the read side in ``views`` and
export/import in ``exchange``.
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..common.db import Database, DatabaseBusy, Schema, add_column, is_busy, script
from ..common.vocab import Status
from . import semantic
from .evidence import code_uses, forbidden_construct, uses_forbidden
from .exchange import (
    EXPORT_FORMAT,
    check_format,
    export_memory,
    import_apart,
    import_experiences,
    import_merges,
    import_rules,
    prepare_rules,
)
from .keys import (
    constructs,
    describe_key,
    error_key,
    fixed_error_keys,
    forbidden,
    merges_alone,
    names_construct_of,
    rule_keys,
)
from .merging import (
    UnknownMergeError,
    add_evidence,
    add_keys,
    apart_from,
    apart_pairs,
    exists,
    keep_apart,
    key_matches,
    merge,
    new_rule,
    resolve,
    root,
    roots_of,
    text_key,
    unmerge,
    wording_key,
)
from .proposals import Candidate, closest, look_alike_groups
from .records import (
    CloseRule,
    GroupMember,
    ImportSummary,
    MemoryBusyError,
    MemoryView,
    MergeOutcome,
    RecordOutcome,
    SignatureCount,
    UnknownRuleError,
)
from .records import now as _now
from .signature import construct_of, normalize_message, signature, split_excerpt
from .similarity import RuleView
from .views import contradicting_nodes, frequent_signature_rows, rule_views, serve

__all__ = [
    "EXPORT_FORMAT", "SKIPPED_STATUSES", "ImportSummary", "MemoryBusyError", "SkillStore", "MemoryView",
    "RecordOutcome", "SignatureCount", "UnknownMergeError", "UnknownRuleError", "text_key", "wording_key",
]

SKIPPED_STATUSES = frozenset({Status.infra_error, Status.correct, Status.wrong_output})
"""Never experiences: our faults, successes and plain numerical mismatches."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS skill_rules (
    id TEXT PRIMARY KEY, text TEXT NOT NULL, construct TEXT, created REAL NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0, retired_by TEXT, edited_by TEXT, pinned INTEGER NOT NULL DEFAULT 0,
    merged_into TEXT);
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
CREATE TABLE IF NOT EXISTS skill_rule_keys (rule_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (rule_id, key));
CREATE INDEX IF NOT EXISTS skill_rule_keys_key ON skill_rule_keys (key);
CREATE TABLE IF NOT EXISTS skill_merges (
    id TEXT PRIMARY KEY, into_id TEXT NOT NULL, members TEXT NOT NULL, who TEXT NOT NULL, reason TEXT NOT NULL,
    created REAL NOT NULL, undone REAL, undone_by TEXT);
CREATE INDEX IF NOT EXISTS skill_merges_into ON skill_merges (into_id);
"""


def _tables(conn: sqlite3.Connection) -> None:
    """The tables of the release before `user_version`, from any earlier file; every rule's merge keys."""
    script(_SCHEMA)(conn)
    add_column(conn, "skill_rules", "merged_into", "TEXT")  # a memory written before merges were recorded
    for r in conn.execute("SELECT id, text FROM skill_rules").fetchall():
        add_keys(conn, r["id"], rule_keys(r["text"]))
    conn.execute("DELETE FROM skill_meta WHERE k = 'schema'")  # the version is user_version now


_JUDGED_AND_ENCODED = """
CREATE TABLE IF NOT EXISTS skill_apart (
    a TEXT NOT NULL, b TEXT NOT NULL, who TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (a, b));
CREATE TABLE IF NOT EXISTS skill_rule_vectors (rule_id TEXT PRIMARY KEY, model TEXT NOT NULL, vec BLOB NOT NULL);
"""

SCHEMA = Schema("skills", slot=1, steps=[_tables, script(_JUDGED_AND_ENCODED)])
"""The skill memory's tables: slot 1 of the file's `user_version`."""


class SkillStore:
    """Skill memory in the SQLite file ``db`` (a path, or the server's open `Database`; tables ``skill_*``).

    ``write_wait_s`` bounds how long one write waits for the write lock, ``read_wait_s`` how long
    a read waits (reads only wait while the file is being created or checkpointed).
    """

    def __init__(self, db: str | Path | Database, threshold: int = 3, contradiction_min: int = 2,
                 write_wait_s: float = 10.0, read_wait_s: float = 5.0, import_batch: int = 250,
                 import_pause_s: float = 0.02):
        self.threshold = int(threshold)
        self.contradiction_min = int(contradiction_min)
        self.write_wait_s = float(write_wait_s)
        self.read_wait_s = float(read_wait_s)
        self.import_batch = max(1, int(import_batch))
        self.import_pause_s = float(import_pause_s)
        self._memory_cache: dict[tuple[object, ...], MemoryView] = {}  # keyed by the memory's version
        self.db = db if isinstance(db, Database) else Database(db, wait_s=self.write_wait_s)
        self.db_path = str(self.db.path)
        with self._busy(self.write_wait_s):
            self.db.migrate(SCHEMA)

    # -- connections ---------------------------------------------------------------------
    @contextmanager
    def _busy(self, wait_s: float) -> Iterator[None]:
        """A write lock held past this operation's bound becomes `MemoryBusyError` (nothing changed)."""
        try:
            yield
        except (DatabaseBusy, sqlite3.OperationalError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not is_busy(exc):
                raise
            raise MemoryBusyError(
                f"the skill memory is busy: another writer (e.g. an import) held its lock for more than "
                f"{wait_s:g} s; nothing was changed, try again in a moment") from None

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, for reads."""
        with self._busy(self.read_wait_s):
            conn = self.db.conn()
            conn.execute(f"PRAGMA busy_timeout={int(self.read_wait_s * 1000)}")
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its first statement."""
        with self._busy(self.write_wait_s), self.db.write(self.write_wait_s) as conn:
            yield conn
            # Every write moves the version, so readers can cache what they derive from it.
            conn.execute("UPDATE skill_meta SET v = v + 1 WHERE k = 'version'")

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
            return resolve(conn, row["r"]) if row and row["r"] else None

    # -- rules ---------------------------------------------------------------------------
    def _links(self, conn: sqlite3.Connection, text: str, task_id: str | None, node_id: str | None,
               excerpt: str | None, node_code: str | None) -> tuple[list[str], list[str], str | None]:
        """The failure signatures a rule may be tied to, its error keys, and why a link was refused.

        A failure is linked only when its error names one of the rule's constructs, or (for the
        failing node) its code uses the construct the rule is about: a rule about ``tl.tanh`` is
        never tied to a failure that has nothing to do with ``tl.tanh``.
        """
        cons = constructs(text)
        main = forbidden(text) or (cons[0] if cons else None)
        sigs: list[str] = []
        keys: list[str] = []
        notes: list[str] = []
        failures: list[tuple[str, str, str]] = []  # (error class, message, where from)
        if node_id:
            q = "SELECT error_class, message FROM skill_experiences WHERE node_id=?"
            args: tuple[str, ...] = (node_id,)
            if task_id:
                q, args = q + " AND task_id=?", (node_id, task_id)
            failures += [(r["error_class"], r["message"], f"node {node_id}") for r in conn.execute(q, args)]
        if excerpt and not failures:
            # With a node, the excerpt is that node's failure (the server passes its feedback when none is given).
            failures.append((*split_excerpt(excerpt), f"node {node_id}" if node_id else "the error excerpt"))
        for error_class, message, where in failures:
            normalized = normalize_message(error_class, message)
            named = not cons or names_construct_of(text, f"{message} {normalized}")
            in_code = bool(main and node_code and where.startswith("node") and code_uses(main, node_code))
            if named or in_code:
                sig = signature(error_class, message)
                if sig not in sigs:
                    sigs.append(sig)
                key = error_key(text, error_class, message)
                if key and key not in keys:
                    keys.append(key)
            else:
                what = ", ".join(cons[:3])
                code_note = " and its code does not use it" if node_code and where.startswith("node") else ""
                notes.append(f"not linked to the failure of {where}: its error ({normalized[:160]}) never "
                             f"names {what}{code_note}")
        return sigs, keys, ("; ".join(notes) if notes and not sigs else None)

    def record_rule(self, *, text: str, who: str, task_id: str | None = None, node_id: str | None = None,
                    error_excerpt: str | None = None, same_as: str | None = None,
                    distinct_from: list[str] | None = None, node_code: str | None = None,
                    closest_k: int = 5) -> RecordOutcome:
        """Record one occasion of a rule: merge it where the evidence cannot be a near miss, or the caller confirmed it.

        With ``same_as`` the caller says this wording is that rule: it joins that rule's cluster.
        With ``distinct_from`` the caller says it is none of those rules: they are kept apart from
        it from then on (never merged with it by the memory, never proposed for it again).
        Without ``same_as``, the wording joins a cluster only on a key of :data:`keys.AUTO_MERGE`
        (the same wording; the same error with the same forbidden construct and the same fix);
        otherwise it becomes a new rule. The outcome lists every rule merged by this call and the
        closest other rules, for the caller to judge.
        """
        text = " ".join((text or "").split())
        if not text:
            raise ValueError("rule text is empty")
        vector = semantic.encode_rules([text])  # before the write lock: ~10 ms a view
        now = _now()
        merged_rules: list[str] = []
        merge_ids: list[str] = []
        with self._tx() as conn:
            target = None
            if same_as:
                target = resolve(conn, same_as)
                if not exists(conn, target):
                    raise UnknownRuleError(same_as)
            apart = []
            for other in distinct_from or []:
                rr = resolve(conn, other)
                if not exists(conn, rr):
                    raise UnknownRuleError(other)
                apart.append(root(conn, rr))
            if target is not None and root(conn, target) in apart:
                raise ValueError(f"rule {same_as} is named both as the same rule (same_as) and as a different one")
            sigs, err_keys, link = self._links(conn, text, task_id, node_id, error_excerpt, node_code)
            keys = rule_keys(text) + err_keys + fixed_error_keys(text, err_keys)
            matches = key_matches(conn, keys)
            own = next((r for k, r in matches if k == keys[0]), None)
            own_root = root(conn, own) if own else None
            judged = apart_pairs(conn)
            kept_apart = set(apart) | (apart_from(judged, own_root) if own_root else set())
            strong: list[tuple[str, str]] = []  # (key, cluster root) other than this wording's own
            for k, r in matches:
                rr = root(conn, r)
                if k != keys[0] and merges_alone(k) and rr not in (own_root, target) and rr not in kept_apart \
                        and all(rr != x for _, x in strong):
                    strong.append((k, rr))
            fresh = own is None
            if own is None:
                own = new_rule(conn, text, now)
                if vector:
                    conn.execute("INSERT OR REPLACE INTO skill_rule_vectors VALUES (?,?,?)",
                                 (own, semantic.vectors_kind(), vector[0]))
            own_root = own_root or own
            stored_text = None  # the wording the rule it joined was stored under, before this call
            if target is not None:
                stored_text = self._views(conn, rule_ids=[target])[0].text
                if own_root != target:
                    mid = merge(conn, target, [own], who, f"confirmed by {who}: same rule as {target}", now)
                    merged_rules.append(own_root)
                    if mid is not None:
                        merge_ids.append(mid)
                    reason = f"merged into {target}: {who} confirmed it is the same rule (same_as)"
                else:
                    reason = f"already part of {target}"
            elif strong:
                key = strong[0][0]
                into = strong[0][1] if fresh else own_root
                stored_text = self._views(conn, rule_ids=[into])[0].text
                members = [r for r in ([own_root] if fresh else []) + [r for _, r in strong] if r != into]
                mid = merge(conn, into, members, f"auto:{who}", describe_key(key), now)
                if mid:
                    merge_ids.append(mid)
                    merged_rules += members
                reason = f"merged into {into}: {describe_key(key)}"
                if len(strong) > 1:
                    reason += "; also joined " + ", ".join(r for _, r in strong[1:])
            elif not fresh:
                stored_text = self._views(conn, rule_ids=[own_root])[0].text
                reason = f"same wording as {own_root}"
            else:
                reason = ("new rule: no stored rule has the same wording, or the same error with the same "
                          "forbidden construct and the same fix; if one of `closest` says the same thing, "
                          "confirm it with same_as")
            add_evidence(conn, own, task_id or "", node_id or "", who, text, error_excerpt, now, now)
            add_keys(conn, own, keys)
            for sig in sigs:
                conn.execute("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)", (own, sig))
                conn.execute("UPDATE skill_experiences SET rule_id=? WHERE signature=? AND rule_id IS NULL",
                             (own, sig))
            rid = root(conn, own)
            if apart:
                keep_apart(conn, [rid, *apart], who, now)
            view = self._views(conn, rule_ids=[rid])[0]
        merged = bool(merged_rules) or not fresh
        out = RecordOutcome(rule_id=rid, merged=merged, count=view.count, active=view.active, reason=reason,
                            merged_rules=merged_rules, merge_ids=merge_ids, link=link,
                            merged_into_text=stored_text if merged else None, kept_apart_from=apart)
        if closest_k:
            out.closest = self.closest_rules(text, signature=sigs[0] if sigs else None, exclude=rid, k=closest_k,
                                             vector=vector[0] if vector else None)
        return out

    def _candidates(self, conn: sqlite3.Connection, include_retired: bool = False,
                    vectors: bool = False) -> list[Candidate]:
        """Every rule cluster with all its wordings (and, with ``vectors``, their embeddings), as proposals
        are ranked over."""
        rows = conn.execute("SELECT id, text, merged_into, retired FROM skill_rules").fetchall()
        roots = roots_of({r["id"]: r["merged_into"] for r in rows})
        out: dict[str, Candidate] = {}
        retired = {roots[r["id"]] for r in rows if r["retired"]}
        for r in rows:
            c = out.setdefault(roots[r["id"]], Candidate(rule_id=roots[r["id"]], text="", count=0, wordings=[]))
            c.wordings.append(r["text"])
            if r["id"] == roots[r["id"]]:
                c.text = r["text"]
        for r in conn.execute("""SELECT rule_id, COUNT(DISTINCT CASE WHEN task_id != '' THEN task_id END)
                                 + COUNT(DISTINCT CASE WHEN task_id = '' THEN who || text_key END) AS n
                                 FROM skill_evidence GROUP BY rule_id"""):
            if r["rule_id"] in roots:
                out[roots[r["rule_id"]]].count += r["n"]
        for r in conn.execute("SELECT rule_id, signature FROM skill_rule_signatures"):
            if r["rule_id"] in roots:
                out[roots[r["rule_id"]]].signatures.add(r["signature"])
        if vectors:
            kind = semantic.vectors_kind()
            for r in conn.execute("SELECT rule_id, vec FROM skill_rule_vectors WHERE model=?", (kind,)):
                if r["rule_id"] in roots:
                    out[roots[r["rule_id"]]].vectors.append(bytes(r["vec"]))
        return [c for rid, c in sorted(out.items()) if include_retired or rid not in retired]

    def _encode_missing(self, at_most: int = 64) -> None:
        """Encode up to ``at_most`` rule rows that have no vector yet (imported, stored before the extra was
        installed, or through another adapter): a large import is caught up over several calls, each under a
        second on a 2-core CPU (about 12 ms a rule)."""
        if not semantic.enabled():
            return
        kind = semantic.vectors_kind()
        with self._conn() as conn:
            rows = conn.execute("""SELECT r.id, r.text FROM skill_rules r
                                   LEFT JOIN skill_rule_vectors v ON v.rule_id = r.id
                                   AND v.model = ? WHERE v.rule_id IS NULL LIMIT ?""",
                                (kind, at_most)).fetchall()
        if not rows:
            return
        vectors = semantic.encode_rules([r["text"] for r in rows])
        if vectors:
            with self._tx() as conn:
                conn.executemany("INSERT OR REPLACE INTO skill_rule_vectors VALUES (?,?,?)",
                                 [(r["id"], kind, v) for r, v in zip(rows, vectors)])

    def closest_rules(self, text: str, *, signature: str | None = None, exclude: str | None = None,
                      k: int = 5, vector: bytes | None = None) -> list[CloseRule]:
        """The (at most ``k``) stored rules closest to ``text``, with why: proposals, never merges.

        Rules judged different from ``exclude`` (see ``distinct_from``) are never proposed for it.
        """
        use_vectors = semantic.enabled()
        if use_vectors:
            self._encode_missing()
            if vector is None:
                encoded = semantic.encode_rules([text])
                vector = encoded[0] if encoded else None
        with self._conn() as conn:
            cands = self._candidates(conn, vectors=use_vectors)
            if exclude:
                apart = apart_from(apart_pairs(conn), resolve(conn, exclude))
                cands = [c for c in cands if c.rule_id not in apart]
            picked = closest(text, cands, signature=signature, k=k, exclude=exclude, vector=vector)
            views = {v.id: v for v in self._views(conn, rule_ids=[c.rule_id for c, _, _ in picked])} if picked else {}
        return [CloseRule(rule_id=c.rule_id, text=views[c.rule_id].text, count=views[c.rule_id].count,
                          active=views[c.rule_id].active, score=score, why=why)
                for c, score, why in picked if c.rule_id in views]

    def groups(self, limit: int = 20, max_group: int = 12) -> list[list[GroupMember]]:
        """Groups of rules that look alike, largest first: candidates for a deduplication pass. Rules judged
        different (``keep_apart``) are never put in one group."""
        with self._conn() as conn:
            cands = self._candidates(conn)
            groups = look_alike_groups(cands, max_group=max_group, apart=apart_pairs(conn))[:limit]
            ids = [c.rule_id for g in groups for c, _ in g]
            views = {v.id: v for v in self._views(conn, rule_ids=ids)} if ids else {}
        return [[GroupMember(rule_id=c.rule_id, text=views[c.rule_id].text, count=views[c.rule_id].count,
                             active=views[c.rule_id].active, why=why) for c, why in g if c.rule_id in views]
                for g in groups]

    def keep_apart(self, rule_ids: list[str], who: str) -> list[RuleView]:
        """Record ``who``'s judgement that the rules ``rule_ids`` are different rules: they are never merged by
        the memory, proposed for one another or grouped together again (until someone merges them)."""
        with self._tx() as conn:
            resolved = []
            for r in rule_ids:
                rr = resolve(conn, r)
                if not exists(conn, rr):
                    raise UnknownRuleError(r)
                if root(conn, rr) not in resolved:
                    resolved.append(root(conn, rr))
            if len(resolved) < 2:
                raise ValueError("name at least two different rules to keep apart (these are one rule)")
            keep_apart(conn, resolved, who, _now())
            return self._views(conn, rule_ids=resolved)

    def merge_rules(self, rule_ids: list[str], who: str, into: str | None = None,
                    reason: str = "") -> MergeOutcome:
        """Merge the rules ``rule_ids`` (and ``into``) into one; recorded as ``who``'s merge, undoable."""
        with self._tx() as conn:
            resolved = []
            for r in [*([into] if into else []), *rule_ids]:
                rr = resolve(conn, r)
                if not exists(conn, rr):
                    raise UnknownRuleError(r)
                if rr not in resolved:
                    resolved.append(rr)
            if len(resolved) < 2:
                raise ValueError("name at least two different rules to merge (they are already one rule)")
            counts = {v.id: v.count for v in self._views(conn, rule_ids=resolved)}
            target = resolved[0] if into else max(resolved, key=lambda r: (counts[r], -resolved.index(r)))
            members = [r for r in resolved if r != target]
            mid = merge(conn, target, members, who, reason or f"judged the same rule by {who}", _now())
            view = self._views(conn, rule_ids=[target])[0]
        return MergeOutcome(merge_id=mid, rule_id=target, members=members, text=view.text, count=view.count,
                            active=view.active)

    def unmerge(self, merge_id: str, who: str) -> list[RuleView]:
        """Undo a merge; returns the rule it had merged into and the rules it restores."""
        with self._tx() as conn:
            into, members = unmerge(conn, merge_id, who, _now())
            ids = [resolve(conn, into), *[resolve(conn, m) for m in members]]
            return self._views(conn, rule_ids=list(dict.fromkeys(ids)))

    def resolve(self, rule_id: str) -> str:
        """The id a rule has now: the rule it was merged into, if it was."""
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
    def memory(self, *, task_source: str | None = None, token_budget: int = 1500, include_candidates: bool = True,
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
            nodes = contradicting_nodes(conn)
        view = serve(views, sig_rows, n_exp, threshold=self.threshold, task_source=task_source,
                     token_budget=token_budget, include_candidates=include_candidates, limit=limit, nodes=nodes)
        if len(self._memory_cache) > 64:
            self._memory_cache.clear()
        self._memory_cache[key] = view
        return view

    # -- exchange ------------------------------------------------------------------------
    def export(self) -> dict[str, Any]:
        """Everything another server needs to start from this memory (JSON-able)."""
        with self._conn() as conn:
            return export_memory(conn, self.threshold)

    def _batch(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """One import batch in its own write transaction, then a pause at least as long as the lock was held,
        so that a writer waiting meanwhile (``record_failure``, ``evaluate_kernel``) gets its turn."""
        t0 = time.perf_counter()
        with self._tx() as conn:
            work(conn)
        time.sleep(max(self.import_pause_s, time.perf_counter() - t0))

    def import_(self, data: dict[str, Any], who: str) -> ImportSummary:
        """Merge an export into this memory in bounded batches; importing the same file twice changes nothing.

        Wordings are analysed before any lock is taken; each batch is then one short write transaction,
        and the import pauses between batches for at least as long as the batch held the lock, so other
        writers are never kept waiting for the whole import.
        """
        check_format(data)
        summary = ImportSummary()
        rules = prepare_rules(list(data.get("rules", [])))  # the costly part, outside any lock
        exps = list(data.get("experiences", []))
        n = self.import_batch
        for i in range(0, len(rules), n):
            self._batch(functools.partial(import_rules, rules=rules[i:i + n], who=who, summary=summary))
        for i in range(0, len(rules), n):
            self._batch(functools.partial(import_merges, rules=rules[i:i + n], who=who, summary=summary))
        for i in range(0, len(exps), n * 4):
            self._batch(functools.partial(import_experiences, experiences=exps[i:i + n * 4], who=who, summary=summary))
        apart = list(data.get("apart", []))
        for i in range(0, len(apart), n * 4):
            self._batch(functools.partial(import_apart, pairs=apart[i:i + n * 4], summary=summary))
        return summary
