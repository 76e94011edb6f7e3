"""Export of the skill memory to a JSON-able dict and import of such an export into another memory."""

from __future__ import annotations

import sqlite3

from .merging import ViewsFn, add_evidence, first_match, new_rule, prefer_wording
from .models import ImportSummary, now

EXPORT_FORMAT = "adaexplore-skill-memory"

_EXPERIENCE_COLUMNS = ("id", "task_id", "node_id", "status", "error_class", "message", "normalized", "signature",
                       "construct", "who", "created", "rule_id")


def export_memory(conn: sqlite3.Connection, threshold: int) -> dict:
    """Everything another server needs to start from this memory (JSON-able)."""
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
    return {"format": EXPORT_FORMAT, "version": 1, "exported_at": now(), "threshold": threshold,
            "rules": rules, "experiences": exps}


def check_format(data: dict) -> None:
    """Raise ValueError unless ``data`` is a skill memory export."""
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(f"not a skill memory export (format {data.get('format')!r}, want {EXPORT_FORMAT!r})")


def import_memory(conn: sqlite3.Connection, views: ViewsFn, data: dict, who: str) -> ImportSummary:
    """Merge the export ``data`` into the memory of ``conn``; importing the same export twice changes nothing."""
    summary = ImportSummary()
    for rule in data.get("rules", []):
        text = " ".join(str(rule["text"]).split())
        decision = first_match(text, rule.get("signatures"), views(conn, with_variants=True))
        if decision and decision.rule_id:
            rid = decision.rule_id
            summary.rules_merged += 1
            prefer_wording(conn, rid, text)
        else:
            rid = new_rule(conn, text, float(rule.get("created") or now()), rule_id=rule.get("id"))
            conn.execute("UPDATE skill_rules SET retired=?, pinned=? WHERE id=?",
                         (int(bool(rule.get("retired"))), int(bool(rule.get("pinned"))), rid))
            summary.rules_added += 1
        summary.id_map[rule["id"]] = rid
        for e in rule.get("evidence", []):
            summary.evidence_added += add_evidence(
                conn, rid, e.get("task_id") or "", e.get("node_id") or "", e.get("who") or who,
                e.get("text") or text, e.get("error_excerpt"), float(e.get("first_seen") or now()),
                float(e.get("last_seen") or now()))
        for sig in rule.get("signatures", []):
            conn.execute("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)", (rid, sig))
        for c in rule.get("contradictions", []):
            summary.contradictions_added += conn.execute(
                "INSERT OR IGNORE INTO skill_contradictions VALUES (?,?,?,?,?)",
                (rid, c["source_hash"], c.get("task_id"), c.get("node_id"), float(c.get("seen") or now()))).rowcount
    cols = _EXPERIENCE_COLUMNS
    for x in data.get("experiences", []):
        vals = [x.get(c) for c in cols]
        vals[11] = summary.id_map.get(x.get("rule_id"), x.get("rule_id"))
        vals[9] = vals[9] or who
        summary.experiences_added += conn.execute(
            f"INSERT OR IGNORE INTO skill_experiences VALUES ({','.join('?' * len(cols))})", vals).rowcount
    return summary
