"""Selection (UCT + widening), virtual loss across concurrent selections, the action rule."""

import math
import random

import pytest
from search_trees import P, build, tree

from adaexplore.search import (
    PendingView,
    SearchParams,
    choose_action,
    paper_reward,
    select,
    uct_score,
    widen_score,
)

R1 = paper_reward("correct", 1.0)
R10 = paper_reward("correct", 10.0)



def pick(nodes, params=P, seed=0, pending=()):
    idx = build(nodes, pending, params)
    return select(idx, params, random.Random(seed))


def test_empty_tree_selects_root_for_a_large_step():
    sel = pick(tree())
    assert sel.node_id == "root" and sel.path == ["root"] and not sel.widened
    idx = build(tree())
    assert choose_action(idx, "root", P, random.Random(0)) == "large"


def test_uct_helpers():
    assert uct_score(0.2, 10, 0, 0.3) == math.inf  # unvisited child: always first
    assert uct_score(0.2, 4, 2, 0.3) == pytest.approx(0.2 + 0.3 * math.sqrt(math.log(4) / 2))
    assert widen_score(0.2, 4, 2, 0.3) == pytest.approx(0.2 + 0.3 * math.sqrt(math.log(4)) / 2)


def test_least_visited_child_wins_by_exploration():
    # a: 1.6 reward spread over 6 visits (mean 0.27); b: one visit, reward 0.05.
    rows = [("a", "root", "large", "correct", 10.0), ("b", "root", "large", "wrong_output", None)]
    rows += [(f"a{k}", "a", "small", "import_error", None) for k in range(5)]
    params = SearchParams(c_expand=0.0)
    idx = build(tree(*rows), params=params)
    ln = math.log(7)
    u_a = R10 / 6 + 0.3 * math.sqrt(ln / 6)
    u_b = 0.05 + 0.3 * math.sqrt(ln / 1)
    assert u_b > u_a
    sel = select(idx, params, random.Random(0))
    assert sel.path[:2] == ["root", "b"] and sel.node_id == "b"
    assert sel.scores["children"]["b"]["uct"] == pytest.approx(u_b)


def test_single_child_of_root_with_one_visit_descends():
    # N(root) = 1: ln 1 = 0, so widen score == UCT: a tie, and ties descend.
    sel = pick(tree(("a", "root", "large", "correct", 1.0)))
    assert sel.node_id == "a" and not sel.widened and sel.path == ["root", "a"]


def test_widens_root_when_widening_score_is_larger():
    nodes = tree(("a", "root", "large", "correct", 1.0), ("b", "a", "small", "wrong_output", None))
    q_a = (R1 + 0.05) / 2
    uct_a = q_a + 0.3 * math.sqrt(math.log(2) / 2)  # 0.4562
    widen = q_a + 0.3 * math.sqrt(math.log(2)) / 1  # 0.5293
    assert widen > uct_a
    sel = pick(nodes)
    assert sel.node_id == "root" and sel.widened and sel.path == ["root"]
    assert sel.scores["widen"] == pytest.approx(widen)
    assert sel.scores["children"]["a"]["uct"] == pytest.approx(uct_a)


def test_descends_when_best_child_beats_widening():
    nodes = tree(
        ("a", "root", "large", "correct", 10.0),
        ("b", "root", "large", "wrong_output", None),
        ("c", "root", "large", "import_error", None),
    )
    uct_a = R10 + 0.3 * math.sqrt(math.log(3))  # 1.9145
    widen = R10 + 0.3 * math.sqrt(math.log(3)) / 3  # 1.7048
    assert uct_a > widen
    sel = pick(nodes)
    assert sel.node_id == "a" and not sel.widened and sel.path == ["root", "a"]


