"""An in-process cache of each task's light node rows, refreshed by version.

Every node change bumps its task's version and stamps the node with it, so a refresh reads
one integer and, when it moved, only the rows that changed since. Works across processes
sharing the database file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .tree_store import NodeRow, TreeStore


@dataclass
class _Entry:
    version: int = -1
    rows: dict[str, NodeRow] = field(default_factory=dict)
    ordered: list[NodeRow] = field(default_factory=list)
    depth: dict[str, int] = field(default_factory=dict)
    children: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # derived views of the current version (the search index, summaries), dropped when it moves
    memo: dict = field(default_factory=dict)
    memo_version: int = -1

    def memoized(self, key, build):
        """`build(rows)` once per version of this entry, given the rows of that version."""
        with self.lock:
            version, snapshot = self.version, self.ordered
            if self.memo_version != version:
                self.memo, self.memo_version = {}, version
            if key in self.memo:
                return self.memo[key]
        value = build(snapshot)
        with self.lock:
            if self.memo_version == version:
                self.memo[key] = value
        return value


class TreeCache:
    def __init__(self, store: TreeStore):
        self.store = store
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def entry(self, task_id: str) -> _Entry:
        with self._lock:
            e = self._entries.get(task_id)
            if e is None:
                e = self._entries[task_id] = _Entry()
            return e

    def rows(self, task_id: str) -> tuple[int, list[NodeRow], _Entry]:
        """(version, rows ordered by seq, entry) of a task; raises KeyError for an unknown task."""
        version = self.store.task_version(task_id)
        if version is None:
            raise KeyError(task_id)
        e = self.entry(task_id)
        with e.lock:
            if version != e.version:
                changed = self.store.light_nodes(task_id, e.version)
                added = False
                for r in changed:
                    if r.id not in e.rows:
                        added = True
                    e.rows[r.id] = r
                    if r.version > version:
                        version = r.version
                if added or not e.ordered:
                    e.ordered = sorted(e.rows.values(), key=lambda r: r.seq)
                    self._shape(e)
                else:
                    e.ordered = [e.rows[r.id] for r in e.ordered]
                e.version = version
            return e.version, e.ordered, e

    @staticmethod
    def _shape(e: _Entry) -> None:
        depth: dict[str, int] = {}
        children: dict[str, int] = {}
        for r in e.ordered:
            depth[r.id] = 0 if r.parent_id is None else depth.get(r.parent_id, 0) + 1
            if r.parent_id is not None:
                children[r.parent_id] = children.get(r.parent_id, 0) + 1
        e.depth, e.children = depth, children
