"""SQLite persistence of the server: tasks, nodes, evaluations, expansions, profiles and API tokens.

Runs in the server process and in CLI commands. One database file in WAL mode holds everything
(the skill memory keeps its own `skill_*` tables in the same file); connections, transactions and
migrations follow the one policy of `adaexplore.common.db`. Several server processes may share the
file: every write is a short `BEGIN IMMEDIATE` transaction and readers never block writers.

Each task row carries a `version` counter that every node change bumps; each node row
records the version of its last change, so a process can refresh its cached view of a
tree by reading only the rows that changed since it last looked. Reads return typed rows
(frozen dataclasses), never bare tuples or dicts.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ...common.db import Database, Schema, add_column, script
from ...common.vocab import PENDING, Status
from .files import secure_file

# The release before `user_version` had these tables (with `synthetic`, `owner` and `lease_expires` added
# by hand to older files); step 1 brings any earlier file to that state. Later changes are new steps.
_TABLES = """
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
)
"""


def _tables(conn: sqlite3.Connection) -> None:
    script(_TABLES)(conn)
    add_column(conn, "tasks", "synthetic", "INTEGER NOT NULL DEFAULT 0")  # files made before synthesized tasks
    add_column(conn, "evaluations", "owner", "TEXT")  # files made before leases
    add_column(conn, "evaluations", "lease_expires", "REAL")
    conn.execute("CREATE INDEX IF NOT EXISTS evaluations_open ON evaluations (finished_at, lease_expires)")
    conn.execute("DELETE FROM server_meta WHERE key = 'schema_version'")  # the version is user_version now


SCHEMA = Schema("server", slot=0, steps=[_tables])
"""The server's tables: slot 0 of the file's `user_version`."""

NODE_LIGHT_COLUMNS = "id, parent_id, action, status, speedup, seq, reward, version"


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(blob: bytes | str | None) -> Any:
    return None if blob is None else orjson.loads(blob)


@dataclass(frozen=True)
class NodeRow:
    """The light columns of a node: what the search and summaries need."""

    id: str
    parent_id: str | None
    action: str
    status: str | None
    speedup: float | None
    seq: int
    reward: float | None
    version: int


@dataclass(frozen=True)
class TaskRow:
    """A registered task; the JSON columns are decoded."""

    id: str
    name: str
    source: str
    validation: dict[str, Any] | None
    flags: list[str] | None
    params: dict[str, Any] | None
    protocol: dict[str, Any] | None
    created_by: str
    created_at: float
    version: int
    synthetic: bool


@dataclass(frozen=True)
class TaskListing:
    """A task as list_tasks shows it: counts instead of contents."""

    id: str
    name: str
    created_by: str
    created_at: float
    flags: list[str]
    nodes: int
    best_speedup: float | None
    synthetic: bool


@dataclass(frozen=True)
class NodeDetail:
    """A node's metrics and feedback, without its source or result."""

    id: str
    parent_id: str | None
    action: str
    status: str | None
    feedback: str | None
    speedup: float | None
    reward: float | None
    seq: int
    created_by: str


@dataclass(frozen=True)
class NodeRecord:
    """A whole node: its detail, the decoded evaluation result and (when asked for) its source."""

    id: str
    task_id: str
    parent_id: str | None
    seq: int
    action: str
    status: str | None
    result: dict[str, Any] | None
    feedback: str | None
    speedup: float | None
    reward: float | None
    created_by: str
    created_at: float
    evaluated_at: float | None
    expansion_id: str | None
    source_hash: str
    source: str | None = None


@dataclass(frozen=True)
class ExpansionRow:
    """A step handed to an agent by expand_node, until a kernel answers it or it expires."""

    id: str
    task_id: str
    node_id: str
    action: str
    created_by: str
    created_at: float
    expires_at: float
    consumed: bool
    result_node_id: str | None


@dataclass(frozen=True)
class TokenRow:
    """An API token's name and scopes (the hash stays in the database)."""

    name: str
    scopes: list[str]
    created_at: float
    revoked: bool


R = TypeVar("R")


