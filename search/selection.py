"""Which node to expand next, and with which kind of step.

Selection walks down from the root. At a node s with children it scores each child a by
UCT, ``Q(a) + c_explore * sqrt(ln N(s) / N(a))`` (N(a) = 0 gives +inf), and s itself by
its widening score ``max_a Q(a) + c_expand * sqrt(ln N(s)) / |children(s)|``. It widens s
(selects s for a new child) when that is strictly larger than the best child's UCT, else
descends into the best child. A childless node is selected; so is the bare root.

Beyond the paper:

* Children whose whole subtree is still being evaluated (status None, no result yet) are
  not descended into: there is no feedback to build on. If every child of s is like that,
  s is widened.
* A node still being evaluated is never widened itself.
* Exact ties (within 1e-12) between children are broken uniformly by ``rng``, so equal
  failures are spread over rather than the oldest always being picked; pass a seeded rng
  for reproducibility. Widening must beat the best child's UCT by more than the same
  1e-12: a tie between widening and descending descends, whatever the float rounding.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from ..common.vocab import Action
from .params import SearchParams
from .tree import TreeIndex

_TIE = 1e-12
_MAX_EXPLAINED_CHILDREN = 8  # keeps the explanation small enough for an agent's context


def uct_score(q: float, n_parent: int, n_child: int, c_explore: float) -> float:
    """UCT value of a child: +inf when it has never been visited."""
    if n_child <= 0:
        return math.inf
    return q + c_explore * math.sqrt(math.log(n_parent) / n_child) if n_parent > 1 else q


def widen_score(max_child_q: float, n_parent: int, n_children: int, c_expand: float) -> float:
    """Widening score of a node with ``n_children`` children."""
    bonus = c_expand * math.sqrt(math.log(n_parent)) / n_children if n_parent > 1 else 0.0
    return max_child_q + bonus


@dataclass(frozen=True, slots=True)
class Selection:
    """The chosen node, whether it was widened (it has children and gets another), the path
    from the root, and the last decision explained: ``scores`` = {"at": node decided at,
    "n": its N, "widen": its widening score, "decision": "widen" or the child id taken,
    "children": {id: {"uct", "q", "n"}} for the top 8 candidates, "children_total"}."""

    node_id: str
    widened: bool
    path: list[str]
    scores: dict[str, Any] = field(default_factory=dict)


def select(index: TreeIndex, params: SearchParams, rng: random.Random) -> Selection:
    """Pick the node to expand next by UCT with widening (see module docstring)."""
    n, first, nxt, status, ids = index.n, index.first, index.nxt, index.status, index.ids
    c_explore, c_expand = params.c_explore, params.c_expand
    q_at, open_at = index.q_at, index.open_at
    s = 0
    path = [0]
    # the latest decision (node, visits, widening score, children's scores, choice), explained once at the end
    last: tuple[int, int, float, list[tuple[float, int, float, int]], int | str] | None = None
    widened = False
    while first[s] >= 0:
        n_s = n[s]
        log_n = math.log(n_s) if n_s > 1 else 0.0
        best_q = -math.inf
        best_uct = -math.inf
        best: list[int] = []
        table = []
        n_kids = 0
        a = first[s]
        while a >= 0:
            n_kids += 1
            qa = q_at(a)
            if qa > best_q:
                best_q = qa
            if status[a] is not None or open_at(a):  # else: all of it still being evaluated
                na = n[a]
                u = math.inf if na <= 0 else qa + c_explore * math.sqrt(log_n / na)
                table.append((u, a, qa, na))
                if u > best_uct + _TIE:
                    best_uct, best = u, [a]
                elif u >= best_uct - _TIE:
                    best.append(a)
            a = nxt[a]
        wscore = best_q + c_expand * math.sqrt(log_n) / n_kids
        can_widen = s == 0 or status[s] is not None
        if can_widen and (not best or wscore > best_uct + _TIE):
            widened = True
            last = (s, n_s, wscore, table, "widen")
            break
        choice = best[0] if len(best) == 1 else rng.choice(best)
        last = (s, n_s, wscore, table, choice)
        s = choice
        path.append(s)
    if last is None:  # the bare root: nothing to compare yet
        scores = {"at": ids[s], "n": n[s], "widen": None, "decision": "first expansion",
                  "children": {}, "children_total": 0}
    else:
        scores = _explain(ids, *last)
    return Selection(node_id=ids[s], widened=widened, path=[ids[i] for i in path], scores=scores)


def _explain(ids: list[str], s: int, n_s: int, wscore: float, table: list[tuple[float, int, float, int]],
             decision: int | str) -> dict[str, Any]:
    table.sort(key=lambda t: -t[0])
    return {
        "at": ids[s],
        "n": n_s,
        "widen": wscore,
        "decision": decision if isinstance(decision, str) else ids[decision],
        "children": {ids[a]: {"uct": u, "q": q, "n": na} for u, a, q, na in table[:_MAX_EXPLAINED_CHILDREN]},
        "children_total": len(table),
    }


def choose_action(
    index: TreeIndex, node_id: str, params: SearchParams, rng: random.Random
) -> Action:
    """Root -> large; a node with >= ``max_small_children`` small-step children -> large
    (its local refinements are used up); otherwise large with probability ``p_large``."""
    i = index.index_of(node_id)
    if i == 0 or index.small_children_at(i) >= params.max_small_children:
        return Action.large
    return Action.large if rng.random() < params.p_large else Action.small
