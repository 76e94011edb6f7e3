"""Rule identity and merging inside a write transaction: new rules, evidence, folding clusters.

Every function takes an open connection of a ``BEGIN IMMEDIATE`` transaction (see
``store.MemoryStore._tx``) and never commits itself.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable, Sequence

from .signature import construct_of, forbidden_part
from .similarity import MergeDecision, RuleView, explained_by, family_of, match_rule, mentions, tokens

ViewsFn = Callable[..., list[RuleView]]
"""``views(conn, rule_ids=None, with_variants=False)``: the rules as matched against."""


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


def first_match(text: str, sigs: Sequence[str], views: list[RuleView],
                unclaimed: Sequence[str] = ()) -> MergeDecision | None:
    """The first merge decision, over the failure signatures ``sigs`` (or none), that names a rule.

    Returns the last decision taken when none names a rule.
    """
    decision = None
    for sig in sigs or [None]:
        decision = match_rule(text, sig, views, unclaimed_failures=unclaimed)
        if decision.rule_id:
            break
    return decision


def unclaimed_failures(conn: sqlite3.Connection) -> list[str]:
    """One normalized message per failure signature that no rule explains yet."""
    return [r["norm"] for r in conn.execute(
        """SELECT MIN(normalized) AS norm FROM skill_experiences
           WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) GROUP BY signature""")]


def prefer_wording(conn: sqlite3.Connection, rule_id: str, text: str) -> None:
    """Give an unpinned rule the wording ``text`` if it is the better one."""
    row = conn.execute("SELECT text, pinned FROM skill_rules WHERE id=?", (rule_id,)).fetchone()
    if not row["pinned"] and wording_key(text) < wording_key(row["text"]):
        conn.execute("UPDATE skill_rules SET text=?, construct=? WHERE id=?", (text, construct_of(text), rule_id))


def resolve(conn: sqlite3.Connection, rule_id: str) -> str:
    """The current id of a rule that may have been folded into another."""
    row = conn.execute("SELECT rule_id FROM skill_rule_aliases WHERE old_id=?", (rule_id,)).fetchone()
    return row["rule_id"] if row else rule_id


def unclaimed_signature(conn: sqlite3.Connection, text: str) -> list[str]:
    """The one failure cluster no rule explains yet that uses what ``text`` forbids, if unique."""
    fam = family_of(text)
    if not fam[0] or not fam[1]:
        return []
    rows = conn.execute("""SELECT signature, MIN(normalized) AS norm FROM skill_experiences
                           WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures)
                           GROUP BY signature""").fetchall()
    hits = [r["signature"] for r in rows if mentions(fam[0], r["norm"])]
    return hits if len(hits) == 1 else []


def new_rule(conn: sqlite3.Connection, text: str, now: float, rule_id: str | None = None) -> str:
    """Insert a rule with this wording; its id is ``rule_id`` or derived from the wording, made unique."""
    base = hashlib.sha256(text_key(text).encode()).hexdigest()
    candidate, salt = rule_id or "r-" + base[:10], 0
    while conn.execute("SELECT 1 FROM skill_rules WHERE id=?", (candidate,)).fetchone():
        salt += 1
        candidate = "r-" + hashlib.sha256(f"{base}:{salt}".encode()).hexdigest()[:10]
    conn.execute("INSERT INTO skill_rules (id, text, construct, created) VALUES (?,?,?,?)",
                 (candidate, text, construct_of(text), now))
    return candidate


def add_evidence(conn, rule_id, task_id, node_id, who, text, excerpt, first, last) -> bool:
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


def fold(conn: sqlite3.Connection, old: str, into: str) -> None:
    """Move everything of rule ``old`` to rule ``into`` and delete ``old`` (its id stays an alias)."""
    for r in conn.execute("""SELECT task_id, node_id, who, text, error_excerpt, first_seen, last_seen
                             FROM skill_evidence WHERE rule_id=?""", (old,)).fetchall():
        add_evidence(conn, into, r["task_id"], r["node_id"], r["who"], r["text"], r["error_excerpt"],
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


def fold_linked(conn: sqlite3.Connection, views: ViewsFn, rule_id: str, text: str, sigs: list[str]) -> list[str]:
    """Fold into ``rule_id`` every other rule that ``text`` alone would also have merged with.

    Without this, merging depends on the order rules arrive in: B and C, both equivalent to a
    later A but not to each other, would stay apart if they came first. A rule that links two
    clusters joins them (single linkage on the same explainable criteria as a merge: a shared
    failure signature or similar wording, never the weaker "explains the construct" link).
    """
    folded: list[str] = []
    while True:
        others = [v for v in views(conn, with_variants=True) if v.id != rule_id]
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
        fold(conn, found, rule_id)
        folded.append(found)
    # Untied rules that came before this cluster's failures: now that the cluster explains a failure
    # with the construct they forbid (and no other failure involves it), they are about it too.
    all_views = views(conn, with_variants=True)
    me = next(v for v in all_views if v.id == rule_id)
    unclaimed = unclaimed_failures(conn)
    for v in all_views:
        if v.id == rule_id or v.signatures:
            continue
        fam = family_of(v.text)
        if not fam[0] or not fam[1] or not any(mentions(fam[0], f) for f in me.failures):
            continue
        if explained_by(fam, [x for x in all_views if x.id != v.id], unclaimed) == rule_id:
            fold(conn, v.id, rule_id)
            folded.append(v.id)
    return folded
