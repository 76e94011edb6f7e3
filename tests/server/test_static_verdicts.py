"""Verdicts the static checks give alone come back at once, however busy the evaluator is."""

import sys
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters
from server_support import SLEEPY, SOFTMAX, env

PLAIN_TORCH = '''
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''
SYNTAX_ERROR = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"


@pytest.mark.slow
def test_a_syntax_error_and_a_plain_pytorch_candidate_are_answered_while_every_evaluation_slot_is_taken(tmp_path):
    # Two evaluation threads (--max-parallel 1), both held by candidates that sleep for two minutes at import.
    params = StdioServerParameters(command=sys.executable, env=env(), args=[
        "-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(tmp_path), "--max-parallel", "1",
        "--wait-limit", "1", "--shutdown-grace", "0"])

    async def main():
        async with Client(params, read_timeout_seconds=300) as c:
            tid = (await c.call_tool("register_task", {"source": SOFTMAX, "name": "softmax"})).structured_content[
                "task_id"]
            held = [(await c.call_tool("evaluate_kernel", {"task_id": tid, "source": SLEEPY + f"\n# {i}\n"}))
                    .structured_content["status"] for i in range(3)]
            answered = {}
            for name, source in (("syntax", SYNTAX_ERROR), ("plain", PLAIN_TORCH)):
                t0 = time.monotonic()
                got = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": source})).structured_content
                answered[name] = (got["status"], time.monotonic() - t0, got.get("feedback", ""))
            node = (await c.call_tool("get_node", {"node_id": got["node_id"]})).structured_content
            return held, answered, node

    held, answered, node = anyio.run(main)
    assert held == ["pending"] * 3  # the evaluator is busy: nothing else can start
    assert answered["syntax"][0] == "syntax_error" and answered["syntax"][1] < 2.0
    assert answered["plain"][0] == "no_triton_kernel" and answered["plain"][1] < 2.0
    assert "@triton.jit" in answered["plain"][2]
    assert node["status"] == "no_triton_kernel"
