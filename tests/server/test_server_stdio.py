"""The server as a stdio subprocess, driven by the official client in both protocol eras."""

import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters
from server_support import SOFTMAX, compile_error_kernel, env


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_stdio_session(tmp_path, mode):
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(tmp_path)],
                                   env=env())

    async def main():
        async with Client(params, mode=mode, read_timeout_seconds=300) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            reg = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "softmax"})).structured_content
            exp = (await c.call_tool("expand_node", {"task_id": reg["task_id"]})).structured_content
            res = (await c.call_tool("evaluate_kernel", {"task_id": reg["task_id"], "source": compile_error_kernel(),
                                                         "expansion_id": exp["expansion_id"]})).structured_content
            node = (await c.call_tool("get_node", {"node_id": res["node_id"]})).structured_content
            return c.protocol_version, names, res, node

    version, names, res, node = anyio.run(main)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "evaluate_kernel" in names
    assert res["status"] == "compile_error" and node["created_by"] == "local"
    assert (tmp_path / "adaexplore.db").exists()
