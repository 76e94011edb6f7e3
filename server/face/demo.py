"""`adaexplore demo`: a scripted agent driving a short search over stdio with the official client.

Runs in the user's shell process (the CLI), which starts the server as a child process over stdio.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import TextContent

RULES = {
    "compile_error": "Declare every size used by tl.arange as a tl.constexpr parameter; do not pass it as a "
                     "runtime integer.",
    "wrong_output": "Mask the tail of every row load with other= the reduction's identity (-inf for max, 0 for "
                    "sum); do not let padding lanes enter the reduction.",
}


def examples_dir() -> Path:
    """The example tasks and kernels: the installed package first, else the checkout."""
    try:
        root = resources.files("adaexplore.examples")
        path = Path(str(root))
        if (path / "tasks").is_dir():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "examples"


def _say(text: str = "") -> None:
    print(text, flush=True)


async def _demo(data_dir: Path) -> int:
    ex = examples_dir()
    variants = sorted((ex / "kernels" / "variants").glob("*.py"))
    if not variants:
        _say(f"no kernel variants found under {ex / 'kernels' / 'variants'}")
        return 1
    env = dict(os.environ)
    env.setdefault("TRITON_INTERPRET", "0" if _has_cuda() else "1")
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(data_dir)],
                                   env=env)
    async with Client(params, read_timeout_seconds=600) as client:
        tools = await client.list_tools()
        _say(f"connected over stdio; {len(tools.tools)} tools: {', '.join(t.name for t in tools.tools)}")
        mem = await client.call_tool("get_skill_memory", {"include_candidates": True})
        _say(f"skill memory: {len(mem.structured_content['rules'])} rule(s)")
        t0 = time.monotonic()
        reg = await client.call_tool("register_task", {"source": (ex / "tasks" / "softmax.py").read_text(),
                                                       "name": "softmax"})
        if reg.is_error:
            _say(f"register_task failed: {_text(reg)}")
            return 1
        task = reg.structured_content
        tid = task["task_id"]
        _say(f"registered task {task['name']} as {tid} in {time.monotonic() - t0:.1f}s "
             f"(baseline: {task['baseline_ms'] or task['baseline_note']})")
        recorded = False
        for path in variants:
            exp = (await client.call_tool("expand_node", {"task_id": tid})).structured_content
            if exp["budget_exhausted"]:
                _say("budget used up")
                break
            t0 = time.monotonic()
            res = await client.call_tool("evaluate_kernel", {"task_id": tid, "source": path.read_text(),
                                                             "expansion_id": exp["expansion_id"]})
            if res.is_error:
                _say(f"  {path.name}: tool error: {_text(res)}")
                continue
            r = res.structured_content
            sp = f" speedup {r['speedup']:.2f}x" if r["speedup"] else ""
            _say(f"{exp['action']:5} step from {exp['parent']['node_id']:>20} -> {r['node_id']:>20} "
                 f"{path.name}: {r['status']}{sp} ({time.monotonic() - t0:.1f}s)")
            if r["status"] not in ("correct", "pending"):
                _say("      " + r["feedback"].splitlines()[1][:150] if "\n" in r["feedback"] else "")
                rule = RULES.get(r["status"])
                if rule and not recorded:
                    out = (await client.call_tool("record_failure", {"rule": rule, "node_id": r["node_id"]}))
                    o = out.structured_content
                    _say(f"      recorded rule {o['rule_id']} (count {o['count']}, merged={o['merged']})")
                    recorded = True
        summary = (await client.call_tool("tree_summary", {"task_id": tid})).structured_content
        _say(f"\ntree: {summary['nodes']} nodes, by status {summary['by_status']}, depth {summary['max_depth']}, "
             f"budget left {summary['budget_left']}")
        _say(summary["tree"])
        best = (await client.call_tool("best_candidates", {"task_id": tid, "k": 3})).structured_content
        _say("\nbest candidates:")
        for c in best["candidates"]:
            sp = f"{c['speedup']:.2f}x" if c["speedup"] else "speed not measured"
            _say(f"  {c['node_id']}  {c['action']}  {sp}  reward {c['reward']:.3f}")
    return 0


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def run_demo(keep: bool = False, data_dir: str | None = None) -> int:
    tmp = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="adaexplore-demo-"))
    try:
        return anyio.run(_demo, tmp)
    finally:
        if data_dir is None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif keep:
            print(f"state kept in {tmp}", file=sys.stderr)


def _text(result: Any) -> str:
    """The text of a tool error (its first text block)."""
    return next((c.text for c in result.content if isinstance(c, TextContent)), "")
