"""What an operator of `adaexplore serve --http` relies on, seen through real clients and real processes:
owner-only files, path errors that reveal nothing, hostile inputs answered with a fix, ranked scopes,
/healthz, /metrics, the access log, and a SIGTERM that leaves nothing pending."""

import os
import re
import stat
import subprocess
import sys

import anyio
import httpx
import orjson
import pytest
from server_support import SLEEPY, SOFTMAX, HttpServer, compile_error_kernel, env, http_client, issue_token

from adaexplore.server.core.tree_store import TreeStore

DEEP_SUM = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x"
            + "+x" * 60000 + "\ndef get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
DEEP_LAMBDAS = DEEP_SUM.replace("return x" + "+x" * 60000, "return (" + "lambda: " * 20000 + "x)()")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server started under umask 022, with a task root holding one task and a token per scope."""
    old = os.umask(0o022)
    try:
        base = tmp_path_factory.mktemp("ops")
        root = base / "tasks"
        (root / "level1").mkdir(parents=True)
        (root / "level1" / "softmax.py").write_text(SOFTMAX)
        data = base / "data"
        tokens = {s: issue_token(data, f"tok-{s}", s) for s in ("read", "write", "admin")}
        srv = HttpServer(data, "--task-root", str(root), "--wait-limit", "1", "--shutdown-grace", "1").start()
    finally:
        os.umask(old)
    yield srv, tokens, root
    srv.stop()


async def call(srv, token, tool, args):
    async with http_client(srv.url, token) as c:
        return await c.call_tool(tool, args)


def text(result) -> str:
    return result.content[0].text


def test_a_task_registered_by_a_path_relative_to_the_task_root(served):
    srv, tok, _ = served
    r = anyio.run(call, srv, tok["write"], "register_task", {"path": "level1/softmax.py"})
    assert not r.is_error, text(r)
    assert r.structured_content["name"] == "softmax"


def test_missing_and_outside_files_get_the_same_answer_without_server_paths(served):
    srv, tok, root = served

    async def main():
        out = {}
        for label, path in (("outside", "/etc/passwd"), ("missing", str(root / "level1" / "nope.py")),
                            ("relative_missing", "level1/nope.py"), ("escape", "../../../../etc/passwd")):
            r = await call(srv, tok["write"], "register_task", {"path": path})
            out[label] = (r.is_error, re.sub(r"task file '[^']*'", "task file <path>", text(r)))
        return out

    out = anyio.run(main)
    assert all(is_error for is_error, _ in out.values())
    assert len({msg for _, msg in out.values()}) == 1, out
    message = out["outside"][1]
    assert "relative to a task root" in message
    assert str(root) not in message and "site-packages" not in message


@pytest.mark.parametrize("args, fix", [
    ({"path": "level1/soft\x00max.py"}, "NUL byte"),
    ({"source": DEEP_SUM}, "split it into several statements"),
    ({"source": DEEP_LAMBDAS}, "split it into several statements"),
    ({"source": SOFTMAX.replace("torch.softmax", "torch.nn.functional.no_such_op")}, "Fix the module"),
], ids=["nul-byte", "60k-term-sum", "deep-lambdas", "reference-crash"])
def test_each_hostile_task_input_gets_a_message_that_says_what_to_fix(served, args, fix):
    srv, tok, _ = served
    r = anyio.run(call, srv, tok["write"], "register_task", args)
    assert r.is_error
    message = text(r)
    assert fix in message, message
    assert message != "Error executing tool register_task"
    assert "site-packages/" not in message.replace("<site-packages>/", "") and sys.prefix not in message


def test_a_deeply_nested_candidate_is_refused_with_a_fix(served):
    srv, tok, _ = served

    async def main():
        reg = await call(srv, tok["write"], "register_task", {"source": SOFTMAX})
        return await call(srv, tok["write"], "evaluate_kernel", {"task_id": reg.structured_content["task_id"],
                                                                  "source": DEEP_SUM.replace("Model", "ModelNew")})

    r = anyio.run(main)
    assert r.is_error and "split it into several statements" in text(r)


def test_scopes_are_ranked_write_can_read_and_read_cannot_write(served):
    srv, tok, _ = served

    async def main():
        return (await call(srv, tok["write"], "list_tasks", {}), await call(srv, tok["admin"], "get_skill_memory", {}),
                await call(srv, tok["read"], "register_task", {"source": SOFTMAX}))

    write_reads, admin_reads, read_writes = anyio.run(main)
    assert not write_reads.is_error and not admin_reads.is_error
    assert read_writes.is_error and "'write' scope" in text(read_writes)


def test_health_metrics_and_access_log_over_plain_http(served):
    srv, tok, _ = served

    async def main():
        reg = await call(srv, tok["write"], "register_task", {"source": SOFTMAX})
        await call(srv, tok["write"], "evaluate_kernel", {"task_id": reg.structured_content["task_id"],
                                                          "source": compile_error_kernel("metrics")})
        await call(srv, tok["read"], "get_node", {"node_id": reg.structured_content["root_node_id"]})

    anyio.run(main)
    base = srv.url.removesuffix("/mcp")
    health = httpx.get(f"{base}/healthz", timeout=10)
    metrics = httpx.get(f"{base}/metrics", timeout=10)
    assert health.status_code == 200
    report = health.json()
    assert report["ready"] and report["store"]["ok"] and report["evaluator"]["state"] == "running"
    assert report["gpu"]["device"] and "present" in report["gpu"]
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    body = metrics.text
    assert 'adaexplore_evaluations_total{status="compile_error"}' in body
    assert 'adaexplore_nodes{status="compile_error"}' in body
    assert "adaexplore_evaluation_queue_depth" in body and "adaexplore_evaluation_seconds_bucket" in body
    assert 'adaexplore_tool_seconds_count{tool="get_node"}' in body
    assert "adaexplore_memory_rules" in body
    log = srv.log_text_once('"path":"/metrics"')
    lines = [orjson.loads(line) for line in log.splitlines() if line.startswith('{"time"')]
    mcp_lines = [e for e in lines if e["path"] == "/mcp" and e["method"] == "POST"]
    assert mcp_lines and {"tok-write", "tok-read"} <= {e["token"] for e in mcp_lines}
    assert all({"time", "method", "path", "status", "duration_ms", "token"} <= e.keys() for e in lines)
    assert any(e["path"] == "/metrics" and e["status"] == 200 for e in lines)
    assert not any(t in log for t in tok.values())


def test_data_directory_is_owner_only_under_umask_022(served):
    srv, _, _ = served
    seen = []
    for dirpath, dirnames, filenames in os.walk(srv.data_dir):
        for d in dirnames:
            seen.append((os.path.join(dirpath, d), stat.S_IMODE(os.stat(os.path.join(dirpath, d)).st_mode), 0o700))
        for f in filenames:
            if f.startswith("server-"):  # the test's own log of the server's output
                continue
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                seen.append((p, stat.S_IMODE(os.stat(p).st_mode), 0o600))
    seen.append((str(srv.data_dir), stat.S_IMODE(os.stat(srv.data_dir).st_mode), 0o700))
    names = {os.path.basename(p) for p, _, _ in seen}
    assert {"adaexplore.db", "adaexplore.db-wal", "adaexplore.db-shm"} <= names
    wrong = [(p, oct(m)) for p, m, want in seen if m & ~want]
    assert not wrong, wrong


def test_sigterm_settles_the_running_evaluation_and_exits_0(served):
    """Runs last in this module: it stops the shared server."""
    srv, tok, _ = served

    async def main():
        reg = await call(srv, tok["write"], "register_task", {"source": SOFTMAX})
        return await call(srv, tok["write"], "evaluate_kernel", {"task_id": reg.structured_content["task_id"],
                                                                  "source": SLEEPY})

    slow = anyio.run(main)
    assert slow.structured_content["status"] == "pending"
    code = srv.terminate()
    assert code == 0, srv.log_text()[-2000:]
    store = TreeStore(srv.data_dir / "adaexplore.db")
    pending = store.conn().execute("SELECT COUNT(*) FROM nodes WHERE status IS NULL").fetchone()[0]
    node = store.get_node(slow.structured_content["node_id"], with_source=False)
    store.close()
    assert pending == 0
    assert node.status == "infra_error" and "shut down" in node.feedback


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stdio_server_exits_0_on_a_signal(tmp_path, sig):
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    proc.stdin.write(orjson.dumps(init) + b"\n")
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()  # serving
    proc.send_signal(getattr(signal, sig))
    try:
        code = proc.wait(20)
    finally:
        proc.kill()
    assert code == 0, proc.stderr.read().decode()[-2000:]