def test_widens_an_inner_node():
    nodes = tree(
        ("a", "root", "large", "correct", 10.0),
        ("x1", "root", "large", "import_error", None),
        ("x2", "root", "large", "import_error", None),
        ("b", "a", "small", "correct", 10.0),
        ("d", "b", "small", "correct", 10.0),
    )
    # root: N=5, UCT(a) = 1.6 + 0.3 sqrt(ln5/3) = 1.8197 > widen(root) = 1.6 + 0.3 sqrt(ln5)/3 = 1.7269
    assert R10 + 0.3 * math.sqrt(math.log(5) / 3) > R10 + 0.3 * math.sqrt(math.log(5)) / 3
    # a: N=3, one child b with N=2: widen(a) = 1.6 + 0.3 sqrt(ln3) = 1.9144 > UCT(b) = 1.8223
    widen_a = R10 + 0.3 * math.sqrt(math.log(3))
    uct_b = R10 + 0.3 * math.sqrt(math.log(3) / 2)
    sel = pick(nodes)
    assert sel.node_id == "a" and sel.widened and sel.path == ["root", "a"]
    assert sel.scores["at"] == "a" and sel.scores["decision"] == "widen"
    assert sel.scores["widen"] == pytest.approx(widen_a)
    assert sel.scores["children"]["b"]["uct"] == pytest.approx(uct_b)


def test_ties_are_broken_by_rng_and_reproducibly():
    nodes = tree(*[(f"c{k}", "root", "large", "import_error", None) for k in range(4)])
    params = SearchParams(c_expand=0.0)  # never widen: isolate the tie between children
    picks = {pick(nodes, params, seed).node_id for seed in range(40)}
    assert picks == {"c0", "c1", "c2", "c3"}
    assert pick(nodes, params, 7).node_id == pick(nodes, params, 7).node_id


def test_all_failure_tree_still_selectable_and_repairable():
    rows = [(f"f{k}", "root", "large", "import_error", None) for k in range(3)]
    rows += [(f"g{k}", "f0", "small", "syntax_error", None) for k in range(2)]
    nodes = tree(*rows)
    idx = build(nodes)
    seen = set()
    for seed in range(30):
        sel = select(idx, P, random.Random(seed))
        assert sel.node_id in idx
        seen.add(sel.node_id)
    assert seen - {"root"}  # failed nodes are selected (small step = the repair path)
    assert choose_action(idx, "f1", P, random.Random(1)) in ("large", "small")


def test_infra_error_nodes_never_selected():
    nodes = tree(
        ("a", "root", "large", "correct", 1.0),
        ("x", "root", "large", "infra_error", None),
        ("y", "root", "large", "infra_error", None),
    )
    for seed in range(20):
        sel = pick(nodes, seed=seed)
        assert sel.node_id in ("a", "root") and "x" not in sel.path and "y" not in sel.path


def test_children_still_being_evaluated_are_not_descended_into():
    nodes = tree(("a", "root", "large", None, None), ("b", "root", "large", None, None))
    sel = pick(nodes, SearchParams(c_expand=0.0))
    assert sel.node_id == "root" and sel.widened  # nothing to build on yet: widen the root
    nodes = tree(("a", "root", "large", "correct", 1.0), ("b", "a", "small", None, None))
    sel = pick(nodes, SearchParams(c_expand=0.0))
    assert sel.node_id == "a" and sel.widened


def test_virtual_loss_spreads_concurrent_selections():
    rows = []
    for k in range(6):  # six lines of work of similar quality
        rows.append((f"L{k}", "root", "large", "correct", 2.0 + 0.1 * k))
        rows.append((f"L{k}s", f"L{k}", "small", "correct", 2.0 + 0.1 * k))
    nodes = tree(*rows)
    pending = []
    rng = random.Random(3)
    chosen = []
    for k in range(8):  # eight agents call expand_node before any of them reports back
        idx = build(nodes, pending)
        sel = select(idx, P, rng)
        chosen.append(sel.node_id)
        pending.append(PendingView(f"p{k}", sel.node_id, 999.0))
    assert len(set(chosen)) >= 4, chosen
    # without virtual loss every agent lands on the same node
    idx = build(nodes)
    alone = {select(idx, P, random.Random(3)).node_id for _ in range(8)}
    assert len(alone) == 1
    # once the expansions expire they no longer hold anyone back
    late = build(nodes, pending, now=999.0 + P.expansion_ttl_s)
    assert late.live_pending == 0


