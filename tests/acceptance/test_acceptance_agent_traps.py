"""Acceptance: a scripted agent replays, through a real MCP client over stdio, the steps where an agent on a
CPU-only server lost time, and each test below checks what it is told at that step.

The session (one server, run once for the module) registers a linear task (x @ W^T + b, ReLU) and sends: a
kernel whose tl.dot takes bfloat16 operands (right on a GPU, wrong in Triton's interpreter) and prints debug
lines; one that calls tl.libdevice.rsqrt; one whose block is 48 wide; the repair of that one, placed by
parent_node_id; with a new expansion (a large step from the root, while a correct kernel exists in another
branch) the repaired code again (a duplicate), then a different kernel, then that same call again. Then it
reads the siblings, the best candidates, and a small step three nodes deep in a second task.
"""

import json
import shlex
import sys
from pathlib import Path

import anyio
import pytest
from conftest import HAS_CUDA
from mcp import Client, StdioServerParameters
from server_support import EXAMPLES, compile_error_kernel, env

# The session is a CPU-only server's: on a GPU the bf16 dot is right and no interpreter note is due.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(HAS_CUDA, reason="replays a CPU-only server's session")]

GOOD = (EXAMPLES / "kernels" / "matmul_bias_relu.py").read_text()
BLOCKS = "BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64"
DEBUG_LINES = 12
BF16 = GOOD.replace("acc += tl.dot(a, b)", "acc += tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))").replace(
    "        x = x.contiguous()\n",
    "        x = x.contiguous()\n        for i in range(%d):\n"
    "            print(f'debug tile {i}: shapes and strides as the kernel sees them, all fine')\n" % DEBUG_LINES)
LIBDEVICE = GOOD.replace("acc = tl.maximum(acc + bias[None, :], 0.0)",
                         "acc = tl.maximum(acc + bias[None, :], 0.0) * tl.libdevice.rsqrt(acc * 0.0 + 1.0)")
BLOCK_48 = GOOD.replace(BLOCKS, "BLOCK_M, BLOCK_N, BLOCK_K = 64, 48, 64")
SMALLER_BLOCKS = GOOD.replace(BLOCKS, "BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32")


async def _session(data_dir: Path, log: Path) -> dict:
    server = [sys.executable, "-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(data_dir),
              "--task-root", str(EXAMPLES / "tasks")]
    params = StdioServerParameters(command="sh", args=["-c", f"exec {shlex.join(server)} 2>{shlex.quote(str(log))}"],
                                   env=env())
    o: dict = {}
    async with Client(params, read_timeout_seconds=300) as c:
        async def call(name: str, args: dict) -> dict:
            """What the agent is told: the structured content, or {"error": message} for a tool error."""
            r = await c.call_tool(name, args)
            if r.is_error:
                return {"error": r.content[0].text}
            o.setdefault("texts", []).append((r.content[0].text, r.structured_content))
            return r.structured_content

        async def send(tid: str, source: str) -> dict:
            exp = await call("expand_node", {"task_id": tid})
            res = await call("evaluate_kernel", {"task_id": tid, "source": source,
                                                 "expansion_id": exp["expansion_id"]})
            return {"expansion": exp, "result": res}

        o["instructions"] = c.instructions
        o["tools"] = {t.name: t for t in (await c.list_tools()).tools}
        o["optimize"] = (await c.get_prompt("optimize", {"task_id": "t"})).messages[0].content.text
        reg = await call("register_task", {"path": "matmul_bias_relu.py", "search": {"c_expand": 5.0}})
        tid = o["task_id"] = reg["task_id"]
        o["facts"] = reg["facts"]
        o["bf16"] = await send(tid, BF16)
        for name, source in (("libdevice", LIBDEVICE), ("block48", BLOCK_48)):  # first kernels: under the root
            o[name] = {"result": await call("evaluate_kernel", {"task_id": tid, "source": source})}
        failed = o["block48"]["result"]["node_id"]
        o["repair"] = await call("evaluate_kernel", {"task_id": tid, "parent_node_id": failed, "edits": [
            {"old": "BLOCK_M, BLOCK_N, BLOCK_K = 64, 48, 64", "new": BLOCKS}]})
        o["repaired_node"] = await call("get_node", {"node_id": o["repair"]["node_id"]})
        exp = o["large"] = await call("expand_node", {"task_id": tid})
        o["duplicate"] = await call("evaluate_kernel", {"task_id": tid, "source": GOOD,
                                                        "expansion_id": exp["expansion_id"]})
        o["after_duplicate"] = await call("evaluate_kernel", {"task_id": tid, "source": SMALLER_BLOCKS,
                                                              "expansion_id": exp["expansion_id"]})
        o["retry"] = await call("evaluate_kernel", {"task_id": tid, "source": SMALLER_BLOCKS,
                                                    "expansion_id": exp["expansion_id"]})
        o["siblings"] = (await call("expand_node", {"task_id": tid}))["siblings"]
        o["best"] = await call("best_candidates", {"task_id": tid, "k": 5})

        # a branch three nodes deep, grown by the repair path, then a small step chosen by the search
        deep = await call("register_task", {"path": "softmax.py", "search": {"p_large": 0.0, "c_expand": 0.0}})
        chain: list[str] = []
        for k in range(3):
            args = {"task_id": deep["task_id"], "source": compile_error_kernel(f"deep-{k}")}
            if chain:
                args["parent_node_id"] = chain[-1]
            chain.append((await call("evaluate_kernel", args))["node_id"])
        o["chain"] = chain
        o["small"] = await call("expand_node", {"task_id": deep["task_id"]})
    return o


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    where = tmp_path_factory.mktemp("agent-traps")
    o = anyio.run(_session, where / "data", where / "server.log")
    log = (where / "server.log").read_text()
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]
    return o


