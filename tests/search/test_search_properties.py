"""Property tests on random trees against a brute-force reference."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from adaexplore.search import (
    REWARD_MAX,
    REWARDS,
    NodeView,
    PendingView,
    SearchParams,
    TreeIndex,
    best_nodes,
    choose_action,
    large_step_context,
    select,
    small_step_context,
)

STATUSES = [None, "correct", "correct", "correct", "wrong_output", "compile_error", "timeout", "infra_error"]
NOW, TTL = 10_000.0, 900.0


@st.composite
def trees(draw):
    n = draw(st.integers(0, 40))
    nodes = [NodeView("r", None, "root", None, None, 0)]
    for k in range(1, n + 1):
        p = draw(st.integers(0, k - 1))
        status = draw(st.sampled_from(STATUSES))
        speedup = draw(st.one_of(st.none(), st.floats(0.01, 50.0))) if status == "correct" else None
        action = "large" if p == 0 else draw(st.sampled_from(["large", "small", "small"]))
        nodes.append(NodeView(f"n{k}", nodes[p].id, action, status, speedup, k))
    pending = [
        PendingView(f"p{j}", nodes[draw(st.integers(0, n))].id, NOW - draw(st.floats(0.0, 2 * TTL)))
        for j in range(draw(st.integers(0, 6)))
    ]
    params = SearchParams(
        reward=draw(st.sampled_from(sorted(REWARDS))),
        q_max_blend=draw(st.sampled_from([0.0, 0.5])),
        c_pool=draw(st.integers(1, 5)),
        expansion_ttl_s=TTL,
    )
    return nodes, pending, params


def visible_parent(by_id, node):
    """The nearest ancestor that is not an infra_error node (the root is always visible)."""
    p = by_id[node.parent_id]
    while p.status == "infra_error":
        p = by_id[p.parent_id]
    return p


@settings(max_examples=300, deadline=None)
@given(trees(), st.integers(0, 2**32 - 1))
def test_random_trees(tree, seed):
    nodes, pending, params = tree
    idx = TreeIndex.build(nodes, pending, params, NOW)
    by_id = {x.id: x for x in nodes}
    fn = REWARDS[params.reward]

    # Brute force: every counted node and every live pending expansion adds one visit and
    # its reward to itself and each visible ancestor.
    n = {x.id: 0 for x in nodes}
    w = {x.id: 0.0 for x in nodes}

    def credit(start, reward):
        x = start
        while True:
            n[x.id] += 1
            w[x.id] += reward
            if x.parent_id is None:
                return
            x = visible_parent(by_id, x)

    counted = [x for x in nodes[1:] if x.status != "infra_error"]
    for x in counted:
        credit(x, fn(x.status, x.speedup) if x.status is not None else 0.0)
    live = [pv for pv in pending if pv.created_at + TTL > NOW]
    for pv in live:
        x = by_id[pv.node_id]
        credit(x if x.status != "infra_error" else visible_parent(by_id, x), 0.0)

    assert idx.N("r") == len(counted) + len(live)
    assert idx.live_pending == len(live)
    for x in [nodes[0]] + counted:
        assert idx.N(x.id) == n[x.id]
        q = idx.Q(x.id)
        assert -1e-12 <= q <= REWARD_MAX[params.reward] + 1e-12
        if params.q_max_blend == 0.0 and n[x.id]:
            assert abs(q - w[x.id] / n[x.id]) < 1e-9
    for x in nodes[1:]:
        assert (x.id in idx) == (x.status != "infra_error")

    rng = random.Random(seed)
    sel = select(idx, params, rng)
    assert sel.node_id in idx and sel.path[0] == "r" and sel.path[-1] == sel.node_id
    assert idx.path_to(sel.node_id) == sel.path
    assert sel.node_id == "r" or by_id[sel.node_id].status is not None  # never expand unevaluated work
    assert choose_action(idx, sel.node_id, params, rng) in ("large", "small")

    recent = small_step_context(idx, sel.node_id, params)
    assert len(recent) <= params.c_recent and "r" not in recent
    assert not recent or recent[-1] == sel.node_id
    pool = large_step_context(idx, sel.node_id, params, rng)
    assert len(pool) == len(set(pool)) <= params.c_pool
    assert all(by_id[p].status == "correct" for p in pool)

    top = best_nodes(idx, 3)
    assert all(by_id[t].status == "correct" for t in top)
