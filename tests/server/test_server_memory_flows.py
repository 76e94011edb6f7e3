"""The skill memory's merge decisions through the official MCP client, in memory: six different lessons stay
six rules, the distill pass (groups, merges, an undo) done by a scripted agent, and calls that answer while a
large import runs."""

import threading
import time

import pytest
from server_support import SOFTMAX, compile_error_kernel, tool, variant
from server_support import in_memory as call

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.face.app import build_server
from adaexplore.skills.skill_store import SkillStore

GOOD = variant("04")
KERNEL_LINE = "    num = tl.exp(x - tl.max(x, axis=0))\n"
STORE_LINE = "    tl.store(out_ptr + row * stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)\n"

# One failing kernel per lesson, each a different mistake in the correct softmax kernel.
FAILURES = {
    "tanh": GOOD.replace(KERNEL_LINE, "    num = tl.exp(tl.tanh(x) - tl.max(x, axis=0))\n"),
    "libdevice": GOOD.replace("import triton.language as tl\n",
                              "import triton.language as tl\nfrom triton.language.extra import libdevice\n")
                     .replace(KERNEL_LINE, "    num = tl.exp(libdevice.tanh(x) * 0.0 + x - tl.max(x, axis=0))\n"),
    "atomic": GOOD.replace(STORE_LINE, STORE_LINE + "    tl.atomic_add(out_ptr + row * stride + cols, out, mask=mask)\n"),
    "constexpr": compile_error_kernel("lessons"),
    "linear": GOOD.replace("        return out\n", "        return out.t().contiguous().reshape(out.shape)\n"),
    "pow2": GOOD.replace("BLOCK = triton.next_power_of_2(x.shape[1])", "BLOCK = x.shape[1] - 6"),
}
LESSONS = {
    "tanh": "tl.tanh does not exist; compute tanh as 2*tl.sigmoid(2*x) - 1",
    "libdevice": "libdevice.tanh returns None in the interpreter; build tanh from tl.exp instead",
    "atomic": "An atomic_add buffer must be allocated with torch.zeros, not torch.empty",
    "constexpr": "tl.arange bounds must be tl.constexpr; do not pass them as runtime ints",
    "linear": "nn.Linear's weight is (out, in); transpose it for x @ W",
    "pow2": "tl.arange sizes must be powers of two; round BLOCK up with triton.next_power_of_2",
}


@pytest.fixture
def fresh(tmp_path):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path, wait_limit_s=120, seed=0))
    task = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None,
                             caller="local").task_id
    yield mcp, svc, task
    svc.close()




def test_six_lessons_from_six_failures_are_six_rules_each_served_in_its_own_words(fresh):
    mcp, _, task = fresh

    async def fn(c):
        nodes, answers = {}, {}
        for name, source in FAILURES.items():
            nodes[name] = await tool(c, "evaluate_kernel", {"task_id": task, "source": source})
        for name, lesson in LESSONS.items():
            answers[name] = await tool(c, "record_failure", {"rule": lesson, "node_id": nodes[name]["node_id"]})
        memory = await tool(c, "get_skill_memory", {"task_id": task, "include_candidates": True,
                                                     "token_budget": 4000})
        return nodes, answers, memory

    nodes, answers, memory = call(mcp, fn)
    assert all(n["status"] != "correct" for n in nodes.values()), {k: n["status"] for k, n in nodes.items()}
    assert len({a["rule_id"] for a in answers.values()}) == 6
    assert not any(a["merged"] or a["merged_rules"] for a in answers.values())
    assert not any("signature" in a["reason"] for a in answers.values())  # no merge on a coarse signature
    served = {r["rule_id"]: r for r in memory["rules"]}
    for name, lesson in LESSONS.items():
        rule = served[answers[name]["rule_id"]]
        assert rule["text"] == lesson and rule["status"] == "unconfirmed" and rule["count"] == 1
        assert lesson in memory["rendered"]
    # A lesson is tied to its node's failure only when that failure is about what the lesson names.
    assert answers["tanh"]["link"] is None
    assert "not linked" in answers["linear"]["link"] and "nn.Linear" in answers["linear"]["link"]
    # Rules about different mistakes are offered as close ones at most, never folded in.
    pow2 = answers["pow2"]
    assert all(c["rule_id"] != pow2["rule_id"] for c in pow2["closest"])


# The distill pass: look-alike rules that no strong key joins; the labels play the agent's judgment.
DISTILL_RULES = {
    "The condition of tl.where must be boolean; pass x > 0, not the float tensor x itself.": "where-bool",
    "tl.where(x, a, b) with a float x is deprecated: give it a boolean mask.": "where-bool",
    "Use tl.where(cond, a, b) instead of a Python if on tensor values.": "if-tensor",
    ".item() on a CUDA tensor in the Python launch loop forces a device sync every iteration.": "item-host",
    "Avoid calling .item() on the host in the launch wrapper to read sizes from a GPU tensor.": "item-host",
    "Never call .item() inside a @triton.jit function.": "item-kernel",
}


