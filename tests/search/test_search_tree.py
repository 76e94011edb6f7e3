"""TreeIndex: visits and rewards backed up exactly, virtual loss, infra_error, robustness."""

import time

import pytest
from search_trees import P, build, tree

from adaexplore.search import NodeView, PendingView, SearchParams, paper_reward

R1 = paper_reward("correct", 1.0)  # 0.50909...
R10 = paper_reward("correct", 10.0)  # 1.6



def test_root_only():
    idx = build(tree())
    assert idx.N("root") == 0 and idx.Q("root") == 0.0
    assert idx.children_of("root") == [] and len(idx) == 1
    assert idx.n_evaluated == 0


def test_backprop_exact():
    idx = build(tree(
        ("a", "root", "large", "correct", 10.0),
        ("b", "a", "small", "wrong_output", None),
        ("c", "a", "small", "import_error", None),
        ("d", "b", "small", "correct", 1.0),
        ("e", "root", "large", "syntax_error", None),
    ))
    assert idx.N("root") == 5 and idx.N("a") == 4 and idx.N("b") == 2
    assert idx.N("c") == idx.N("d") == idx.N("e") == 1
    assert idx.Q("d") == pytest.approx(R1)
    assert idx.Q("b") == pytest.approx((0.05 + R1) / 2)
    assert idx.Q("a") == pytest.approx((R10 + 0.05 + 0 + R1) / 4)
    assert idx.Q("root") == pytest.approx((R10 + 0.05 + R1) / 5)
    assert idx.children_of("a") == ["b", "c"]  # seq order
    assert idx.reward_of("a") == pytest.approx(R10)
    assert idx.path_to("d") == ["root", "a", "b", "d"]


def test_q_max_blend():
    nodes = tree(("a", "root", "large", "correct", 10.0), ("b", "a", "small", "import_error", None))
    idx = build(nodes, params=SearchParams(q_max_blend=0.5))
    assert idx.Q("a") == pytest.approx(0.5 * (R10 / 2) + 0.5 * R10)
    assert idx.Q("b") == 0.0


def test_unevaluated_node_counts_as_zero_visit():
    idx = build(tree(("a", "root", "large", "correct", 10.0), ("b", "a", "small", None, None)))
    assert idx.N("a") == 2 and idx.Q("a") == pytest.approx(R10 / 2)
    assert idx.n_evaluated == 1


def test_virtual_loss_live_and_expired():
    nodes = tree(("a", "root", "large", "correct", 10.0), ("b", "a", "small", "correct", 10.0))
    ttl = P.expansion_ttl_s
    now = 5000.0
    pending = [
        PendingView("p1", "b", now - 1.0),  # live
        PendingView("p2", "b", now - ttl + 0.5),  # live, about to expire
        PendingView("p3", "b", now - ttl),  # created_at + ttl == now: expired
        PendingView("p4", "a", now - 2 * ttl),  # long expired
        PendingView("p5", "ghost", now),  # unknown node: ignored
    ]
    idx = build(nodes, pending, now=now)
    assert idx.live_pending == 2
    assert idx.N("b") == 3 and idx.Q("b") == pytest.approx(R10 / 3)
    assert idx.N("a") == 4 and idx.Q("a") == pytest.approx(2 * R10 / 4)
    assert idx.N("root") == 4
    assert idx.pending_count("b") == 2 and idx.pending_count("a") == 0
    later = build(nodes, pending, now=now + ttl)
    assert later.live_pending == 0 and later.N("root") == 2


def test_pending_on_root_counts_on_root_only():
    idx = build(tree(("a", "root", "large", "correct", 1.0)), [PendingView("p", "root", 999.0)])
    assert idx.N("root") == 2 and idx.N("a") == 1


