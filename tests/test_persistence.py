"""Databases made by the release before schema migrations open with this one, and keep their data.

The release before keyed nothing on `PRAGMA user_version`: it wrote a `schema_version` row that it never
read (server) and a `schema` row in `skill_meta` (skill memory). The tables below are that release's,
word for word; each test builds such a file, fills it as that release did, and opens it with this one.
"""

import sqlite3
import time

import pytest

from adaexplore.common.db import Database, Schema, script
from adaexplore.server.auth import hash_token
from adaexplore.server.store import SCHEMA as SERVER_SCHEMA
from adaexplore.server.store import Store, root_id
from adaexplore.skills.store import SCHEMA as SKILLS_SCHEMA
from adaexplore.skills.store import MemoryStore

PREVIOUS_SERVER_TABLES = """
CREATE TABLE IF NOT EXISTS server_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    validation BLOB,
    flags BLOB,
    params BLOB,
    protocol BLOB,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    synthetic INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks(id),
    parent_id TEXT,
    seq INTEGER NOT NULL,
    action TEXT NOT NULL,
    source TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    status TEXT,
    result BLOB,
    feedback TEXT,
    speedup REAL,
    reward REAL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    evaluated_at REAL,
    expansion_id TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    UNIQUE (task_id, seq)
);
CREATE INDEX IF NOT EXISTS nodes_task_hash ON nodes (task_id, source_hash);
CREATE INDEX IF NOT EXISTS nodes_task_version ON nodes (task_id, version);
CREATE INDEX IF NOT EXISTS nodes_pending ON nodes (status) WHERE status IS NULL;

CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT,
    owner TEXT,
    lease_expires REAL
);
CREATE INDEX IF NOT EXISTS evaluations_node ON evaluations (node_id);

CREATE TABLE IF NOT EXISTS expansions (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    action TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0,
    result_node_id TEXT
);
CREATE INDEX IF NOT EXISTS expansions_open ON expansions (task_id, consumed, expires_at);

CREATE TABLE IF NOT EXISTS profiles (
    node_id TEXT PRIMARY KEY,
    device TEXT NOT NULL,
    triton_share REAL,
    report TEXT NOT NULL,
    created_at REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
"""

PREVIOUS_SKILL_TABLES = """
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

    store = Store(path)
    memory = MemoryStore(path, threshold=2)

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
    Store(path).close()
    MemoryStore(path)

    db = Database(path)
    assert SERVER_SCHEMA.version_in(db.user_version()) == len(SERVER_SCHEMA.steps)
    assert SKILLS_SCHEMA.version_in(db.user_version()) == len(SKILLS_SCHEMA.steps)
    meta = db.conn().execute("SELECT COUNT(*) FROM server_meta WHERE key = 'schema_version'").fetchone()[0]
    assert meta == 0  # the old marker is gone: user_version is the one place a version lives
    before = db.conn().execute("SELECT COUNT(*) FROM skill_rule_keys").fetchone()[0]
    Store(path).close()
    MemoryStore(path)
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