def test_distill_pass_by_a_scripted_agent_lists_groups_merges_records_and_undoes(fresh):
    mcp, _, task = fresh

    async def fn(c):
        out = {"prompt": await c.get_prompt("distill", {"limit": "10"})}
        ids = {}
        for text in DISTILL_RULES:
            ids[text] = (await tool(c, "record_failure", {"rule": text}))["rule_id"]  # each its own occasion
        out["ids"] = ids
        out["groups"] = await tool(c, "list_rule_groups", {"limit": 10})
        merges = []
        for group in out["groups"]["groups"]:  # the agent: merge the members that say the same thing
            by_label: dict[str, list[str]] = {}
            for member in group["rules"]:
                by_label.setdefault(DISTILL_RULES[member["text"]], []).append(member["rule_id"])
            for label, members in by_label.items():
                if len(members) > 1:
                    merges.append(await tool(c, "merge_rules", {"rule_ids": members, "reason": f"both: {label}"}))
        out["merges"] = merges
        out["after"] = await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 4000})
        out["undo"] = await tool(c, "unmerge_rules", {"merge_id": merges[0]["merge_id"]})
        out["again"] = await c.call_tool("unmerge_rules", {"merge_id": merges[0]["merge_id"]})
        out["restored"] = await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 4000})
        return out

    o = call(mcp, fn)
    text = o["prompt"].messages[0].content.text
    assert "list_rule_groups" in text and "merge_rules" in text and "unmerge_rules" in text
    assert len(set(o["ids"].values())) == len(DISTILL_RULES)  # no strong key joined them on record
    listed = [{DISTILL_RULES[m["text"]] for m in g["rules"]} for g in o["groups"]["groups"]]
    assert any(labels >= {"where-bool"} for labels in listed) and any("item-host" in ls for ls in listed)
    assert all(g["rules"][0]["why"] for g in o["groups"]["groups"])  # each group says why it looks alike
    label_of = {rule_id: DISTILL_RULES[text] for text, rule_id in o["ids"].items()}
    assert {label_of[m["members"][0]] for m in o["merges"]} == {"where-bool", "item-host"}  # near misses (if-tensor, item-kernel) left apart
    for m in o["merges"]:
        assert m["merge_id"].startswith("m-") and m["count"] == 2 and len(m["members"]) == 1
    after = {r["rule_id"] for r in o["after"]["rules"]}
    assert len(after) == len(DISTILL_RULES) - 2 and not any(m["members"][0] in after for m in o["merges"])
    first = o["merges"][0]
    assert {r["rule_id"] for r in o["undo"]["rules"]} == {first["rule_id"], *first["members"]}
    assert o["again"].is_error and "already undone" in o["again"].content[0].text
    restored = {r["rule_id"]: r for r in o["restored"]["rules"]}
    assert len(restored) == len(DISTILL_RULES) - 1 and all(restored[r]["count"] == 1 for r in first["members"])


def big_export(n: int) -> dict:
    """An export of ``n`` distinct rules, each seen once on its own task."""
    doc = {"format": "adaexplore-skill-memory", "version": 2, "threshold": 3, "experiences": []}
    doc["rules"] = [{
        "id": f"r-{k:010d}", "text": f"Do not call tl.op_{k}(x) on a block; use tl.alt_{k}(x) instead (case {k}).",
        "created": 1.0 + k, "retired": False, "pinned": False, "merged_into": None, "keys": [], "signatures": [],
        "evidence": [{"task_id": f"t-{k}", "node_id": f"n-{k}", "who": f"agent-{k % 7}", "text": None,
                      "error_excerpt": None, "first_seen": 1.0 + k, "last_seen": 1.0 + k}],
        "contradictions": []} for k in range(n)]
    return doc


def test_record_failure_and_get_skill_memory_answer_while_a_large_import_runs(fresh):
    mcp, svc, task = fresh
    doc = big_export(3000)
    importer = SkillStore(svc.memory.db_path)  # as `adaexplore memory import` would, on the same file
    done: dict = {}

    def run_import():
        t0 = time.perf_counter()
        done["summary"] = importer.import_(doc, who="ops")
        done["s"] = time.perf_counter() - t0

    async def fn(c):
        await tool(c, "record_failure", {"rule": LESSONS["tanh"], "task_id": task})  # the memory is in use
        thread = threading.Thread(target=run_import)
        thread.start()
        timings = []
        k = 0
        while thread.is_alive() or k < 2:
            t = time.perf_counter()
            rec = await tool(c, "record_failure", {"rule": f"{LESSONS['pow2']} (seen on block {k})",
                                                   "task_id": task})
            t_rec = time.perf_counter() - t
            t = time.perf_counter()
            mem = await tool(c, "get_skill_memory", {"include_candidates": True})
            timings.append((t_rec, time.perf_counter() - t, thread.is_alive(), rec, mem))
            k += 1
        thread.join()
        return timings

    timings = call(mcp, fn)
    during = [t for t in timings if t[2]]
    assert len(during) >= 2, f"only {len(during)} calls overlapped the import ({done.get('s')} s)"
    assert max(t[0] for t in timings) < 5 and max(t[1] for t in timings) < 5
    assert all(t[4]["available"] for t in timings) and all(t[3]["rule_id"] for t in timings)
    assert done["summary"].rules_added == 3000
