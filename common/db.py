"""One SQLite file, one policy: connections, write transactions and schema migrations.

Runs in every process that opens the data directory's database: the server (the tree store and
the skill memory, each with its own `Database` over the same file) and the CLI commands. The
policy is the same for every owner of tables in the file:

* one connection per thread and `Database`, opened on first use, in autocommit mode (so a read
  never holds a snapshot), WAL journal, `synchronous=NORMAL` (a power loss may lose the last
  commits, never the file), foreign keys enforced, rows as `sqlite3.Row` (by index or by column name);
* every write is one short `BEGIN IMMEDIATE` transaction that takes the write lock up front and
  waits for it at most `wait_s`; past that it raises `DatabaseBusy`, and nothing was changed;
* threads of one process take turns at a lock of their own (`write_turn`) before SQLite's,
  because SQLite's busy handler sleeps in steps of up to 100 ms while a lock wakes the next
  writer the moment the last one ends.

Migrations are keyed on `PRAGMA user_version`. Each owner of tables is a `Schema` with a slot:
the byte of `user_version` at `8 * slot` holds how many of that schema's steps the file has
applied. Opening a `Database` with a schema applies the missing steps in order, each with its
slot's new version in one write transaction, so an interrupted upgrade resumes where it stopped
and two processes opening an old file at once apply every step exactly once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

Step = Callable[[sqlite3.Connection], None]
"""One migration step: statements run inside the upgrade's write transaction."""

SLOT_BITS = 8
MAX_STEPS = (1 << SLOT_BITS) - 1


class DatabaseBusy(Exception):
    """Another writer held the database's write lock longer than this operation may wait."""


@dataclass(frozen=True)
class Schema:
    """The tables one package owns in the file, as the ordered steps that build them.

    Steps are never edited once released: a change of schema is a new step at the end."""

    name: str
    slot: int
    steps: Sequence[Step]

    def __post_init__(self) -> None:
        if not 0 <= self.slot < 32 // SLOT_BITS:
            raise ValueError(f"schema {self.name}: slot {self.slot} is not in 0..3")
        if len(self.steps) > MAX_STEPS:
            raise ValueError(f"schema {self.name}: more than {MAX_STEPS} steps")

    def version_in(self, user_version: int) -> int:
        """How many of this schema's steps a file with `user_version` has applied."""
        return (user_version >> (SLOT_BITS * self.slot)) & MAX_STEPS

    def with_version(self, user_version: int, version: int) -> int:
        """`user_version` with this schema's slot set to `version`."""
        shift = SLOT_BITS * self.slot
        return (user_version & ~(MAX_STEPS << shift)) | (version << shift)


def script(sql: str) -> Step:
    """A step made of plain SQL statements (separated by semicolons)."""

    def run(conn: sqlite3.Connection) -> None:
        for stmt in sql.split(";"):
            if stmt.strip():
                conn.execute(stmt)

    return run


def add_column(conn: sqlite3.Connection, table: str, column: str, decl: str) -> None:
    """Add a column unless the table has it (files made by releases that predate `user_version`)."""
    if column not in columns(conn, table):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


class Database:
    """Connections to one SQLite file under the policy above, and the schema it must have.

    `wait_s` is how long a write waits for the write lock unless told otherwise; `prepare`
    runs once on the path before SQLite creates the file (e.g. to create it owner-only)."""

    def __init__(self, path: str | Path, *, schema: Schema | None = None, wait_s: float = 30.0,
                 prepare: Callable[[Path], None] | None = None):
        self.path = Path(path)
        self.wait_s = float(wait_s)
        if prepare is not None:
            prepare(self.path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._write_lock = threading.RLock()
        if schema is not None:
            self.migrate(schema)

    # -- connections -----------------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        c: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(self.path, timeout=self.wait_s, isolation_level=None, check_same_thread=False)
            c.row_factory = sqlite3.Row
            c.execute(f"PRAGMA busy_timeout={int(self.wait_s * 1000)}")
            try:
                c.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:  # another process is switching it right now: already WAL then
                pass
            c.execute("PRAGMA synchronous=NORMAL")
            c.execute("PRAGMA foreign_keys=ON")
            self._local.conn = c
            with self._lock:
                self._all.append(c)
        return c

    @property
    def write_turn(self) -> threading.RLock:
        """This process's turn at the write lock. Hold it around writes made through another `Database`
        over the same file, so that this one's writers wait here and start the moment they end."""
        return self._write_lock

    @contextmanager
    def write(self, wait_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction: the write lock is taken up front, waited for at most `wait_s`
        (default: the database's), then `DatabaseBusy`. Commits on success, rolls back on any error."""
        wait = self.wait_s if wait_s is None else wait_s
        c = self.conn()
        with self._write_lock:
            self._begin(c, wait)
            try:
                yield c
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")

    @staticmethod
    def _begin(c: sqlite3.Connection, wait_s: float) -> None:
        c.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
        deadline = time.monotonic() + wait_s
        # SQLite's busy handler covers most waits; a few busy cases (a checkpoint or recovery in another
        # process) answer at once, so those are retried here until the same deadline.
        while True:
            try:
                c.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(f"another writer held the database's write lock for more than {wait_s:g} s"
                                       ) from None
                time.sleep(0.05)

    def close(self) -> None:
        """Close every thread's connection (a later call opens new ones)."""
        with self._lock:
            for c in self._all:
                try:
                    c.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()

    # -- migrations ------------------------------------------------------------------

    def user_version(self) -> int:
        return int(self.conn().execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, schema: Schema) -> int:
        """Apply the steps of `schema` this file lacks; returns the schema's version now."""
        version = schema.version_in(self.user_version())
        while version < len(schema.steps):
            with self.write() as c:
                # Read again inside the transaction: another process may have applied the step meanwhile.
                current = int(c.execute("PRAGMA user_version").fetchone()[0])
                version = schema.version_in(current)
                if version >= len(schema.steps):
                    break
                schema.steps[version](c)
                version += 1
                c.execute(f"PRAGMA user_version = {schema.with_version(current, version)}")
        if version > len(schema.steps):
            raise RuntimeError(f"the database {self.path} has {schema.name} tables of version {version}, newer "
                               f"than this release knows ({len(schema.steps)}); upgrade adaexplore")
        return version
