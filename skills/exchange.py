"""Export of the skill memory to a JSON-able dict, and import of such an export in bounded batches.

Runs in the process that owns a ``SkillStore`` (the server for ``import_memory``, the
``adaexplore memory import`` command). Import is linear in the size of the export: every rule is
matched by its keys (indexed lookups), never against every stored rule, and each batch is its
own short write transaction, so other writers (``record_failure``, ``evaluate_kernel``) get the
lock between batches.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from .keys import describe_key, merges_alone, rule_keys
from .merging import add_evidence, add_keys, exists, first_match, key_matches, merge, new_rule, root, text_key
from .records import ImportSummary, now
from .signature import construct_of

EXPORT_FORMAT = "adaexplore-skill-memory"

_EXPERIENCE_COLUMNS = ("id", "task_id", "node_id", "status", "error_class", "message", "normalized", "signature",
                       "construct", "who", "created", "rule_id")


def export_memory(conn: sqlite3.Connection, threshold: int) -> dict[str, Any]:
    """Everything another server needs to start from this memory (JSON-able)."""
    keys: dict[str, list[str]] = {}
    for r in conn.execute("SELECT rule_id, key FROM skill_rule_keys ORDER BY key"):
        keys.setdefault(r[0], []).append(r[1])
    sigs: dict[str, list[str]] = {}
    for r in conn.execute("SELECT rule_id, signature FROM skill_rule_signatures ORDER BY signature"):
        sigs.setdefault(r[0], []).append(r[1])
    evidence: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute("""SELECT rule_id, task_id, node_id, who, text, error_excerpt, first_seen, last_seen
                             FROM skill_evidence ORDER BY id"""):
        d = dict(r)
        evidence.setdefault(d.pop("rule_id"), []).append(d)
    contra: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute("SELECT rule_id, source_hash, task_id, node_id, seen FROM skill_contradictions"):
        d = dict(r)
        contra.setdefault(d.pop("rule_id"), []).append(d)
    rules = []
    for rule in conn.execute("SELECT * FROM skill_rules ORDER BY id").fetchall():
        rid = rule["id"]
        rules.append({
            "id": rid, "text": rule["text"], "construct": rule["construct"], "created": rule["created"],
            "retired": bool(rule["retired"]), "pinned": bool(rule["pinned"]), "merged_into": rule["merged_into"],
            "keys": keys.get(rid, []), "signatures": sigs.get(rid, []), "evidence": evidence.get(rid, []),
            "contradictions": contra.get(rid, []),
        })
    exps = [dict(r) for r in conn.execute("SELECT * FROM skill_experiences ORDER BY created, id")]
    apart = [dict(r) for r in conn.execute("SELECT a, b, who, created FROM skill_apart ORDER BY a, b")]
    return {"format": EXPORT_FORMAT, "version": 2, "exported_at": now(), "threshold": threshold,
            "rules": rules, "experiences": exps, "apart": apart}


def check_format(data: dict[str, Any]) -> None:
    """Raise ValueError unless ``data`` is a skill memory export."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        fmt = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"not a skill memory export (format {fmt!r}, want {EXPORT_FORMAT!r})")


@dataclass
class Prepared:
    """An exported rule row with everything derived from its text computed before any lock is taken."""

    row: dict[str, Any]
    text: str
    keys: list[str]
    strong: list[str]
    construct: str | None
    evidence: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)  # (row, text, text key)


def prepare_rules(rules: list[dict[str, Any]]) -> list[Prepared]:
    """Normalize wordings and compute keys, constructs and evidence text keys (no database access)."""
    out = []
    for rule in rules:
        text = " ".join(str(rule["text"]).split())
        err = [k for k in rule.get("keys", []) if k.startswith(("err:", "ecf:"))]
        own = rule_keys(text)
        prepared = Prepared(rule, text, own + err, [k for k in [*own[1:], *err] if merges_alone(k)],
                            construct_of(text))
        for e in rule.get("evidence", []):
            etext = e.get("text") or text
            prepared.evidence.append((e, etext, text_key(etext)))
        out.append(prepared)
    return out


