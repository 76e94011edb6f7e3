"""A read-only index of one task's tree, rebuilt from plain rows on every call.

Conventions:

* The root is the task (reference) node: action ``"root"``, ``parent_id`` None, no kernel,
  no reward of its own. It is never counted as a visit.
* A visible node counts as one visit carrying its reward. A node whose ``status`` is None
  (kernel submitted, evaluation still running) counts as one visit with reward 0: it is
  work in flight, and counting it keeps other agents from piling onto the same spot.
* ``infra_error`` nodes are invisible: our failure, not the kernel's. Their children, if
  any, hang under the nearest visible ancestor; pending expansions on them move there too.
* Virtual loss: each live pending expansion of v adds one visit with reward 0 to v and
  every ancestor of v. A pending expansion with ``created_at + ttl <= now`` has expired
  and is dropped. Once its kernel is attached as a node, the caller removes the pending
  row (the node itself then counts).

So ``N(s)`` = visible nodes in the subtree of s (s included unless it is the root) + live
pending expansions in that subtree, and ``Q(s)`` = (1-b) * mean + b * max of those
rewards, with b = ``q_max_blend``.

``build`` is O(n) and allocation-light, because the server runs it on every call: column
extraction by comprehension, at most one sort by ``seq`` (only if a parent does not come
before its child in the input), and one reverse pass that sums subtrees bottom-up.
Children are a first-child / next-sibling linked list (no list per node). Anything only
some calls need (segments, per-node actions) is computed lazily. No recursion, so depth is
unbounded.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from itertools import compress, islice, repeat
from operator import eq, ge
from typing import Iterator, Sequence

from ..common.vocab import Action, Status
from .params import SearchParams
from .rewards import REWARDS

INFRA_ERROR = Status.infra_error
CORRECT = Status.correct


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the search sees it. ``seq`` increases with creation order."""

    id: str
    parent_id: str | None
    action: str
    status: str | None
    speedup: float | None
    seq: int


@dataclass(frozen=True, slots=True)
class PendingView:
    """An outstanding expansion of ``node_id`` handed to an agent at ``created_at``, for a
    step of kind ``action`` ("small" or "large"; a small one counts against the node's
    small-step limit until it is answered or expires)."""

    id: str
    node_id: str
    created_at: float
    action: str = Action.small


def _speed_key(speedup: float | None) -> float:
    # Ranking key: unknown (or NaN) speed ranks after every measured one.
    if speedup is None or speedup != speedup:
        return -math.inf
    return speedup


