"""Reward values at the boundaries, for every status class."""

import math

import pytest

from adaexplore.search import REWARD_MAX, REWARDS, SearchParams, log_speedup_reward, paper_reward, reward_for

LOAD_FAILURES = ["syntax_error", "import_error", "no_triton_kernel", "cheat_detected", "infra_error"]
WRONG = ["wrong_output", "shape_mismatch", "nan_output"]
IMPORTED_THEN_FAILED = ["compile_error", "runtime_error", "cuda_error", "timeout", "oom"]


@pytest.mark.parametrize("status", LOAD_FAILURES + [None])
@pytest.mark.parametrize("fn", [paper_reward, log_speedup_reward])
def test_failures_score_zero(fn, status):
    assert fn(status, None) == 0.0
    assert fn(status, 5.0) == 0.0  # a speedup on a failure means nothing


@pytest.mark.parametrize("status", WRONG + IMPORTED_THEN_FAILED)
@pytest.mark.parametrize("fn", [paper_reward, log_speedup_reward])
def test_a_candidate_that_imports_but_is_not_correct_scores_005_as_in_the_method(fn, status):
    assert fn(status, None) == 0.05
    assert fn(status, 3.0) == 0.05


@pytest.mark.parametrize(
    "speedup, expected",
    [
        (0.1, 0.4),
        (1.0, 0.4 + 1.2 * 0.9 / 9.9),
        (10.0, 1.6),
        (0.01, 0.4),  # clipped up to 0.1
        (0.0, 0.4),
        (912.0, 1.6),  # clipped down to 10
        (math.inf, 1.6),
        (None, 0.4 + 1.2 * 0.9 / 9.9),  # no GPU timing: treated as 1x
        (math.nan, 0.4 + 1.2 * 0.9 / 9.9),
    ],
)
def test_paper_reward_correct(speedup, expected):
    assert paper_reward("correct", speedup) == pytest.approx(expected, abs=1e-12)


def test_paper_reward_at_1x_is_0509():
    assert paper_reward("correct", 1.0) == pytest.approx(0.509090909, abs=1e-8)


@pytest.mark.parametrize(
    "speedup, expected",
    [(0.1, 0.1), (0.01, 0.1), (1.0, 0.55), (10.0, 1.0), (100.0, 1.0), (None, 0.55),
     (0.5, 0.1 + 0.45 * (math.log10(0.5) + 1))],
)
def test_log_speedup_reward_correct(speedup, expected):
    assert log_speedup_reward("correct", speedup) == pytest.approx(expected, abs=1e-12)


def test_log_speedup_separates_half_from_one_better_than_paper():
    def gap(fn, name):
        return (fn("correct", 1.0) - fn("correct", 0.5)) / REWARD_MAX[name]

    assert gap(log_speedup_reward, "log_speedup") > 3 * gap(paper_reward, "paper")


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_rewards_monotone_and_bounded(name):
    fn = REWARDS[name]
    grid = [0.05 * 1.1**k for k in range(80)]
    values = [fn("correct", s) for s in grid]
    assert values == sorted(values)
    assert all(0.0 <= v <= REWARD_MAX[name] + 1e-12 for v in values)
    # a correct kernel always beats a wrong one, which beats one that does not load
    assert min(values) > fn("wrong_output", None) > fn("import_error", None)


def test_reward_for_uses_named_function():
    assert reward_for(SearchParams(), "correct", 10.0) == pytest.approx(1.6)
    assert reward_for(SearchParams(reward="log_speedup"), "correct", 10.0) == pytest.approx(1.0)


def test_status_enum_accepted():
    enum = pytest.importorskip("adaexplore.evaluator.results")
    assert paper_reward(enum.Status.correct, 10.0) == pytest.approx(1.6)
    assert paper_reward(enum.Status.nan_output, None) == 0.05
    assert paper_reward(enum.Status.import_error, None) == 0.0


def test_params_reject_unknown_and_out_of_range():
    with pytest.raises(ValueError):
        SearchParams(c_explre=0.1)
    with pytest.raises(ValueError):
        SearchParams(p_large=1.5)
    with pytest.raises(ValueError):
        SearchParams(reward="linear")


def test_the_reward_table_names_every_status():
    from adaexplore.evaluator.results import Status
    from adaexplore.search.rewards import REWARD_TABLE

    for st in Status:
        assert st.value in REWARD_TABLE, st
