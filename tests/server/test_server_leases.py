"""Two HTTP servers share one data directory; one is killed in the middle of an evaluation. The
survivor settles the dead server's node once its lease runs out, with no restart, and the same code
submitted again runs again instead of being called a duplicate."""

import time

import anyio
import pytest
from server_support import SLEEPY, SOFTMAX, HttpServer, http_client, issue_token

LEASE_S = 3.0


@pytest.mark.slow
def test_a_survivor_settles_a_killed_peers_evaluation_within_the_lease(tmp_path):
    tok = issue_token(tmp_path, "team", "write")
    doomed = HttpServer(tmp_path, "--lease", str(LEASE_S), "--wait-limit", "1").start()
    survivor = HttpServer(tmp_path, "--lease", str(LEASE_S), "--shutdown-grace", "0").start()
    try:
        async def start_evaluation():
            async with http_client(doomed.url, tok) as c:
                reg = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "peer"})).structured_content
                res = (await c.call_tool("evaluate_kernel", {"task_id": reg["task_id"], "source": SLEEPY}))
                return reg["task_id"], res.structured_content

        tid, slow = anyio.run(start_evaluation)
        assert slow["status"] == "pending"
        doomed.kill()
        killed_at = time.time()

        async def watch():
            async with http_client(survivor.url, tok) as c:
                while True:
                    node = (await c.call_tool("get_node", {"node_id": slow["node_id"]})).structured_content
                    if node["status"] != "pending" or time.time() - killed_at > 6 * LEASE_S:
                        break
                    await anyio.sleep(0.2)
                settled_after = time.time() - killed_at
                summary = (await c.call_tool("tree_summary", {"task_id": tid})).structured_content
                again = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": SLEEPY})).structured_content
                return node, settled_after, summary, again

        node, settled_after, summary, again = anyio.run(watch)
    finally:
        doomed.kill()
        survivor.kill()
    assert node["status"] == "infra_error" and "lease" in node["feedback"]
    # the last renewal was at most a quarter lease before the kill; the survivor looks every quarter lease
    assert settled_after <= LEASE_S * 1.5 + 1.0, settled_after
    assert summary["steps_used"] == 0 and summary["by_status"] == {"infra_error": 1}
    assert again["node_id"] == slow["node_id"] and not again["duplicate"] and again["status"] == "pending"
    assert "the lease of" in survivor.log_text() and slow["node_id"] in survivor.log_text()
