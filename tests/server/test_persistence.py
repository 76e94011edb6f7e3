"""Databases made by the release before schema migrations open with this one, and keep their data.

The release before keyed nothing on `PRAGMA user_version`: it wrote a `schema_version` row that it never
read (server) and a `schema` row in `skill_meta` (skill memory). That release's tables, word for word,
are kept as data in fixtures/previous_release/; each test builds such a file, fills it as that release
did, and opens it with this one.
"""

import sqlite3
import time
from pathlib import Path

import pytest

from adaexplore.common.db import Database, Schema, script
from adaexplore.server.core.tree_store import SCHEMA as SERVER_SCHEMA
from adaexplore.server.core.tree_store import TreeStore, root_id
from adaexplore.server.face.auth import hash_token
from adaexplore.skills.skill_store import SCHEMA as SKILLS_SCHEMA
from adaexplore.skills.skill_store import SkillStore

PREVIOUS = Path(__file__).resolve().parents[1] / "fixtures" / "previous_release"
PREVIOUS_SERVER_TABLES = (PREVIOUS / "server.sql").read_text()
PREVIOUS_SKILL_TABLES = (PREVIOUS / "skills.sql").read_text()

RULE = "tl.float32 is a dtype, not a function: use x.to(tl.float32), not tl.float32(x)"


def previous_release_database(path):
    """A data directory's database as the previous release left it: one task, a scored kernel, a pending
    expansion, a token and a rule seen on two tasks."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(PREVIOUS_SERVER_TABLES)
    conn.execute("INSERT OR IGNORE INTO server_meta VALUES ('schema_version', '1')")
    conn.executescript(PREVIOUS_SKILL_TABLES)
    conn.execute("INSERT OR REPLACE INTO skill_meta (k, v) VALUES ('schema', 3)")
    now = time.time()
    conn.execute("INSERT INTO tasks (id, name, source, validation, flags, params, protocol, created_by, created_at, "
                 "version, synthetic) VALUES ('t1', 'softmax', 'class Model: ...', '{}', '[]', '{}', '{}', 'alice', "
                 "?, 2, 0)", (now,))
    conn.execute("INSERT INTO nodes (id, task_id, parent_id, seq, action, source, source_hash, status, feedback, "
                 "speedup, reward, created_by, created_at, version) VALUES "
                 "('t1-0', 't1', NULL, 0, 'root', 'class Model: ...', 'h0', 'reference', 'the reference', 1.0, "
                 "NULL, 'alice', ?, 1)", (now,))
    conn.execute("INSERT INTO nodes (id, task_id, parent_id, seq, action, source, source_hash, status, result, "
                 "feedback, speedup, reward, created_by, created_at, evaluated_at, version) VALUES "
                 "('t1-1', 't1', 't1-0', 1, 'large', 'class ModelNew: ...', 'h1', 'correct', "
                 "'{\"timing\": {\"mean_ms\": 0.5}}', 'status: correct', 2.0, 0.52, 'bob', ?, ?, 2)", (now, now))
    conn.execute("INSERT INTO expansions (id, task_id, node_id, action, created_by, created_at, expires_at) "
                 "VALUES ('x1', 't1', 't1-1', 'small', 'bob', ?, ?)", (now, now + 3600))
    conn.execute("INSERT INTO tokens (name, hash, scopes, created_at) VALUES ('alice', ?, 'read,write', ?)",
                 (hash_token("secret-token"), now))
    conn.execute("INSERT INTO skill_rules (id, text, created) VALUES ('r-1', ?, ?)", (RULE, now))
    for task in ("t1", "t2"):
        conn.execute("INSERT INTO skill_evidence (rule_id, task_id, node_id, who, text, text_key, first_seen, "
                     "last_seen) VALUES ('r-1', ?, '', 'bob', ?, ?, ?, ?)", (task, RULE, RULE.lower(), now, now))
    conn.close()


def test_a_previous_release_database_keeps_its_tasks_nodes_tokens_and_rules(tmp_path):
    path = tmp_path / "adaexplore.db"
    previous_release_database(path)

    store = TreeStore(path)
    memory = SkillStore(path, threshold=2)

    task = store.get_task("t1")
    assert task is not None and task.name == "softmax" and task.created_by == "alice" and not task.synthetic
    node = store.get_node("t1-1")
    assert node is not None and node.status == "correct" and node.speedup == 2.0 and node.source == "class ModelNew: ..."
    assert node.result == {"timing": {"mean_ms": 0.5}} and node.parent_id == root_id("t1")
    expansion = store.get_expansion("x1")
    assert expansion is not None and expansion.node_id == "t1-1" and not expansion.consumed
    assert store.find_token(hash_token("secret-token")) == ("alice", ["read", "write"])
    assert [t.nodes for t in store.list_tasks()] == [1]
    rule = memory.get_rule("r-1")
    assert rule.text == RULE and rule.count == 2 and rule.tasks == ["t1", "t2"] and rule.active

    # and the upgraded file goes on working: a new kernel and a new occasion of the rule
    node_id, created = store.create_node(task_id="t1", parent_id="t1-1", action="small", source="v2",
                                         source_hash="h2", created_by="bob", expansion_id="x1")
    assert created and node_id == "t1-2" and store.get_expansion("x1").consumed
    memory.record_rule(text=RULE, who="carol", task_id="t3")
    assert memory.get_rule("r-1").count == 3
    store.close()


def test_an_upgraded_database_records_both_schemas_in_user_version_and_upgrades_once(tmp_path):
    path = tmp_path / "adaexplore.db"
    previous_release_database(path)
    TreeStore(path).close()
    SkillStore(path)

    db = Database(path)
    assert SERVER_SCHEMA.version_in(db.user_version()) == len(SERVER_SCHEMA.steps)
    assert SKILLS_SCHEMA.version_in(db.user_version()) == len(SKILLS_SCHEMA.steps)
    meta = db.conn().execute("SELECT COUNT(*) FROM server_meta WHERE key = 'schema_version'").fetchone()[0]
    assert meta == 0  # the old marker is gone: user_version is the one place a version lives
    before = db.conn().execute("SELECT COUNT(*) FROM skill_rule_keys").fetchone()[0]
    TreeStore(path).close()
    SkillStore(path)
    assert db.conn().execute("SELECT COUNT(*) FROM skill_rule_keys").fetchone()[0] == before


def test_a_new_schema_step_runs_once_on_an_existing_file(tmp_path):
    path = tmp_path / "db.sqlite"
    v1 = Schema("demo", slot=2, steps=[script("CREATE TABLE demo (id INTEGER PRIMARY KEY)")])
    db = Database(path, schema=v1)
    db.conn().execute("INSERT INTO demo VALUES (1)")
    v2 = Schema("demo", slot=2, steps=[*v1.steps, script("ALTER TABLE demo ADD COLUMN note TEXT DEFAULT 'kept'")])
    rows = Database(path, schema=v2).conn().execute("SELECT id, note FROM demo").fetchall()
    assert [tuple(r) for r in rows] == [(1, "kept")]
    assert v2.version_in(Database(path, schema=v2).user_version()) == 2


def test_a_database_from_a_newer_release_is_refused(tmp_path):
    path = tmp_path / "db.sqlite"
    two = Schema("demo", slot=2, steps=[script("CREATE TABLE a (x)"), script("CREATE TABLE b (x)")])
    Database(path, schema=two)
    with pytest.raises(RuntimeError, match="newer than this release"):
        Database(path, schema=Schema("demo", slot=2, steps=two.steps[:1]))