def test_infra_error_nodes_invisible():
    nodes = tree(
        ("a", "root", "large", "correct", 2.0),
        ("x", "a", "small", "infra_error", None),
        ("y", "x", "small", "infra_error", None),
        ("c", "y", "small", "wrong_output", None),  # evaluated child of an infra node
        ("d", "root", "large", "infra_error", None),
    )
    idx = build(nodes, [PendingView("p", "y", 999.0)])
    assert "x" not in idx and "y" not in idx and "d" not in idx
    assert len(idx) == 3 and idx.n_visible == 2
    assert idx.children_of("root") == ["a"]
    assert idx.children_of("a") == ["c"]  # re-hung under the nearest visible ancestor
    assert idx.parent_of("c") == "a"
    assert idx.N("a") == 3  # a, c, and the pending expansion of y (moved to a)
    assert idx.N("root") == 3
    with pytest.raises(KeyError, match="infrastructure"):
        idx.index_of("x")
    with pytest.raises(KeyError, match="unknown"):
        idx.index_of("nope")


def test_status_enum_rows():
    types = pytest.importorskip("adaexplore.evaluator.results")
    S = types.Status
    idx = build(tree(("a", "root", "large", S.correct, 10.0), ("b", "a", "small", S.infra_error, None)))
    assert idx.N("root") == 1 and idx.Q("a") == pytest.approx(R10)


def test_unsorted_input_is_sorted_once():
    nodes = tree(("a", "root", "large", "correct", 1.0), ("b", "a", "small", "wrong_output", None))
    idx = build(list(reversed(nodes)))
    assert idx.root_id == "root" and idx.N("root") == 2 and idx.children_of("a") == ["b"]


@pytest.mark.parametrize(
    "nodes, msg",
    [
        ([], "empty"),
        (tree(("a", "ghost", "large", "correct", 1.0)), "unknown parent"),
        (tree(("a", None, "large", "correct", 1.0)), "exactly one root"),
        (tree(("a", "root", "large", "correct", 1.0), ("a", "root", "large", "correct", 1.0)), "duplicate"),
        ([NodeView("a", "root", "large", "correct", 1.0, 1), NodeView("root", None, "root", None, None, 5)],
         "smallest seq"),
        ([NodeView("root", None, "root", None, None, 0), NodeView("b", "a", "small", "correct", 1.0, 1),
          NodeView("a", "root", "large", "correct", 1.0, 2)], "smaller seq"),
    ],
)
def test_malformed_trees_rejected(nodes, msg):
    with pytest.raises(ValueError, match=msg):
        build(nodes)


def test_chain_of_10000_small_steps_needs_no_recursion():
    rows = [("n1", "root", "large", "correct", 1.0)]
    rows += [(f"n{k}", f"n{k - 1}", "small", "correct", 1.0 + k / 1e4) for k in range(2, 10_001)]
    idx = build(tree(*rows))
    assert idx.N("root") == 10_000 and idx.N("n5000") == 5_001
    assert len(idx.path_to("n10000")) == 10_001


def test_with_pending_matches_a_full_build():
    import random

    from adaexplore.search import NodeView, PendingView, SearchParams, TreeIndex

    rng = random.Random(1)
    nodes = [NodeView("r", None, "root", None, None, 0)]
    for i in range(1, 300):
        nodes.append(NodeView(f"n{i}", nodes[rng.randrange(i)].id, rng.choice(["small", "large"]),
                              rng.choice(["correct", "import_error", "infra_error", None]), 1.5, i))
    now, params = time.time(), SearchParams()
    pending = [PendingView(f"x{k}", nodes[rng.randrange(300)].id, now - rng.choice([1, 5000])) for k in range(40)]
    full = TreeIndex.build(nodes, pending, params, now)
    fast = TreeIndex.build(nodes, [], params, now).with_pending(pending, now)
    assert fast is not None and fast.live_pending == full.live_pending
    for nd in nodes:
        if nd.id in full:
            assert fast.N(nd.id) == full.N(nd.id) and fast.pending_count(nd.id) == full.pending_count(nd.id)