def import_rules(conn: sqlite3.Connection, rules: list[Prepared], who: str, summary: ImportSummary) -> None:
    """Import one batch of prepared rule rows (their merges into each other come in :func:`import_merges`).

    A row joins a stored rule when it has the same id or the same wording; otherwise it is added, and
    merged into the first rule already stored here (not one of this import) that shares one of its
    strong keys, unless the export says it was merged into another of its own rows.
    """
    imported = set(summary.id_map.values())
    for p in rules:
        rule, text = p.row, p.text
        exported_id = str(rule["id"])
        if exists(conn, exported_id):
            rid, joined = exported_id, True
        else:
            same = [r for _, r in key_matches(conn, [p.keys[0]])]
            if same:
                rid, joined = same[0], True
            else:
                rid = new_rule(conn, text, float(rule.get("created") or now()), rule_id=exported_id,
                               construct=p.construct)
                conn.execute("UPDATE skill_rules SET retired=?, pinned=? WHERE id=?",
                             (int(bool(rule.get("retired"))), int(bool(rule.get("pinned"))), rid))
                joined = bool(rule.get("merged_into"))
                if not joined:
                    # Rows of this export that the exporter kept apart stay apart: only rules already here are joined.
                    for key in p.strong:
                        target = first_match(conn, key, rid, skip=imported)
                        if target:
                            merge(conn, target, [rid], f"import:{who}", f"imported; {describe_key(key)}", now())
                            joined = True
                            break
        summary.rules_merged += joined
        summary.rules_added += not joined
        summary.id_map[exported_id] = rid
        imported.add(rid)
        add_keys(conn, rid, p.keys)
        for e, etext, tkey in p.evidence:
            summary.evidence_added += add_evidence(
                conn, rid, e.get("task_id") or "", e.get("node_id") or "", e.get("who") or who,
                etext, e.get("error_excerpt"), float(e.get("first_seen") or now()),
                float(e.get("last_seen") or now()), tkey=tkey)
        conn.executemany("INSERT OR IGNORE INTO skill_rule_signatures VALUES (?,?)",
                         [(rid, sig) for sig in rule.get("signatures", [])])
        for c in rule.get("contradictions", []):
            summary.contradictions_added += conn.execute(
                "INSERT OR IGNORE INTO skill_contradictions VALUES (?,?,?,?,?)",
                (rid, c["source_hash"], c.get("task_id"), c.get("node_id"), float(c.get("seen") or now()))).rowcount


def import_merges(conn: sqlite3.Connection, rules: list[Prepared], who: str, summary: ImportSummary) -> None:
    """Repeat, here, the merges the export had among its rows (a no-op for those already in effect)."""
    for rule in (p.row for p in rules):
        into = rule.get("merged_into")
        if not into:
            continue
        rid = summary.id_map.get(str(rule["id"]), str(rule["id"]))
        target = summary.id_map.get(into, into)
        if exists(conn, rid) and exists(conn, target) and root(conn, rid) != root(conn, target):
            merge(conn, target, [rid], f"import:{who}", "merged in the imported memory", now())


def import_apart(conn: sqlite3.Connection, pairs: list[dict[str, Any]], summary: ImportSummary) -> None:
    """Repeat the export's "keep apart" judgements between the rules they name here."""
    for pair in pairs:
        a, b = (summary.id_map.get(str(pair.get(k)), str(pair.get(k))) for k in ("a", "b"))
        if a != b and exists(conn, a) and exists(conn, b):
            lo, hi = sorted((a, b))
            conn.execute("INSERT OR IGNORE INTO skill_apart (a, b, who, created) VALUES (?,?,?,?)",
                         (lo, hi, str(pair.get("who") or "import"), float(pair.get("created") or now())))


def import_experiences(conn: sqlite3.Connection, experiences: list[dict[str, Any]], who: str, summary: ImportSummary) -> None:
    cols = _EXPERIENCE_COLUMNS
    for x in experiences:
        vals = [x.get(c) for c in cols]
        old_rule = x.get("rule_id")
        vals[11] = summary.id_map.get(old_rule, old_rule) if old_rule is not None else None
        vals[9] = vals[9] or who
        summary.experiences_added += conn.execute(
            f"INSERT OR IGNORE INTO skill_experiences VALUES ({','.join('?' * len(cols))})", vals).rowcount
