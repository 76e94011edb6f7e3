import pytest

from adaexplore.skills.render import estimate_tokens
from adaexplore.skills.skill_store import SkillStore, UnknownRuleError

F32 = "Do not call tl.float32(x); use x.to(tl.float32)"
I32 = "Never call tl.int32(v) to cast a value; use v.to(tl.int32) instead"
F16 = "tl.float16(y) is not callable; convert with y.to(tl.float16)"
WHERE = "Use tl.where(cond, a, b) instead of a Python if on tensor values"
MAXR = "Use tl.maximum(a, b) instead of Python max() on tensors"
SOFTMAX = "Subtract the row max (tl.max) before tl.exp in a softmax, do not exponentiate raw logits"


@pytest.fixture
def store(tmp_path):
    return SkillStore(tmp_path / "mem.db")


DTYPE_ERROR = "TypeError: 'dtype' object is not callable"


def test_merge_and_distinct_occasions(store):
    a = store.record_rule(text=F32, who="alice", task_id="t1", error_excerpt=DTYPE_ERROR)
    assert not a.merged and a.count == 1 and a.rule_id.startswith("r-") and len(a.rule_id) == 12
    again = store.record_rule(text=F32, who="alice", task_id="t1")
    assert again.rule_id == a.rule_id and again.count == 1  # same task twice counts once
    # the same error, naming the construct both forbid, with the same fix: one lesson, merged without asking
    b = store.record_rule(text=I32, who="bob", task_id="t2", error_excerpt=DTYPE_ERROR)
    assert b.merged and b.rule_id == a.rule_id and b.count == 2 and not b.active
    assert "same error" in b.reason and b.merged_into_text == F32
    c = store.record_rule(text=F16, who="carol", task_id="t3", same_as=a.rule_id)
    assert c.count == 3 and c.active
    assert c.reason
    view = store.get_rule(a.rule_id)
    assert view.tasks == ["t1", "t2", "t3"] and view.who == ["alice", "bob", "carol"]
    assert view.first_seen <= view.last_seen


def test_the_same_construct_and_fix_without_the_same_error_is_proposed_not_merged(store):
    a = store.record_rule(text=F32, who="alice", task_id="t1")
    b = store.record_rule(text=I32, who="bob", task_id="t2")
    assert not b.merged and b.rule_id != a.rule_id
    assert b.closest[0].rule_id == a.rule_id and "same forbidden construct" in b.closest[0].why


def test_untied_rules_count_per_client(store):
    a = store.record_rule(text=F32, who="alice")
    assert store.record_rule(text=F32, who="alice").count == 1
    assert store.record_rule(text=F32, who="bob").count == 2 == store.get_rule(a.rule_id).count


def test_near_miss_rules_stay_apart(store):
    w = store.record_rule(text=WHERE, who="a", task_id="t1")
    m = store.record_rule(text=MAXR, who="a", task_id="t2")
    assert w.rule_id != m.rule_id and not m.merged


def test_threshold_configurable(tmp_path):
    s = SkillStore(tmp_path / "m.db", threshold=1)
    assert s.record_rule(text=F32, who="a", task_id="t1").active
    s5 = SkillStore(tmp_path / "m.db", threshold=5)
    assert not s5.get_rule(s.memory().rules[0].id).active


def test_best_wording_kept(store):
    long = "Never call tl.float32(x) on a value inside a kernel, it is a dtype; cast with x.to(tl.float32)"
    r = store.record_rule(text=long, who="a", task_id="t1")
    out = store.record_rule(text=F32, who="b", task_id="t2", same_as=r.rule_id)
    assert out.rule_id == r.rule_id and store.get_rule(r.rule_id).text == F32
    assert out.merged_into_text == long  # the answer names the rule as it was stored, not the new wording


def test_experiences_skip_and_link(store):
    assert store.record_experience(task_id="t", node_id="n", status="infra_error", error_class="X", message="y") is None
    assert store.record_experience(task_id="t", node_id="n", status="wrong_output", error_class="X", message="y") is None
    assert store.record_experience(task_id="t", node_id="n", status="correct", error_class="X", message="y") is None
    msg = "at 3:8: y = tl.float32(x) TypeError(\"'dtype' object is not callable\")"
    e1 = store.record_experience(task_id="t1", node_id="n1", status="compile_error", error_class="CompilationError",
                                 message=msg)
    mem = store.memory(include_signatures=True)
    assert mem.frequent_signatures and mem.frequent_signatures[0].count == 1
    r = store.record_rule(text=F32, who="a", task_id="t1", node_id="n1")
    assert store.experience_rule(e1) == r.rule_id
    assert not store.memory(include_signatures=True).frequent_signatures
    # a rule tied to the same failure signature in other words is proposed first, not merged: the agent decides
    store.record_experience(task_id="t2", node_id="n2", status="compile_error", error_class="CompilationError",
                            message=msg.replace("x)", "acc)"))
    r2 = store.record_rule(text="Convert dtypes with the .to method", who="b", task_id="t2", node_id="n2")
    assert r2.rule_id != r.rule_id and not r2.merged
    assert r2.closest[0].rule_id == r.rule_id and "same failure signature" in r2.closest[0].why


