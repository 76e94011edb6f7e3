"""Every tool, resource and prompt through the official client, in memory, with the real evaluator."""

import anyio
import pytest
from conftest import HAS_CUDA
from mcp import Client
from server_support import SOFTMAX, compile_error_kernel, variant

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.face.app import build_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = ServerConfig(data_dir=tmp_path_factory.mktemp("data"), wait_limit_s=120, seed=0)
    mcp, svc = build_server(cfg)
    reg = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None, caller="local")
    yield mcp, svc, reg.task_id
    svc.close()


def call(mcp, fn, mode="auto"):
    async def main():
        async with Client(mcp, mode=mode) as c:
            return await fn(c)
    return anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_listing_in_both_protocol_eras(server, mode):
    mcp, _, _ = server

    async def fn(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        prompts = [p.name for p in (await c.list_prompts()).prompts]
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        return c.protocol_version, tools, prompts, templates

    version, tools, prompts, templates = call(mcp, fn, mode)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert set(tools) == {"register_task", "list_tasks", "get_node", "tree_summary", "expand_node",
                          "evaluate_kernel", "best_candidates", "get_skill_memory", "record_failure",
                          "retire_rule", "edit_rule", "export_memory", "import_memory", "synthesize_task",
                          "list_rule_groups", "merge_rules", "unmerge_rules", "keep_rules_apart", "profile_kernel"}
    for t in tools.values():
        assert t.annotations is not None and t.output_schema is not None
        assert t.annotations.read_only_hint is not None and t.annotations.idempotent_hint is not None
        assert t.annotations.destructive_hint is (t.name in ("retire_rule", "edit_rule"))
    assert tools["list_tasks"].annotations.read_only_hint and not tools["expand_node"].annotations.read_only_hint
    assert set(prompts) == {"optimize", "adapt", "distill"}
    assert "adaexplore://tasks/{task_id}/tree" in templates


def test_register_is_idempotent_and_validates(server):
    mcp, _, tid = server

    async def fn(c):
        again = await c.call_tool("register_task", {"source": SOFTMAX + "\n\n", "name": "other"})
        bad = await c.call_tool("register_task", {"source": "import torch\nx = 1\n"})
        neither = await c.call_tool("register_task", {})
        path = await c.call_tool("register_task", {"path": "/etc/passwd"})
        listed = await c.call_tool("list_tasks", {})
        return again, bad, neither, path, listed

    again, bad, neither, path, listed = call(mcp, fn)
    assert not again.is_error and again.structured_content["existing"] and again.structured_content["task_id"] == tid
    if HAS_CUDA:  # measured on the GPU at the first registration; the second reads it back
        assert again.structured_content["baseline_ms"] > 0
    else:
        assert again.structured_content["baseline_ms"] is None and again.structured_content["baseline_note"]
    assert bad.is_error and "Model" in bad.content[0].text
    assert neither.is_error and "exactly one" in neither.content[0].text
    assert path.is_error and "task-root" in path.content[0].text
    assert [t["task_id"] for t in listed.structured_content["tasks"]] == [tid]


def test_search_loop_failures_edits_duplicates_and_memory(server):
    mcp, svc, tid = server

    async def fn(c):
        out = {}
        exp = (await c.call_tool("expand_node", {"task_id": tid})).structured_content
        out["exp"] = exp
        r = await c.call_tool("evaluate_kernel", {"task_id": tid, "source": compile_error_kernel("loop"),
                                                  "expansion_id": exp["expansion_id"]})
        out["fail"] = r.structured_content
        out["reuse"] = await c.call_tool("evaluate_kernel", {"task_id": tid, "source": "x",
                                                             "expansion_id": exp["expansion_id"]})
        node = r.structured_content["node_id"]
        out["dup"] = (await c.call_tool("evaluate_kernel", {"task_id": tid,
                                                            "source": compile_error_kernel("loop")})).structured_content
        out["edit0"] = await c.call_tool("evaluate_kernel", {"task_id": tid, "parent_node_id": node,
                                                             "edits": [{"old": "no such text", "new": "y"}]})
        out["edit2"] = await c.call_tool("evaluate_kernel", {"task_id": tid, "parent_node_id": node, "edits": [
            {"old": "n_cols", "new": "n_cols"}]})
        fix = [{"old": "n_cols,", "new": "n_cols: tl.constexpr,"}] if "n_cols," in compile_error_kernel() else None
        out["edited"] = (await c.call_tool("evaluate_kernel", {"task_id": tid, "parent_node_id": node,
                                                               "edits": fix})).structured_content if fix else None
        out["node"] = (await c.call_tool("get_node", {"node_id": node})).structured_content
        out["code"] = (await c.call_tool("get_node", {"node_id": node, "include_code": True})).structured_content
        out["rule"] = (await c.call_tool("record_failure", {"rule": "Declare tl.arange bounds as tl.constexpr; "
                                                            "do not pass them as runtime ints.",
                                                            "node_id": node})).structured_content
        out["memory"] = (await c.call_tool("get_skill_memory", {"task_id": tid,
                                                                "include_candidates": True})).structured_content
        out["summary"] = (await c.call_tool("tree_summary", {"task_id": tid})).structured_content
        out["tree"] = await c.read_resource(f"adaexplore://tasks/{tid}/tree")
        out["ref"] = await c.read_resource(f"adaexplore://tasks/{tid}/reference")
        out["nodecode"] = await c.read_resource(f"adaexplore://nodes/{node}/code")
        out["prompt"] = await c.get_prompt("optimize", {"task_id": tid})
        return out

    o = call(mcp, fn)
    assert o["exp"]["action"] == "large" and o["exp"]["parent"]["node_id"] == f"{tid}-0"
    assert "class Model" in o["exp"]["task"]["reference_code"] and o["exp"]["hardware"]
    assert o["fail"]["status"] == "compile_error" and o["fail"]["reward"] == 0.05 and "constexpr" in o["fail"]["feedback"]
    assert o["reuse"].is_error and "already used" in o["reuse"].content[0].text
    assert o["dup"]["duplicate"] and o["dup"]["node_id"] == o["fail"]["node_id"]
    assert o["edit0"].is_error and "edit 0" in o["edit0"].content[0].text and "does not occur" in o["edit0"].content[0].text
    assert o["edit2"].is_error and "times" in o["edit2"].content[0].text
    assert o["node"]["code"] is None and o["node"]["status"] == "compile_error" and o["node"]["depth"] == 1
    assert "triton" in o["code"]["code"]
    assert o["rule"]["count"] >= 1 and o["rule"]["rule_id"]
    assert any("constexpr" in r["text"] for r in o["memory"]["rules"])
    assert o["summary"]["by_status"].get("compile_error", 0) >= 1 and o["summary"]["tree"].startswith(f"{tid}-0")
    assert f'"{tid}-0"' in o["tree"].contents[0].text
    assert "class Model" in o["ref"].contents[0].text and "ModelNew" in o["nodecode"].contents[0].text
    assert "expand_node" in o["prompt"].messages[0].content.text


def test_a_kernel_sent_again_with_its_expansion_runs_again_when_its_evaluation_was_lost(server):
    from adaexplore.server.core.leases import infra_result

    mcp, svc, tid = server
    source = compile_error_kernel("lost")

    async def send(c, expansion_id):
        return (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": source,
                                                      "expansion_id": expansion_id})).structured_content

    async def fn(c):
        exp = (await c.call_tool("expand_node", {"task_id": tid})).structured_content
        first = await send(c, exp["expansion_id"])
        result, feedback = infra_result("LeaseExpired", "lost")
        svc.store.finish_node(first["node_id"], status="infra_error", result=result, feedback=feedback,
                              speedup=None, reward=None)
        return first, await send(c, exp["expansion_id"])

    first, again = call(mcp, fn)
    assert again["node_id"] == first["node_id"] and not again["duplicate"]
    assert again["status"] == "compile_error"


