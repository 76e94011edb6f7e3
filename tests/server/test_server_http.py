"""A running `adaexplore serve --http`: bearer tokens, scopes, DNS-rebinding protection, both eras,
concurrent agents on one tree, and a crash in the middle of an evaluation."""

import json
import time

import anyio
import httpx2
import pytest
from server_support import SLEEPY, SOFTMAX, HttpServer, compile_error_kernel, http_client, issue_token

from adaexplore.search import NodeView, SearchParams, TreeIndex
from adaexplore.server.core.tree_store import TreeStore

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("http")
    tokens = {"rw": issue_token(d, "alice", "read,write"), "r": issue_token(d, "bob", "read"),
              "w": issue_token(d, "carol", "write")}
    srv = HttpServer(d).start()
    yield srv, tokens
    srv.stop()


def test_http_auth_scopes_and_host_checks(served):
    srv, tok = served

    async def main():
        out = {}
        async with httpx2.AsyncClient() as hc:
            post = lambda headers, **kw: hc.post(srv.url, headers=HEADERS | headers, **kw)  # noqa: E731
            out["none"] = (await post({}, json=INIT)).status_code
            out["bad"] = (await post({"Authorization": "Bearer adx_wrong"}, json=INIT)).status_code
            out["write_only"] = (await post({"Authorization": f"Bearer {tok['w']}"}, json=INIT)).status_code
            out["host"] = (await post({"Authorization": f"Bearer {tok['rw']}", "Host": "evil.example"},
                                      json=INIT)).status_code
            out["origin"] = (await post({"Authorization": f"Bearer {tok['rw']}", "Origin": "http://evil.example"},
                                        json=INIT)).status_code
            out["big"] = (await post({"Authorization": f"Bearer {tok['rw']}"}, content=b"x" * (2 << 20))).status_code
        async with http_client(srv.url, tok["r"]) as c:
            out["ro_write"] = await c.call_tool("register_task", {"source": SOFTMAX})
            out["ro_read"] = await c.call_tool("list_tasks", {})
        return out

    out = anyio.run(main)
    assert out["none"] == 401 and out["bad"] == 401
    assert out["write_only"] == 200  # write includes read
    assert out["host"] == 421 and out["origin"] == 403
    assert out["big"] == 413
    assert out["ro_write"].is_error and "'write' scope" in out["ro_write"].content[0].text
    assert not out["ro_read"].is_error


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_http_session_attributes_nodes_to_token(served, mode):
    srv, tok = served

    async def main():
        async with http_client(srv.url, tok["rw"], mode=mode) as c:
            reg = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "softmax"})).structured_content
            res = (await c.call_tool("evaluate_kernel", {"task_id": reg["task_id"],
                                                         "source": compile_error_kernel(mode)})).structured_content
            node = (await c.call_tool("get_node", {"node_id": res["node_id"]})).structured_content
            return c.protocol_version, node

    version, node = anyio.run(main)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert node["created_by"] == "alice" and node["status"] == "compile_error"


def test_over_http_the_text_content_is_compact_json_of_the_structured_content(served):
    srv, tok = served

    async def main():
        async with http_client(srv.url, tok["rw"]) as c:
            reg = await c.call_tool("register_task", {"source": SOFTMAX, "name": "softmax"})
            listed = await c.call_tool("list_tasks", {})
            return [reg, listed]

    for result in anyio.run(main):
        text = result.content[0].text
        assert "\n" not in text and json.loads(text) == result.structured_content