def hint_of(feedback: str) -> str:
    return next(ln[len("hint: "):] for ln in feedback.splitlines() if ln.startswith("hint: "))


# -- interpreter mode -------------------------------------------------------------------------------------------

def test_the_connect_time_instructions_say_kernels_run_in_the_interpreter_and_what_differs_there(seen):
    text = seen["instructions"]
    assert "no GPU" in text and "Triton's interpreter" in text
    assert "bfloat16" in text and "libdevice" in text


def test_a_wrong_output_from_a_bf16_dot_under_the_interpreter_says_the_interpreter_is_at_fault(seen):
    r = seen["bf16"]["result"]
    assert r["status"] == "wrong_output"
    hint = hint_of(r["feedback"])
    assert "interpreter" in hint and "bfloat16" in hint and "tl.dot" in hint and "a.to(tl.float32)" in hint


def test_the_output_excerpt_of_a_failure_is_cut_at_line_boundaries(seen):
    feedback = seen["bf16"]["result"]["feedback"]
    excerpt = feedback.split("\noutput: ", 1)[1].splitlines()
    assert 0 < len(excerpt) < DEBUG_LINES  # only the end of the output
    assert all(ln.startswith("debug tile ") and ln.endswith("all fine") for ln in excerpt), excerpt


# -- hints that name the fix ------------------------------------------------------------------------------------

def test_tl_libdevice_rsqrt_gets_a_hint_that_names_tl_rsqrt(seen):
    r = seen["libdevice"]["result"]
    assert r["status"] == "compile_error"
    assert "tl.libdevice does not exist" in r["feedback"]
    assert hint_of(r["feedback"]).startswith("use tl.rsqrt(x)")


def test_a_block_that_is_not_a_power_of_two_is_named_with_its_size_and_the_block_that_works(seen):
    r = seen["block48"]["result"]
    assert r["status"] == "compile_error"
    assert "arange's range must be a power of 2" in r["feedback"] and "a range of 48" in r["feedback"]
    assert "64" in hint_of(r["feedback"]) and "mask" in hint_of(r["feedback"])


# -- the repair path --------------------------------------------------------------------------------------------