def test_contradiction(tmp_path):
    s = SkillStore(tmp_path / "m.db", threshold=1, contradiction_min=2)
    r = s.record_rule(text=MAXR, who="a", task_id="t1")
    cast = s.record_rule(text=F32, who="a", task_id="t1")
    ok_src = "import triton\n@triton.jit\ndef k(x_ptr):\n    x = tl.load(x_ptr)\n    y = x.to(tl.float32)\n    z = max(x, y)\n"
    grid_only = "def launch(n):\n    return (max(1, n),)\n@triton.jit\ndef k(x):\n    pass\n"
    assert s.note_correct_kernel(task_id="t1", node_id="n1", source=ok_src) == [r.rule_id]  # x.to(...) is no call
    assert s.note_correct_kernel(task_id="t2", node_id="n2", source=grid_only) == []  # max() outside kernels
    assert not s.get_rule(r.rule_id).contradicted
    s.note_correct_kernel(task_id="t1", node_id="n1", source=ok_src)  # the same kernel again counts once
    assert not s.get_rule(r.rule_id).contradicted
    s.note_correct_kernel(task_id="t3", node_id="n3", source=ok_src + "\n# another kernel\n")
    v = s.get_rule(r.rule_id)
    assert v.contradicted and not v.active
    assert r.rule_id not in [x.id for x in s.memory().rules]
    assert s.get_rule(cast.rule_id).active


def test_retire_and_edit(store):
    r = store.record_rule(text=F32, who="a", task_id="t1")
    for t in ("t2", "t3"):
        store.record_rule(text=F32, who="a", task_id=t)
    e = store.edit(r.rule_id, "Cast with x.to(tl.float32); never call tl.float32(x)", who="lead")
    assert e.text.startswith("Cast with") and e.active
    store.record_rule(text=F32, who="b", task_id="t4")  # merged, edited wording is kept
    assert store.get_rule(r.rule_id).text.startswith("Cast with")
    store.retire(r.rule_id, who="lead")
    assert store.get_rule(r.rule_id).retired and not store.memory().rules
    again = store.record_rule(text=F32, who="c", task_id="t9")
    assert again.rule_id == r.rule_id and not again.active
    with pytest.raises(UnknownRuleError):
        store.get_rule("r-0000000000")
    with pytest.raises(UnknownRuleError):
        store.retire("r-0000000000", who="x")


SOFTMAX_TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


def test_relevance_ranking(tmp_path):
    s = SkillStore(tmp_path / "m.db", threshold=1)
    for i in range(5):
        s.record_rule(text=F32, who="a", task_id=f"t{i}")
    for i in range(3):
        s.record_rule(text=WHERE, who="a", task_id=f"t{i}")
    soft = s.record_rule(text=SOFTMAX, who="a", task_id="t0")
    ranked = s.memory(task_source=SOFTMAX_TASK).rules
    assert ranked[0].id == soft.rule_id
    plain = s.memory().rules
    assert plain[0].count == 5  # without a task: most frequent first


def test_token_budget(tmp_path):
    s = SkillStore(tmp_path / "m.db", threshold=1)
    apis = ["tl.load", "tl.store", "tl.dot", "tl.sum", "tl.max", "tl.exp", "tl.where", "tl.arange", "tl.cumsum",
            "tl.atomic_add", "tl.program_id", "tl.reshape", "tl.trans", "tl.sqrt", "tl.log", "tl.abs"]
    for i, api in enumerate(apis):
        s.record_rule(text=f"Do not pass a python list to {api}; convert it to a block of values number {i} first",
                      who="a", task_id=f"t{i}")
    full = s.memory(token_budget=100000)
    assert len(full.rules) == len(apis) and "left out" not in full.rendered
    small = s.memory(token_budget=120)
    assert estimate_tokens(small.rendered) <= 120
    assert "more rules left out" in small.rendered
    assert small.rendered.count("\n1. ") == 1