@pytest.mark.slow
def test_eight_agents_share_one_tree(tmp_path):
    tok = issue_token(tmp_path, "team", "read,write")
    srv = HttpServer(tmp_path).start()
    try:
        async def main():
            async with http_client(srv.url, tok) as c:
                reg = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "conc",
                                                           "search": {"max_steps": 1000}})).structured_content
                tid = reg["task_id"]
                for i in range(8):  # eight first-level kernels
                    await c.call_tool("evaluate_kernel", {"task_id": tid, "source": compile_error_kernel(f"s{i}")})

            first: list[dict] = []
            go = anyio.Event()

            async def agent(k: int):
                async with http_client(srv.url, tok) as c:
                    await go.wait()
                    for j in range(4):
                        exp = (await c.call_tool("expand_node", {"task_id": tid})).structured_content
                        if j == 0:
                            first.append(exp)
                            while len(first) < 8:  # all eight expansions are out before anyone evaluates
                                await anyio.sleep(0.02)
                        res = await c.call_tool("evaluate_kernel", {"task_id": tid,
                                                                    "source": compile_error_kernel(f"a{k}-{j}"),
                                                                    "expansion_id": exp["expansion_id"]})
                        assert not res.is_error, res.content

            async with anyio.create_task_group() as tg:
                for k in range(8):
                    tg.start_soon(agent, k)
                await anyio.sleep(1.0)
                go.set()
            return tid, first

        tid, first = anyio.run(main)
    finally:
        srv.stop()
    assert len({e["parent"]["node_id"] for e in first}) >= 4
    store = TreeStore(tmp_path / "adaexplore.db")
    rows = store.conn().execute("SELECT id, parent_id, action, status, speedup, seq FROM nodes WHERE task_id = ?",
                                (tid,)).fetchall()
    assert len(rows) == 1 + 8 + 8 * 4
    assert sorted(r[5] for r in rows) == list(range(len(rows)))
    assert all(r[3] == "compile_error" for r in rows if r[2] != "root")
    exps = store.conn().execute("SELECT consumed, result_node_id FROM expansions WHERE task_id = ?", (tid,)).fetchall()
    assert len(exps) == 32 and all(c == 1 for c, _ in exps) and len({n for _, n in exps}) == 32
    index = TreeIndex.build([NodeView(r[0], r[1], r[2], None if r[2] == "root" else r[3], r[4], r[5]) for r in rows],
                            [], SearchParams(), time.time())
    assert index.N(rows[0][0]) == 40  # every node counted once, no virtual loss left
    kids: dict[str, list[str]] = {}
    for r in rows:
        kids.setdefault(r[1], []).append(r[0])

    def subtree(n: str) -> int:
        return 1 + sum(subtree(k) for k in kids.get(n, []))

    for r in rows[1:]:
        assert index.N(r[0]) == subtree(r[0])


@pytest.mark.slow
def test_crash_during_evaluation_and_restart(tmp_path):
    tok = issue_token(tmp_path, "ops", "read,write")
    srv = HttpServer(tmp_path, "--wait-limit", "1").start()
    try:
        async def before():
            async with http_client(srv.url, tok) as c:
                reg = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "crash",
                                                           "search": {"expansion_ttl_s": 10}})).structured_content
                tid = reg["task_id"]
                ok = (await c.call_tool("evaluate_kernel", {"task_id": tid,
                                                            "source": compile_error_kernel("kept")})).structured_content
                open_exp = (await c.call_tool("expand_node", {"task_id": tid})).structured_content
                slow = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": SLEEPY})).structured_content
                return tid, ok, open_exp, slow

        tid, ok, open_exp, slow = anyio.run(before)
        assert slow["status"] == "pending" and open_exp["expansion_id"]
        created = time.time()
    finally:
        srv.kill()
    srv2 = HttpServer(tmp_path).start()
    try:
        async def after():
            async with http_client(srv2.url, tok) as c:
                kept = (await c.call_tool("get_node", {"node_id": ok["node_id"]})).structured_content
                lost = (await c.call_tool("get_node", {"node_id": slow["node_id"]})).structured_content
                await anyio.sleep(max(0.0, created + 10.5 - time.time()))
                summary = (await c.call_tool("tree_summary", {"task_id": tid})).structured_content
                late = await c.call_tool("evaluate_kernel", {"task_id": tid, "source": compile_error_kernel("late"),
                                                             "expansion_id": open_exp["expansion_id"]})
                return kept, lost, summary, late

        kept, lost, summary, late = anyio.run(after)
    finally:
        srv2.stop()
    assert kept["status"] == "compile_error" and kept["feedback"]
    assert lost["status"] == "infra_error" and "stopped" in lost["feedback"]
    assert summary["open_expansions"] == 0 and summary["by_status"]["infra_error"] == 1
    assert summary["steps_used"] == 1  # the kept node; infra_error nodes cost nothing
    assert not late.is_error  # an expired expansion may still deliver its kernel