def test_when_to_give_parent_node_id_is_said_in_the_tool_and_in_the_optimize_prompt(seen):
    described = seen["tools"]["evaluate_kernel"].input_schema["properties"]["parent_node_id"]["description"]
    assert "repair" in described and "without expansion_id" in described
    assert "parent_node_id=<the failed node_id>" in seen["optimize"]
    assert "parent_node_id" in seen["instructions"]


def test_a_repair_sent_with_parent_node_id_grows_from_the_failed_node_as_a_small_step(seen):
    failed = seen["block48"]["result"]["node_id"]
    assert seen["repair"]["parent_id"] == failed and seen["repair"]["status"] == "correct"
    assert seen["repaired_node"]["action"] == "small" and seen["repaired_node"]["parent_id"] == failed


def test_a_small_step_on_a_failed_node_is_called_its_repair_path(seen):
    small = seen["small"]
    assert small["action"] == "small" and small["parent"]["node_id"] == seen["chain"][-1]
    assert "repair path" in small["instructions"] and "compile_error" in small["instructions"]


# -- duplicates -------------------------------------------------------------------------------------------------

def test_a_duplicate_leaves_its_expansion_open_for_a_different_kernel(seen):
    dup, after = seen["duplicate"], seen["after_duplicate"]
    assert dup["duplicate"] and dup["node_id"] == seen["repair"]["node_id"]
    assert "still open" in dup["note"] and seen["large"]["expansion_id"] in dup["note"]
    assert not after["duplicate"] and after["status"] == "correct"
    assert after["parent_id"] == seen["large"]["parent"]["node_id"]


def test_the_same_call_again_is_answered_as_a_duplicate_not_an_error(seen):
    retry = seen["retry"]
    assert retry["duplicate"] and retry["node_id"] == seen["after_duplicate"]["node_id"]
    assert "answered expansion" in retry["note"]


# -- the pool ---------------------------------------------------------------------------------------------------

def test_a_large_step_from_the_root_says_why_its_pool_is_empty_while_correct_kernels_exist(seen):
    large = seen["large"]
    assert large["action"] == "large" and large["pool"] == []
    text = large["instructions"]
    assert "path from the root" in text and "pool_topup is off" in text
    assert "Here it is empty: this step starts from the root" in text
    assert "the one correct kernel elsewhere in the tree is left out" in text
    assert "strongest kernels found so far" not in text


# -- context without noise --------------------------------------------------------------------------------------

def test_a_siblings_summary_is_its_first_error_line_not_its_status(seen):
    by_id = {s["node_id"]: s for s in seen["siblings"]}
    libdevice = by_id[seen["libdevice"]["result"]["node_id"]]["summary"]
    block48 = by_id[seen["block48"]["result"]["node_id"]]["summary"]
    assert libdevice.startswith("CompilationError: tl.libdevice does not exist")
    assert "arange's range must be a power of 2" in block48
    assert not any(s["summary"].startswith("status:") for s in seen["siblings"])


def test_the_history_runs_newest_first_and_leaves_the_parent_to_parent(seen):
    first, second, parent = seen["chain"]
    history = [h["node_id"] for h in seen["small"]["history"]]
    assert history == [second, first]
    assert seen["small"]["parent"]["code"] is not None


def test_kernels_tied_for_want_of_timings_come_with_a_note_that_their_order_means_nothing(seen):
    best = seen["best"]
    assert len(best["candidates"]) == 2 and all(c["speedup"] is None for c in best["candidates"])
    assert "2 kernels tie at reward 0.509" in best["note"] and "no GPU" in best["note"]


# -- contracts --------------------------------------------------------------------------------------------------

def test_the_task_facts_say_how_model_news_weights_match_models(seen):
    text = seen["facts"]["parameters"]
    assert "same seed" in text and "__init__" in text and "nothing is copied" in text


def test_text_content_is_compact_json_of_the_structured_content(seen):
    for text, structured in seen["texts"]:
        assert "\n" not in text  # compact: JSON escapes the newlines of its strings, so any would be indentation
        assert json.loads(text) == structured
