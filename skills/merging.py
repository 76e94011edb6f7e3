"""Rule identity and merging inside a write transaction: rule rows, evidence, keys, merges and their undo.

Runs in the process that owns a ``SkillStore`` (the server, or the ``adaexplore memory``
command). Every function takes an open connection of a ``BEGIN IMMEDIATE`` transaction (see
``store.SkillStore._tx``) and never commits itself.

A *rule row* holds one wording. Rows that say the same thing form a cluster: every row but the
cluster's root points to it through ``merged_into``. A merge only sets ``merged_into`` and writes a
``skill_merges`` record (who, when, why, which rows), so nothing of a member is lost (its wording,
evidence, counts, signatures stay on its row) and :func:`unmerge` restores the rows exactly.
A "keep apart" judgement (:func:`keep_apart`) records that two clusters are different rules, so
nothing proposes or groups them together again.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import uuid

from .signature import construct_of, forbidden_part
from .similarity import tokens


def text_key(text: str) -> str:
    """Identity of a wording up to case, spacing and word order of its weighted tokens."""
    return hashlib.sha256(" ".join(sorted(tokens(text))).encode()).hexdigest()[:16]


_DO_RE = re.compile(r"\b(use|cast|call|mark|declare|replace|prefer|convert|keep|pass|write|compute|make|"
                    r"load|store|add|set|check|apply|accumulate|launch|wrap)\b", re.I)


def wording_key(text: str) -> tuple[bool, bool, int, str]:
    """Sort key of wordings, best first: has both a do and a don't part, then shorter."""
    dont = forbidden_part(text)
    rest = text.replace(dont, " ") if dont else text
    both = bool(dont) and bool(_DO_RE.search(rest))
    return (not both, not dont, len(text), text)


def parents(conn: sqlite3.Connection) -> dict[str, str | None]:
    """Every rule row's ``merged_into``."""
    return {r[0]: r[1] for r in conn.execute("SELECT id, merged_into FROM skill_rules")}


def roots_of(parent: dict[str, str | None]) -> dict[str, str]:
    """The cluster root of every rule row."""
    out: dict[str, str] = {}
    for rid in parent:
        cur, hops = rid, 0
        nxt = parent.get(cur)
        while nxt is not None and nxt in parent and hops < 64:
            cur, hops = nxt, hops + 1
            nxt = parent.get(cur)
        out[rid] = cur
    return out


def root(conn: sqlite3.Connection, rule_id: str) -> str:
    """The cluster root of one rule row (the row itself when it is not merged)."""
    cur = rule_id
    for _ in range(64):
        row = conn.execute("SELECT merged_into FROM skill_rules WHERE id=?", (cur,)).fetchone()
        if row is None or not row[0]:
            return cur
        cur = row[0]
    return cur


def resolve(conn: sqlite3.Connection, rule_id: str) -> str:
    """The current id of a rule: its cluster's root (older memories folded rules and kept an alias)."""
    row = conn.execute("SELECT rule_id FROM skill_rule_aliases WHERE old_id=?", (rule_id,)).fetchone()
    return root(conn, row[0] if row else rule_id)


def exists(conn: sqlite3.Connection, rule_id: str) -> bool:
    return conn.execute("SELECT 1 FROM skill_rules WHERE id=?", (rule_id,)).fetchone() is not None


def new_rule(conn: sqlite3.Connection, text: str, now: float, rule_id: str | None = None,
             construct: str | None = None) -> str:
    """Insert a rule row with this wording; its id is ``rule_id`` or derived from the wording, made unique."""
    candidate, salt, base = rule_id, 0, None
    if candidate is None or exists(conn, candidate):
        base = hashlib.sha256(text_key(text).encode()).hexdigest()
        candidate = rule_id if rule_id and not exists(conn, rule_id) else "r-" + base[:10]
        while exists(conn, candidate):
            salt += 1
            candidate = "r-" + hashlib.sha256(f"{base}:{salt}".encode()).hexdigest()[:10]
    conn.execute("INSERT INTO skill_rules (id, text, construct, created) VALUES (?,?,?,?)",
                 (candidate, text, construct if construct is not None else construct_of(text), now))
    return candidate


