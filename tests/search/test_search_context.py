"""Small-step and large-step context, budget and the leaderboard."""

import random
from collections import Counter

from search_trees import P, build, tree

from adaexplore.search import (
    PendingView,
    SearchParams,
    best_nodes,
    budget_left,
    large_step_context,
    small_step_context,
)

# root -> A(large) -> a1 -> a2 -> B(large, widened from a2) -> b1 -> b2 -> b3 -> b4 -> b5 -> b6
CHAIN = tree(
    ("A", "root", "large", "correct", 1.5),
    ("a1", "A", "small", "correct", 2.5),
    ("a2", "a1", "small", "wrong_output", None),
    ("B", "a2", "large", "compile_error", None),
    *[(f"b{k}", "B" if k == 1 else f"b{k - 1}", "small", "correct", 1.0 + k / 10) for k in range(1, 7)],
)


def test_small_step_context_walks_the_segment():
    idx = build(CHAIN)
    assert small_step_context(idx, "b6", P) == ["b2", "b3", "b4", "b5", "b6"]  # newest 5, path order
    assert small_step_context(idx, "b3", P) == ["B", "b1", "b2", "b3"]  # stops at the large step
    assert small_step_context(idx, "a2", P) == ["A", "a1", "a2"]
    assert small_step_context(idx, "B", P) == ["B"]
    assert small_step_context(idx, "root", P) == []  # the root has no kernel
    assert small_step_context(idx, "b6", SearchParams(c_recent=2)) == ["b5", "b6"]


def test_small_step_context_on_long_chain_is_bounded():
    rows = [("n1", "root", "large", "correct", 1.0)]
    rows += [(f"n{k}", f"n{k - 1}", "small", "wrong_output", None) for k in range(2, 10_001)]
    idx = build(tree(*rows))
    assert small_step_context(idx, "n10000", P) == [f"n{k}" for k in range(9996, 10_001)]
    pool = large_step_context(idx, "n10000", P, random.Random(0))
    assert pool == ["n1"]


def test_large_step_pool_one_best_per_segment_on_the_path():
    idx = build(CHAIN)
    pool = large_step_context(idx, "b6", SearchParams(pool_topup=False), random.Random(0))
    # segment A: best correct is a1 (2.5x); segment B: b6 (1.6x); B itself failed
    assert pool == ["a1", "b6"]
    assert large_step_context(idx, "a2", SearchParams(pool_topup=False), random.Random(0)) == ["a1"]
    assert large_step_context(idx, "root", SearchParams(pool_topup=False), random.Random(0)) == []


def test_segment_best_includes_side_branches():
    nodes = tree(
        ("A", "root", "large", "correct", 1.0),
        ("a1", "A", "small", "correct", 1.2),
        ("side", "A", "small", "correct", 3.0),  # off the path, same segment
    )
    idx = build(nodes)
    assert large_step_context(idx, "a1", SearchParams(pool_topup=False), random.Random(0)) == ["side"]


def _deep_segments(n_segments):
    rows, parent = [], "root"
    for k in range(n_segments):
        rows.append((f"S{k}", parent, "large", "correct", 1.0 + k))
        rows.append((f"S{k}x", f"S{k}", "small", "compile_error", None))
        parent = f"S{k}x"
    return rows


def test_large_step_pool_sampled_down_keeps_the_best():
    idx = build(tree(*_deep_segments(9)))
    params = SearchParams(pool_topup=False, c_pool=3)
    seen = Counter()
    for seed in range(200):
        pool = large_step_context(idx, "S8x", params, random.Random(seed))
        assert len(pool) == 3 and len(set(pool)) == 3
        assert "S8" in pool  # the fastest is always kept
        order = [int(p[1:]) for p in pool]
        assert order == sorted(order)  # path order
        seen.update(pool)
    assert all(seen[f"S{k}"] > 0 for k in range(9))  # the rest is sampled


