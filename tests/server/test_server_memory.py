"""The skill memory end to end through the official MCP client: thresholds, contradiction, relevance,
token budget, experiences, synthesis, export/import (in memory); scopes and concurrent agents (over HTTP)."""

import anyio
import pytest
from server_support import (
    EXAMPLES,
    SOFTMAX,
    HttpServer,
    cli,
    compile_error_kernel,
    http_client,
    issue_token,
    tool,
    variant,
)
from server_support import in_memory as call

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.tree_store import TreeStore
from adaexplore.server.face.app import build_server
from adaexplore.skills.render import estimate_tokens

F32 = "Do not call tl.float32(x); use x.to(tl.float32)"
CAST_WORDINGS = [
    F32,
    "Never call tl.int32(v) to cast a value; use v.to(tl.int32) instead",
    "tl.float16(y) is not callable; convert with y.to(tl.float16)",
    "Do not call tl.bfloat16(t) to cast; write t.to(tl.bfloat16)",
]
DTYPE_ERROR = "TypeError: 'dtype' object is not callable"  # the failure every cast wording above explains
PROGRAM_ID = "Do not call tl.program_id inside a kernel; pass the row index as an argument"
SOFTMAX_RULE = "Subtract the row max (tl.max) before tl.exp in a softmax, do not exponentiate raw logits"
CONV_RULE = "Do not index conv weights in a Python loop over kernel_size; unroll it with tl.static_range"

