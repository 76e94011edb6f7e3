"""Acceptance: what an agent sees, through a real MCP client over stdio, on the server the README's setup
line starts (a task root at examples/tasks). A scripted agent registers a task by a relative path, expands,
sends kernels that fail the ways agents fail (tl.tanh, libdevice under the interpreter, a lint error),
a correct one, expands again, and reads best_candidates and profile_kernel. Then the server shuts down.

Checked: siblings are present; input/output shapes, dtypes and the tolerance are present; no hint proposes
what fails in the mode the server runs; no message is said twice; every field is described; nothing is
logged at ERROR at shutdown.
"""

import json
import os
import shlex
import sys

import anyio
import pytest
from conftest import HAS_CUDA
from mcp import Client, StdioServerParameters
from server_support import EXAMPLES, compile_error_kernel, env, variant

from adaexplore.evaluator.lint.names import KNOWN_REPLACEMENTS, LIBDEVICE_IN_INTERPRETER

GOOD = variant("04")
TANH = GOOD.replace("num = tl.exp(", "num = tl.tanh(")
LIBDEVICE = GOOD.replace("import triton.language as tl\n",
                         "import triton.language as tl\nfrom triton.language.extra import libdevice\n"
                         ).replace("num = tl.exp(", "num = libdevice.exp(")
INTERPRET = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def described(schema: dict) -> list[str]:
    missing = []
    for scope in [schema, *schema.get("$defs", {}).values()]:
        missing += [n for n, p in scope.get("properties", {}).items() if not p.get("description")]
    return missing


@pytest.mark.slow
def test_a_scripted_agent_session_sees_what_it_needs_and_nothing_twice(tmp_path):
    assert TANH != GOOD and LIBDEVICE != GOOD
    log = tmp_path / "server.log"
    server = [sys.executable, "-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(tmp_path / "data"),
              "--task-root", str(EXAMPLES / "tasks")]
    params = StdioServerParameters(command="sh", args=["-c", f"exec {shlex.join(server)} 2>{shlex.quote(str(log))}"],
                                   env=env())

    async def session():
        out: dict = {"results": []}
        async with Client(params, read_timeout_seconds=300) as c:
            async def call(name, args):
                r = await c.call_tool(name, args)
                assert not r.is_error, (name, r.content)
                return r.structured_content

            tools = (await c.list_tools()).tools
            out["schemas"] = {t.name: (t.description, t.input_schema, t.output_schema) for t in tools}
            out["prompts"] = (await c.list_prompts()).prompts
            reg = await call("register_task", {"path": "softmax.py", "search": {"c_expand": 5.0}})
            tid = out["task_id"] = reg["task_id"]
            out["first"] = await call("expand_node", {"task_id": tid})
            for src in (TANH, LIBDEVICE, compile_error_kernel("acc"), GOOD):
                exp = await call("expand_node", {"task_id": tid})
                res = await call("evaluate_kernel", {"task_id": tid, "source": src,
                                                     "expansion_id": exp["expansion_id"]})
                out["results"].append(res)
            out["later"] = [await call("expand_node", {"task_id": tid}) for _ in range(3)]
            out["best"] = await call("best_candidates", {"task_id": tid, "k": 3})
            good = out["results"][-1]["node_id"]
            out["profile"] = await call("profile_kernel", {"node_id": good})
        return out

    o = anyio.run(session)

    # the README's example path resolves against the task root
    assert o["task_id"]

    # shapes, dtypes and the tolerance in every expansion
    for exp in [o["first"], *o["later"]]:
        facts = exp["task"]
        assert facts["inputs"] and all(i["shape"] and i["dtype"] == "float32" for i in facts["inputs"])
        assert facts["outputs"] and all(x["shape"] and x["dtype"] == "float32" for x in facts["outputs"])
        assert "atol=" in facts["tolerance"] and facts["device"]
        assert exp["expires_at"].endswith("Z")

    # the siblings already tried from a parent are shown once it has children
    with_kids = [e for e in o["later"] if e["siblings"]]
    assert with_kids, [e["parent"]["node_id"] for e in o["later"]]
    tried = {r["node_id"] for r in o["results"]}
    for e in with_kids:
        for s in e["siblings"]:
            assert s["status"] and s["change"] and "summary" in s
        assert {s["node_id"] for s in e["siblings"]} & tried

    # the failures: the cause named, hints that work here, each problem said once
    tanh, libdevice, lint, good = o["results"]
    assert good["status"] == "correct"
    if HAS_CUDA:  # timed: the reward moves with the measured speedup
        assert 0.05 < good["reward"] <= 1.0
    else:  # untimed on the interpreter: a correct kernel's reward without a speedup
        assert good["reward"] == pytest.approx(0.509, abs=1e-3)
    assert lint["reward"] == 0.05
    assert "2 * tl.sigmoid(2 * x) - 1" in tanh["feedback"] and "closest names" not in tanh["feedback"]
    if INTERPRET:
        assert "does not run in Triton's interpreter" in libdevice["feedback"]
        working = {r.hint(interpret=True) for r in [*KNOWN_REPLACEMENTS.values(), *LIBDEVICE_IN_INTERPRETER.values()]}
        for r in (tanh, libdevice):
            hints = [ln[len("hint: "):] for ln in r["feedback"].splitlines() if ln.startswith("hint: ")]
            assert hints and all(h in working and "libdevice" not in h for h in hints), hints
    for r in o["results"]:
        lines = r["feedback"].splitlines()
        errors = [ln for ln in lines if not ln.startswith(("status:", "hint:", "lint line"))][:1]
        for ln in lines:
            if ln.startswith("lint line") and errors:
                msg = ln.split(": error: ", 1)[-1].split(" (", 1)[0]
                assert msg not in errors[0], ("said twice", r["feedback"])

    # best_candidates and the profile
    assert o["best"]["candidates"][0]["node_id"] == good["node_id"]
    assert "triton_share" in o["best"]["candidates"][0]
    assert o["profile"]["floor_bytes"] and o["profile"]["summary"]

    # every field and prompt argument described; descriptions on one line
    for name, (desc, inp, outp) in o["schemas"].items():
        assert "\n" not in desc and "  " not in desc, name
        assert described(inp) == [] and described(outp or {}) == [], name
    assert all(a.description for p in o["prompts"] for a in (p.arguments or []))

    # a clean shutdown is silent
    text = log.read_text()
    assert "ERROR" not in text and "Traceback" not in text, text[-3000:]
    json.dumps(o["best"])  # the structured content is plain JSON