def test_correct_kernel_and_best(server):
    mcp, _, tid = server

    async def fn(c):
        progress = []

        async def on_progress(p, total, msg):
            progress.append(p)

        r = await c.call_tool("evaluate_kernel", {"task_id": tid, "source": variant("04")},
                              progress_callback=on_progress)
        best = await c.call_tool("best_candidates", {"task_id": tid, "k": 3, "include_code": True})
        return r.structured_content, best.structured_content

    r, best = call(mcp, fn)
    assert r["status"] == "correct" and r["reward"] > 0.4 and r["best"]["node_id"] == r["node_id"]
    assert best["candidates"][0]["node_id"] == r["node_id"] and "ModelNew" in best["candidates"][0]["code"]


def test_pending_result_is_polled(server):
    _, svc, tid = server
    # the same service behind a server that answers at once instead of waiting for the evaluation
    mcp, _ = build_server(svc.config.model_copy(update={"wait_limit_s": 0.0}), service=svc)

    async def fn(c):
        r = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": variant("05")})).structured_content
        for _ in range(600):
            n = (await c.call_tool("get_node", {"node_id": r["node_id"]})).structured_content
            if n["status"] != "pending":
                return r, n
            await anyio.sleep(0.2)
        return r, n

    r, n = call(mcp, fn)
    assert r["status"] == "pending" and "get_node" in r["feedback"]
    assert n["status"] == "correct"


def test_caller_mistakes_are_tool_errors(server):
    mcp, _, tid = server
    cases = [
        ("get_node", {"node_id": "nope-1"}, "unknown node_id"),
        ("tree_summary", {"task_id": "nope"}, "unknown task_id"),
        ("expand_node", {"task_id": "nope"}, "unknown task_id"),
        ("best_candidates", {"task_id": "nope"}, "unknown task_id"),
        ("evaluate_kernel", {"task_id": tid}, "exactly one"),
        ("evaluate_kernel", {"task_id": tid, "source": "x" * (256 * 1024 + 1)}, "at most 262144"),
        ("evaluate_kernel", {"task_id": tid, "source": "a", "expansion_id": "xnope"}, "unknown expansion_id"),
        ("evaluate_kernel", {"task_id": tid, "edits": [{"old": "a", "new": "b"}]}, "parent"),
        ("record_failure", {"rule": "  "}, "empty"),
        ("record_failure", {"rule": "r", "node_id": "nope"}, "unknown node_id"),
    ]

    async def fn(c):
        return [await c.call_tool(name, args) for name, args, _ in cases]

    for (name, _, needle), res in zip(cases, call(mcp, fn)):
        assert res.is_error, name
        assert needle in res.content[0].text, (name, res.content[0].text)
