"""How wordings are cut into views and how packed views are compared: pure, no model needed."""

from array import array

import pytest

from adaexplore.skills import semantic


def unit(*xs: float) -> bytes:
    v = [0.0] * semantic.DIM
    for i, x in enumerate(xs):
        v[i] = x
    norm = sum(x * x for x in v) ** 0.5
    return array("f", [x / norm for x in v]).tobytes()


def test_a_wording_of_several_sentences_is_seen_whole_and_sentence_by_sentence():
    text = "The histogram came out as garbage counts.  Zero the bins with torch.zeros before tl.atomic_add."
    assert semantic.views(text) == [
        "The histogram came out as garbage counts. Zero the bins with torch.zeros before tl.atomic_add.",
        "The histogram came out as garbage counts.",
        "Zero the bins with torch.zeros before tl.atomic_add."]


def test_a_one_sentence_wording_or_one_with_short_fragments_is_one_view():
    assert semantic.views("Always mask the tail load when N is not a multiple of BLOCK.") == [
        "Always mask the tail load when N is not a multiple of BLOCK."]
    assert len(semantic.views("Use tl.where. Not if.")) == 1  # fragments under four words are not views


def test_an_entry_scores_the_mean_of_whole_against_whole_and_its_best_pair_of_views():
    query = unit(1, 0) + unit(0, 1)            # whole, then one sentence
    close_sentence = unit(1, 1) + unit(0, 1)   # whole differs; one sentence is the query's second
    far = unit(0, 0, 1)
    got = semantic.best_cosines(query, [[close_sentence], [far], []])
    whole = 2 ** -0.5
    assert got[0] == pytest.approx(0.5 * whole + 0.5 * 1.0, abs=1e-6)
    assert got[1] == pytest.approx(0.0, abs=1e-6)
    assert got[2] == 0.0


def test_a_rule_of_one_wording_scores_that_wording_and_one_of_several_the_mean_of_its_best_two():
    query = unit(1, 0)
    got = semantic.best_cosines(query, [[unit(1, 0)], [unit(0, 1), unit(1, 0), unit(1, 1)], [unit(0, 1)]])
    assert got == [pytest.approx(1.0, abs=1e-6), pytest.approx(0.5 * (1.0 + 2 ** -0.5), abs=1e-6),
                   pytest.approx(0.0, abs=1e-6)]


def test_a_rule_whose_wordings_agree_outranks_one_that_a_single_wording_matches_by_chance():
    query = unit(1, 0)
    agreeing = [unit(1, 0.3), unit(1, 0.4)]      # both wordings close to the query
    incidental = [unit(1, 0.1), unit(0, 1)]      # one very close, the other about something else
    got = semantic.best_cosines(query, [agreeing, incidental])
    assert got[0] > got[1]
