"""The read side of the skill memory: rules as matched and served, and the ranked served memory."""

from __future__ import annotations

import sqlite3

from .merging import parents, roots_of, wording_key
from .records import MemoryView, SignatureCount, WithheldRule
from .relevance import relevance, task_keywords
from .render import render_rules
from .similarity import RuleView


def rule_views(conn: sqlite3.Connection, threshold: int, contradiction_min: int, rule_ids: list[str] | None = None,
               with_variants: bool = False) -> list[RuleView]:
    """Every rule cluster (or those of ``rule_ids``) with its counts, evidence summary and state.

    A cluster is its root row and every row merged into it: their evidence, signatures and
    contradictions add up, and it is served under its best wording (an admin's edit wins). It
    is active (confirmed) once ``threshold`` distinct occasions back it, unless
    ``contradiction_min`` correct kernels used what it forbids or an admin retired it.
    """
    roots = roots_of(parents(conn))
    members: dict[str, list[str]] = {}
    for rid, r in roots.items():
        members.setdefault(r, []).append(rid)
    wanted = sorted(members) if rule_ids is None else sorted({roots[r] for r in rule_ids if r in roots})
    ids = [m for r in wanted for m in members[r]]
    where = ""
    args: tuple[str, ...] = ()
    if rule_ids is not None:
        where, args = f"WHERE id IN ({','.join('?' * len(ids))})", tuple(ids)
    rows = {r["id"]: r for r in conn.execute(f"SELECT * FROM skill_rules {where}", args)}
    rwhere = where.replace("id IN", "rule_id IN")
    ev: dict[str, list[sqlite3.Row]] = {}
    for r in conn.execute(f"SELECT rule_id, task_id, who, text, text_key, first_seen, last_seen FROM skill_evidence "
                          f"{rwhere} ORDER BY id", args):
        ev.setdefault(roots.get(r["rule_id"], r["rule_id"]), []).append(r)
    sigs: dict[str, set[str]] = {}
    for r in conn.execute(f"SELECT rule_id, signature FROM skill_rule_signatures {rwhere}", args):
        sigs.setdefault(roots.get(r["rule_id"], r["rule_id"]), set()).add(r["signature"])
    fails: dict[str, set[str]] = {}
    if with_variants:
        for r in conn.execute("""SELECT s.rule_id, MIN(e.normalized) AS normalized FROM skill_rule_signatures s
                                 JOIN skill_experiences e ON e.signature = s.signature
                                 GROUP BY s.rule_id, s.signature"""):
            fails.setdefault(roots.get(r["rule_id"], r["rule_id"]), set()).add(r["normalized"])
    contra: dict[str, set[str]] = {}
    for r in conn.execute(f"SELECT rule_id, source_hash FROM skill_contradictions {rwhere}", args):
        contra.setdefault(roots.get(r["rule_id"], r["rule_id"]), set()).add(r["source_hash"])
    out = []
    for rid in wanted:
        cluster = [rows[m] for m in members[rid] if m in rows]
        head = rows.get(rid)
        if head is None:
            continue
        pinned = [c for c in cluster if c["pinned"]]
        if head["pinned"]:
            best = head
        elif pinned:
            best = pinned[0]
        else:
            best = min(cluster, key=lambda c: wording_key(c["text"]))
        erows = ev.get(rid, [])
        tasks = sorted({r["task_id"] for r in erows if r["task_id"]})
        untied = {(r["who"], r["text_key"]) for r in erows if not r["task_id"]}
        count = len(tasks) + len(untied)
        contradicted = len(contra.get(rid, ())) >= contradiction_min
        retired = any(c["retired"] for c in cluster)
        texts = {c["text"] for c in cluster} | ({r["text"] for r in erows} if with_variants else set())
        out.append(RuleView(
            id=rid, text=best["text"], count=count,
            active=count >= threshold and not contradicted and not retired,
            contradicted=contradicted, retired=retired, construct=best["construct"], tasks=tasks,
            first_seen=min((r["first_seen"] for r in erows), default=head["created"]),
            last_seen=max((r["last_seen"] for r in erows), default=head["created"]),
            who=sorted({r["who"] for r in erows}), signatures=sorted(sigs.get(rid, ())),
            variants=sorted(texts - {best["text"]}), members=sorted(m for m in members[rid] if m != rid),
            failures=sorted(fails.get(rid, ()))))
    return out


def frequent_signature_rows(conn: sqlite3.Connection, limit: int) -> list[sqlite3.Row]:
    """The most widespread failure signatures that no rule explains yet, by number of tasks."""
    return conn.execute(
        """SELECT signature, COUNT(DISTINCT task_id) AS n, MIN(error_class) AS ec, MIN(message) AS msg,
           MIN(normalized) AS norm FROM skill_experiences
           WHERE signature NOT IN (SELECT signature FROM skill_rule_signatures) AND rule_id IS NULL
           GROUP BY signature ORDER BY n DESC, signature LIMIT ?""", (max(1, limit),)).fetchall()


def contradicting_nodes(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """For each rule cluster (by its root), the nodes of the correct kernels that used what it forbids."""
    roots = roots_of(parents(conn))
    out: dict[str, list[str]] = {}
    for r in conn.execute("SELECT rule_id, node_id FROM skill_contradictions ORDER BY seen"):
        nodes = out.setdefault(roots.get(r["rule_id"], r["rule_id"]), [])
        if r["node_id"] and r["node_id"] not in nodes:
            nodes.append(r["node_id"])
    return out


def withheld(views: list[RuleView], nodes: dict[str, list[str]]) -> list[WithheldRule]:
    """The rules that are not served whatever is asked, each with why (and the kernels that contradicted it)."""
    out = []
    for v in views:
        if v.retired:
            out.append(WithheldRule(id=v.id, text=v.text, why="retired by an admin"))
        elif v.contradicted:
            seen = nodes.get(v.id, [])
            out.append(WithheldRule(id=v.id, text=v.text, nodes=seen[:20],
                                    why=f"contradicted: {len(seen) or 'several'} correct kernels used what it forbids"))
    return out


def serve(views: list[RuleView], sig_rows: list[sqlite3.Row], n_exp: int, *, threshold: int,
          task_source: str | None, token_budget: int, include_candidates: bool, limit: int,
          nodes: dict[str, list[str]] | None = None) -> MemoryView:
    """Rules to serve: confirmed ones first, then unconfirmed ones; within each, most relevant to the task,
    then most frequent, then most recent. Rules never served (contradicted, retired) are listed apart, with
    why, and the rest are counted: listed + withheld + not listed = all rules."""
    keywords = task_keywords(task_source)
    served = [v for v in views if v.active or (include_candidates and not v.retired and not v.contradicted)]
    served.sort(key=lambda v: (not v.active, -relevance(v.text, v.construct, keywords), -v.count,
                               -(v.last_seen or 0), v.id))
    served = served[: max(0, limit)]
    held = withheld(views, nodes or {})
    return MemoryView(
        rules=served, withheld=held, not_listed=len(views) - len(served) - len(held),
        rendered=render_rules(served, token_budget, threshold=threshold), threshold=threshold, total_rules=len(views),
        active_rules=sum(v.active for v in views), experiences=n_exp,
        candidate_rules=sum(not v.active and not v.retired and not v.contradicted for v in views),
        frequent_signatures=[SignatureCount(signature=r["signature"], count=r["n"], error_class=r["ec"],
                                            example=r["msg"][:300], normalized=r["norm"][:300]) for r in sig_rows])
