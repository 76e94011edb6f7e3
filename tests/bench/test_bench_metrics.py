"""The bench's metrics on a known set of results, computed by hand."""

import math

import pytest

from adaexplore.server.bench.metrics import aggregate, best_so_far, quantiles, task_best, verdict_shares
from adaexplore.server.bench.state import StepRecord


def step(task, n, status, eager=None, compiled=None):
    return StepRecord(task=task, step=n, status=status, node_id=f"{task}-{n}", speedup=eager,
                      speedup_compile=compiled)


# A: fails, then 1.2x, then 1.6x (0.8x and 1.25x against torch.compile); B: wrong, then 0.5x (0.4x);
# C: never correct; D: 20x at once (12x against torch.compile).
RESULTS = {
    "A": [step("A", 1, "compile_error"), step("A", 2, "correct", 1.2, 0.8), step("A", 3, "correct", 1.6, 1.25),
          step("A", 4, "wrong_output")],
    "B": [step("B", 1, "wrong_output"), step("B", 2, "correct", 0.5, 0.4)],
    "C": [step("C", 1, "compile_error"), step("C", 2, "runtime_error")],
    "D": [step("D", 1, "correct", 20.0, 12.0), step("D", 2, "no_code")],
}


def bests(baseline):
    return [task_best(t, s, baseline) for t, s in RESULTS.items()]


def test_each_task_reports_its_fastest_correct_kernel_and_the_step_it_came_at():
    a, b, c, d = bests("eager")
    assert (a.correct, a.node_id, a.speedup, a.found_at) == (True, "A-3", 1.6, 3)
    assert (b.node_id, b.found_at) == ("B-2", 2)
    assert (c.correct, c.node_id, c.speedup, c.found_at) == (False, None, None, None)
    assert (d.speedup, d.speedup_compile, d.found_at, d.steps) == (20.0, 12.0, 1, 2)


def test_summary_against_eager_matches_the_hand_computed_numbers():
    agg = aggregate(bests("eager"), "eager")
    assert agg.tasks == 4 and agg.accuracy == 0.75
    assert agg.fast_p == {"1": 0.5, "1.2": 0.5, "1.5": 0.5, "2": 0.25}
    assert agg.geomean_tasks == 3 and agg.geomean_speedup == pytest.approx(16 ** (1 / 3))  # 1.6 * 0.5 * 20
    assert agg.mean_speedup_clip10 == pytest.approx((1.6 + 0.5 + 0 + 10) / 4)  # D clipped, C counts 0


def test_summary_against_torch_compile_uses_the_compiled_speedups():
    agg = aggregate(bests("compile"), "compile")
    assert agg.accuracy == 0.75
    assert agg.fast_p == {"1": 0.5, "1.2": 0.5, "1.5": 0.25, "2": 0.25}
    assert agg.geomean_speedup == pytest.approx(6 ** (1 / 3))  # 1.25 * 0.4 * 12
    assert agg.mean_speedup_clip10 == pytest.approx((1.25 + 0.4 + 0 + 10) / 4)


def test_fast_p_is_strictly_faster_and_an_untimed_correct_kernel_counts_as_correct_only():
    exact = [task_best("E", [step("E", 1, "correct", 1.0, 1.0)])]
    assert aggregate(exact).fast_p["1"] == 0.0
    untimed = [task_best("F", [step("F", 1, "correct"), step("F", 2, "correct")])]
    agg = aggregate(untimed)
    assert agg.accuracy == 1.0 and agg.geomean_speedup is None and agg.mean_speedup_clip10 == 0.0
    assert untimed[0].found_at == 1


def test_best_speedup_so_far_is_a_running_maximum_with_zero_before_the_first_correct_kernel():
    assert best_so_far(RESULTS["A"], 5) == [0.0, 1.2, 1.6, 1.6, 1.6]
    assert best_so_far(RESULTS["C"], 2) == [0.0, 0.0]
    assert best_so_far(RESULTS["A"], 3, "compile") == [0.0, 0.8, 1.25]


def test_quantiles_interpolate_and_verdict_shares_sum_to_one():
    assert quantiles([1.0, 2.0, 3.0, 4.0]) == [1.75, 2.5, 3.25]
    assert all(math.isnan(q) for q in quantiles([]))
    shares = verdict_shares(s for steps in RESULTS.values() for s in steps)
    assert shares["correct"] == pytest.approx(4 / 10) and sum(shares.values()) == pytest.approx(1.0)