def test_action_rule():
    nodes = tree(
        ("a", "root", "large", "correct", 1.0),
        ("s1", "a", "small", "correct", 1.0),
        ("s2", "a", "small", "wrong_output", None),
        ("b", "root", "large", "correct", 1.0),
        ("bs", "b", "small", "correct", 1.0),
        ("bl", "b", "large", "correct", 1.0),
        ("bx", "b", "small", "infra_error", None),  # invisible: does not count
    )
    idx = build(nodes)
    rng = random.Random(0)
    assert all(choose_action(idx, "root", P, rng) == "large" for _ in range(50))
    assert all(choose_action(idx, "a", P, rng) == "large" for _ in range(50))  # 2 small children
    freq = sum(choose_action(idx, "b", P, rng) == "large" for _ in range(20_000)) / 20_000
    assert freq == pytest.approx(0.2, abs=0.015)
    freq = sum(choose_action(idx, "s1", SearchParams(p_large=0.7), rng) == "large" for _ in range(20_000)) / 20_000
    assert freq == pytest.approx(0.7, abs=0.015)
    assert choose_action(idx, "b", SearchParams(max_small_children=1), rng) == "large"


def test_chain_selection_is_iterative():
    rows = [("n1", "root", "large", "correct", 1.0)]
    rows += [(f"n{k}", f"n{k - 1}", "small", "correct", 1.0) for k in range(2, 10_001)]
    params = SearchParams(c_expand=0.0)  # never widen: walk the whole chain
    sel = pick(tree(*rows), params)
    assert sel.node_id == "n10000" and len(sel.path) == 10_001


def test_a_widen_or_descend_tie_that_float_rounding_tips_toward_widening_still_descends():
    # root -> a -> b -> c, all equally wrong: N(root) = N(a) = 3, one child. With
    # c_expand = c_explore / sqrt(3) both scores are equal on paper; in floats widening is
    # larger by one ulp. The tie must be decided the same way as an exact one: descend.
    nodes = tree(("a", "root", "large", "wrong_output", None), ("b", "a", "small", "wrong_output", None),
                 ("c", "b", "small", "wrong_output", None))
    params = SearchParams(c_explore=0.7, c_expand=0.7 / math.sqrt(3))
    idx = build(nodes, [], params)
    q = idx.Q("a")
    uct_a = uct_score(q, 3, 3, params.c_explore)
    widen = widen_score(q, 3, 1, params.c_expand)
    assert 0.0 < widen - uct_a < 1e-12  # the rounding this test is about
    sel = pick(nodes, params)
    assert sel.path[:2] == ["root", "a"] and not (sel.widened and sel.node_id == "root")


def test_pending_small_steps_count_against_the_two_small_children_rule():
    nodes = tree(("a", "root", "large", "correct", 1.0), ("s1", "a", "small", "correct", 1.0))
    always_small = SearchParams(p_large=0.0)
    # one small child made and none pending: the next step may be small
    assert choose_action(build(nodes, [], always_small), "a", always_small, random.Random(0)) == "small"
    # one made, one promised to another agent: a third small step is not allowed
    pending = [PendingView("x1", "a", 999.0, "small")]
    assert choose_action(build(nodes, pending, always_small), "a", always_small, random.Random(0)) == "large"
    # a pending large step does not use up the small-step allowance
    pending = [PendingView("x1", "a", 999.0, "large")]
    assert choose_action(build(nodes, pending, always_small), "a", always_small, random.Random(0)) == "small"
    # the same through with_pending, the path the server takes
    idx = build(nodes, [], always_small).with_pending([PendingView("x1", "a", 999.0, "small")], 999.0)
    assert choose_action(idx, "a", always_small, random.Random(0)) == "large"
