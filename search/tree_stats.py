"""Budget and leaderboard queries over a TreeIndex."""

from __future__ import annotations

import heapq

from ..common.vocab import Status
from .params import SearchParams
from .tree import TreeIndex, _speed_key


def budget_left(index: TreeIndex, params: SearchParams) -> int | None:
    """Expansions still allowed under ``step_budget`` (None = unlimited).

    Work in flight counts as spent: visible nodes (evaluated or still evaluating) plus live
    pending expansions, so concurrent agents cannot overshoot the budget together.
    ``infra_error`` nodes cost nothing.
    """
    if params.step_budget is None:
        return None
    return max(0, params.step_budget - index.n_visible - index.live_pending)


def best_nodes(index: TreeIndex, k: int) -> list[str]:
    """Up to k correct nodes, fastest first; unknown speedup ranks after any measured one;
    ties go to the older node (smaller seq). O(n log k)."""
    if k <= 0:
        return []
    status, rows = index.status, index.rows
    correct = (rows[i] for i in range(1, len(rows)) if status[i] == Status.correct)
    top = heapq.nsmallest(k, correct, key=lambda r: (-_speed_key(r.speedup), r.seq))
    return [r.id for r in top]