def test_export_import_round_trip(tmp_path):
    a = SkillStore(tmp_path / "a.db")
    a.record_rule(text=F32, who="alice", task_id="t1", error_excerpt="TypeError: 'dtype' object is not callable")
    a.record_rule(text=I32, who="bob", task_id="t2", error_excerpt="TypeError: 'dtype' object is not callable")
    a.record_rule(text=WHERE, who="bob", task_id="t2")
    a.record_experience(task_id="t1", node_id="n1", status="compile_error", error_class="TypeError",
                        message="'dtype' object is not callable")
    data = a.export()
    import json
    json.dumps(data)
    b = SkillStore(tmp_path / "b.db")
    b.record_rule(text=F16, who="carol", task_id="t3", error_excerpt="TypeError: 'dtype' object is not callable")
    b.record_rule(text=F32, who="alice", task_id="t1", error_excerpt="TypeError: 'dtype' object is not callable")
    # (the same occasion exists on both sides)
    summary = b.import_(data, who="importer")
    assert summary.rules_merged >= 1 and summary.rules_added == 1 and summary.experiences_added == 1
    rules = {r.text: r for r in b.memory(include_candidates=True).rules}
    assert len(rules) == 2
    cast = next(r for r in rules.values() if r.construct and "float" in r.construct or "int32" in (r.construct or ""))
    assert cast.count == 3 and cast.tasks == ["t1", "t2", "t3"] and cast.active
    again = b.import_(data, who="importer")
    assert again.evidence_added == 0 and again.experiences_added == 0
    assert len(b.memory(include_candidates=True).rules) == 2
    assert b.get_rule(cast.id).count == 3
    fresh = SkillStore(tmp_path / "c.db")
    fresh.import_(data, who="x")
    assert sorted(r["id"] for r in fresh.export()["rules"]) == sorted(r["id"] for r in data["rules"])


def test_a_rule_with_the_key_of_two_clusters_joins_them_and_says_so(tmp_path):
    """Merging does not depend on feed order: a rule whose keys match two separate rules joins them, and the
    answer lists the rule it absorbed."""
    s = SkillStore(tmp_path / "m.db")
    first = "at 3:8: y = tl.float32(x) TypeError(\"'dtype' object is not callable\")"
    second = "at 5:12: y = tl.float16(v) AttributeError: 'dtype' has no attribute '__call__'"
    a = s.record_rule(text=F32, who="a", task_id="t1", error_excerpt=f"CompilationError: {first}")
    b = s.record_rule(text=I32, who="a", task_id="t2", error_excerpt=f"CompilationError: {second}")
    assert a.rule_id != b.rule_id  # the same construct and fix, but two different errors: proposed, not merged
    for message in (first, second):  # one node that failed both ways
        s.record_experience(task_id="t3", node_id="n3", status="compile_error", error_class="CompilationError",
                            message=message)
    c = s.record_rule(text=F16, who="a", task_id="t3", node_id="n3")
    assert c.merged and len(c.merged_rules) == 2 and "also joined" in c.reason
    assert s.resolve(a.rule_id) == s.resolve(b.rule_id) == c.rule_id and c.count == 3


def test_six_different_lessons_stay_six_rules(tmp_path):
    """Different mistakes never merge on a shared coarse failure, and each keeps its own wording."""
    s = SkillStore(tmp_path / "m.db")
    coarse = "CompilationError: the kernel failed to compile"
    lessons = ["tl.tanh does not exist; use 2*tl.sigmoid(2*x)-1",
               "libdevice.tanh returns None in the interpreter; build tanh from tl.exp",
               "An atomic_add buffer must be torch.zeros, not torch.empty",
               "tl.arange bounds must be constexpr",
               "nn.Linear's weight is (out, in); transpose it for x @ W",
               "tl.arange sizes must be powers of two"]
    outs = [s.record_rule(text=t, who="a", task_id=f"t{k}", error_excerpt=coarse) for k, t in enumerate(lessons)]
    assert len({o.rule_id for o in outs}) == 6 and not any(o.merged for o in outs)
    assert sorted(r.text for r in s.memory(include_candidates=True).rules) == sorted(lessons)


def test_memory_view_follows_every_write(tmp_path):
    """The rendered memory is cached per version; any write, from any store on the file, moves it."""
    from adaexplore.skills.skill_store import SkillStore

    a, b = SkillStore(tmp_path / "m.db"), SkillStore(tmp_path / "m.db")
    for task in ("t1", "t2"):
        a.record_rule(text="Do not call tl.float32(x); use x.to(tl.float32).", who="u", task_id=task)
    assert a.memory(include_candidates=True).rules[0].count == 2
    assert a.memory(include_candidates=False).rules == []
    b.record_rule(text="Do not call tl.float32(x); use x.to(tl.float32).", who="u", task_id="t3")
    assert [r.count for r in a.memory().rules] == [3]