class TreeIndex:
    """Children, visits and rewards of one task tree, by dense integer index.

    Index 0 is the root and a parent's index is always smaller than its children's.
    Public methods take and return node ids (str); the ``*_at`` helpers take indices.
    """

    __slots__ = (
        "params", "now", "rows", "ids", "pos", "alias", "parent", "status", "reward",
        "first", "nxt", "n", "w", "mx", "pending_on", "pending_small_on", "live_pending",
        "n_visible", "_segments",
    )
    params: SearchParams
    now: float
    rows: Sequence[NodeView]
    ids: list[str]
    pos: dict[str, int]
    alias: dict[str, int]  # id of an infra_error node -> index of its nearest visible ancestor
    parent: list[int]
    status: list[str | None]
    reward: list[float]
    first: list[int]  # first child of each index, -1 for none
    nxt: list[int]  # next sibling of each index, -1 for none
    n: list[int]  # visits, virtual loss included
    w: list[float]  # summed reward of the subtree
    mx: list[float] | None  # best reward in the subtree (only when Q blends in the max)
    pending_on: dict[int, int]
    pending_small_on: dict[int, int]
    live_pending: int
    n_visible: int
    _segments: list[tuple[list[int], dict[int, int]] | None]

    @classmethod
    def build(
        cls,
        nodes: Sequence[NodeView],
        pending: Sequence[PendingView],
        params: SearchParams,
        now: float,
    ) -> TreeIndex:
        """Index ``nodes`` (exactly one root) and the live ones of ``pending`` at time ``now``.

        Pass rows in ``seq`` order (as a query sorted by seq returns them); the index keeps
        that order and only sorts by ``seq`` itself when some parent does not come first.

        Raises ValueError for a malformed tree: no root or two roots, duplicate ids, an
        unknown parent, or a parent whose ``seq`` is not smaller than its child's.
        """
        self = cls.__new__(cls)
        self.params, self.now = params, now
        rows = nodes if isinstance(nodes, list) else list(nodes)
        if not rows:
            raise ValueError("empty tree: the root (task) node is required")
        sts = [r.status for r in rows]
        pids = [r.parent_id for r in rows]
        ids = [r.id for r in rows]
        size = len(rows)
        pos = dict(zip(ids, range(size)))
        if len(pos) != size:
            raise ValueError("duplicate node ids")
        parent = _parent_indices(pos, pids) if pids[0] is None else None
        if parent is None or any(map(ge, parent, range(1, size))):
            if pids.count(None) != 1:
                raise ValueError(f"a tree needs exactly one root (parent_id None), got {pids.count(None)}")
            # Input not in seq order: sort once; then every parent must come first.
            order = sorted(range(size), key=lambda k: rows[k].seq)
            rows = [rows[k] for k in order]
            sts = [sts[k] for k in order]
            pids = [pids[k] for k in order]
            ids = [ids[k] for k in order]
            pos = dict(zip(ids, range(size)))
            if pids[0] is not None:
                raise ValueError("the root must have the smallest seq")
            parent = _parent_indices(pos, pids)
            if any(map(ge, parent, range(1, size))):
                raise ValueError("a parent must have a smaller seq than its children")
        parent.insert(0, -1)

        # infra_error nodes keep their slot but are cut out: children and pending move to the
        # nearest visible ancestor, the id leaves ``pos``. Rare, so handled off the hot path.
        alias: dict[str, int] = {}
        infra: list[int] = []
        if INFRA_ERROR in sts:
            infra = list(_where(sts, INFRA_ERROR))
            up: dict[int, int] = {}
            for j in infra:  # increasing index: an infra parent is resolved before its child
                p = parent[j]
                up[j] = up.get(p, p)
                alias[ids[j]] = up[j]
                del pos[ids[j]]
            for i in compress(range(size), map(up.__contains__, parent)):
                parent[i] = up[parent[i]]

        # Rewards: a constant per failure status, the reward function only for correct ones.
        fn = REWARDS[params.reward]
        const = {st: (fn(st, None) if st is not None else 0.0) for st in set(sts)}
        rw = list(map(const.__getitem__, sts))
        for i in _where(sts, CORRECT):
            rw[i] = fn(CORRECT, rows[i].speedup)
        rw[0] = 0.0  # the root has no kernel

        n = [1] * size
        n[0] = 0
        for j in infra:
            n[j] = 0
            rw[j] = 0.0
        pending_on: dict[int, int] = {}
        pending_small_on: dict[int, int] = {}
        live = 0
        deadline = now - params.expansion_ttl_s
        for pv in pending:
            if pv.created_at <= deadline:  # created_at + ttl <= now: expired
                continue
            found = pos.get(pv.node_id)
            if found is None:
                found = alias.get(pv.node_id)
                if found is None:
                    continue  # node gone: nothing to hold back
            i = found
            pending_on[i] = pending_on.get(i, 0) + 1
            if pv.action == Action.small:
                pending_small_on[i] = pending_small_on.get(i, 0) + 1
            n[i] += 1
            live += 1

        w = rw[:]
        first = [-1] * size
        nxt = [-1] * size
        # Reverse index order visits children before parents: one bottom-up pass.
        # Prepending while walking down the indices leaves each child list in seq order.
        for i, p in zip(range(size - 1, 0, -1), reversed(parent)):
            n[p] += n[i]
            w[p] += w[i]
            nxt[i] = first[p]
            first[p] = i
        for j in infra:  # unlink (its own children were already linked to its stand-in)
            p = parent[j]
            if first[p] == j:
                first[p] = nxt[j]
            else:
                c = first[p]
                while nxt[c] != j:
                    c = nxt[c]
                nxt[c] = nxt[j]
        mx = None
        if params.q_max_blend > 0.0:
            mx = rw[:]
            for i, p in zip(range(size - 1, 0, -1), reversed(parent)):
                if mx[i] > mx[p]:
                    mx[p] = mx[i]

        self.rows, self.ids, self.pos, self.alias, self.parent = rows, ids, pos, alias, parent
        self.status, self.reward, self.first, self.nxt = sts, rw, first, nxt
        self.n, self.w, self.mx = n, w, mx
        self.pending_on, self.live_pending = pending_on, live
        self.pending_small_on = pending_small_on
        self.n_visible = size - 1 - len(infra)
        # A one-slot holder, shared by the copies `with_pending` makes: segments do not depend
        # on pending expansions, so they are computed once per tree, not once per call.
        self._segments = [None]
        return self

    def with_pending(self, pending: Sequence[PendingView], now: float) -> TreeIndex:
        """A copy of this index with the live ones of ``pending`` added as virtual loss.

        Equal to ``build(nodes, existing_pending + pending, params, now)`` for an index built
        with no pending rows, without redoing the O(n) build: each live expansion adds one
        zero-reward visit to its node and every ancestor.
        """
        out = copy.copy(self)
        out.now = now
        n = list(self.n)
        pending_on = dict(self.pending_on)
        pending_small_on = dict(self.pending_small_on)
        live = 0
        deadline = now - self.params.expansion_ttl_s
        for pv in pending:
            if pv.created_at <= deadline:
                continue
            found = self.pos.get(pv.node_id)
            if found is None:
                found = self.alias.get(pv.node_id)
                if found is None:
                    continue
            i = found
            pending_on[i] = pending_on.get(i, 0) + 1
            if pv.action == Action.small:
                pending_small_on[i] = pending_small_on.get(i, 0) + 1
            live += 1
            while i >= 0:
                n[i] += 1
                i = self.parent[i]
        out.n, out.pending_on, out.live_pending = n, pending_on, self.live_pending + live
        out.pending_small_on = pending_small_on
        return out

    @property
    def n_evaluated(self) -> int:
        """Visible nodes with a result (status not None)."""
        sts = self.status
        return self.n_visible - sts.count(None) + (sts[0] is None)

    # ---- by index (for the search functions) ----

    def q_at(self, i: int) -> float:
        """Q of index i: mean subtree reward, blended with the max; 0 when unvisited."""
        n = self.n[i]
        if n == 0:
            return 0.0
        mean = self.w[i] / n
        if self.mx is None:
            return mean
        b = self.params.q_max_blend
        return (1.0 - b) * mean + b * self.mx[i]

    def children_at(self, i: int) -> list[int]:
        """Child indices of i, in seq order."""
        out = []
        c = self.first[i]
        nxt = self.nxt
        while c >= 0:
            out.append(c)
            c = nxt[c]
        return out

    def action_at(self, i: int) -> str:
        return Action.root if i == 0 else self.rows[i].action

    def speedup_at(self, i: int) -> float | None:
        return self.rows[i].speedup

    def seq_at(self, i: int) -> int:
        return self.rows[i].seq

    def evaluated_at(self, i: int) -> bool:
        """True when node i has a result (the root counts as evaluated: it is the task)."""
        return i == 0 or self.status[i] is not None

    def open_at(self, i: int) -> bool:
        """True when the subtree of i holds an evaluated node, i.e. something to build on.
        Only subtrees of still-evaluating nodes are walked, and those are rare and small."""
        if self.status[i] is not None or i == 0:
            return True
        first, nxt, status = self.first, self.nxt, self.status
        stack = [i]
        while stack:
            c = first[stack.pop()]
            while c >= 0:
                if status[c] is not None:
                    return True
                stack.append(c)
                c = nxt[c]
        return False

    def small_children_at(self, i: int) -> int:
        """Small-step children of i, counting live pending small-step expansions of i: with
        several agents at once, a node promised two small steps gets no third."""
        rows = self.rows
        made = sum(1 for c in self.children_at(i) if rows[c].action == Action.small)
        return made + self.pending_small_on.get(i, 0)

    def segments(self) -> tuple[list[int], dict[int, int]]:
        """(segment head of every index, best correct node of each segment), computed once.

        A segment is a large step plus the small steps grown from it; a child of the root
        always starts one. Best = fastest, unknown speed last, then oldest."""
        if self._segments[0] is None:
            rows, parent, sts = self.rows, self.parent, self.status
            size = len(rows)
            acts = [r.action for r in rows]
            seg = list(range(size))
            for i, p, a in zip(range(1, size), islice(parent, 1, None), islice(acts, 1, None)):
                if p and a == Action.small:
                    seg[i] = seg[p]
            best: dict[int, int] = {}
            best_key: dict[int, float] = {}
            for i in _where(sts, CORRECT):  # seq order: on equal speed the older one stays
                k = rows[i].speedup
                if k is None or k != k:
                    k = -math.inf
                h = seg[i]
                b = best_key.get(h)
                if b is None or k > b:
                    best_key[h] = k
                    best[h] = i
            self._segments[0] = (seg, best)
            return seg, best
        return self._segments[0]

    def index_of(self, node_id: str) -> int:
        """Dense index of a visible node. KeyError for unknown or infra_error ids."""
        i = self.pos.get(node_id)
        if i is None:
            if node_id in self.alias:
                raise KeyError(f"node {node_id!r} hit an infrastructure failure and is not part of the search")
            raise KeyError(f"unknown node {node_id!r}")
        return i

    def path_indices(self, i: int) -> list[int]:
        """Indices from the root down to i."""
        out = []
        parent = self.parent
        while i >= 0:
            out.append(i)
            i = parent[i]
        out.reverse()
        return out

    # ---- by id (for callers) ----

    @property
    def root_id(self) -> str:
        return self.ids[0]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.pos

    def __len__(self) -> int:
        """Visible nodes, root included."""
        return self.n_visible + 1

    def node(self, node_id: str) -> NodeView:
        return self.rows[self.index_of(node_id)]

    def N(self, node_id: str) -> int:
        return self.n[self.index_of(node_id)]

    def Q(self, node_id: str) -> float:
        return self.q_at(self.index_of(node_id))

    def reward_of(self, node_id: str) -> float:
        return self.reward[self.index_of(node_id)]

    def children_of(self, node_id: str) -> list[str]:
        return [self.ids[c] for c in self.children_at(self.index_of(node_id))]

    def parent_of(self, node_id: str) -> str | None:
        """Parent id in the search's view (an infra_error parent is skipped over)."""
        p = self.parent[self.index_of(node_id)]
        return None if p < 0 else self.ids[p]

    def path_to(self, node_id: str) -> list[str]:
        """Ids from the root down to ``node_id``."""
        return [self.ids[i] for i in self.path_indices(self.index_of(node_id))]

    def pending_count(self, node_id: str) -> int:
        """Live pending expansions of exactly this node."""
        return self.pending_on.get(self.index_of(node_id), 0)


def _where(values: list[str | None], target: object) -> Iterator[int]:
    """Indices i >= 1 (the root excluded) with values[i] == target, scanned at C speed."""
    return compress(range(1, len(values)), map(eq, islice(values, 1, None), repeat(target)))


def _parent_indices(pos: dict[str, int], pids: list[str | None]) -> list[int]:
    """Parent index of every non-root row (pids[0] is the root's None)."""
    try:
        return list(map(pos.__getitem__, pids[1:]))  # type: ignore[arg-type]  # a None parent: KeyError below
    except KeyError as e:
        if e.args[0] is None:
            raise ValueError("a tree needs exactly one root (parent_id None), got several") from None
        raise ValueError(f"unknown parent {e.args[0]!r}") from None