def add_evidence(conn: sqlite3.Connection, rule_id: str, task_id: str, node_id: str, who: str, text: str,
                 excerpt: str | None, first: float, last: float, tkey: str | None = None) -> bool:
    """Add one evidence row, or widen the seen-interval of the same occasion; True if new."""
    key = (rule_id, task_id, node_id, who, tkey or text_key(text))
    cur = conn.execute(
        """INSERT INTO skill_evidence (rule_id, task_id, node_id, who, text, text_key, error_excerpt,
           first_seen, last_seen) VALUES (?,?,?,?,?,?,?,?,?)
           ON CONFLICT (rule_id, task_id, node_id, who, text_key) DO NOTHING""",
        (*key[:4], text, key[4], excerpt, first, last))
    if cur.rowcount:
        return True
    conn.execute("""UPDATE skill_evidence SET first_seen=min(first_seen, ?), last_seen=max(last_seen, ?)
                    WHERE rule_id=? AND task_id=? AND node_id=? AND who=? AND text_key=?""", (first, last, *key))
    return False


def add_keys(conn: sqlite3.Connection, rule_id: str, keys: list[str]) -> None:
    conn.executemany("INSERT OR IGNORE INTO skill_rule_keys VALUES (?,?)", [(rule_id, k) for k in keys])


def first_match(conn: sqlite3.Connection, key: str, but: str, skip: set[str] | frozenset[str] = frozenset()) -> str | None:
    """One stored rule row that has ``key``, outside ``but``'s cluster and not in ``skip`` (None: no such row)."""
    but_root = root(conn, but)
    for (rid,) in conn.execute("SELECT rule_id FROM skill_rule_keys WHERE key=? AND rule_id != ? ORDER BY rule_id",
                               (key, but)):
        if rid not in skip and root(conn, rid) != but_root:
            return str(rid)
    return None


def key_matches(conn: sqlite3.Connection, keys: list[str]) -> list[tuple[str, str]]:
    """``(key, rule row)`` for every stored row that has one of ``keys``."""
    if not keys:
        return []
    return [(r[1], r[0]) for r in conn.execute(
        f"SELECT rule_id, key FROM skill_rule_keys WHERE key IN ({','.join('?' * len(keys))}) ORDER BY rule_id",
        keys)]


def merge(conn: sqlite3.Connection, into: str, members: list[str], who: str, reason: str, now: float) -> str | None:
    """Merge the clusters of ``members`` into the cluster of ``into``; returns the merge id (None: nothing to do)."""
    target = root(conn, into)
    moved = []
    for m in members:
        r = root(conn, m)
        if r != target and r not in moved:
            moved.append(r)
    if not moved:
        return None
    for r in moved:
        conn.execute("UPDATE skill_rules SET merged_into=? WHERE id=?", (target, r))
    merge_id = "m-" + uuid.uuid4().hex[:10]
    conn.execute("INSERT INTO skill_merges (id, into_id, members, who, reason, created) VALUES (?,?,?,?,?,?)",
                 (merge_id, target, json.dumps(moved), who, reason, now))
    return merge_id


class UnknownMergeError(KeyError):
    """No merge has this id, or it was already undone."""


def unmerge(conn: sqlite3.Connection, merge_id: str, who: str, now: float) -> tuple[str, list[str]]:
    """Undo a merge: its member rows become clusters of their own again. Returns (into, members)."""
    row = conn.execute("SELECT into_id, members, undone FROM skill_merges WHERE id=?", (merge_id,)).fetchone()
    if row is None or row["undone"] is not None:
        raise UnknownMergeError(merge_id)
    members = json.loads(row["members"])
    for m in members:
        conn.execute("UPDATE skill_rules SET merged_into=NULL WHERE id=? AND merged_into=?", (m, row["into_id"]))
    conn.execute("UPDATE skill_merges SET undone=?, undone_by=? WHERE id=?", (now, who, merge_id))
    return row["into_id"], members


def keep_apart(conn: sqlite3.Connection, rule_ids: list[str], who: str, now: float) -> list[tuple[str, str]]:
    """Record that the clusters of ``rule_ids`` are different rules (pairwise); returns the new pairs."""
    roots = list(dict.fromkeys(root(conn, r) for r in rule_ids))
    added = []
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            pair = (a, b) if a < b else (b, a)
            if conn.execute("INSERT OR IGNORE INTO skill_apart (a, b, who, created) VALUES (?,?,?,?)",
                            (*pair, who, now)).rowcount:
                added.append(pair)
    return added


def apart_pairs(conn: sqlite3.Connection) -> set[frozenset[str]]:
    """Every pair of clusters (by their roots now) judged different rules; pairs merged since are left out."""
    roots = roots_of(parents(conn))
    out = set()
    for r in conn.execute("SELECT a, b FROM skill_apart"):
        a, b = roots.get(r["a"], r["a"]), roots.get(r["b"], r["b"])
        if a != b:
            out.add(frozenset((a, b)))
    return out


def apart_from(pairs: set[frozenset[str]], rule_id: str) -> set[str]:
    """The clusters judged different from ``rule_id``'s."""
    return {x for p in pairs if rule_id in p for x in p if x != rule_id}