SYNTH_OK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 2.0 + x.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
'''


def task_source(name: str) -> str:
    return (EXAMPLES / "tasks" / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = ServerConfig(data_dir=tmp_path_factory.mktemp("mem"), wait_limit_s=120, seed=0)
    mcp, svc = build_server(cfg)
    ids = {}
    for name in ("softmax", "gelu_scale", "fused_add_mul", "conv_bias_relu"):
        ids[name] = svc.tasks.register_task(source=task_source(name), path=None, name=name, search=None, protocol=None,
                                      caller="local").task_id
    yield mcp, svc, ids
    svc.close()




def served_ids(memory: dict) -> list:
    return [r["rule_id"] for r in memory["rules"]]


def test_rule_becomes_active_at_three_distinct_tasks(server):
    mcp, _, ids = server

    async def fn(c):
        out = {"same": [await tool(c, "record_failure", {"rule": F32, "task_id": ids["softmax"], "error_excerpt": DTYPE_ERROR}) for _ in range(3)]}
        out["before"] = await tool(c, "get_skill_memory", {})
        out["second"] = await tool(c, "record_failure", {"rule": CAST_WORDINGS[1], "task_id": ids["gelu_scale"],
                                                           "error_excerpt": DTYPE_ERROR})
        out["third"] = await tool(c, "record_failure", {"rule": CAST_WORDINGS[2], "task_id": ids["fused_add_mul"],
                                                          "error_excerpt": DTYPE_ERROR})
        out["after"] = await tool(c, "get_skill_memory", {})
        return out

    o = call(mcp, fn)
    rid = o["same"][0]["rule_id"]
    assert [r["count"] for r in o["same"]] == [1, 1, 1] and not any(r["active"] for r in o["same"])
    before = {r["rule_id"]: r for r in o["before"]["rules"]}
    assert before[rid]["status"] == "unconfirmed" and o["before"]["threshold"] == 3  # served, marked unconfirmed
    assert "Unconfirmed rules" in o["before"]["rendered"] and "seen on N occasions" not in o["before"]["rendered"]
    assert o["second"]["merged"] and o["second"]["rule_id"] == rid and o["second"]["count"] == 2
    assert not o["second"]["active"]
    assert o["third"]["rule_id"] == rid and o["third"]["count"] == 3 and o["third"]["active"]
    assert rid in served_ids(o["after"]) and "tl.float32" in o["after"]["rendered"]
    assert o["after"]["active_rules"] >= 1


def test_threshold_is_configurable(tmp_path):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path, memory_threshold=1))
    try:
        async def fn(c):
            rec = await tool(c, "record_failure", {"rule": F32})
            return rec, await tool(c, "get_skill_memory", {})

        rec, mem = call(mcp, fn)
    finally:
        svc.close()
    assert rec["active"] and mem["threshold"] == 1 and served_ids(mem) == [rec["rule_id"]]
    listed = cli("memory", "list", "--memory-threshold", "1", data_dir=tmp_path)
    assert listed.returncode == 0 and "\tactive\t" in listed.stdout
    assert cli("memory", "list", data_dir=tmp_path).stdout.strip() == ""  # default 3: still a candidate


def test_contradicted_rule_is_no_longer_served(server):
    mcp, _, ids = server

    async def fn(c):
        out = {}
        for name in ("softmax", "gelu_scale", "fused_add_mul"):
            out["rule"] = await tool(c, "record_failure", {"rule": PROGRAM_ID, "task_id": ids[name]})
        out["served"] = await tool(c, "get_skill_memory", {"task_id": ids["softmax"]})
        good = variant("04")
        out["k1"] = await tool(c, "evaluate_kernel", {"task_id": ids["softmax"], "source": good})
        out["one"] = await tool(c, "get_skill_memory", {})
        out["k2"] = await tool(c, "evaluate_kernel", {"task_id": ids["softmax"], "source": good + "\n# again\n"})
        out["two"] = await tool(c, "get_skill_memory", {"include_candidates": True})
        return out

    o = call(mcp, fn)
    rid = o["rule"]["rule_id"]
    assert o["rule"]["active"] and rid in served_ids(o["served"])
    assert o["k1"]["status"] == "correct" and o["k2"]["status"] == "correct"
    assert rid in served_ids(o["one"])  # one correct kernel is not enough
    assert rid not in served_ids(o["two"]) and "tl.program_id inside" not in o["two"]["rendered"]
    cast = [r for r in o["two"]["rules"] if "tl.float32" in r["text"] or "tl.int32" in r["text"]]
    assert cast and cast[0]["active"]  # x.to(tl.float32) in the kernels does not contradict the cast rule


def test_relevance_ranks_task_rules_first(server):
    mcp, _, ids = server

    async def fn(c):
        for name in ("gelu_scale", "fused_add_mul", "conv_bias_relu"):
            a = await tool(c, "record_failure", {"rule": CONV_RULE, "task_id": ids[name]})
            b = await tool(c, "record_failure", {"rule": SOFTMAX_RULE, "task_id": ids[name]})
        soft = await tool(c, "get_skill_memory", {"task_id": ids["softmax"]})
        conv = await tool(c, "get_skill_memory", {"task_id": ids["conv_bias_relu"]})
        return a, b, soft, conv

    conv_rule, soft_rule, soft, conv = call(mcp, fn)
    assert conv_rule["count"] == soft_rule["count"] == 3 and conv_rule["rule_id"] != soft_rule["rule_id"]
    order = served_ids(soft)
    assert order.index(soft_rule["rule_id"]) < order.index(conv_rule["rule_id"])
    order = served_ids(conv)
    assert order.index(conv_rule["rule_id"]) < order.index(soft_rule["rule_id"])


def test_token_budget_of_the_rendering(server):
    mcp, _, _ = server

    async def fn(c):
        for api in ("tl.load", "tl.store", "tl.cumsum", "tl.atomic_add", "tl.reshape", "tl.trans", "tl.sqrt"):
            await tool(c, "record_failure", {"rule": f"Do not pass a Python list to {api}; build a block of "
                                                     f"values with tl.arange first and mask it"})
        full = await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 20000})
        small = await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 80})
        bad = await c.call_tool("get_skill_memory", {"token_budget": 10})
        return full, small, bad

    full, small, bad = call(mcp, fn)
    assert len(full["rules"]) >= 8 and "left out" not in full["rendered"]
    assert 0 < estimate_tokens(small["rendered"]) <= 80 and "more rules left out" in small["rendered"]
    assert bad.is_error


def test_failures_become_experiences_and_signatures(server):
    mcp, _, ids = server

    async def fn(c):
        res = await tool(c, "evaluate_kernel", {"task_id": ids["gelu_scale"], "source": compile_error_kernel("exp")})
        before = await tool(c, "get_skill_memory", {"include_signatures": True})
        rule = await tool(c, "record_failure", {"rule": "Declare tl.arange bounds as tl.constexpr; do not pass "
                                                        "them as runtime ints", "node_id": res["node_id"]})
        after = await tool(c, "get_skill_memory", {"include_signatures": True})
        return res, before, rule, after

    res, before, rule, after = call(mcp, fn)
    assert res["status"] == "compile_error"
    assert before["experiences"] >= 1 and before["frequent_signatures"]
    sig = before["frequent_signatures"][0]
    assert sig["count"] == 1 and "constexpr" in sig["example"]
    assert rule["count"] == 1 and not rule["merged"]
    assert sig["signature"] not in [s["signature"] for s in after["frequent_signatures"]]


def test_synthesis_and_synthetic_registration(server):
    mcp, _, ids = server

    async def fn(c):
        brief = await tool(c, "synthesize_task", {"n_seeds": 2, "n_ops": 3, "seed": 7})
        again = await tool(c, "synthesize_task", {"n_seeds": 2, "n_ops": 3, "seed": 7})
        ok = await tool(c, "register_task", {"source": SYNTH_OK, "name": "Tanh_RowSum", "synthetic": True})
        bad = await c.call_tool("register_task", {"source": task_source("degenerate_zeros"), "synthetic": True})
        listed = await tool(c, "list_tasks", {})
        return brief, again, ok, bad, listed

    brief, again, ok, bad, listed = call(mcp, fn)
    assert brief == again and len(brief["seed_task_ids"]) == 2 and set(brief["seed_task_ids"]) <= set(ids.values())
    assert len(brief["operators"]) == 3 and all(o["signature"].startswith("nn.") for o in brief["operators"])
    assert "synthetic=true" in brief["instructions"] and "class Model" in brief["format_example"]
    assert ok["synthetic"] and not ok["existing"]
    assert bad.is_error and "degenerate" in bad.content[0].text and "all_zeros" in bad.content[0].text
    tasks = {t["task_id"]: t for t in listed["tasks"]}
    assert tasks[ok["task_id"]]["synthetic"] and not tasks[ids["softmax"]]["synthetic"]
    assert not any(t["name"] == "degenerate_zeros" for t in listed["tasks"])


def test_export_import_into_a_fresh_server(server, tmp_path):
    mcp, _, _ = server

    async def export(c):
        await tool(c, "record_failure", {"rule": F32, "task_id": server[2]["softmax"], "error_excerpt": DTYPE_ERROR})
        return await tool(c, "export_memory"), await tool(c, "get_skill_memory", {"include_candidates": True,
                                                                                  "token_budget": 20000})

    exported, before = call(mcp, export)
    doc = exported["document"]
    assert doc["format"] == "adaexplore-skill-memory" and exported["rules"] == len(doc["rules"])
    fresh, svc = build_server(ServerConfig(data_dir=tmp_path))
    try:
        async def fn(c):
            local = await tool(c, "record_failure", {"rule": CAST_WORDINGS[3], "error_excerpt": DTYPE_ERROR})  # one occasion only here
            first = await tool(c, "import_memory", {"document": doc})
            second = await tool(c, "import_memory", {"document": doc})
            bad = await c.call_tool("import_memory", {"document": {"format": "something else"}})
            mem = await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 20000})
            return local, first, second, bad, mem

        local, first, second, bad, mem = call(fresh, fn)
    finally:
        svc.close()
    # An export holds one row per wording; each row is either added or joins a rule already here.
    assert first["rules_added"] + first["rules_merged"] == exported["rules"] == len(doc["rules"])
    assert first["rules_merged"] >= 1 and first["evidence_added"] > 0  # the local cast rule was met again
    assert second["rules_added"] == 0 and second["evidence_added"] == 0 and second["experiences_added"] == 0
    assert bad.is_error and "export_memory" in bad.content[0].text
    counts = {r["text"]: r["count"] for r in before["rules"]}
    cast_before = next(r for r in before["rules"] if r["text"] in CAST_WORDINGS)
    got = {r["rule_id"]: r for r in mem["rules"]}
    assert mem["total_rules"] == before["total_rules"] and len(got) == len(mem["rules"]) == len(before["rules"])
    assert len({r["text"] for r in mem["rules"]}) == len(mem["rules"])  # no rule served twice
    cast = got[local["rule_id"]]
    assert cast["count"] == cast_before["count"] + 1  # the exported tasks plus the local occasion
    assert cast["text"] in CAST_WORDINGS
    assert {r["text"] for r in mem["rules"]} - {cast["text"]} == set(counts) - {cast_before["text"]}
    assert sorted(r["count"] for r in mem["rules"] if r["rule_id"] != cast["rule_id"]) == sorted(
        r["count"] for r in before["rules"] if r is not cast_before)


# -- over HTTP: scopes and concurrent agents ---------------------------------------------------------


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    d = tmp_path_factory.mktemp("team")
    store = TreeStore(d / "adaexplore.db")
    tasks = [f"team-task-{k}" for k in range(8)]
    for k, tid in enumerate(tasks):  # tasks inserted directly: this module is about the memory, not validation
        store.insert_task(task_id=tid, name=tid, source=SOFTMAX + f"\n# {k}\n", source_hash=tid, validation={},
                          flags=[], params={}, protocol={}, created_by="setup", root_status="reference",
                          root_speedup=None, root_reward=None, root_result=None)
    store.close()
    tokens = {"r": issue_token(d, "reader", "read"), "w": issue_token(d, "writer", "read,write"),
              "a": issue_token(d, "lead", "admin")}
    srv = HttpServer(d, "--memory-threshold", "2").start()
    yield srv, tokens, tasks
    srv.stop()


def test_scopes_over_http(team):
    srv, tok, tasks = team

    async def main():
        out = {}
        async with http_client(srv.url, tok["w"]) as c:
            out["w_record"] = await c.call_tool("record_failure", {"rule": F32, "task_id": tasks[0], "error_excerpt": DTYPE_ERROR})
            rid = out["w_record"].structured_content["rule_id"]
            out["w_retire"] = await c.call_tool("retire_rule", {"rule_id": rid})
            out["w_edit"] = await c.call_tool("edit_rule", {"rule_id": rid, "text": "x"})
            out["w_export"] = await c.call_tool("export_memory", {})
            out["w_import"] = await c.call_tool("import_memory", {"document": out["w_export"].structured_content
                                                                  ["document"]})
        async with http_client(srv.url, tok["r"]) as c:
            out["r_record"] = await c.call_tool("record_failure", {"rule": F32, "task_id": tasks[1], "error_excerpt": DTYPE_ERROR})
            out["r_retire"] = await c.call_tool("retire_rule", {"rule_id": rid})
            out["r_memory"] = await c.call_tool("get_skill_memory", {"include_candidates": True})
            out["r_synth"] = await c.call_tool("synthesize_task", {"seed": 1})
        async with http_client(srv.url, tok["a"]) as c:
            out["a_record"] = await c.call_tool("record_failure", {"rule": PROGRAM_ID, "task_id": tasks[1]})
            out["a_edit"] = await c.call_tool("edit_rule", {"rule_id": rid, "text": F32 + " (edited)"})
            out["a_import"] = await c.call_tool("import_memory", {"document": out["w_export"].structured_content
                                                                  ["document"]})
            out["a_unknown"] = await c.call_tool("retire_rule", {"rule_id": "r-0000000000"})
            out["a_retire"] = await c.call_tool("retire_rule", {"rule_id": out["a_record"].structured_content
                                                                ["rule_id"]})
        return out

    o = anyio.run(main)
    assert not o["w_record"].is_error and not o["w_export"].is_error
    for key, scope in (("w_retire", "admin"), ("w_edit", "admin"), ("w_import", "admin"), ("r_record", "write"),
                       ("r_retire", "admin")):
        assert o[key].is_error and f"'{scope}' scope" in o[key].content[0].text, key
    assert not o["r_memory"].is_error and o["r_memory"].structured_content["threshold"] == 2
    assert not o["r_synth"].is_error and o["r_synth"].structured_content["seed_task_ids"]
    assert not o["a_record"].is_error and not o["a_import"].is_error
    assert o["a_edit"].structured_content["text"].endswith("(edited)")
    assert o["a_unknown"].is_error and "unknown rule_id" in o["a_unknown"].content[0].text
    assert o["a_retire"].structured_content["retired"] and not o["a_retire"].structured_content["active"]


def test_eight_agents_record_equivalent_rules_at_once(team):
    srv, tok, tasks = team
    go = anyio.Event()
    results: list[dict] = []

    async def agent(k: int):
        async with http_client(srv.url, tok["w"]) as c:
            await go.wait()
            for j in range(2):  # two wordings for the same task: one occasion
                res = await c.call_tool("record_failure", {"rule": CAST_WORDINGS[(k + j) % 4].replace("x", "v" * (k + 1)),
                                                           "task_id": tasks[k], "error_excerpt": DTYPE_ERROR})
                assert not res.is_error, res.content
                results.append(res.structured_content)

    async def main():
        async with anyio.create_task_group() as tg:
            for k in range(8):
                tg.start_soon(agent, k)
            await anyio.sleep(1.0)
            go.set()
        async with http_client(srv.url, tok["r"]) as c:
            return await tool(c, "get_skill_memory", {"include_candidates": True, "token_budget": 20000})

    mem = anyio.run(main)
    assert len(results) == 16 and len({r["rule_id"] for r in results}) == 1
    cast = [r for r in mem["rules"] if r["rule_id"] == results[0]["rule_id"]]
    assert len(cast) == 1 and cast[0]["count"] == 8  # tasks[0..7]; the scope test's occasion was on tasks[0]
    assert sum("tl.float" in r["text"] or "tl.int32" in r["text"] or "tl.bfloat16" in r["text"]
               for r in mem["rules"]) == 1