def _typed(cls: type[R], row: sqlite3.Row, **converted: Any) -> R:
    """The typed row `cls` from a database row: its columns by name, `converted` ones (decoded JSON, flags
    as bools) given instead."""
    return cls(**{k: row[k] for k in row.keys() if k not in converted}, **converted)


_NODE_COLUMNS = ("id, task_id, parent_id, seq, action, status, result, feedback, speedup, reward, created_by, "
                 "created_at, evaluated_at, expansion_id, source_hash")
_DETAIL_COLUMNS = "id, parent_id, action, status, feedback, speedup, reward, seq, created_by"


class TreeStore:
    """Thread-safe access to the server's tables (one connection per thread, see `adaexplore.common.db`)."""

    def __init__(self, path: str | Path):
        # secure_file before SQLite creates the file: the -wal and -shm files copy its mode
        self.db = Database(path, schema=SCHEMA, wait_s=30.0, prepare=secure_file)
        self.path = self.db.path

    # -- connections -------------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        return self.db.conn()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A short write transaction that takes the write lock up front."""
        with self.db.write() as c:
            yield c

    @property
    def write_turn(self) -> Any:
        """This process's turn at the database's write lock (see `Database.write_turn`): the skill
        memory's writes hold it, so this store's writers queue behind them here."""
        return self.db.write_turn

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database without blocking anyone (a background thread calls
        this every few seconds, so no tool call pays for a checkpoint)."""
        self.conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def close(self) -> None:
        self.db.close()

    # -- tasks --------------------------------------------------------------------

    def get_task(self, task_id: str) -> TaskRow | None:
        r = self.conn().execute(
            "SELECT id, name, source, validation, flags, params, protocol, created_by, created_at, version, synthetic "
            "FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if r is None:
            return None
        return _typed(TaskRow, r, validation=loads(r["validation"]), flags=loads(r["flags"]),
                      params=loads(r["params"]), protocol=loads(r["protocol"]), synthetic=bool(r["synthetic"]))

    def task_version(self, task_id: str) -> int | None:
        row = self.conn().execute("SELECT version FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None else row[0]

    def list_tasks(self) -> list[TaskListing]:
        rows = self.conn().execute(
            "SELECT t.id, t.name, t.created_by, t.created_at, t.flags, "
            "(SELECT COUNT(*) FROM nodes n WHERE n.task_id = t.id AND n.action != 'root') AS nodes, "
            "(SELECT MAX(n.speedup) FROM nodes n WHERE n.task_id = t.id AND n.status = 'correct' "
            " AND n.action != 'root') AS best_speedup, t.synthetic "
            "FROM tasks t ORDER BY t.created_at").fetchall()
        return [_typed(TaskListing, r, flags=loads(r["flags"]) or [], synthetic=bool(r["synthetic"])) for r in rows]

    def insert_task(self, *, task_id: str, name: str, source: str, source_hash: str, validation: Any,
                    flags: list[str], params: dict[str, Any], protocol: dict[str, Any], created_by: str,
                    root_status: str | None, root_speedup: float | None, root_reward: float | None,
                    root_result: Any, synthetic: bool = False) -> bool:
        """Insert a task and its root node (the reference). False if it already existed."""
        now = time.time()
        with self.tx() as c:
            if c.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone():
                return False
            c.execute(
                "INSERT INTO tasks (id, name, source, validation, flags, params, protocol, created_by, created_at,"
                " version, synthetic) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                (task_id, name, source, dumps(validation), dumps(flags), dumps(params), dumps(protocol),
                 created_by, now, int(synthetic)))
            c.execute(
                "INSERT INTO nodes (id, task_id, parent_id, seq, action, source, source_hash, status, result,"
                " feedback, speedup, reward, created_by, created_at, evaluated_at, version)"
                " VALUES (?, ?, NULL, 0, 'root', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (root_id(task_id), task_id, source, source_hash, root_status, dumps(root_result),
                 "the reference module (root of the tree)", root_speedup, root_reward, created_by, now, now))
        return True

    # -- nodes --------------------------------------------------------------------

    def light_nodes(self, task_id: str, since_version: int = -1) -> list[NodeRow]:
        rows = self.conn().execute(
            f"SELECT {NODE_LIGHT_COLUMNS} FROM nodes WHERE task_id = ? AND version > ?",
            (task_id, since_version)).fetchall()
        return [NodeRow(*r) for r in rows]

    def get_node(self, node_id: str, *, with_source: bool = True) -> NodeRecord | None:
        sel = _NODE_COLUMNS + (", source" if with_source else "")
        r = self.conn().execute(f"SELECT {sel} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if r is None:
            return None
        return _typed(NodeRecord, r, result=loads(r["result"]))

    def node_sources(self, node_ids: list[str]) -> dict[str, str]:
        if not node_ids:
            return {}
        marks = ",".join("?" * len(node_ids))
        rows = self.conn().execute(f"SELECT id, source FROM nodes WHERE id IN ({marks})", node_ids).fetchall()
        return {r[0]: r[1] for r in rows}

    def node_details(self, node_ids: list[str]) -> dict[str, NodeDetail]:
        """Feedback and metrics (no source) of several nodes."""
        if not node_ids:
            return {}
        marks = ",".join("?" * len(node_ids))
        rows = self.conn().execute(f"SELECT {_DETAIL_COLUMNS} FROM nodes WHERE id IN ({marks})", node_ids).fetchall()
        return {r["id"]: _typed(NodeDetail, r) for r in rows}

    def create_node(self, *, task_id: str, parent_id: str, action: str, source: str, source_hash: str,
                    created_by: str, expansion_id: str | None, owner: str | None = None,
                    lease_s: float = 30.0) -> tuple[str, bool]:
        """Attach a candidate to the tree, or find the node that already holds the same code (then
        `expansion_id` is left unanswered).

        Returns (node id, created). A node that holds the same code and ended in infra_error
        is reset to pending and evaluated again (created is True then). The evaluation row
        records `owner`, the server process that holds it, with a lease of `lease_s` seconds.
        """
        now = time.time()
        host, pid = socket.gethostname(), os.getpid()
        with self.tx() as c:
            row = c.execute(
                "SELECT id, status FROM nodes WHERE task_id = ? AND source_hash = ? ORDER BY seq LIMIT 1",
                (task_id, source_hash)).fetchone()
            if row is not None and row[1] != Status.infra_error:
                return row[0], False  # an expansion it came with stays open for a kernel of its own
            version = c.execute("UPDATE tasks SET version = version + 1 WHERE id = ? RETURNING version",
                                (task_id,)).fetchone()[0]
            if row is not None:  # re-run an evaluation our infrastructure lost
                node_id = row[0]
                c.execute("UPDATE nodes SET status = NULL, result = NULL, feedback = NULL, speedup = NULL,"
                          " reward = NULL, version = ? WHERE id = ?", (version, node_id))
            else:
                seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM nodes WHERE task_id = ?",
                                (task_id,)).fetchone()[0]
                node_id = f"{task_id}-{seq}"
                c.execute(
                    "INSERT INTO nodes (id, task_id, parent_id, seq, action, source, source_hash, status,"
                    " created_by, created_at, expansion_id, version) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
                    (node_id, task_id, parent_id, seq, action, source, source_hash, created_by, now, expansion_id,
                     version))
            c.execute("INSERT INTO evaluations (node_id, task_id, host, pid, started_at, owner, lease_expires)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?)", (node_id, task_id, host, pid, now, owner, now + lease_s))
            if expansion_id:
                c.execute("UPDATE expansions SET consumed = 1, result_node_id = ? WHERE id = ?",
                          (node_id, expansion_id))
        return node_id, True

    def finish_node(self, node_id: str, *, status: str, result: Any, feedback: str, speedup: float | None,
                    reward: float | None, owner: str | None = None) -> bool:
        """Record a node's result. With `owner`, only while that process still holds the evaluation
        (False when its lease was taken: another server settled the node meanwhile)."""
        with self.tx() as c:
            if owner is not None and c.execute(
                    "SELECT 1 FROM evaluations WHERE node_id = ? AND finished_at IS NULL AND owner = ?",
                    (node_id, owner)).fetchone() is None:
                return False
            return self._finish(c, node_id, status, result, feedback, speedup, reward)

    @staticmethod
    def _finish(c: sqlite3.Connection, node_id: str, status: str, result: Any, feedback: str,
                speedup: float | None, reward: float | None) -> bool:
        now = time.time()
        row = c.execute("SELECT task_id FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            return False
        version = c.execute("UPDATE tasks SET version = version + 1 WHERE id = ? RETURNING version",
                            (row[0],)).fetchone()[0]
        c.execute("UPDATE nodes SET status = ?, result = ?, feedback = ?, speedup = ?, reward = ?,"
                  " evaluated_at = ?, version = ? WHERE id = ?",
                  (status, dumps(result), feedback, speedup, reward, now, version, node_id))
        c.execute("UPDATE evaluations SET finished_at = ?, status = ? WHERE node_id = ? AND finished_at IS NULL",
                  (now, status, node_id))
        return True

    # -- leases -------------------------------------------------------------------

    def renew_leases(self, owner: str, lease_s: float) -> int:
        """Push back the expiry of every open evaluation `owner` holds; returns how many."""
        with self.tx() as c:
            return c.execute("UPDATE evaluations SET lease_expires = ? WHERE owner = ? AND finished_at IS NULL",
                             (time.time() + lease_s, owner)).rowcount

    def expired_leases(self, now: float) -> list[tuple[str, str]]:
        """(node_id, owner) of pending nodes whose evaluation lease ran out before `now`."""
        return self.conn().execute(
            "SELECT e.node_id, e.owner FROM evaluations e JOIN nodes n ON n.id = e.node_id "
            "WHERE e.finished_at IS NULL AND e.lease_expires < ? AND n.status IS NULL", (now,)).fetchall()

    def fail_expired(self, node_id: str, owner: str, now: float, *, result: Any, feedback: str) -> bool:
        """Mark a node infra_error if its evaluation by `owner` is still open and expired (one server wins)."""
        with self.tx() as c:
            if c.execute("SELECT 1 FROM evaluations WHERE node_id = ? AND owner = ? AND finished_at IS NULL "
                         "AND lease_expires < ?", (node_id, owner, now)).fetchone() is None:
                return False
            return self._finish(c, node_id, Status.infra_error, result, feedback, None, None)

    def open_evaluations(self, owner: str) -> list[str]:
        return [r[0] for r in self.conn().execute(
            "SELECT node_id FROM evaluations WHERE owner = ? AND finished_at IS NULL", (owner,)).fetchall()]

    def interrupted_evaluations(self) -> list[str]:
        """Pending nodes whose evaluating process (on this host) is gone."""
        host = socket.gethostname()
        rows = self.conn().execute(
            "SELECT n.id, e.host, e.pid FROM nodes n LEFT JOIN evaluations e "
            "ON e.node_id = n.id AND e.finished_at IS NULL WHERE n.status IS NULL").fetchall()
        lost = []
        for node_id, ehost, pid in rows:
            if ehost is None or (ehost == host and not _pid_alive(pid)):
                lost.append(node_id)
        return lost

    def nodes_by_status(self) -> dict[str, int]:
        """Candidate nodes of every task by status ('pending' while evaluated)."""
        rows = self.conn().execute("SELECT COALESCE(status, ?), COUNT(*) FROM nodes WHERE action != 'root' "
                                   "GROUP BY 1", (PENDING,)).fetchall()
        return {r[0]: r[1] for r in rows}

    def ping(self) -> None:
        """Raise unless the database answers a query."""
        self.conn().execute("SELECT COUNT(*) FROM tasks").fetchone()

    def best_nodes_rows(self, task_id: str, k: int) -> list[NodeDetail]:
        rows = self.conn().execute(
            f"SELECT {_DETAIL_COLUMNS} FROM nodes "
            "WHERE task_id = ? AND status = 'correct' AND action != 'root' "
            "ORDER BY COALESCE(speedup, 0) DESC, reward DESC, seq LIMIT ?", (task_id, k)).fetchall()
        return [_typed(NodeDetail, r) for r in rows]

    # -- expansions ---------------------------------------------------------------

    def open_expansions(self, task_id: str, now: float) -> list[tuple[str, str, float, str]]:
        """(id, node_id, created_at, action) of the task's unanswered, unexpired expansions."""
        return self.conn().execute(
            "SELECT id, node_id, created_at, action FROM expansions WHERE task_id = ? AND consumed = 0 AND expires_at > ?",
            (task_id, now)).fetchall()

    # -- profiles -----------------------------------------------------------------

    def save_profile(self, node_id: str, device: str, triton_share: float | None, report: dict[str, Any]) -> None:
        """Keep the latest profile report of a node (its Triton share is shown by best_candidates)."""
        with self.tx() as c:
            c.execute("INSERT OR REPLACE INTO profiles (node_id, device, triton_share, report, created_at) "
                      "VALUES (?, ?, ?, ?, ?)", (node_id, device, triton_share, dumps(report), time.time()))

    def profile_summary(self, node_id: str) -> str | None:
        """The summary of a node's latest GPU profile, if it has one."""
        row = self.conn().execute("SELECT json_extract(report, '$.summary') FROM profiles WHERE node_id = ?",
                                  (node_id,)).fetchone()
        return None if row is None else row[0]

    def triton_shares(self, node_ids: list[str]) -> dict[str, float]:
        """Known Triton shares of device time, by node (nodes never profiled on a GPU are absent)."""
        if not node_ids:
            return {}
        marks = ",".join("?" * len(node_ids))
        rows = self.conn().execute(f"SELECT node_id, triton_share FROM profiles WHERE node_id IN ({marks}) "
                                   "AND triton_share IS NOT NULL", node_ids).fetchall()
        return {r[0]: r[1] for r in rows}

    def create_expansion(self, *, expansion_id: str, task_id: str, node_id: str, action: str, created_by: str,
                         ttl_s: float) -> float:
        now = time.time()
        with self.tx() as c:
            c.execute("INSERT INTO expansions (id, task_id, node_id, action, created_by, created_at, expires_at)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (expansion_id, task_id, node_id, action, created_by, now, now + ttl_s))
        return now + ttl_s

    def get_expansion(self, expansion_id: str) -> ExpansionRow | None:
        r = self.conn().execute(
            "SELECT id, task_id, node_id, action, created_by, created_at, expires_at, consumed, result_node_id "
            "FROM expansions WHERE id = ?", (expansion_id,)).fetchone()
        return None if r is None else _typed(ExpansionRow, r, consumed=bool(r["consumed"]))

    # -- tokens -------------------------------------------------------------------

    def add_token(self, name: str, token_hash: str, scopes: list[str]) -> None:
        with self.tx() as c:
            if c.execute("SELECT 1 FROM tokens WHERE name = ? AND revoked = 0", (name,)).fetchone():
                raise ValueError(f"a token named {name!r} exists; revoke it first")
            c.execute("DELETE FROM tokens WHERE name = ?", (name,))
            c.execute("INSERT INTO tokens (name, hash, scopes, created_at) VALUES (?, ?, ?, ?)",
                      (name, token_hash, ",".join(scopes), time.time()))

    def find_token(self, token_hash: str) -> tuple[str, list[str]] | None:
        row = self.conn().execute("SELECT name, scopes FROM tokens WHERE hash = ? AND revoked = 0",
                                  (token_hash,)).fetchone()
        return None if row is None else (row[0], [s for s in row[1].split(",") if s])

    def list_tokens(self) -> list[TokenRow]:
        rows = self.conn().execute("SELECT name, scopes, created_at, revoked FROM tokens ORDER BY name").fetchall()
        return [_typed(TokenRow, r, scopes=r["scopes"].split(","), revoked=bool(r["revoked"])) for r in rows]

    def revoke_token(self, name: str) -> bool:
        with self.tx() as c:
            return c.execute("UPDATE tokens SET revoked = 1 WHERE name = ? AND revoked = 0", (name,)).rowcount > 0


def root_id(task_id: str) -> str:
    return f"{task_id}-0"


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
