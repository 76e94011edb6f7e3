"""The read side of the skill memory: rules as matched and served, and the ranked served memory."""

from __future__ import annotations

import sqlite3

from .models import MemoryView, SignatureCount
from .relevance import relevance, task_keywords
from .render import render_rules
from .similarity import RuleView


def rule_views(conn: sqlite3.Connection, threshold: int, contradiction_min: int, rule_ids: list[str] | None = None,
               with_variants: bool = False) -> list[RuleView]:
    """Every rule (or those of ``rule_ids``) with its counts, evidence summary and state.

    A rule is active once ``threshold`` distinct occasions back it, unless ``contradiction_min``
    correct kernels used what it forbids or an admin retired it.
    """
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
        contradicted = contra.get(rule["id"], 0) >= contradiction_min
        out.append(RuleView(
            id=rule["id"], text=rule["text"], count=count,
            active=count >= threshold and not contradicted and not rule["retired"],
            contradicted=contradicted, retired=bool(rule["retired"]), construct=rule["construct"], tasks=tasks,
            first_seen=min((r["first_seen"] for r in rows), default=rule["created"]),
            last_seen=max((r["last_seen"] for r in rows), default=rule["created"]),
            who=sorted({r["who"] for r in rows}), signatures=sigs.get(rule["id"], []),
            variants=sorted({r["text"] for r in rows} - {rule["text"]}) if with_variants else [],
            failures=fails.get(rule["id"], [])))
    return out


def frequent_signature_rows(conn: sqlite3.Connection, limit: int) -> list[sqlite3.Row]:
    """The most widespread failure signatures that no rule explains yet, by number of tasks."""
    return conn.execute(
        """SELECT signature, COUNT(DISTINCT task_id) AS n, MIN(error_class) AS ec, MIN(message) AS msg,
           MIN(normalized) AS norm FROM skill_experiences
           WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) AND rule_id IS NULL
           GROUP BY signature ORDER BY n DESC, signature LIMIT ?""", (max(1, limit),)).fetchall()


def serve(views: list[RuleView], sig_rows: list[sqlite3.Row], n_exp: int, *, threshold: int,
          task_source: str | None, token_budget: int, include_candidates: bool, limit: int) -> MemoryView:
    """Rules to serve, most relevant to the task first, then most frequent, then most recent."""
    keywords = task_keywords(task_source)
    served = [v for v in views if v.active or (include_candidates and not v.retired and not v.contradicted)]
    served.sort(key=lambda v: (-relevance(v.text, v.construct, keywords), not v.active, -v.count,
                               -(v.last_seen or 0), v.id))
    served = served[: max(0, limit)]
    return MemoryView(
        rules=served, rendered=render_rules(served, token_budget), threshold=threshold, total_rules=len(views),
        active_rules=sum(v.active for v in views), experiences=n_exp,
        candidate_rules=sum(not v.active and not v.retired and not v.contradicted for v in views),
        frequent_signatures=[SignatureCount(signature=r["signature"], count=r["n"], error_class=r["ec"],
                                            example=r["msg"][:300], normalized=r["norm"][:300]) for r in sig_rows])