def _two_branches():
    rows = [("A", "root", "large", "correct", 1.0), ("a1", "A", "small", "correct", 1.1)]
    for k in range(6):  # six other lines of work, fast ones and slow ones
        rows.append((f"O{k}", "root", "large", "correct", 9.0 if k < 2 else 0.5))
        rows.append((f"O{k}s", f"O{k}", "small", "correct", 0.4))  # weaker: never the segment's best
        rows.append((f"O{k}w", f"O{k}", "small", "wrong_output", None))
    rows.append(("F", "root", "large", "compile_error", None))
    return tree(*rows)


TOPUP = SearchParams(pool_topup=True)


def test_the_top_up_is_off_by_default_as_in_the_methods_kernelbench_setup():
    idx = build(_two_branches())
    assert not P.pool_topup
    assert all(large_step_context(idx, "a1", P, random.Random(seed)) == ["a1"] for seed in range(20))


def test_topup_adds_only_correct_unique_strong_kernels_from_other_branches():
    idx = build(_two_branches())
    sizes = Counter()
    picked = Counter()
    for seed in range(400):
        pool = large_step_context(idx, "a1", TOPUP, random.Random(seed))
        assert pool[0] == "a1"  # the path's own segment first
        assert len(pool) == len(set(pool)) <= P.c_pool
        extra = pool[1:]
        assert all(e in {f"O{k}" for k in range(6)} for e in extra)  # best of each other segment
        sizes[len(extra)] += 1
        picked.update(extra)
    assert sizes[0] == 0 and sizes[1] > sizes[2] > sizes[3]  # truncated geometric, p = 0.5
    assert picked["O0"] + picked["O1"] > 5 * (picked["O2"] + picked["O3"])  # softmax over speedup


def test_topup_fills_an_empty_pool_and_respects_c_pool():
    idx = build(_two_branches())
    params = SearchParams(c_pool=2, topup_geometric_p=0.01, pool_topup=True)
    for seed in range(50):
        pool = large_step_context(idx, "root", params, random.Random(seed))
        assert 1 <= len(pool) <= 2 and len(set(pool)) == len(pool)
    # no other correct segment: nothing to add
    idx = build(tree(("A", "root", "large", "correct", 1.0), ("F", "root", "large", "oom", None)))
    assert large_step_context(idx, "A", TOPUP, random.Random(0)) == ["A"]


def test_topup_with_extreme_temperature_never_duplicates():
    idx = build(_two_branches())
    params = SearchParams(topup_temperature=1e-6, topup_geometric_p=0.01, c_pool=6, pool_topup=True)
    pool = large_step_context(idx, "a1", params, random.Random(0))
    assert len(pool) == len(set(pool))
    assert set(pool[1:3]) == {"O0", "O1"}


def test_budget_counts_work_in_flight():
    nodes = tree(
        ("a", "root", "large", "correct", 1.0),
        ("b", "a", "small", None, None),
        ("x", "a", "small", "infra_error", None),  # our fault: free
    )
    assert budget_left(build(nodes), P) is None
    params = SearchParams(step_budget=5)
    assert budget_left(build(nodes, params=params), params) == 3
    pend = [PendingView("p", "a", 999.0), PendingView("q", "a", 0.0)]  # one live, one expired
    assert budget_left(build(nodes, pend, params), params) == 2
    assert budget_left(build(nodes, pend, SearchParams(step_budget=1)), SearchParams(step_budget=1)) == 0


def test_best_nodes_order():
    nodes = tree(
        ("a", "root", "large", "correct", 2.0),
        ("b", "root", "large", "correct", None),
        ("c", "a", "small", "correct", 3.0),
        ("d", "a", "small", "wrong_output", 9.0),
        ("e", "root", "large", "correct", 2.0),
        ("f", "root", "large", "correct", None),
        ("g", "root", "large", "infra_error", None),
    )
    idx = build(nodes)
    assert best_nodes(idx, 10) == ["c", "a", "e", "b", "f"]
    assert best_nodes(idx, 2) == ["c", "a"]
    assert best_nodes(idx, 0) == []
