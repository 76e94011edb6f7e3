"""What an agent sees when it writes the next kernel.

A *segment* is a large-step node plus the small steps grown from it (a child of the root
always starts one). Small steps see their own branch's recent history; large steps see a
pool of strong kernels, one per segment, from the path and (optionally) the rest of the tree.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from itertools import accumulate

from ..common.vocab import Action, Status
from .params import SearchParams
from .rewards import SPEEDUP_MAX, SPEEDUP_MIN
from .tree import TreeIndex, _speed_key


def small_step_context(index: TreeIndex, node_id: str, params: SearchParams) -> list[str]:
    """The newest ``c_recent`` nodes of ``node_id``'s segment, oldest first, ending with
    ``node_id``: walk up through small steps to and including the nearest large step.
    The root is never included (it has no kernel), so the root gives []. O(c_recent)."""
    i = index.index_of(node_id)
    parent, rows = index.parent, index.rows
    out: list[int] = []
    while i > 0 and len(out) < params.c_recent:
        out.append(i)
        if rows[i].action != Action.small:  # reached the segment's head
            break
        i = parent[i]
    out.reverse()
    return [index.ids[j] for j in out]


def _better(index: TreeIndex, a: int, b: int) -> bool:
    # Faster first; among equals (or unknown speed) the older node.
    ra, rb = index.rows[a], index.rows[b]
    return (_speed_key(ra.speedup), -ra.seq) > (_speed_key(rb.speedup), -rb.seq)


def large_step_context(
    index: TreeIndex, node_id: str, params: SearchParams, rng: random.Random
) -> list[str]:
    """A pool of at most ``c_pool`` correct kernels for a large step from ``node_id``.

    1. Path pool: the best correct kernel of each segment whose head lies on the path from
       the root to ``node_id`` (the best over the whole segment, side branches included).
       If there are more than ``c_pool``, the overall best is kept and the rest are sampled
       uniformly. Returned in path order.
    2. Top-up (``pool_topup``): candidates are the best kernel of every other segment. A
       count k in [1, room] is drawn from a geometric distribution (parameter
       ``topup_geometric_p``) truncated at room = min(c_pool - len(pool), candidates);
       k candidates are then drawn without replacement, each draw by softmax over speedup
       (clipped to [0.1, 10], unknown = 1x) at ``topup_temperature``.

    Only correct kernels, never a duplicate.
    """
    i = index.index_of(node_id)
    parent, rows = index.parent, index.rows
    seg_best = index.segments()[1] if params.pool_topup else None
    heads: list[int] = []
    while i > 0:  # walk up, noting where each segment starts
        if rows[i].action != Action.small or parent[i] == 0:
            heads.append(i)
        i = parent[i]
    heads.reverse()
    if seg_best is None:
        seg_best = _path_segment_best(index, heads)
    pool = [seg_best[h] for h in heads if h in seg_best]

    c_pool = params.c_pool
    if len(pool) > c_pool:
        top = pool[0]
        for j in pool[1:]:
            if _better(index, j, top):
                top = j
        rest = [j for j in pool if j != top]
        keep = set(rng.sample(rest, c_pool - 1))
        keep.add(top)
        pool = [j for j in pool if j in keep]

    room = c_pool - len(pool)
    if params.pool_topup and room > 0:
        on_path = set(heads)
        cands = [b for h, b in seg_best.items() if h not in on_path]
        room = min(room, len(cands))
        if room > 0:
            k = _truncated_geometric(rng, params.topup_geometric_p, room)
            pool.extend(_softmax_draws(index, cands, k, params.topup_temperature, rng))
    return [index.ids[j] for j in pool]


def _path_segment_best(index: TreeIndex, heads: list[int]) -> dict[int, int]:
    """Best correct node of each given segment, found by walking each segment's small steps
    down from its head (cheaper than indexing every segment when no top-up is wanted)."""
    rows, status, first, nxt = index.rows, index.status, index.first, index.nxt
    best: dict[int, int] = {}
    for h in heads:
        top = -1
        stack = [h]
        while stack:
            i = stack.pop()
            if status[i] == Status.correct and (top < 0 or _better(index, i, top)):
                top = i
            c = first[i]
            while c >= 0:
                if rows[c].action == Action.small:
                    stack.append(c)
                c = nxt[c]
        if top >= 0:
            best[h] = top
    return best


def _truncated_geometric(rng: random.Random, p: float, m: int) -> int:
    """k in [1, m] with P(k) proportional to p (1-p)^(k-1)."""
    weights = [p * (1.0 - p) ** (k - 1) for k in range(1, m + 1)]
    u = rng.random() * sum(weights)
    for k, wk in enumerate(weights, start=1):
        u -= wk
        if u < 0:
            return k
    return m


def _softmax_draws(
    index: TreeIndex, cands: list[int], k: int, temperature: float, rng: random.Random
) -> list[int]:
    """k distinct candidates, drawn one by one with probability softmax(speedup / T)."""
    # Clipped like the reward, so a freak timing cannot take all the mass (or overflow).
    sp = [
        min(max(s if s is not None and s == s else 1.0, SPEEDUP_MIN), SPEEDUP_MAX)
        for s in (index.rows[c].speedup for c in cands)
    ]
    top = max(sp)
    weights = [math.exp((s - top) / temperature) for s in sp]
    chosen: list[int] = []
    for _ in range(k):
        cum = list(accumulate(weights))  # C speed; redone per draw since drawn weights drop to 0
        total = cum[-1]
        if total > 0.0:
            j = min(bisect_right(cum, rng.random() * total), len(cum) - 1)
            while weights[j] == 0.0:  # float edge at the top end: step back to a live one
                j -= 1
        else:  # every remaining weight underflowed: uniform over what is left
            j = rng.choice([x for x, wx in enumerate(weights) if wx == 0.0 and cands[x] not in chosen])
        chosen.append(cands[j])
        weights[j] = 0.0
    return chosen
