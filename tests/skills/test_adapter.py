"""The memory's domain adapter: it ships with the package, maps vectors into unit vectors near the model's own,
tags what it made so a changed adapter re-encodes stored rules, and a broken one falls back to lexical proposals."""

import sqlite3

import numpy as np
import pytest

from adaexplore.skills import adapter, semantic
from adaexplore.skills.skill_store import SkillStore

SEMANTIC = semantic.installed()


@pytest.fixture
def packaged(monkeypatch):
    monkeypatch.delenv(adapter.ENV, raising=False)


def random_units(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, semantic.DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_packaged_adapter_is_a_square_map_near_the_models_own_space(packaged):
    assert adapter.path() == adapter.PACKAGED and adapter.PACKAGED.is_file()
    matrix, digest = adapter.load()
    assert matrix.shape == (semantic.DIM, semantic.DIM) and len(digest) == 12
    x = random_units(50)
    y = adapter.apply(x)
    assert np.allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-5)
    # Near, not equal: the map moves vectors, but a wording stays closest to itself among strangers.
    cos_same = (x * y).sum(1)
    assert cos_same.min() > 0.5 and cos_same.max() < 0.9999
    assert (np.argmax(y @ adapter.apply(x).T, axis=1) == np.arange(50)).all()


def test_turned_off_the_adapter_leaves_vectors_and_their_tag_alone(monkeypatch):
    monkeypatch.setenv(adapter.ENV, "off")
    x = random_units(3)
    assert adapter.load() is None and adapter.apply(x) is x
    assert adapter.kind("model/views") == "model/views"


def test_each_adapter_file_gives_its_vectors_their_own_tag(monkeypatch, tmp_path, packaged):
    packaged_kind = adapter.kind("model/views")
    mine = tmp_path / "mine.npy"
    np.save(mine, np.zeros((semantic.DIM, semantic.DIM), dtype=np.float16))
    monkeypatch.setenv(adapter.ENV, str(mine))
    assert adapter.kind("model/views") not in (packaged_kind, "model/views")
    x = random_units(4)
    assert np.allclose(adapter.apply(x), x, atol=1e-6)  # a zero D is the identity


@pytest.mark.parametrize("content", [None, "not an array", np.zeros((3, 4))])
def test_a_named_adapter_that_is_missing_or_not_a_square_matrix_is_refused(monkeypatch, tmp_path, content):
    bad = tmp_path / "bad.npy"
    if isinstance(content, str):
        bad.write_text(content)
    elif content is not None:
        np.save(bad, content)
    monkeypatch.setenv(adapter.ENV, str(bad))
    with pytest.raises((OSError, ValueError)):
        adapter.load()
    assert semantic.vectors_kind().endswith("adapter-unreadable")


def stored_kinds(db, rule_id: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {k for (k,) in conn.execute("SELECT model FROM skill_rule_vectors WHERE rule_id=?", (rule_id,))}


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_rules_stored_through_another_adapter_are_encoded_again_before_they_are_compared(monkeypatch, tmp_path,
                                                                                       packaged):
    monkeypatch.setenv(semantic.ENV, "on")
    db = tmp_path / "m.db"
    store = SkillStore(db)
    rid = store.record_rule(text="Mask the tail load when N is not a multiple of BLOCK.", who="a",
                            task_id="t1", closest_k=0).rule_id
    assert stored_kinds(db, rid) == {semantic.vectors_kind()}
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((semantic.DIM, semantic.DIM), dtype=np.float16))
    monkeypatch.setenv(adapter.ENV, str(other))
    after = semantic.vectors_kind()
    close = store.closest_rules("Guard the last partial block's load with a mask.", k=3)
    assert [c.rule_id for c in close] == [rid]
    assert stored_kinds(db, rid) == {after}


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_an_unreadable_adapter_turns_embeddings_off_with_why_and_proposals_still_answer(monkeypatch, tmp_path):
    monkeypatch.setenv(semantic.ENV, "on")
    monkeypatch.setenv(adapter.ENV, str(tmp_path / "gone.npy"))
    monkeypatch.setattr(semantic, "_model", None)
    monkeypatch.setattr(semantic, "_failed", None)
    store = SkillStore(tmp_path / "m.db")
    rid = store.record_rule(text="tl.tanh does not exist; use 2*tl.sigmoid(2*x) - 1.", who="a", task_id="t1",
                            closest_k=0).rule_id
    close = store.closest_rules("There is no tl.tanh in triton.language.", k=3)
    assert [c.rule_id for c in close] == [rid]
    assert not semantic.enabled()
    assert semantic.mode().startswith("lexical only (the embedding model failed to load: FileNotFoundError")
